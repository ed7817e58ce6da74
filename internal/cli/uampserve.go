package cli

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/server"
)

// The files agentry serve keeps under --data for its TLS listener.
const (
	devCertFile  = "tls/cert.pem"      // the self-signed development certificate
	devKeyFile   = "tls/key.pem"       // its key (0600)
	identityFile = "uamp/identity.jwk" // the server's UAMP identity key, as agentry uamp keygen writes it
	trustFile    = "uamp/trusted.jwks" // default --uamp-trust when it exists
)

// listenTLS listens on --tls-addr; it returns nil (and no error) when
// --tls-addr is empty, or when the default address is taken (the plain
// protocols do not depend on it).
func listenTLS(e *env, f *serveFlags, logger *slog.Logger) (net.Listener, error) {
	if f.tlsAddr == "" {
		logger.Info("TLS listener disabled (--tls-addr is empty): UAMP is not served")
		return nil, nil
	}
	ln, err := net.Listen("tcp", f.tlsAddr)
	if err != nil {
		if !f.tlsAddrSet {
			logger.Warn("TLS listener not started: UAMP is not served", "tls_addr", f.tlsAddr, "error", err)
			fmt.Fprintf(e.stderr, "agentry: cannot listen on %s (%v): UAMP is not served; pick another --tls-addr\n", f.tlsAddr, err)
			return nil, nil
		}
		return nil, listenError("--tls-addr", f.tlsAddr, err)
	}
	return ln, nil
}

// uampConfig is the UAMP of agentry serve on the TLS listener ln: the
// built-in echo agent, answering as --uamp-did (default
// did:web:<host>%3A<port>) with the identity key under --data, over
// --tls-cert or a development certificate, trusting --uamp-trust,
// --uamp-client-ca and --uamp-oauth-issuer.
func uampConfig(e *env, f *serveFlags, logger *slog.Logger, ln net.Listener) (*server.UAMP, error) {
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); ip != nil && (ip.IsUnspecified() || ip.To4() == nil) {
		host = "localhost" // a wildcard or IPv6 listener is named by the host every certificate covers
	}
	hostport := net.JoinHostPort(host, port)
	did := f.uampDID
	if did == "" {
		did = "did:web:" + strings.ReplaceAll(hostport, ":", "%3A") // did:web encodes the port's colon
	}
	cert, certDesc, err := serverCertificate(f, host, logger)
	if err != nil {
		return nil, err
	}
	var identity *envelope.PrivateKey
	if f.uampKey != "" { // replicas share one identity: the file must exist
		if _, err := os.Stat(f.uampKey); err != nil {
			return nil, usageError("--uamp-key: %v (make one with: agentry uamp keygen --out %s)", err, f.uampKey)
		}
		identity, err = loadIdentity(f.uampKey, did)
	} else {
		identity, err = loadIdentity(filepath.Join(f.data, identityFile), did)
	}
	if err != nil {
		return nil, fmt.Errorf("UAMP identity key: %w", err)
	}
	trusted, trustPath, err := loadTrust(f)
	if err != nil {
		return nil, err
	}
	u := &server.UAMP{
		Handler: messaging.Echo, DID: did, Key: identity, Certificate: cert, TrustedKeys: trusted,
		BaseURL: "https://" + hostport,
		Manifest: envelope.Manifest{
			Agent:       "uamp/1.0",
			Description: "agentry built-in echo agent: streams the request's body.content back as chunk deltas, then done",
			Intents:     []string{string(envelope.IntentAsk), string(envelope.IntentSubscribe), string(envelope.IntentProgress), string(envelope.IntentCancel)},
			BodyTypes:   []string{"text/plain", "text/markdown"},
			Auth:        []string{"mtls"},
			Limits:      envelope.Limits{MaxBodyKB: envelope.MaxEnvelopeSize >> 10},
		},
	}
	if f.uampClientCA != "" {
		b, err := os.ReadFile(f.uampClientCA)
		if err != nil {
			return nil, fmt.Errorf("--uamp-client-ca: %w", err)
		}
		u.ClientCAs = x509.NewCertPool()
		if !u.ClientCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("--uamp-client-ca %s: no PEM certificate", f.uampClientCA)
		}
	}
	if f.uampOAuthIssuer != "" || f.uampOAuthJWKS != "" {
		if f.uampOAuthIssuer == "" || f.uampOAuthJWKS == "" {
			return nil, usageError("--uamp-oauth-issuer and --uamp-oauth-jwks go together")
		}
		b, err := os.ReadFile(f.uampOAuthJWKS)
		if err != nil {
			return nil, fmt.Errorf("--uamp-oauth-jwks: %w", err)
		}
		issuerKeys, err := parseKeySet(b)
		if err != nil {
			return nil, fmt.Errorf("--uamp-oauth-jwks %s: %w", f.uampOAuthJWKS, err)
		}
		u.OAuth = &messaging.BearerOptions{Issuer: f.uampOAuthIssuer, Keys: issuerKeys}
	}
	n := len(trusted.Keys())
	logger.Info("UAMP serving", "url", u.BaseURL, "did", did, "certificate", certDesc, "trusted_keys", n, "trust", trustPath)
	fmt.Fprintf(e.stderr, "agentry: UAMP on %s as %s (protocol echo; each agent at %s:agents:NAME; %s)\n", u.BaseURL, did, did, certDesc)
	if n == 0 {
		fmt.Fprintf(e.stderr, "agentry: UAMP trusts no client key: every envelope is refused (agentry uamp keygen --out ~/.config/agentry/client.jwk > ~/.config/agentry/client.pub.jwk, then --uamp-trust ~/.config/agentry/client.pub.jwk: keep private keys out of a repository)\n")
	}
	return u, nil
}

