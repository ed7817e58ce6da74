// Package uampv1 is the generated Go code of uamp.proto, the gRPC service
// uamp.v1.Agent of UAMP 1.0 (uamp.dev §7): frames carrying the
// exact signed JSON bytes of envelopes and deltas. Regenerate it with
// go generate in messaging/grpcmsg; package grpcmsg is the binding built
// on it.
package uampv1
