package envelope_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/envelope"
)

func TestUAMP_8_SignedDocument(t *testing.T) {
	key := edKey(t, "did:web:hub.example#key-1")
	keys, _ := envelope.NewKeySet(key.Public())
	doc := map[string]any{"did": "did:web:hub.example", "manifests": []any{map[string]any{"did": "did:web:a.example", "url": "https://a.example/m"}}, "n": 1}
	sig, err := envelope.SignDocument(doc, key)
	if err != nil {
		t.Fatal(err)
	}
	doc["sig"] = sig
	b, _ := json.Marshal(doc)
	if err := envelope.VerifyDocument(ctx, b, "did:web:hub.example", keys); err != nil {
		t.Fatalf("VerifyDocument: %v", err)
	}
	// Member order and spacing do not matter; content does.
	spaced := strings.Replace(string(b), `,"n":1`, `, "n" : 1`, 1)
	if err := envelope.VerifyDocument(ctx, []byte(spaced), "did:web:hub.example", keys); err != nil {
		t.Errorf("VerifyDocument of a respaced document: %v", err)
	}
	for name, c := range map[string]struct {
		doc  string
		code envelope.Code
	}{
		"changed":        {strings.Replace(string(b), `"n":1`, `"n":2`, 1), envelope.CodeUnauthenticated},
		"nested changed": {strings.Replace(string(b), `a.example/m`, `evil.example/m`, 1), envelope.CodeUnauthenticated},
		"no sig":         {`{"did":"x"}`, envelope.CodeUnauthenticated},
		"duplicate":      {strings.Replace(string(b), `"n":1`, `"n":1,"n":1`, 1), envelope.CodeBadRequest},
		"not an object":  {`[1]`, envelope.CodeBadRequest},
	} {
		err := envelope.VerifyDocument(ctx, []byte(c.doc), "did:web:hub.example", keys)
		if e := envelope.AsError(err); err == nil || e.Code != c.code {
			t.Errorf("%s: err = %v, want %s", name, err, c.code)
		}
	}
	// A kid of another DID than the signer named is refused.
	if err := envelope.VerifyDocument(ctx, b, "did:web:other.example", keys); err == nil {
		t.Error("verified as another signer's document")
	}
}
