// Package binding is the seam between package messaging's server and
// client cores and the UAMP bindings built outside it (package grpcmsg,
// which keeps gRPC out of messaging's imports): a Server's checks and
// streams behind Conn, and a Client's consumer behind Carrier. Whatever
// arrives through them is checked and answered exactly as over SSE and
// WebSocket.
//
// Package messaging imports this package and sets its hooks (Connect,
// ErrorEnvelope, AskOver) in an init; this package cannot name
// messaging's types, so the hooks take a *messaging.Server or a
// *messaging.Client as a plainer type and document which.
package binding

import (
	"context"
	"errors"
	"net/http"

	"github.com/agentry-dev/agentry/envelope"
)

// ErrTakenOver is the error of Follower.Read once another consumer
// attached to the stream (a resume on another connection).
var ErrTakenOver = errors.New("messaging: another consumer attached to the stream")

// The hooks, set by package messaging.
var (
	// Connect authenticates the connection r stands for — a binding
	// builds r from its connection's TLS state and metadata — with the
	// Authenticator of srv, a *messaging.Server. r must have arrived over
	// TLS 1.3 (4.03 otherwise, as over HTTP); an unauthenticated one is
	// 4.01. Close the Conn when the connection ends.
	Connect func(srv http.Handler, r *http.Request) (Conn, error)

	// ErrorEnvelope returns the signed error envelope of srv, a
	// *messaging.Server, answering replyTo (an envelope id, or "") with
	// err's wire form — 5.00 without its text for an error that is not
	// an *envelope.Error, which is logged — addressed to to (the
	// requester; "" before authentication).
	ErrorEnvelope func(srv http.Handler, to, replyTo string, err error) []byte

	// AskOver is Ask of c, a *messaging.Client, over a Carrier: the
	// request is signed with the client's Key when its sig is empty, and
	// dial sends its bytes on a new connection and returns the Carrier.
	// The reply is a *messaging.Reply. As over WebSocket, a refusal is
	// the first error its Deltas yields.
	AskOver func(c any, ctx context.Context, req *envelope.Envelope, dial Dial) (reply any, err error)
)

// Conn is one authenticated connection of a binding. Its methods are
// safe for concurrent use.
type Conn interface {
	// Principal returns the authenticated principal: the from of every
	// envelope the connection may send.
	Principal() string
	// Context returns a context that ends with the request's, when the
	// Conn is closed and when the Server closes.
	Context() context.Context
	// Close ends the Conn's context.
	Close()
	// Open decodes and checks one envelope the connection sent, as the
	// other bindings do: at most Options.MaxBodySize bytes (4.13),
	// strictly decoded, signature verified, from = the principal and to
	// naming the server (4.03), cap_token checked. The envelope is
	// returned with the error when it could be decoded, for the reply_to
	// of the refusal.
	Open(b []byte) (*envelope.Envelope, error)
	// Dispatch acts on an opened envelope as the other bindings do: an
	// ask or subscribe (replay-checked) opens a stream and runs the
	// Handler, an ACK (a progress envelope with ext.ack_seq) moves its
	// stream's window, a cancel (replay-checked) cancels its request. Any
	// other intent is 4.00.
	Dispatch(e *envelope.Envelope) (Dispatched, error)
	// Follow makes the connection st's consumer from delta_seq from on,
	// taking the stream over from the connection that followed it
	// before. The log holds the last delta_window deltas: a from outside
	// it is 4.09, not retryable. A stream of another principal is 4.03.
	Follow(st Stream, from int64) (Follower, error)
	// ErrorEnvelope is the hook ErrorEnvelope addressed to the principal.
	ErrorEnvelope(replyTo string, err error) []byte
}

// Stream is a *messaging.Stream, as Dispatch names it.
type Stream interface{ ID() string }

// Dispatched is what Conn.Dispatch did with an envelope.
type Dispatched struct {
	// Stream is the stream an ask or subscribe opened (Opened), or the
	// one an ACK or a cancel is about.
	Stream Stream
	// Opened reports that the envelope opened Stream.
	Opened bool
	// Resume is, for an ACK, the delta_seq that a consumer resuming with
	// it wants next: ack_seq + 1.
	Resume int64
}

// Follower is the consumer end of a stream on a Conn: it reads the
// stream's log from its position on.
type Follower interface {
	// Read waits until the log holds deltas after the follower's
	// position, then appends up to maxBytes of them (at least one) to
	// dst, each through frame (which gets its delta_seq and JSON, valid
	// only during the call), and advances. final reports that the last
	// delta appended ends the stream; once it was read, Read returns
	// final with nothing more. The error is ErrTakenOver once another
	// consumer attached to the stream, or ctx's.
	Read(ctx context.Context, dst []byte, maxBytes int, frame func(dst []byte, seq int64, delta []byte) []byte) (_ []byte, final bool, err error)
	// Close detaches the follower from its stream (unless another
	// consumer took it over already); the stream waits in its log for a
	// resume.
	Close()
}

// Carrier carries one request on a binding: the Reply that AskOver
// returns sends its envelopes through it and reads its stream from it,
// with the checks, ACKs, resume and cancel of the other bindings. Send
// is called concurrently with itself and with Receive; Receive,
// Reconnect and Close are called from one goroutine.
type Carrier interface {
	// Send sends one envelope (an ACK or a cancel) on the current
	// connection.
	Send(ctx context.Context, envelope []byte) error
	// Receive reads what the server sends on the current connection and
	// hands each record — the JSON of a delta, or of an envelope (the
	// server's error) — to deliver, until deliver returns false (Receive
	// then returns nil) or the connection ends. An *envelope.Error that
	// is not Retry ends the Reply with it; any other error makes the
	// Reply reconnect.
	Receive(ctx context.Context, deliver func(record []byte) bool) error
	// Reconnect replaces a lost connection. The Reply then sends on the
	// new one an ACK of the last delta it holds (-1 for none), which
	// resumes the stream there from the delta after it, as over
	// WebSocket.
	Reconnect(ctx context.Context) error
	// Close ends the connection once the Reply is done with it.
	Close() error
}

// Dial sends the bytes of a request on a new connection and returns its
// Carrier.
type Dial func(ctx context.Context, request []byte) (Carrier, error)
