package uiapworkflow

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzAppData checks decodeAppData, the decoder of what a replica stored
// for a UIAP session about the workflow session it drives, on arbitrary
// bytes: it never panics; what it accepts names a workflow and a UAIP
// session, and encodes to bytes it reads back the same.
func FuzzAppData(f *testing.F) {
	for _, s := range []string{
		`{"workflow":"store","uaipSession":"0b6f1c1e-8d2a-4c43-9d7e-2f1f0c7a9b11"}`,
		`{}`, `null`, `[]`, ``, `{"workflow":"store"}`, `{"workflow":1,"uaipSession":"x"}`,
		`{"workflow":"a","uaipSession":"b","future":[1]}`, `{"workflow":"a","uaipSession":"b"} {}`,
		`{"workflow":"a","workflow":"b","uaipSession":"\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := decodeAppData(b)
		if err != nil {
			if d != nil {
				t.Fatalf("refused %q but returned %+v", b, d)
			}
			return
		}
		if d.Workflow == "" || d.UAIPSession == "" {
			t.Fatalf("accepted %q as %+v", b, d)
		}
		enc, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeAppData(enc)
		if err != nil {
			t.Fatalf("re-encoded %s refused: %v", enc, err)
		}
		if diff := cmp.Diff(d, again); diff != "" {
			t.Fatalf("round trip (-first +again):\n%s", diff)
		}
	})
}
