package grpcmsg

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentry-dev/agentry/envelope"
)

// statusCode returns the gRPC status code a call refused with e ends
// with (after the error envelope, which carries e itself):
//
//	4.00, 4.15  InvalidArgument
//	4.01        Unauthenticated
//	4.03        PermissionDenied
//	4.09        Aborted when e.Retry (retry at a higher level: resume),
//	            FailedPrecondition otherwise (the stream is gone or ended)
//	4.13        ResourceExhausted
//	5.04        Unavailable, with a retry-after trailer in seconds
//	5.00, other Internal
func statusCode(e *envelope.Error) codes.Code {
	switch e.Code {
	case envelope.CodeBadRequest, envelope.CodeUnsupportedMediaType:
		return codes.InvalidArgument
	case envelope.CodeUnauthenticated:
		return codes.Unauthenticated
	case envelope.CodeUnauthorized:
		return codes.PermissionDenied
	case envelope.CodeMissingDeltaSeq:
		if e.Retry {
			return codes.Aborted
		}
		return codes.FailedPrecondition
	case envelope.CodePayloadTooLarge:
		return codes.ResourceExhausted
	case envelope.CodeBusy:
		return codes.Unavailable
	}
	return codes.Internal
}

// statusError is the UAMP error of a call that ended with st and no
// error envelope — one the gRPC library refused itself (a message over
// its limit) — for the codes of refusals that a retry cannot cure; ok is
// false for the others (a transport failure: the client reconnects).
func statusError(st *status.Status) (_ *envelope.Error, ok bool) {
	var c envelope.Code
	switch st.Code() {
	case codes.InvalidArgument:
		c = envelope.CodeBadRequest
	case codes.Unauthenticated:
		c = envelope.CodeUnauthenticated
	case codes.PermissionDenied:
		c = envelope.CodeUnauthorized
	case codes.FailedPrecondition:
		c = envelope.CodeMissingDeltaSeq
	case codes.ResourceExhausted:
		c = envelope.CodePayloadTooLarge
	default:
		return nil, false
	}
	e := envelope.NewError(c, st.Message(), st.Err())
	e.Retry = false
	return e, true
}
