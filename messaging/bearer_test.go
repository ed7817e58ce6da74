package messaging_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// TestUAMP_6_2_BearerJWT: OAuth bearer access tokens from the configured
// issuer authenticate their sub; anything else is 4.01.
func TestUAMP_6_2_BearerJWT(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	issuerKey, err := envelope.NewPrivateKey(priv, "issuer-1")
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := envelope.NewKeySet(issuerKey.Public())
	auth, err := messaging.BearerJWT(&messaging.BearerOptions{Issuer: "https://auth.example", Audience: "did:web:agent.example", Keys: keys, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	mint := func(key any, alg jose.SignatureAlgorithm, kid, typ string, c jwt.Claims) string {
		opts := (&jose.SignerOptions{}).WithHeader("kid", kid)
		if typ != "" {
			opts = opts.WithType(jose.ContentType(typ))
		}
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := jwt.Signed(s).Claims(c).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	good := jwt.Claims{Issuer: "https://auth.example", Subject: "did:web:client.example", Audience: jwt.Audience{"did:web:agent.example"},
		Expiry: jwt.NewNumericDate(now.Add(time.Hour)), IssuedAt: jwt.NewNumericDate(now.Add(-time.Minute))}
	with := func(f func(c *jwt.Claims)) jwt.Claims { c := good; f(&c); return c }
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	hs := func() string { // HS256 keyed with the issuer's public key bytes (alg confusion)
		s, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte(priv.Public().(ed25519.PublicKey))}, (&jose.SignerOptions{}).WithHeader("kid", "issuer-1").WithType("at+jwt"))
		tok, _ := jwt.Signed(s).Claims(good).Serialize()
		return tok
	}()
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"issuer-1","typ":"at+jwt"}`)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"https://auth.example","sub":"did:web:client.example","aud":"did:web:agent.example","exp":9999999999}`)) + "."

	cases := []struct {
		name, header string
		principal    string
	}{
		{"valid", "Bearer " + mint(priv, jose.EdDSA, "issuer-1", "at+jwt", good), "did:web:client.example"},
		{"scheme case", "bearer " + mint(priv, jose.EdDSA, "issuer-1", "application/at+jwt", good), "did:web:client.example"},
		{"no header", "", ""},
		{"basic", "Basic YTpi", ""},
		{"garbage", "Bearer x.y.z", ""},
		{"typ JWT", "Bearer " + mint(priv, jose.EdDSA, "issuer-1", "JWT", good), ""},
		{"other issuer", "Bearer " + mint(priv, jose.EdDSA, "issuer-1", "at+jwt", with(func(c *jwt.Claims) { c.Issuer = "https://evil.example" })), ""},
		{"other audience", "Bearer " + mint(priv, jose.EdDSA, "issuer-1", "at+jwt", with(func(c *jwt.Claims) { c.Audience = jwt.Audience{"did:web:other.example"} })), ""},
		{"expired", "Bearer " + mint(priv, jose.EdDSA, "issuer-1", "at+jwt", with(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-time.Hour)) })), ""},
		{"no exp", "Bearer " + mint(priv, jose.EdDSA, "issuer-1", "at+jwt", with(func(c *jwt.Claims) { c.Expiry = nil })), ""},
		{"not yet", "Bearer " + mint(priv, jose.EdDSA, "issuer-1", "at+jwt", with(func(c *jwt.Claims) { c.NotBefore = jwt.NewNumericDate(now.Add(time.Hour)) })), ""},
		{"no subject", "Bearer " + mint(priv, jose.EdDSA, "issuer-1", "at+jwt", with(func(c *jwt.Claims) { c.Subject = "" })), ""},
		{"unknown kid", "Bearer " + mint(priv, jose.EdDSA, "issuer-2", "at+jwt", good), ""},
		{"other key", "Bearer " + mint(otherPriv, jose.EdDSA, "issuer-1", "at+jwt", good), ""},
		{"HS256 with the public key", "Bearer " + hs, ""},
		{"alg none", "Bearer " + none, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/v1/messages", nil)
			if c.header != "" {
				r.Header.Set("Authorization", c.header)
			}
			p, err := auth(r)
			if c.principal != "" {
				if err != nil || p != c.principal {
					t.Fatalf("principal %q, %v; want %q", p, err, c.principal)
				}
				return
			}
			if e := envelope.AsError(err); err == nil || e.Code != envelope.CodeUnauthenticated || p != "" {
				t.Fatalf("principal %q, err %v; want a 4.01 refusal", p, err)
			}
		})
	}
	r := httptest.NewRequest("POST", "/", nil)
	r.Header.Add("Authorization", cases[0].header)
	r.Header.Add("Authorization", cases[0].header)
	if _, err := auth(r); err == nil || !strings.Contains(err.Error(), "one Authorization") {
		t.Errorf("two Authorization headers: %v", err)
	}
	if _, err := messaging.BearerJWT(&messaging.BearerOptions{Issuer: "x"}); err == nil {
		t.Error("BearerJWT without audience and keys")
	}
}
