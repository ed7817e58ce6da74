package envelope_test

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
		N  = envelope.StateNew
		P  = envelope.StateInProgress
		C  = envelope.StateCompleted
		X  = envelope.StateCancelled
		E  = envelope.StateError
		no = envelope.State("")
	)
	// want[state] lists the target per event, in envelope.Events order:
	// ask, subscribe, progress, confirm, done, cancel, error.
	want := map[envelope.State][]envelope.State{
		N: {P, P, no, no, no, no, no},
		P: {no, no, P, C, C, X, E},
		C: {no, no, no, no, no, no, no},
		X: {no, no, no, no, no, no, no},
		E: {no, no, no, no, no, no, no},
	}
	for _, s := range envelope.States {
		for i, ev := range envelope.Events {
			to := want[s][i]
			if got := s.CanTransition(ev); got != (to != no) {
				t.Errorf("%s.CanTransition(%s) = %v", s, ev, got)
			}
			got, err := s.Apply(ev)
			if to != no {
				if err != nil || got != to {
					t.Errorf("%s --%s--> %s, %v; want %s", s, ev, got, err, to)
				}
				continue
			}
			if got != s {
				t.Errorf("%s --%s--> %s; a refused event must not move the state", s, ev, got)
			}
			wantCode(t, err, envelope.CodeMissingDeltaSeq)
			if envelope.AsError(err).Retry {
				t.Errorf("%s --%s--> refusal is retryable", s, ev)
			}
			if errors.Is(err, envelope.ErrTerminal) != s.Terminal() {
				t.Errorf("%s --%s-->: ErrTerminal %v", s, ev, errors.Is(err, envelope.ErrTerminal))
			}
		}
	}
	if n := len(envelope.States) * len(envelope.Events); n != 35 {
		t.Errorf("%d pairs", n)
	}
	for _, s := range envelope.States {
		if s.Terminal() != (s == C || s == X || s == E) {
			t.Errorf("%s.Terminal()", s)
		}
	}
}

// TestUAMP_10_EventsOfMessages maps intents and delta types to events.
func TestUAMP_10_EventsOfMessages(t *testing.T) {
	intents := map[envelope.Intent]envelope.Event{
		envelope.IntentAsk: envelope.EventAsk, envelope.IntentSubscribe: envelope.EventSubscribe,
		envelope.IntentConfirm: envelope.EventConfirm, envelope.IntentCancel: envelope.EventCancel,
		envelope.IntentError: envelope.EventError, envelope.IntentDeny: envelope.EventError,
		envelope.IntentProgress: envelope.EventProgress, envelope.IntentNotify: envelope.EventProgress,
	}
	for _, i := range envelope.Intents {
		ev, ok := envelope.IntentEvent(i)
		if want, has := intents[i]; ok != has || ev != want {
			t.Errorf("IntentEvent(%s) = %q, %v", i, ev, ok)
		}
	}
	deltas := map[envelope.DeltaType]envelope.Event{
		envelope.DeltaPatch: envelope.EventProgress, envelope.DeltaChunk: envelope.EventProgress, envelope.DeltaProgress: envelope.EventProgress,
		envelope.DeltaDone: envelope.EventDone, envelope.DeltaCancel: envelope.EventCancel, envelope.DeltaError: envelope.EventError,
	}
	for _, d := range envelope.DeltaTypes {
		if got := envelope.DeltaEvent(d); got != deltas[d] {
			t.Errorf("DeltaEvent(%s) = %s", d, got)
		}
		if d.Final() != (deltas[d] != envelope.EventProgress) {
			t.Errorf("%s.Final()", d)
		}
	}
	// A frame after done is refused.
	s, _ := envelope.StateNew.Apply(envelope.EventAsk)
	s, _ = s.Apply(envelope.DeltaEvent(envelope.DeltaDone))
	if _, err := s.Apply(envelope.DeltaEvent(envelope.DeltaChunk)); !errors.Is(err, envelope.ErrTerminal) {
		t.Errorf("chunk after done: %v", err)
	}
}
