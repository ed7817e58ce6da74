package envelope

import "fmt"

// State is the state of a request (§10): NEW when its envelope is
// received, IN_PROGRESS once an ask or subscribe starts it, then one of
// three terminal states, which absorb every later event.
type State string

// The states of §10.
const (
	StateNew        State = "NEW"
	StateInProgress State = "IN_PROGRESS"
	StateCompleted  State = "COMPLETED"
	StateCancelled  State = "CANCELLED"
	StateError      State = "ERROR"
)

// allStates lists the states of §10.
var allStates = []State{StateNew, StateInProgress, StateCompleted, StateCancelled, StateError}

// Terminal reports whether s is COMPLETED, CANCELLED or ERROR.
func (s State) Terminal() bool {
	return s == StateCompleted || s == StateCancelled || s == StateError
}

// Event is what moves a request (the labels of §10's edges, plus
// progress).
type Event string

// The events of §10. EventProgress (a progress, chunk or patch delta, a
// progress or notify envelope) is not drawn in §10; it keeps a request
// IN_PROGRESS (docs/spec-notes/uamp.md, "State machine").
const (
	EventAsk       Event = "ask"
	EventSubscribe Event = "subscribe"
	EventProgress  Event = "progress"
	EventConfirm   Event = "confirm"
	EventDone      Event = "done"
	EventCancel    Event = "cancel"
	EventError     Event = "error"
)

// allEvents lists the events.
var allEvents = []Event{EventAsk, EventSubscribe, EventProgress, EventConfirm, EventDone, EventCancel, EventError}

// transitions is §10's diagram: from → event → to.
var transitions = map[State]map[Event]State{
	StateNew: {
		EventAsk:       StateInProgress,
		EventSubscribe: StateInProgress,
	},
	StateInProgress: {
		EventProgress: StateInProgress,
		EventConfirm:  StateCompleted,
		EventDone:     StateCompleted,
		EventCancel:   StateCancelled,
		EventError:    StateError,
	},
}

// canTransition reports whether ev is allowed in s.
func (s State) canTransition(ev Event) bool {
	_, ok := transitions[s][ev]
	return ok
}

// Apply returns the state ev moves s to. An event s does not allow
// leaves s unchanged and is an *Error with code 4.09, not retryable; on a
// terminal state it wraps ErrTerminal.
func (s State) Apply(ev Event) (State, error) {
	if to, ok := transitions[s][ev]; ok {
		return to, nil
	}
	var e *Error
	if s.Terminal() {
		e = NewError(CodeMissingDeltaSeq, fmt.Sprintf("request is %s: %s refused", s, ev), ErrTerminal)
	} else {
		e = NewError(CodeMissingDeltaSeq, fmt.Sprintf("%s is not allowed in state %s", ev, s), nil)
	}
	e.Retry = false
	return s, e
}

// intentEvent returns the event an envelope of intent i is to the request
// it belongs to: ask, subscribe, confirm, cancel and error as named,
// progress and notify as EventProgress, and deny (a NAK) as EventError.
// inform and propose are not request events.
func intentEvent(i Intent) (Event, bool) {
	switch i {
	case IntentAsk:
		return EventAsk, true
	case IntentSubscribe:
		return EventSubscribe, true
	case IntentConfirm:
		return EventConfirm, true
	case IntentCancel:
		return EventCancel, true
	case IntentError, IntentDeny:
		return EventError, true
	case IntentProgress, IntentNotify:
		return EventProgress, true
	}
	return "", false
}

// DeltaEvent returns the event a delta of type t is: done, cancel and
// error as named, the others EventProgress.
func DeltaEvent(t DeltaType) Event {
	switch t {
	case DeltaDone:
		return EventDone
	case DeltaCancel:
		return EventCancel
	case DeltaError:
		return EventError
	}
	return EventProgress
}
