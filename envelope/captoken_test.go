package envelope_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/envelope"
	jose "github.com/go-jose/go-jose/v4"
)

const (
	capIssuer = "https://auth.example"
	capAud    = "did:web:worker.example"
)

// jwtWith signs claims (a JSON object text) as a compact JWS with the
// given algorithm, key and protected headers.
func jwtWith(t *testing.T, alg jose.SignatureAlgorithm, key any, headers map[jose.HeaderKey]any, claims string) string {
	t.Helper()
	opts := &jose.SignerOptions{}
	for k, v := range headers {
		opts.WithHeader(k, v)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := s.Sign([]byte(claims))
	if err != nil {
		t.Fatal(err)
	}
	out, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// claimsJSON returns valid claims at now with changes applied (a nil
// value deletes the claim).
func claimsJSON(t *testing.T, now time.Time, changes map[string]any) string {
	m := map[string]any{
		"iss": capIssuer, "sub": sampleFrom, "aud": capAud, "scope": "uamp:inform uamp:ask",
		"exp": now.Add(time.Hour).Unix(), "nbf": now.Add(-time.Minute).Unix(), "iat": now.Add(-time.Minute).Unix(), "jti": "t-1",
	}
	for k, v := range changes {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return string(mustJSON(t, m))
}

// TestUAMP_6_2_CapToken checks capability tokens: genuine and current or
// 4.01; granting the envelope (aud, sub, scope) or 4.03.
func TestUAMP_6_2_CapToken(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	issuerKey := edKey(t, "issuer-key-1")
	priv := issuerKey.Signer().(ed25519.PrivateKey)
	policy := &envelope.CapTokenPolicy{
		Audience: capAud,
		Issuers:  map[string]envelope.KeyResolver{capIssuer: keySet(t, issuerKey)},
		Required: true,
		Now:      func() time.Time { return now },
	}
	kid := map[jose.HeaderKey]any{"kid": "issuer-key-1"}
	typJWT := map[jose.HeaderKey]any{"kid": "issuer-key-1", "typ": "JWT"}
	sign := func(changes map[string]any) string {
		return jwtWith(t, jose.EdDSA, priv, typJWT, claimsJSON(t, now, changes))
	}
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	es256 := newKey(t, envelope.ES256, "issuer-key-1")
	good := sign(nil)
	goodParts := strings.Split(good, ".")

	cases := []struct {
		name   string
		token  string
		intent envelope.Intent
		want   envelope.Code // "" = accepted
	}{
		{"valid", good, envelope.IntentAsk, ""},
		{"valid without typ", jwtWith(t, jose.EdDSA, priv, kid, claimsJSON(t, now, nil)), envelope.IntentAsk, ""},
		{"typ at+jwt", jwtWith(t, jose.EdDSA, priv, map[jose.HeaderKey]any{"kid": "issuer-key-1", "typ": "at+jwt"}, claimsJSON(t, now, nil)), envelope.IntentAsk, ""},
		{"aud array", sign(map[string]any{"aud": []string{"did:web:other", capAud}}), envelope.IntentAsk, ""},
		{"wildcard scope", sign(map[string]any{"scope": "uamp:*"}), envelope.IntentCancel, ""},
		{"no sub", sign(map[string]any{"sub": nil}), envelope.IntentAsk, ""},
		{"expired within leeway", sign(map[string]any{"exp": now.Add(-30 * time.Second).Unix()}), envelope.IntentAsk, ""},
		{"fractional exp", sign(map[string]any{"exp": float64(now.Add(time.Hour).Unix()) + 0.5}), envelope.IntentAsk, ""},

		{"missing", "", envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"garbage", "not.a.jwt", envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"expired", sign(map[string]any{"exp": now.Add(-2 * time.Minute).Unix()}), envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"not yet valid", sign(map[string]any{"nbf": now.Add(2 * time.Minute).Unix()}), envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"issued in the future", sign(map[string]any{"iat": now.Add(2 * time.Minute).Unix()}), envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"untrusted issuer", sign(map[string]any{"iss": "https://evil.example"}), envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"no exp", sign(map[string]any{"exp": nil}), envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"no aud", sign(map[string]any{"aud": nil}), envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"no scope", sign(map[string]any{"scope": nil}), envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"scope array", sign(map[string]any{"scope": []string{"uamp:ask"}}), envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"exp a string", sign(map[string]any{"exp": "tomorrow"}), envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"duplicate claim", jwtWith(t, jose.EdDSA, priv, kid, strings.Replace(claimsJSON(t, now, nil), `"aud":`, `"aud":"x","aud":`, 1)), envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"tampered claims", goodParts[0] + "." + b64url([]byte(claimsJSON(t, now, map[string]any{"scope": "uamp:*"}))) + "." + goodParts[2], envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"unknown kid", jwtWith(t, jose.EdDSA, priv, map[jose.HeaderKey]any{"kid": "issuer-key-2"}, claimsJSON(t, now, nil)), envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"no kid", jwtWith(t, jose.EdDSA, priv, nil, claimsJSON(t, now, nil)), envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"kid of another DID", jwtWith(t, jose.EdDSA, priv, map[jose.HeaderKey]any{"kid": "did:web:evil#issuer-key-1"}, claimsJSON(t, now, map[string]any{"iss": "did:web:auth"})), envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"HS256 keyed by the public key", jwtWith(t, jose.HS256, []byte(issuerKey.Public().Key().(ed25519.PublicKey)), kid, claimsJSON(t, now, nil)), envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"RS256", jwtWith(t, jose.RS256, rsaKey, kid, claimsJSON(t, now, nil)), envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"ES256 under an EdDSA kid", jwtWith(t, jose.ES256, es256.Signer(), kid, claimsJSON(t, now, nil)), envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"alg none", b64url([]byte(`{"alg":"none","kid":"issuer-key-1"}`)) + "." + goodParts[1] + ".", envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"crit", jwtWith(t, jose.EdDSA, priv, map[jose.HeaderKey]any{"kid": "issuer-key-1", "crit": []string{"exp"}, "exp": 1}, claimsJSON(t, now, nil)), envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"typ dpop+jwt", jwtWith(t, jose.EdDSA, priv, map[jose.HeaderKey]any{"kid": "issuer-key-1", "typ": "dpop+jwt"}, claimsJSON(t, now, nil)), envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"detached", goodParts[0] + ".." + goodParts[2], envelope.IntentAsk, envelope.CodeUnauthenticated},
		{"too long", strings.Repeat("a", envelope.MaxCapTokenSize+1), envelope.IntentAsk, envelope.CodeUnauthenticated},

		{"another audience", sign(map[string]any{"aud": "did:web:other"}), envelope.IntentAsk, envelope.CodeUnauthorized},
		{"scope does not cover the intent", good, envelope.IntentSubscribe, envelope.CodeUnauthorized},
		{"scope of a prefix", sign(map[string]any{"scope": "uamp:as"}), envelope.IntentAsk, envelope.CodeUnauthorized},
		{"bare intent scope", sign(map[string]any{"scope": "ask"}), envelope.IntentAsk, envelope.CodeUnauthorized},
		{"issued to another sender", sign(map[string]any{"sub": "did:web:mallory.example"}), envelope.IntentAsk, envelope.CodeUnauthorized},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := sampleEnvelope()
			e.CapToken, e.Intent = c.token, c.intent
			claims, err := policy.Check(ctx, e)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if claims.Issuer != capIssuer || !envelope.ScopeCovers(claims.Scope, c.intent) {
					t.Errorf("claims %+v", claims)
				}
				return
			}
			if claims != nil {
				t.Errorf("claims %+v along with an error", claims)
			}
			wantCode(t, err, c.want)
		})
	}

	// Not required: no token passes with nil claims.
	lax := *policy
	lax.Required = false
	e := sampleEnvelope()
	e.CapToken = ""
	if claims, err := lax.Check(ctx, e); claims != nil || err != nil {
		t.Errorf("optional token: %+v, %v", claims, err)
	}
}
