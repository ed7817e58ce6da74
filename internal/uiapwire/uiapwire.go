// Package uiapwire names the message types of UIAP Core 0.1 (uiap.dev)
// and of its Action Runtime, as the wire spells them. The uicontrol
// package speaks them and offers a typed API over them (Agent.CallAction,
// Agent.Ping, App.HandleAction, …), so they are not part of its API; its
// conformance kits and bridges, which write and read raw envelopes, use
// them from here.
package uiapwire

// The message types of UIAP Core (§8, §9, §10).
const (
	TypeInitialize          = "session.initialize"
	TypeInitialized         = "session.initialized"
	TypeResume              = "session.resume"
	TypeResumed             = "session.resumed"
	TypeInterrupt           = "session.interrupt"
	TypeInterrupted         = "session.interrupted"
	TypePing                = "session.ping"
	TypePong                = "session.pong"
	TypeTerminate           = "session.terminate"
	TypeTerminated          = "session.terminated"
	TypeCapabilitiesGet     = "capabilities.get"
	TypeCapabilitiesList    = "capabilities.list"
	TypeCapabilitiesChanged = "capabilities.changed"
	TypeError               = "error"
)

// The message types of the Action Runtime.
const (
	// TypeActionRequest (agent → app, request) asks the app to run an
	// action; it is answered by TypeActionResult or an error.
	TypeActionRequest = "action.request"
	// TypeActionStarted (app → agent, event): the request was accepted.
	TypeActionStarted = "action.started"
	// TypeActionProgress (app → agent, event): a state change or progress
	// report of a running action.
	TypeActionProgress = "action.progress"
	// TypeActionResult (app → agent, response to action.request): the
	// action's terminal state and result.
	TypeActionResult = "action.result"
	// TypeActionCancel (agent → app, request) asks the app to cancel a
	// running action; it is answered by TypeActionCancelled.
	TypeActionCancel    = "action.cancel"
	TypeActionCancelled = "action.cancelled"
	// TypeActionConfirm (app → agent, request) asks the controller for an
	// explicit confirmation before the action runs; it is answered by
	// TypeActionConfirmed.
	TypeActionConfirm   = "action.confirm"
	TypeActionConfirmed = "action.confirmed"
)
