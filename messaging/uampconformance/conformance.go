// Package conformance is a black-box conformance suite for servers of the
// Universal Agent Messaging Protocol, UAMP 1.0 (uamp.dev), ours
// or anyone else's: Run talks to a server over the network only —
// HTTP/2 + SSE, WebSocket, raw TLS — and returns a Report with one
// result per check, each named after the spec section it tests.
//
// The server must serve an echo agent (the request's body.content
// streamed back as chunk deltas {"content": …}, then done; agentry
// serve's built-in agent) and trust Options.Key, the key the suite signs
// with; the suite authenticates with a TLS client certificate made with
// that key (messaging.KeyCertificate) unless Options.Certificate is set.
// Where the spec is silent the suite expects the decisions of DESIGN §5
// and docs/spec-notes/uamp.md: error envelopes with {code, message,
// retry} and the HTTP status of their code, ACKs as progress envelopes
// with ext.ack_seq, resume with Last-Event-ID.
//
// What it checks: signed discovery (§8: the hub verified by did:web or
// the given trust anchors, the manifest a JWS of media type
// application/manifest+jws verified with the hub's keys); TLS 1.3 only
// (§6.1: a TLS 1.2 handshake and plain HTTP are refused); the media type
// (415) and body limit (413) of the HTTP binding; authentication (§6.2,
// §6.3: no client certificate, an envelope without sig, one whose sig is
// not a JWS, a tampered and an unknown-key envelope are 401, from ≠ principal is 403, a replayed ask
// is refused); the echo round trip over SSE and WebSocket with a small
// window and ACKs; the window itself (§5: no more than delta_window
// un-ACKed deltas arrive); resume with Last-Event-ID after a dropped
// connection, and 4.09 for a resume the server can no longer fill;
// cancel (§4.1, §10: the stream ends with a cancel delta, a second
// cancel is 4.09); and, client-side, that every stream read was
// numbered from 0 without gaps or duplicates. Error envelopes must
// verify with the hub's keys when discovery succeeded.
package uampconformance

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/conformance"
	"github.com/agentry-dev/agentry/envelope"
)

// Options configures Run. BaseURL and Key are required.
type Options struct {
	// BaseURL is the server's root, "https://host:port".
	BaseURL string
	// Key signs the suite's envelopes; the server must trust it.
	Key *envelope.PrivateKey
	// From is the principal the suite speaks as; default the DID of Key's
	// kid when it is a DID URL, else "did:web:uamp-conformance.invalid".
	From string
	// Certificate is the TLS client certificate; default one made with
	// Key naming From (messaging.KeyCertificate).
	Certificate *tls.Certificate
	// To is the agent under test; default the DID of the server's hub.
	To string
	// RootCAs verify the server's certificate; nil uses the system
	// roots. InsecureSkipVerify skips that (development servers).
	RootCAs            *x509.CertPool
	InsecureSkipVerify bool
	// Trust verifies the hub; nil resolves the hub's DID with did:web.
	Trust envelope.KeyResolver
	// Timeout bounds each check; default 15 s.
	Timeout time.Duration
}

// result is the outcome of one check: conformance.Result, the type the
// three conformance kits share.
type result = conformance.Result

// Report is the outcome of Run.
type Report struct {
	BaseURL string `json:"base_url"`
	// Agent is the DID the suite addressed.
	Agent string `json:"agent"`
	// Results lists the checks (Passed, Failed, Skipped, Find).
	conformance.Results `json:"results"`
}

// The spec clauses the checks are named after.
const (
	clauseManifest   = "§8 Manifest: signed JWS, application/manifest+jws"
	clauseHub        = "§8 Hub: child manifests and trust anchors, signed"
	clauseTLS        = "§6.1 Transport MUST be TLS 1.3; unencrypted connections are disallowed"
	clauseMediaType  = "§7 HTTP binding, §11 media type application/uamp+json"
	clauseTooLarge   = "§9 4.13 Payload too large"
	clauseAuthN      = "§6.2 mTLS client certificate or OAuth bearer; §9 4.01"
	clauseIntegrity  = "§6.3 every envelope carries a detached JWS (EdDSA/ES256); §9 4.01"
	clauseAuthZ      = "§6.2 the sender is the authenticated principal; §9 4.03"
	clauseReplay     = "§6 replay: a signed envelope is accepted once"
	clauseEchoSSE    = "§5 delta streaming, §7 HTTP/2 + SSE"
	clauseEchoWS     = "§5 delta streaming, §7 WebSocket (4-byte length-prefixed frames)"
	clauseWindow     = "§5 producer MUST NOT send more than delta_window un-ACKed frames"
	clauseResume     = "§5 resume after a dropped connection (SSE Last-Event-ID)"
	clauseResumeGap  = "§9 4.09 missing delta_seq: a resume the server cannot fill"
	clauseCancel     = "§4.1 cancel, §10 IN_PROGRESS → CANCELLED, terminal states absorb"
	clauseSequencing = "§5 delta_seq from 0 without gaps (checked client-side)"
)

// Run runs the suite against the server at opts.BaseURL. It never
// returns nil; a server that cannot be reached yields failed checks.
func Run(ctx context.Context, opts *Options) *Report {
	var o Options
	if opts != nil {
		o = *opts
	}
	r := &runner{opts: o, base: strings.TrimRight(o.BaseURL, "/")}
	r.report = &Report{BaseURL: r.base}
	if err := r.setup(); err != nil {
		r.fail("setup", "options", "an https:// server URL and a signing key", err.Error())
		return r.report
	}
	defer r.close()
	r.run(ctx)
	r.report.Agent = r.to
	return r.report
}
