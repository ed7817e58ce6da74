// Package http3msg provides the HTTP/3 binding of the Universal Agent
// Messaging Protocol, UAMP 1.0 (uamp.dev §7: the paths of the
// HTTP/2 binding over QUIC, ALPN h3): an HTTP/3 server for a
// *messaging.Server and the client transport for a messaging.Client, on
// github.com/quic-go/quic-go. It is its own package so that importers of
// messaging do not pull in QUIC.
//
// The binding is the SSE one, unchanged: POST /v1/messages, GET
// /v1/stream/{id} as Server-Sent Events with Last-Event-ID resume, the
// same Handler, authentication (the QUIC connection's TLS state carries
// the client certificate), checks and error answers. QUIC is always
// TLS 1.3. WebSocket is not served over HTTP/3 (RFC 9220 is not
// implemented): it stays on HTTP/1.1 over TLS. A UAMP stream is named by
// its path, never by a QUIC stream ID; docs/spec-notes/uamp.md
// ("Bindings: HTTP/3") says why.
package http3msg

import (
	"crypto/tls"
	"net/http"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// quicConfig is the QUIC configuration of both ends: an idle QUIC
// connection is kept for as long as an idle SSE stream is (its heartbeat
// comes every 15 s), and a stream may be resumed on a fresh connection.
func quicConfig() *quic.Config {
	return &quic.Config{MaxIdleTimeout: time.Minute, KeepAlivePeriod: 15 * time.Second}
}

// NewServer returns an HTTP/3 server for h (a *messaging.Server) with
// conf (from messaging.TLSConfig, cloned: ALPN h3, TLS 1.3 only). Serve
// it with Serve(udpConn) or ListenAndServe; Close or Shutdown it before
// h.
func NewServer(h http.Handler, conf *tls.Config) *http3.Server {
	c := conf.Clone()
	c.MinVersion = tls.VersionTLS13
	return &http3.Server{
		Handler:        h,
		TLSConfig:      http3.ConfigureTLSConfig(c),
		QUICConfig:     quicConfig(),
		MaxHeaderBytes: 64 << 10,
		IdleTimeout:    2 * time.Minute,
	}
}

// NewTransport returns the client side, for messaging.ClientOptions
// .Transport: HTTP/3 with conf (roots, and a client certificate for
// mTLS; cloned: TLS 1.3 only, ALPN h3). Close it when done with it; it owns a UDP
// socket.
func NewTransport(conf *tls.Config) *http3.Transport {
	c := &tls.Config{}
	if conf != nil {
		c = conf.Clone()
	}
	c.MinVersion = tls.VersionTLS13
	c.NextProtos = []string{http3.NextProtoH3}
	return &http3.Transport{TLSClientConfig: c, QUICConfig: quicConfig()}
}
