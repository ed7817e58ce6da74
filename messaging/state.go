package messaging

import (
	"fmt"

	"github.com/agentry-dev/agentry/envelope"
)

// reqState is the state of a request (§10): NEW when its envelope is
// received, IN_PROGRESS once an ask or subscribe starts it, then one of
// three terminal states, which absorb every later event.
type reqState string

// The states of §10.
const (
	stateNew        reqState = "NEW"
	stateInProgress reqState = "IN_PROGRESS"
	stateCompleted  reqState = "COMPLETED"
	stateCancelled  reqState = "CANCELLED"
	stateError      reqState = "ERROR"
)

// allStates lists the states of §10.
var allStates = []reqState{stateNew, stateInProgress, stateCompleted, stateCancelled, stateError}

// terminal reports whether s is COMPLETED, CANCELLED or ERROR.
func (s reqState) terminal() bool {
	return s == stateCompleted || s == stateCancelled || s == stateError
}

// reqEvent is what moves a request (the labels of §10's edges, plus
// progress).
type reqEvent string

// The events of §10. evProgress (a progress, chunk or patch delta, a
// progress or notify envelope) is not drawn in §10; it keeps a request
// IN_PROGRESS (docs/spec-notes/uamp.md, "reqState machine").
const (
	evAsk       reqEvent = "ask"
	evSubscribe reqEvent = "subscribe"
	evProgress  reqEvent = "progress"
	evConfirm   reqEvent = "confirm"
	evDone      reqEvent = "done"
	evCancel    reqEvent = "cancel"
	evError     reqEvent = "error"
)

// allEvents lists the events.
var allEvents = []reqEvent{evAsk, evSubscribe, evProgress, evConfirm, evDone, evCancel, evError}

// transitions is §10's diagram: from → event → to.
var transitions = map[reqState]map[reqEvent]reqState{
	stateNew: {
		evAsk:       stateInProgress,
		evSubscribe: stateInProgress,
	},
	stateInProgress: {
		evProgress: stateInProgress,
		evConfirm:  stateCompleted,
		evDone:     stateCompleted,
		evCancel:   stateCancelled,
		evError:    stateError,
	},
}

// canTransition reports whether ev is allowed in s.
func (s reqState) canTransition(ev reqEvent) bool {
	_, ok := transitions[s][ev]
	return ok
}

// apply returns the state ev moves s to. An event s does not allow
// leaves s unchanged and is an *envelope.Error with code 4.09, not retryable; on a
// terminal state it wraps envelope.ErrTerminal.
func (s reqState) apply(ev reqEvent) (reqState, error) {
	if to, ok := transitions[s][ev]; ok {
		return to, nil
	}
	var e *envelope.Error
	if s.terminal() {
		e = envelope.NewError(envelope.CodeMissingDeltaSeq, fmt.Sprintf("request is %s: %s refused", s, ev), envelope.ErrTerminal)
	} else {
		e = envelope.NewError(envelope.CodeMissingDeltaSeq, fmt.Sprintf("%s is not allowed in state %s", ev, s), nil)
	}
	e.Retry = false
	return s, e
}

// intentEvent returns the event an envelope of intent i is to the request
// it belongs to: ask, subscribe, confirm, cancel and error as named,
// progress and notify as evProgress, and deny (a NAK) as evError.
// inform and propose are not request events.
func intentEvent(i envelope.Intent) (reqEvent, bool) {
	switch i {
	case envelope.IntentAsk:
		return evAsk, true
	case envelope.IntentSubscribe:
		return evSubscribe, true
	case envelope.IntentConfirm:
		return evConfirm, true
	case envelope.IntentCancel:
		return evCancel, true
	case envelope.IntentError, envelope.IntentDeny:
		return evError, true
	case envelope.IntentProgress, envelope.IntentNotify:
		return evProgress, true
	}
	return "", false
}

// deltaEvent returns the event a delta of type t is: done, cancel and
// error as named, the others evProgress.
func deltaEvent(t envelope.DeltaType) reqEvent {
	switch t {
	case envelope.DeltaDone:
		return evDone
	case envelope.DeltaCancel:
		return evCancel
	case envelope.DeltaError:
		return evError
	}
	return evProgress
}
