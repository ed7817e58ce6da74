// Package uicontrol implements UIAP Core 0.1 (uiap.dev),
// the UI Control Protocol between a running application and an AI agent
// that controls it: the common message envelope, session establishment
// and lifecycle, version, profile and extension negotiation, errors, and
// capability discovery.
//
// Both roles are here. An App is the controlled side and the session
// owner: it answers session.initialize, publishes a CapabilityDocument
// (SetCapabilities pushes capabilities.changed), and dispatches other
// requests to handlers registered with Handle; Serve runs one
// connection. An Agent is the controlling side: Connect negotiates a
// session, GetCapabilities and Changes read and follow the app's
// capabilities, Call sends requests.
//
// The package is strict by envelope and flexible by payload (§2): every
// received message passes DecodeEnvelope's rules (required fields,
// payload an object, correlationId on responses, IDs of 1..128
// characters unique in the session, ext entries never overriding core
// fields), then, after the handshake, the selected version and the
// message's requires list; unknown optional fields are ignored. Errors
// travel as *Error, one sentinel per §10 code for errors.Is.
//
// Sessions follow §7 (NEW, INITIALIZING, ACTIVE, INTERRUPTED,
// TERMINATING, TERMINATED): before the handshake and while interrupted
// only session messages are processed; every request is answered by one
// response or error; nothing is processed after session.terminated.
// Negotiated heartbeats ping an idle peer and terminate the session after
// repeated missed pongs. When a transport is lost, the session waits,
// INTERRUPTED, for a resume with its single-use resume token; the app
// then replays the events the agent missed (by seq). With
// AppOptions.Sessions the sessions are kept in a store that Apps share —
// the replicas of a server — and any of them resumes a session another
// started, the token still single-use.
//
// Actions (extension uiap.action@0.1, ours where the Action Runtime
// draft is silent): an app registers action handlers with a declared
// risk; an agent calls them with CallAction (action.request →
// action.started, action.progress…, exactly one action.result), cancels
// them, and repeats a request safely with an idempotency key — nothing is
// ever resent blindly. A Policy decides each request (allow, confirm,
// deny, handoff; failing closed), a confirmation is a round trip to the
// agent's Confirm hook, and a per-session token bucket answers requests
// over the limit with rate_limited (retryable).
//
// Messages travel over a Transport; Pair connects an app and an agent in
// one process, the ws@0.1 and http@0.1 bindings across processes. Package uicontrol/uiaptest is the conformance suite every
// binding passes. Where the spec is silent, docs/spec-notes/uiap.md
// records what this package does.
package uicontrol
