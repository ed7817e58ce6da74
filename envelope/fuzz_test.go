package envelope_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/envelope"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/google/go-cmp/cmp"
)

func addFiles(f *testing.F, patterns ...string) {
	f.Helper()
	n := 0
	for _, p := range patterns {
		files, _ := filepath.Glob(p)
		for _, file := range files {
			b, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
			n++
		}
	}
	if n == 0 {
		f.Fatalf("no seed files in %v", patterns)
	}
}

// wantDecodeError checks a refusal of a decoder: an *envelope.Error of
// code 4.00 or 4.13.
func wantDecodeError(t *testing.T, err error) {
	var e *envelope.Error
	if !errors.As(err, &e) || (e.Code != envelope.CodeBadRequest && e.Code != envelope.CodePayloadTooLarge) {
		t.Fatalf("refusal %v (%T) is not a 4.00/4.13 *envelope.Error", err, err)
	}
}

// wantOnlySigMissing checks a 4.01 of Decode: b's sig is absent, empty
// or not a string, and b with a sig decodes. (Decode refused nothing
// else, so b is one JSON object without duplicates: re-encoding it with
// its numbers as written keeps what Decode checks.)
func wantOnlySigMissing(t *testing.T, b []byte) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("4.01 for what is not a JSON object: %v\ninput: %q", err, b)
	}
	if s, ok := m["sig"].(string); ok && s != "" {
		t.Fatalf("4.01 from Decode for an envelope with a sig\ninput: %q", b)
	}
	m["sig"] = "x..y"
	signed, _ := json.Marshal(m)
	if _, err := envelope.Decode(signed); err != nil {
		t.Fatalf("4.01 for an envelope that is malformed with a sig too: %v\ninput: %q", err, b)
	}
}

// FuzzDecodeEnvelope: Decode never panics and refuses with 4.00/4.13,
// or 4.01 for an envelope that decodes once given a sig (§6.3); what it
// accepts the schema accepts, encodes back to the canonical form of the
// input and decodes to itself; Open on it never panics.
func FuzzDecodeEnvelope(f *testing.F) {
	addFiles(f, filepath.Join("testdata", "golden", "*envelope.json"), filepath.Join("testdata", "examples", "*.json"), filepath.Join("testdata", "spec", "*.json"))
	for _, s := range []string{
		minimal,
		strings.Replace(minimal, `"intent":"ask"`, `"intent":"ask","\u0069ntent":"ask"`, 1),
		strings.Replace(minimal, "2+2", `\ud83d\ude00 \ud800`, 1),
		strings.Replace(minimal, `,"sig":"x..y"`, ``, 1),
		strings.Replace(minimal, `"sig":"x..y"`, `"sig":[]`, 1),
		strings.Replace(minimal, `"sig":"x..y"`, `"sig":"x..y","ext":{"n":[9007199254740992,1e-400,-0.0,1.5E+3],"o":{"":null}}`, 1),
		strings.Replace(minimal, `"sig":"x..y"`, `"sig":"x..y","context":[{"id":"11111111-1111-4111-8111-111111111111","hash":"sha256:`+hex64('0')+`","x":{}}],"delta_window":6.4e1`, 1),
	} {
		f.Add([]byte(s))
	}
	fuzzKey := edKey(f, "fuzz").Public()
	keys := envelope.KeyResolverFunc(func(_ context.Context, _, kid string) (*envelope.PublicKey, error) {
		return fuzzKey, nil
	})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := envelope.Decode(b)
		if err != nil {
			if e != nil {
				t.Fatal("an envelope along with an error")
			}
			if errors.Is(err, envelope.CodeUnauthenticated) {
				wantOnlySigMissing(t, b)
				return
			}
			wantDecodeError(t, err)
			return
		}
		if err := envelope.ValidateEnvelope(b); err != nil {
			t.Fatalf("Decode accepts what the schema refuses: %v\ninput: %q", err, b)
		}
		checkRoundTrip(t, b, e)
		_, err = envelope.Open(ctx, b, keys)
		var ee *envelope.Error
		if err == nil || !errors.As(err, &ee) || ee.Code != envelope.CodeUnauthenticated {
			t.Fatalf("Open of an arbitrary envelope: %v", err)
		}
	})
}