// serverCertificate returns --tls-cert/--tls-key, or the development
// certificate under --data: made on the first start, reused after, and
// made again when it expires within a day or does not cover host.
func serverCertificate(f *serveFlags, host string, logger *slog.Logger) (tls.Certificate, string, error) {
	if f.tlsCert != "" {
		c, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return tls.Certificate{}, "", fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		return c, "certificate " + f.tlsCert, nil
	}
	certPath, keyPath := filepath.Join(f.data, devCertFile), filepath.Join(f.data, devKeyFile)
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if ip := net.ParseIP(host); host != "" && host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		hosts = append(hosts, host)
	}
	desc := "development certificate " + certPath
	if c, err := tls.LoadX509KeyPair(certPath, keyPath); err == nil && usableDevCert(c.Leaf, hosts) {
		return c, desc, nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		logger.Warn("development certificate unreadable: making a new one", "path", certPath, "error", err)
	}
	dc, err := messaging.GenerateDevCert(&messaging.DevCertOptions{Hosts: hosts})
	if err != nil {
		return tls.Certificate{}, "", err
	}
	if err := writeFileAtomic(keyPath, dc.KeyPEM, 0o600); err != nil {
		return tls.Certificate{}, "", fmt.Errorf("development certificate: %w", err)
	}
	if err := writeFileAtomic(certPath, dc.CertPEM, 0o644); err != nil {
		return tls.Certificate{}, "", fmt.Errorf("development certificate: %w", err)
	}
	logger.Info("made a self-signed development certificate", "path", certPath, "hosts", strings.Join(hosts, ","), "not_after", dc.Leaf.NotAfter)
	return dc.TLS, desc, nil
}

func usableDevCert(leaf *x509.Certificate, hosts []string) bool {
	if leaf == nil || time.Until(leaf.NotAfter) < 24*time.Hour {
		return false
	}
	for _, h := range hosts {
		if leaf.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// writeFileAtomic writes b to path through a synced temporary file, so
// that a crash leaves the old file or the new one.
func writeFileAtomic(path string, b []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// loadIdentity reads the server's identity key (a private JWK as
// agentry uamp keygen writes it), making one on the first start. Its kid
// is made a DID URL of did, keeping the fragment: the key stays when the
// address, and so the DID, changes.
func loadIdentity(path, did string) (*envelope.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		k, err := envelope.GenerateKey(envelope.EdDSA, "key-1")
		if err != nil {
			return nil, err
		}
		if b, err = json.MarshalIndent(k, "", "  "); err != nil {
			return nil, err
		}
		if err := writeFileAtomic(path, append(b, '\n'), 0o600); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	k, err := envelope.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	frag := k.KID()
	if _, f, ok := strings.Cut(frag, "#"); ok {
		frag = f
	}
	return envelope.NewPrivateKey(k.Signer(), did+"#"+frag)
}

// loadTrust reads the client keys UAMP trusts: --uamp-trust, or
// <data>/uamp/trusted.jwks when it exists; none trusts nobody.
func loadTrust(f *serveFlags) (*envelope.KeySet, string, error) {
	path := f.uampTrust
	if path == "" {
		path = filepath.Join(f.data, trustFile)
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			s, _ := envelope.NewKeySet()
			return s, "", nil
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("--uamp-trust: %w", err)
	}
	s, err := parseKeySet(b)
	if err != nil {
		return nil, "", fmt.Errorf("--uamp-trust %s: %w", path, err)
	}
	return s, path, nil
}

// parseKeySet reads a JWK set, a public JWK or a private JWK (standing
// for its public half).
func parseKeySet(b []byte) (*envelope.KeySet, error) {
	if s, err := envelope.ParseKeySet(b); err == nil {
		return s, nil
	}
	k, err := envelope.ParsePrivateKey(b)
	if err != nil {
		return nil, errors.New("not a JWK set, a public JWK or a private JWK (EdDSA or ES256)")
	}
	return envelope.NewKeySet(k.Public())
}
