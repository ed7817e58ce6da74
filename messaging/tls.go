package messaging

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"time"
)

// TLSConfig returns the server side of UAMP's transport security
// (§6.1): TLS 1.3 only, ALPN h2 (the SSE binding) and http/1.1 (which
// the WebSocket handshake needs; RFC 8441 WebSocket over HTTP/2 is not
// supported by the WebSocket library), the server certificate cert. When
// clientCAs is not nil, client certificates are requested and verified
// against it if presented, for the default Authenticator (Options.Authenticate); requests without one
// are refused by the authenticator, not the handshake, so that other
// endpoints may share the listener.
func TLSConfig(cert tls.Certificate, clientCAs *x509.CertPool) *tls.Config {
	c := &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"h2", "http/1.1"},
	}
	if clientCAs != nil {
		c.ClientCAs = clientCAs
		c.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return c
}

// NewHTTPServer returns an http.Server for h over TLS only: conf (from
// TLSConfig) with HTTP/1.1 and HTTP/2 over TLS and no unencrypted
// HTTP/2 (h2c), header limits, and no write timeout (streams are long;
// the Server bounds them itself). Serve it with ServeTLS(ln, "", "");
// the Server refuses requests that did not arrive over TLS 1.3.
func NewHTTPServer(h http.Handler, conf *tls.Config) *http.Server {
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	return &http.Server{
		Handler:           h,
		TLSConfig:         conf,
		Protocols:         &p,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

// DevCertOptions describes a development certificate; the zero value
// makes one for localhost.
type DevCertOptions struct {
	// Hosts are DNS names and IP addresses; default localhost,
	// 127.0.0.1 and ::1.
	Hosts []string
	// URIs are URI subject alternative names, such as the DID a client
	// certificate authenticates (Options.Authenticate, ClientKeys).
	URIs []string
	// ValidFor is the validity from now; default one year.
	ValidFor time.Duration
}

// DevCert is a self-signed certificate and its key, valid for both
// server and client authentication.
type DevCert struct {
	// CertPEM and KeyPEM are the PEM forms (CERTIFICATE, and PKCS #8
	// PRIVATE KEY), for files.
	CertPEM, KeyPEM []byte
	// TLS is the certificate for a tls.Config.
	TLS tls.Certificate
	// Leaf is the parsed certificate.
	Leaf *x509.Certificate
}

// Pool returns a certificate pool trusting c alone.
func (c *DevCert) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.Leaf)
	return p
}

// GenerateDevCert makes a self-signed development certificate: ECDSA
// P-256, for server and client authentication. It is meant for tests and
// for a server's first start (agentry serve), never for production
// trust.
func GenerateDevCert(opts *DevCertOptions) (*DevCert, error) {
	var o DevCertOptions
	if opts != nil {
		o = *opts
	}
	if len(o.Hosts) == 0 && len(o.URIs) == 0 {
		o.Hosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	if o.ValidFor <= 0 {
		o.ValidFor = 365 * 24 * time.Hour
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"agentry development"}, CommonName: "agentry development certificate"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(o.ValidFor),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	for _, s := range o.URIs {
		u, err := url.Parse(s)
		if err != nil || u.Scheme == "" {
			return nil, errors.New("messaging: dev certificate URI " + s + " is not an absolute URI")
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &DevCert{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8}),
		TLS:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
		Leaf:    leaf,
	}, nil
}
