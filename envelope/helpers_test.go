package envelope_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/google/go-cmp/cmp"
	"github.com/gowebpki/jcs"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden and testdata/examples")

var ctx = context.Background()

// edKey returns a deterministic Ed25519 key (seeded by kid), so that
// signatures are reproducible.
func edKey(t testing.TB, kid string) *envelope.PrivateKey {
	t.Helper()
	seed := sha256.Sum256([]byte("agentry uamp test key " + kid))
	k, err := envelope.NewPrivateKey(ed25519.NewKeyFromSeed(seed[:]), kid)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// newKey returns a key for alg: deterministic for EdDSA, fresh for ES256.
func newKey(t testing.TB, alg envelope.Algorithm, kid string) *envelope.PrivateKey {
	t.Helper()
	if alg == envelope.EdDSA {
		return edKey(t, kid)
	}
	k, err := envelope.GenerateKey(alg, kid)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func keySet(t testing.TB, keys ...*envelope.PrivateKey) *envelope.KeySet {
	t.Helper()
	var pubs []*envelope.PublicKey
	for _, k := range keys {
		pubs = append(pubs, k.Public())
	}
	s, err := envelope.NewKeySet(pubs...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const (
	sampleFrom = "did:web:client.example"
	sampleKID  = "did:web:client.example#key-1"
)

// sampleEnvelope returns an unsigned envelope with every member of §4
// set, open objects (body, context elements, ext) carrying extra members.
func sampleEnvelope() *envelope.Envelope {
	return &envelope.Envelope{
		ID:          "urn:uuid:6f1c2a4e-8d3b-4c1a-9e2f-0a1b2c3d4e5f",
		TS:          "2025-07-10T13:37:05.000Z",
		From:        sampleFrom,
		To:          []string{"did:web:worker.example", "did:web:backup.example"},
		Intent:      envelope.IntentAsk,
		ReplyTo:     "urn:uuid:0b7e3f7c-5a1d-4e8b-8c9d-1e2f3a4b5c6d",
		Context:     []envelope.ContextRef{{ID: "urn:uuid:9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d", Hash: "sha256:" + hex64('a'), Extra: map[string]any{"role": "prior"}}},
		StreamID:    "str-42",
		DeltaWindow: 64,
		Body: envelope.Body{Type: "text/markdown", Content: "# Draw me a sheep…", Encoding: "utf-8", Compression: "none",
			Extra: map[string]any{"lang": "en"}},
		CapToken: "eyJhbGciOiJFZERTQSJ9.e30.c2ln",
		Ext:      map[string]any{"x-trace": "b3:80f198ee56343ba864fe8b2a57d3eff7", "x-nested": map[string]any{"n": 1.5, "list": []any{"a", true, nil}}},
	}
}

func hex64(c byte) string { return string(bytes.Repeat([]byte{c}, 64)) }

// signed returns the sample envelope signed with the deterministic
// EdDSA key sampleKID.
func signed(t testing.TB) (*envelope.Envelope, *envelope.PrivateKey) {
	t.Helper()
	e := sampleEnvelope()
	k := edKey(t, sampleKID)
	if err := envelope.Sign(e, k); err != nil {
		t.Fatal(err)
	}
	return e, k
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantCode fails unless err is an *envelope.Error with code c.
func wantCode(t testing.TB, err error, c envelope.Code) {
	t.Helper()
	var e *envelope.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not an *envelope.Error with code %s", err, err, c)
	}
	if e.Code != c {
		t.Fatalf("code %s, want %s: %v", e.Code, c, err)
	}
}

// goldenFile compares got, indented, with testdata/golden/name (or writes
// it with -update) and returns the file's content.
func goldenFile(t *testing.T, name string, got []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Indent(&buf, got, "", "  "); err != nil {
		t.Fatal(err)
	}
	buf.WriteByte('\n')
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create)", err)
	}
	if diff := cmp.Diff(string(want), buf.String()); diff != "" {
		t.Errorf("%s (-golden +got):\n%s", path, diff)
	}
	return want
}

func b64url(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// canonicalOf is the JCS of b.
func canonicalOf(b []byte) ([]byte, error) { return jcs.Transform(b) }
