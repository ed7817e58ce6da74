package runs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// goTypeName matches what would betray a Go type in an error message.
var goTypeName = regexp.MustCompile(`\b(u?int(8|16|32|64)?|float(32|64)|map\[|\[\]|struct|interface|Go value|runs\.)\b`)

// TestBadRequests_HostileBodies: POST /v1/runs decodes its body strictly
// (DESIGN §2). Trailing bytes, invalid UTF-8, lone surrogates, a value of
// the wrong type, a duplicate or unknown member are a 400 that says what
// is wrong without a Go type name, and no run starts: the journal and the
// ledger are as they were. Every body asks to wait, so that a run that
// did start would be journaled before the answer.
func TestBadRequests_HostileBodies(t *testing.T) {
	f := newFixture(t)
	const hint = `the body must be {"agent": "...", "input": "...", "wait": bool}: `
	tests := []struct{ name, body, message string }{
		{"trailing }x", `{"agent":"support","input":"please refund o-1001","wait":true}}x`, hint + "unexpected data after the JSON value at byte 62"},
		{"trailing {}", `{"agent":"support","input":"please refund o-1001","wait":true}{}`, hint + "unexpected data after the JSON value at byte 62"},
		{"\\xff in a string", "{\"agent\":\"support\",\"input\":\"status of o-1002\xff\",\"wait\":true}", hint + "input: invalid UTF-8 (byte 0xff) at byte 44"},
		{"lone surrogate", `{"agent":"support","input":"status of o-1002 \ud800","wait":true}`, hint + `input: \ud800 at byte 45 is half a surrogate pair without its other half (not a character)`},
		{"reversed surrogates", `{"agent":"support","input":"\udc00\ud800 status of o-1002","wait":true}`, hint + `input: \udc00 at byte 28 is half a surrogate pair without its other half (not a character)`},
		{"number for a boolean", `{"agent":"support","input":"status of o-1002","wait":1e400}`, hint + "wait: must be a boolean"},
		{"duplicate member", `{"agent":"support","input":"status of o-1002","input":"please refund o-1001","wait":true}`, hint + `duplicate member "input"`},
		{"member in another case", `{"agent":"support","Input":"status of o-1002","wait":true}`, hint + `unknown member "Input" (member names are case-sensitive: "input")`},
		{"unknown member", `{"agent":"support","input":"status of o-1002","wait":true,"zz":1}`, hint + `unknown member "zz"`},
	}
	before := journalLen(t, f)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := http.Post(f.srv.URL+"/v1/runs", "application/json", bytes.NewBufferString(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", resp.StatusCode, raw)
			}
			var e struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatalf("body %s: %v", raw, err)
			}
			if diff := cmp.Diff(tc.message, e.Error.Message); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
			if e.Error.Code != "BAD_REQUEST" || goTypeName.MatchString(e.Error.Message) {
				t.Errorf("error %+v", e.Error)
			}
		})
	}
	if after := journalLen(t, f); after != before {
		t.Errorf("%d journal records after the refused requests, %d before: a run started", after, before)
	}
	if log := f.ledger.Log(); len(log) != 0 {
		t.Errorf("ledger %v", log)
	}
}

func journalLen(t *testing.T, f *fixture) int {
	t.Helper()
	n := 0
	for _, err := range f.journal.Records(context.Background(), 0) {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	return n
}
