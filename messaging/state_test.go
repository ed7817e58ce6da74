package messaging

import (
	"errors"
	"testing"

	"github.com/agentry-dev/agentry/envelope"
)

// TestUAMP_10_StateMachine checks every (state, event) pair against the
// table of §10: NEW →ask/subscribe→ IN_PROGRESS →confirm/done→
// COMPLETED, →cancel→ CANCELLED, →error→ ERROR, progress keeps
// IN_PROGRESS, terminal states absorb everything.
func TestUAMP_10_StateMachine(t *testing.T) {
	const (
		N  = stateNew
		P  = stateInProgress
		C  = stateCompleted
		X  = stateCancelled
		E  = stateError
		no = reqState("")
	)
	// want[state] lists the target per event, in allEvents order:
	// ask, subscribe, progress, confirm, done, cancel, error.
	want := map[reqState][]reqState{
		N: {P, P, no, no, no, no, no},
		P: {no, no, P, C, C, X, E},
		C: {no, no, no, no, no, no, no},
		X: {no, no, no, no, no, no, no},
		E: {no, no, no, no, no, no, no},
	}
	for _, s := range allStates {
		for i, ev := range allEvents {
			to := want[s][i]
			if got := s.canTransition(ev); got != (to != no) {
				t.Errorf("%s.canTransition(%s) = %v", s, ev, got)
			}
			got, err := s.apply(ev)
			if to != no {
				if err != nil || got != to {
					t.Errorf("%s --%s--> %s, %v; want %s", s, ev, got, err, to)
				}
				continue
			}
			if got != s {
				t.Errorf("%s --%s--> %s; a refused event must not move the state", s, ev, got)
			}
			if !errors.Is(err, envelope.CodeMissingDeltaSeq) {
				t.Errorf("%s --%s--> refused with %v, want 4.09", s, ev, err)
			}
			if envelope.AsError(err).Retry {
				t.Errorf("%s --%s--> refusal is retryable", s, ev)
			}
			if errors.Is(err, envelope.ErrTerminal) != s.terminal() {
				t.Errorf("%s --%s-->: ErrTerminal %v", s, ev, errors.Is(err, envelope.ErrTerminal))
			}
		}
	}
	if n := len(allStates) * len(allEvents); n != 35 {
		t.Errorf("%d pairs", n)
	}
	for _, s := range allStates {
		if s.terminal() != (s == C || s == X || s == E) {
			t.Errorf("%s.terminal()", s)
		}
	}
}

// TestUAMP_10_EventsOfMessages maps intents and delta types to events.
func TestUAMP_10_EventsOfMessages(t *testing.T) {
	intents := map[envelope.Intent]reqEvent{
		envelope.IntentAsk: evAsk, envelope.IntentSubscribe: evSubscribe,
		envelope.IntentConfirm: evConfirm, envelope.IntentCancel: evCancel,
		envelope.IntentError: evError, envelope.IntentDeny: evError,
		envelope.IntentProgress: evProgress, envelope.IntentNotify: evProgress,
	}
	for _, i := range []envelope.Intent{envelope.IntentAsk, envelope.IntentInform, envelope.IntentPropose, envelope.IntentConfirm,
		envelope.IntentDeny, envelope.IntentProgress, envelope.IntentCancel, envelope.IntentSubscribe, envelope.IntentError, envelope.IntentNotify} {
		ev, ok := intentEvent(i)
		if want, has := intents[i]; ok != has || ev != want {
			t.Errorf("IntentEvent(%s) = %q, %v", i, ev, ok)
		}
	}
	deltas := map[envelope.DeltaType]reqEvent{
		envelope.DeltaPatch: evProgress, envelope.DeltaChunk: evProgress, envelope.DeltaProgress: evProgress,
		envelope.DeltaDone: evDone, envelope.DeltaCancel: evCancel, envelope.DeltaError: evError,
	}
	for d := range deltas {
		if got := deltaEvent(d); got != deltas[d] {
			t.Errorf("DeltaEvent(%s) = %s", d, got)
		}
		if d.Final() != (deltas[d] != evProgress) {
			t.Errorf("%s.Final()", d)
		}
	}
	// A frame after done is refused.
	s, _ := stateNew.apply(evAsk)
	s, _ = s.apply(deltaEvent(envelope.DeltaDone))
	if _, err := s.apply(deltaEvent(envelope.DeltaChunk)); !errors.Is(err, envelope.ErrTerminal) {
		t.Errorf("chunk after done: %v", err)
	}
}
