// Package envelope implements the core of the Universal Agent Messaging
// Protocol, UAMP 1.0 (uamp.dev): the Envelope, Delta and
// Manifest wire types, their strict decoding and validation against the
// spec's JSON schemas (Appendix A, embedded), the canonical form and
// signatures of envelopes, the error codes of §9, replay and clock-skew
// protection and capability-token checks. It does no network I/O; the
// bindings, and the request state machine of §10 they apply, are in
// package messaging.
//
// A sender builds an envelope with New and signs it with Sign; a receiver
// turns untrusted bytes into a verified Envelope with Open:
//
//	e := envelope.New(from, to, envelope.IntentAsk, envelope.Body{Type: "text/plain", Content: "2+2"})
//	err := envelope.Sign(e, key) // key: GenerateKey or ParsePrivateKey
//	got, err := envelope.Open(ctx, wire, trusted) // trusted: a KeySet or any KeyResolver
//
// # Canonical form and signatures
//
// The canonical form of an envelope (§4.2) is the RFC 8785 (JCS)
// serialization of the envelope without sig. Its sig (§6.3) is a
// detached compact JWS, "<protected>..<signature>", whose protected
// header is exactly {"alg","kid"}, alg EdDSA or ES256, and whose payload
// is the JCS of {"sha256":"<lowercase hex SHA-256 of the canonical
// form>"} (DESIGN §5). Sign sets it; Verify checks it on an Envelope;
// Open decodes untrusted bytes strictly and verifies the result.
// Keys are JWKs (PrivateKey, PublicKey, KeySet); a KeyResolver finds the
// key a (from, kid) pair names.
//
// # Untrusted input
//
// Decode, DecodeDelta and DecodeManifest accept only what the schemas
// accept, with formats asserted, and refuse beyond them what would make
// a signature ambiguous: duplicate member names, invalid UTF-8, escapes
// of lone surrogates, numbers beyond ±2^53. Every refusal, like every
// other failure a peer may see, is an *Error carrying a §9 code, and
// the code matches it with errors.Is (errors.Is(err, CodeUnauthenticated)).
//
// The decisions this package takes where the spec is silent or wrong are
// recorded in docs/spec-notes/uamp.md.
package envelope
