// Package grpcmsg provides the gRPC binding of the Universal Agent
// Messaging Protocol, UAMP 1.0 (uamp.dev §7): the service
// uamp.v1.Agent (uampv1/uamp.proto) serving a *messaging.Server, and a
// client. It is its own package so that importers of messaging do not
// pull in gRPC.
//
// One bidirectional call, Exchange, carries one request: the client's
// frames are envelopes (the ask, then ACKs and maybe a cancel), the
// server's are the stream's deltas, packed several to a frame, and error
// envelopes. Frames hold the exact JSON bytes of envelopes and deltas,
// so the signature an envelope carries verifies on every binding. The
// server side is the messaging.Server's: the same Handler, the same
// authentication (its Authenticator sees the call's TLS state and
// metadata; by default the principal is the verified client
// certificate's URI), the same envelope checks, replay window, delta
// window, ACKs, cancel and resume log. A resume is an ACK sent as the
// first frame of a new call, as over WebSocket. A refused first
// envelope is answered with the signed error envelope, then the call
// ends with the gRPC status of its code (StatusCode). TLS 1.3 only.
//
// The decisions are recorded in docs/spec-notes/uamp.md ("Bindings:
// gRPC").
package grpcmsg

//go:generate protoc --proto_path=internal/uampv1 --go_out=internal/uampv1 --go_opt=paths=source_relative --go-grpc_out=internal/uampv1 --go-grpc_opt=paths=source_relative uamp.proto