// FuzzDecodeDelta: DecodeDelta never panics and refuses with 4.00/4.13;
// what it accepts the schema accepts and re-encodes to a delta that
// decodes to itself.
func FuzzDecodeDelta(f *testing.F) {
	addFiles(f, filepath.Join("testdata", "golden", "delta.json"), filepath.Join("testdata", "examples", "c1-delta.json"), filepath.Join("testdata", "spec", "example-c1-delta.json"))
	for _, s := range []string{
		`{"delta_seq":0,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"done"}`,
		`{"delta_seq":9007199254740992,"stream_id":"","ts":"2025-07-10t13:38:01.5+01:00","type":"chunk","payload":{"a":[{"b":"\ud83d\ude00"}]}}`,
		`{"delta_seq":1e2,"stream_id":"s","ts":"2025-07-10T13:38:01Z","type":"patch","payload":{}}`,
		`{"delta_seq":1,"delta_seq":2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := envelope.DecodeDelta(b)
		if err != nil {
			if d != nil {
				t.Fatal("a delta along with an error")
			}
			wantDecodeError(t, err)
			return
		}
		if err := envelope.ValidateDelta(b); err != nil {
			t.Fatalf("DecodeDelta accepts what the schema refuses: %v\ninput: %q", err, b)
		}
		again, err := envelope.DecodeDelta(mustJSON(t, d))
		if err != nil {
			t.Fatalf("re-encoded delta does not decode: %v", err)
		}
		if diff := cmp.Diff(d, again); diff != "" {
			t.Fatalf("(-first +again):\n%s", diff)
		}
	})
}

// FuzzParseJWS: ParseSignature never panics and refuses with 4.01; what
// it accepts has an allowed alg, a kid, a 64-byte signature and segments
// in canonical base64url, and go-jose parses it to the same header (no
// parser differential); verifying it never panics.
func FuzzParseJWS(f *testing.F) {
	e, _ := signed(f)
	f.Add(e.Sig)
	parts := strings.Split(e.Sig, ".")
	f.Add(parts[0] + "." + b64url([]byte(`{"sha256":"00"}`)) + "." + parts[2])
	for _, h := range []string{
		`{"alg":"none","kid":"k"}`, `{"alg":"EdDSA","kid":"k","crit":["b64"],"b64":false}`, `{"alg":"EdDSA","alg":"ES256","kid":"k"}`,
		`{"alg":"ES256","kid":"\ud800"}`, `{"alg":"EdDSA","kid":"k","typ":"JWT"}`, `{"alg":"HS256","kid":"k"}`, `{"kid":"k","alg":"ES256"}`,
	} {
		f.Add(b64url([]byte(h)) + ".." + parts[2])
	}
	f.Add("..")
	f.Add(parts[0] + "..." + parts[2])
	f.Add(parts[0] + ".." + parts[2] + "\n")
	keys := keySet(f, edKey(f, sampleKID))
	f.Fuzz(func(t *testing.T, token string) {
		s, err := envelope.ParseSignature(token)
		if err != nil {
			var ee *envelope.Error
			if s != nil || !errors.As(err, &ee) || ee.Code != envelope.CodeUnauthenticated {
				t.Fatalf("refusal %v (%T), signature %v", err, err, s)
			}
			return
		}
		if !s.Algorithm.Valid() || s.KeyID == "" || len(s.Value) != 64 {
			t.Fatalf("accepted %+v", s)
		}
		segs := strings.Split(token, ".")
		for _, seg := range segs {
			if seg == "" {
				continue
			}
			b, err := base64.RawURLEncoding.DecodeString(seg)
			if err != nil || base64.RawURLEncoding.EncodeToString(b) != seg {
				t.Fatalf("accepted a non-canonical segment %q", seg)
			}
		}
		algs := []jose.SignatureAlgorithm{jose.SignatureAlgorithm(s.Algorithm)}
		var obj *jose.JSONWebSignature
		if s.Detached() {
			obj, err = jose.ParseDetached(token, []byte("{}"), algs)
		} else {
			obj, err = jose.ParseSignedCompact(token, algs)
		}
		if err != nil {
			t.Fatalf("go-jose refuses what ParseSignature accepts: %v", err)
		}
		h := obj.Signatures[0].Protected
		if h.Algorithm != string(s.Algorithm) || h.KeyID != s.KeyID || !bytes.Equal(obj.Signatures[0].Signature, s.Value) {
			t.Fatalf("go-jose reads %+v, ParseSignature %+v", h, s)
		}
		hb, _ := base64.RawURLEncoding.DecodeString(segs[0])
		var m map[string]any
		if json.Unmarshal(hb, &m) != nil || len(m) != 2 {
			t.Fatalf("header %s", hb)
		}
		env := sampleEnvelope()
		env.Sig = token
		_ = envelope.Verify(ctx, env, keys)
	})
}
