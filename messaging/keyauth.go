package messaging

import (
	"crypto"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/envelope"
)

// KeyCertificate returns a self-signed TLS client certificate made with
// key (the Ed25519 or P-256 key that signs the client's envelopes),
// naming principal as its only URI subject alternative name, valid for
// validFor from now (default one hour). A server that trusts key — a
// ClientKeys authenticator — accepts it as mTLS without any CA: the TLS
// handshake proves possession of the key, and the trusted key set says
// who may hold it.
func KeyCertificate(key *envelope.PrivateKey, principal string, validFor time.Duration) (tls.Certificate, error) {
	if key == nil {
		return tls.Certificate{}, errors.New("messaging: KeyCertificate needs a key")
	}
	u, err := url.Parse(principal)
	if err != nil || u.Scheme == "" {
		return tls.Certificate{}, fmt.Errorf("messaging: principal %q is not an absolute URI", principal)
	}
	if validFor <= 0 {
		validFor = time.Hour
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: principal},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     now.Add(validFor),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		URIs:         []*url.URL{u},
	}
	signer := key.Signer()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, signer.Public(), signer)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: signer, Leaf: leaf}, nil
}

// RequestClientCertificates sets conf (from TLSConfig) to ask for a client
// certificate without verifying it in the handshake, for a ClientKeys
// authenticator, which verifies it per request. A connection without a
// certificate still succeeds, so that other endpoints may share the
// listener; the authenticator refuses its UAMP requests (4.01).
func RequestClientCertificates(conf *tls.Config) *tls.Config {
	conf.ClientAuth = tls.RequestClientCert
	conf.ClientCAs = nil
	return conf
}

// ClientKeys returns an Authenticator for mTLS (§6.2) over a listener
// whose tls.Config requests client certificates without verifying them
// (RequestClientCertificates). A request is authenticated by its client
// certificate, which is accepted when
//
//   - it chains to cas (when not nil), for client authentication: the
//     principal is its single URI SAN, as for the default
//     Authenticator (Options.Authenticate); or
//   - its public key is one of keys, the keys trusted to sign envelopes
//     (a certificate from KeyCertificate): the principal is its single
//     URI SAN, which must be the DID of the key's kid when that kid is a
//     DID URL ("did:web:a.example#key-1" speaks for did:web:a.example
//     only), and the certificate must be within its validity period.
//
// Either way a certificate names exactly one URI (4.01 otherwise), so
// that which identity it grants is never a choice; anything else is
// 4.01. keys may be nil (certificates from cas only).
func ClientKeys(keys *envelope.KeySet, cas *x509.CertPool) Authenticator {
	return func(r *http.Request) (string, error) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
			return "", envelope.NewError(envelope.CodeUnauthenticated, "a TLS client certificate is required", nil)
		}
		leaf := r.TLS.PeerCertificates[0]
		if cas != nil {
			inter := x509.NewCertPool()
			for _, c := range r.TLS.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			chains, err := leaf.Verify(x509.VerifyOptions{Roots: cas, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
			if err == nil {
				state := *r.TLS
				state.VerifiedChains = chains
				r2 := *r
				r2.TLS = &state
				return clientCertificate(&r2)
			}
		}
		if keys != nil {
			for _, k := range keys.Keys() {
				if !publicKeyEqual(k.Key(), leaf.PublicKey) {
					continue
				}
				return pinnedPrincipal(k, leaf)
			}
		}
		return "", envelope.NewError(envelope.CodeUnauthenticated, "the client certificate is neither issued by a trusted CA nor made with a trusted key", nil)
	}
}

// pinnedPrincipal is the principal of a certificate made with trusted
// key k.
func pinnedPrincipal(k *envelope.PublicKey, leaf *x509.Certificate) (string, error) {
	now := time.Now()
	if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		return "", envelope.NewError(envelope.CodeUnauthenticated, "the client certificate is expired or not yet valid", nil)
	}
	if len(leaf.URIs) != 1 {
		return "", envelope.NewError(envelope.CodeUnauthenticated, "the client certificate must name exactly one URI",
			fmt.Errorf("client certificate has %d URI SANs", len(leaf.URIs)))
	}
	p := leaf.URIs[0].String()
	if did, _, ok := strings.Cut(k.KID(), "#"); ok && strings.HasPrefix(did, "did:") && did != p {
		return "", envelope.NewError(envelope.CodeUnauthenticated, "the client certificate's key is "+did+"'s, not "+p+"'s", nil)
	}
	return p, nil
}

func publicKeyEqual(a, b crypto.PublicKey) bool {
	e, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && e.Equal(b)
}
