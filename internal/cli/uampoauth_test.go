package cli

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/envelope"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// TestServeUAMPOAuthBearer: with --uamp-oauth-issuer/--uamp-oauth-jwks a
// client without a certificate authenticates with a bearer access token;
// its sub is the principal the envelope's from must equal.
func TestServeUAMPOAuthBearer(t *testing.T) {
	dir, data := t.TempDir(), t.TempDir()
	issuer, err := envelope.GenerateKey(envelope.EdDSA, "issuer-1")
	if err != nil {
		t.Fatal(err)
	}
	jwks, _ := envelope.NewKeySet(issuer.Public())
	jwksJSON, _ := json.Marshal(jwks)
	client, _ := envelope.GenerateKey(envelope.EdDSA, "did:web:client.example#key-1")
	trust, _ := envelope.NewKeySet(client.Public())
	trustJSON, _ := json.Marshal(trust)
	srv := serveInProcess(t, data, "--uamp-trust", writeFile(t, dir, "trust.jwks", string(trustJSON)),
		"--uamp-oauth-issuer", "https://auth.example", "--uamp-oauth-jwks", writeFile(t, dir, "issuer.jwks", string(jwksJSON)))
	if srv.tlsURL == "" {
		t.Fatalf("no UAMP listener:\n%s", srv.output.String())
	}
	pem, err := os.ReadFile(filepath.Join(data, devCertFile))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{ForceAttemptHTTP2: true,
		TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13}}}

	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: issuer.Signer()},
		(&jose.SignerOptions{}).WithHeader("kid", "issuer-1").WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	token, err := jwt.Signed(signer).Claims(jwt.Claims{Issuer: "https://auth.example", Subject: "did:web:client.example",
		Audience: jwt.Audience{srv.did}, Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour))}).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	post := func(bearer string) int {
		t.Helper()
		e := envelope.New("did:web:client.example", []string{srv.did}, envelope.IntentAsk, envelope.Body{Type: "text/plain", Content: "hi"})
		if err := envelope.Sign(e, client); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(e)
		req, _ := http.NewRequest("POST", srv.tlsURL+"/v1/messages", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/uamp+json;v=1")
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(token); code != http.StatusAccepted {
		t.Errorf("with a bearer token: %d, want 202", code)
	}
	if code := post(""); code != http.StatusUnauthorized {
		t.Errorf("without token or certificate: %d, want 401", code)
	}
	if code := post(token[:len(token)-4] + "AAAA"); code != http.StatusUnauthorized {
		t.Errorf("with a forged token: %d, want 401", code)
	}
}
