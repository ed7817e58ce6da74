package envelope

import (
	"bytes"
	"strings"
	"testing"
)

// TestCanonicalDirectMatchesJCS pins the direct canonical encoder to the
// general path (encoding, then gowebpki/jcs) on envelopes that stress
// member order and string escapes, including what only Sign can meet:
// invalid UTF-8 and every control character. FuzzDecodeEnvelope checks
// the same equality on every envelope Decode accepts.
func TestCanonicalDirectMatchesJCS(t *testing.T) {
	var controls strings.Builder
	for c := rune(0); c < 0x20; c++ {
		controls.WriteRune(c)
	}
	texts := []string{"", "2+2", controls.String() + "\"\\/\u007f", "Grüße 🙂 \u2028\u2029 \ufeff", "bad \xff\xfe utf-8 \xc3", "<>&'"}
	base := func() *Envelope {
		return &Envelope{ID: "urn:uuid:5b0e6a9e-8f0e-4c1a-9d57-3e4a2b1c0d9f", TS: "2026-11-22T10:00:00Z",
			From: "did:web:a.example", To: []string{"did:web:b.example"}, Intent: IntentAsk,
			Body: Body{Type: "text/plain", Content: "x"}}
	}
	var cases []*Envelope
	for _, s := range texts {
		e := base()
		e.Body.Content, e.From, e.TS = s, "did:web:"+s, s
		e.To = []string{s, "did:web:z"}
		cases = append(cases, e)
	}
	full := base()
	full.ReplyTo, full.StreamID, full.DeltaWindow, full.CapToken, full.Sig = "urn:uuid:11111111-1111-4111-8111-111111111111", "s-1", 16, "a.b.c", "ignored..sig"
	full.Body.Encoding, full.Body.Compression = "utf-8", "none"
	full.Context = []ContextRef{{ID: "c1", Hash: "sha256:00"}, {ID: "c2", Hash: "sha256:ff"}}
	full.Ext = map[string]any{"z": []any{1, 2.5, 1e3, -0.0001, true, nil}, "a": map[string]any{"é": "🚀", "A": controls.String()}, "": 0}
	cases = append(cases, full)
	noTo := base()
	noTo.To, noTo.Context, noTo.Ext = nil, []ContextRef{}, map[string]any{}
	cases = append(cases, noTo)

	for i, e := range cases {
		direct, ok, err := e.canonicalDirect()
		if err != nil || !ok {
			t.Fatalf("case %d: direct path: ok=%v err=%v", i, ok, err)
		}
		general, err := e.canonicalGeneral()
		if err != nil {
			t.Fatalf("case %d: general path: %v", i, err)
		}
		if !bytes.Equal(direct, general) {
			t.Errorf("case %d: direct and general canonical forms differ\ndirect  %q\ngeneral %q", i, direct, general)
		}
	}

	// Extra members take the general path.
	x := base()
	x.Body.Extra = map[string]any{"lang": "en"}
	if _, ok, _ := x.canonicalDirect(); ok {
		t.Error("an envelope with body Extra took the direct path")
	}
	x = base()
	x.Context = []ContextRef{{ID: "c", Hash: "h", Extra: map[string]any{"k": 1}}}
	if _, ok, _ := x.canonicalDirect(); ok {
		t.Error("an envelope with context Extra took the direct path")
	}
	if c, err := x.canonical(); err != nil || !bytes.Contains(c, []byte(`"k":1`)) {
		t.Errorf("Canonical of an envelope with Extra: %s, %v", c, err)
	}
}
