package envelope_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/envelope"
	jose "github.com/go-jose/go-jose/v4"
)

// TestUAMP_6_3_JWK round-trips keys of both algorithms through their
// JWKs and checks what the parsers refuse.
func TestUAMP_6_3_JWK(t *testing.T) {
	for _, alg := range []envelope.Algorithm{envelope.EdDSA, envelope.ES256} {
		k, err := envelope.GenerateKey(alg, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(k.KID()) != 43 { // base64url of a SHA-256 thumbprint
			t.Errorf("%s: default kid %q is not a thumbprint", alg, k.KID())
		}
		priv := mustJSON(t, k)
		pub := mustJSON(t, k.Public())
		if !strings.Contains(string(priv), `"d":`) || strings.Contains(string(pub), `"d":`) {
			t.Fatalf("%s: private %s public %s", alg, priv, pub)
		}
		k2, err := envelope.ParsePrivateKey(priv)
		if err != nil {
			t.Fatal(err)
		}
		p2, err := envelope.ParsePublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		if k2.KID() != k.KID() || k2.Algorithm() != alg || p2.KID() != k.KID() || p2.Algorithm() != alg {
			t.Errorf("%s: round trip %v %v", alg, k2, p2)
		}
		// A key parsed back signs what the original verifies.
		e := sampleEnvelope()
		if err := envelope.Sign(e, k2); err != nil {
			t.Fatal(err)
		}
		s, _ := envelope.NewKeySet(p2)
		if err := envelope.Verify(ctx, e, s); err != nil {
			t.Errorf("%s: %v", alg, err)
		}
		if _, err := envelope.ParsePublicKey(priv); err == nil {
			t.Errorf("%s: ParsePublicKey accepts a private JWK", alg)
		}
		if _, err := envelope.ParsePrivateKey(pub); err == nil {
			t.Errorf("%s: ParsePrivateKey accepts a public JWK", alg)
		}
		// A kid absent from the JWK is the thumbprint.
		var m map[string]any
		json.Unmarshal(pub, &m)
		delete(m, "kid")
		if p3, err := envelope.ParsePublicKey(mustJSON(t, m)); err != nil || p3.KID() != k.KID() {
			t.Errorf("%s: kid of a JWK without one: %v, %v", alg, p3, err)
		}
	}

	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	jwkOf := func(key any, alg string) string {
		b, err := json.Marshal(jose.JSONWebKey{Key: key, KeyID: "k", Algorithm: alg})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	ed := string(mustJSON(t, edKey(t, "k").Public()))
	for name, in := range map[string]string{
		"RSA":               jwkOf(&rsaKey.PublicKey, "RS256"),
		"P-384":             jwkOf(&p384.PublicKey, "ES384"),
		"oct":               jwkOf([]byte("secret-secret-secret"), "HS256"),
		"alg mismatch":      strings.Replace(ed, `"alg":"EdDSA"`, `"alg":"ES256"`, 1),
		"use enc":           strings.Replace(ed, `"use":"sig"`, `"use":"enc"`, 1),
		"duplicate x":       strings.Replace(ed, `"x":`, `"x":"AAAA","x":`, 1),
		"not JSON":          `{"kty":`,
		"short Ed25519 key": strings.Replace(ed, ed[strings.Index(ed, `"x":"`)+5:len(ed)-2], "AAAA", 1),
	} {
		if _, err := envelope.ParsePublicKey([]byte(in)); err == nil {
			t.Errorf("%s: accepted %s", name, in)
		}
	}
}

// TestUAMP_6_3_KeySet reads JWK sets and single JWKs, and refuses two
// keys under one kid.
func TestUAMP_6_3_KeySet(t *testing.T) {
	a, b := edKey(t, "a"), newKey(t, envelope.ES256, "b")
	set := keySet(t, a, b)
	parsed, err := envelope.ParseKeySet(mustJSON(t, set))
	if err != nil {
		t.Fatal(err)
	}
	if ks := parsed.Keys(); len(ks) != 2 || ks[0].KID() != "a" || ks[1].KID() != "b" {
		t.Errorf("keys %v", ks)
	}
	single, err := envelope.ParseKeySet(mustJSON(t, a.Public()))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := single.Key("a"); !ok {
		t.Error("single JWK not in the set")
	}
	if _, err := single.ResolveKey(ctx, "", "b"); err == nil {
		t.Error("unknown kid resolved")
	}
	if err := set.Add(a.Public()); err != nil {
		t.Errorf("adding the same key again: %v", err)
	}
	if err := set.Add(edKey(t, "other-seed").Public()); err != nil {
		t.Fatal(err)
	}
	clash, _ := envelope.NewPrivateKey(edKey(t, "x").Signer(), "a")
	if err := set.Add(clash.Public()); err == nil {
		t.Error("two keys under kid a")
	}
	for _, in := range []string{`[]`, `{"keys":{}}`, `{"other":[]}`, `{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`, `{"keys":[` + string(mustJSON(t, a)) + `]}`} {
		if _, err := envelope.ParseKeySet([]byte(in)); err == nil {
			t.Errorf("ParseKeySet(%s) accepted", in)
		}
	}
	if got := string(mustJSON(t, keySet(t))); got != `{"keys":[]}` {
		t.Errorf("empty set %s", got)
	}
}

// TestUAMP_8_SignedManifest signs a manifest as a compact JWS and opens
// it; a changed payload or another signer's key is 4.01.
func TestUAMP_8_SignedManifest(t *testing.T) {
	m := &envelope.Manifest{Agent: "uamp/1.0", Description: "calc", Intents: []string{"ask"}, BodyTypes: []string{"text/plain"}, Auth: []string{"mtls"}}
	k := edKey(t, "did:web:calc#key-1")
	jws, err := envelope.SignManifest(m, k)
	if err != nil {
		t.Fatal(err)
	}
	got, err := envelope.OpenManifest(ctx, jws, "did:web:calc", keySet(t, k))
	if err != nil {
		t.Fatal(err)
	}
	if got.Description != "calc" || got.Agent != "uamp/1.0" {
		t.Errorf("%+v", got)
	}
	parts := strings.Split(jws, ".")
	forged := parts[0] + "." + b64url([]byte(`{"agent":"uamp/1.0","auth":["mtls"],"body_types":[],"description":"evil","intents":[],"limits":{}}`)) + "." + parts[2]
	_, err = envelope.OpenManifest(ctx, forged, "did:web:calc", keySet(t, k))
	wantCode(t, err, envelope.CodeUnauthenticated)
	_, err = envelope.OpenManifest(ctx, jws, "did:web:other", keySet(t, k))
	wantCode(t, err, envelope.CodeUnauthenticated)
	_, err = envelope.OpenManifest(ctx, parts[0]+".."+parts[2], "did:web:calc", keySet(t, k))
	wantCode(t, err, envelope.CodeUnauthenticated)
	// A manifest the schema refuses is 4.00 even when signed.
	bad, _ := envelope.SignManifest(&envelope.Manifest{Agent: "uamp/2.0"}, k)
	_, err = envelope.OpenManifest(ctx, bad, "did:web:calc", keySet(t, k))
	wantCode(t, err, envelope.CodeBadRequest)
}
