// Package messaging provides the transport bindings of the Universal
// Agent Messaging Protocol, UAMP 1.0 (uamp.dev §5, §6.1, §7):
// windowed delta streams with resume, an http.Handler serving HTTP/2 +
// Server-Sent Events (POST /v1/messages, GET /v1/stream/{id}) and
// WebSocket (/uamp/1/ws), a client for both, TLS 1.3 configuration,
// client-certificate authentication and a development certificate
// generator. The envelope itself (types, strict decoding, signatures,
// error codes, replay protection) is package envelope; this package
// moves envelopes and deltas, each stream's request following the state
// machine of §10.
//
// # Streams
//
// An ask (or subscribe) opens a stream. The application's Handler
// produces its deltas through a Stream, whose Send blocks while
// delta_window deltas are un-ACKed (§5), so a slow consumer bounds the
// producer and the memory a stream holds. The consumer ACKs with a
// progress envelope whose reply_to is the request id and whose
// ext.ack_seq is the highest contiguous delta_seq received (DESIGN §5);
// the Client does this every AckEvery deltas. Deltas are numbered from 0
// without gaps; a consumer refuses a gap with 4.09, drops duplicates and
// refuses frames after the final one (done, cancel, error). A consumer
// that lost its connection resumes from a bounded per-stream log: over
// SSE with Last-Event-ID, over WebSocket by sending its ACK on the new
// connection.
//
// # Wire forms
//
// Over HTTP/2 the request body is the envelope JSON with media type
// application/uamp+json;v=1; SSE events carry one delta each, with the
// delta_seq as the event id. Over WebSocket (subprotocol uamp.v1) every
// binary message holds one or more records, each a 4-byte big-endian
// length and the UTF-8 JSON of an envelope or a delta. Errors are error
// envelopes whose body carries {code, message, retry}, with the HTTP
// status of the code (envelope.Code.HTTPStatus) and Retry-After for
// 5.04.
//
// The package is a protocol core: it imports no agent runtime.
// messaging/uampagent serves an agent over UAMP and uses a remote UAMP
// agent as a tool. The decisions this package takes where the spec is
// silent are recorded in docs/spec-notes/uamp.md.
package messaging
