package runs_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/runs"
	"github.com/google/go-cmp/cmp"
)

// gatedModel replies with steps in order; its first reply waits until
// open is closed, so that a test subscribes before the model speaks.
func gatedModel(t *testing.T, steps ...scripted.Step) (m *scripted.Model, open chan struct{}) {
	open = make(chan struct{})
	var n atomic.Int32
	m = scripted.NewFunc(func(ctx context.Context, req *llm.Request) (scripted.Step, error) {
		i := int(n.Add(1) - 1)
		if i == 0 {
			select {
			case <-open:
			case <-ctx.Done():
				return scripted.Step{}, ctx.Err()
			}
		}
		if i >= len(steps) {
			t.Errorf("model call %d was not scripted", i+1)
			return scripted.Step{}, errors.New("not scripted")
		}
		return steps[i], nil
	})
	return m, open
}

// chargeSteps: the model charges acct-1, then confirms — its words held
// back by the governor (the run wrote) until the run delivered.
var chargeSteps = []scripted.Step{
	{ToolCalls: []llm.ToolCall{{ToolCallID: "c1", ToolName: "charge", Arguments: map[string]any{"account": "acct-1"}}}},
	{Text: "Charged acct-1."},
}

// collect pulls events until the iterator ends or fails.
func collect(t *testing.T, next func() (*runs.Event, error, bool)) []*runs.Event {
	t.Helper()
	var out []*runs.Event
	for {
		ev, err, ok := next()
		if !ok {
			return out
		}
		if err != nil {
			t.Fatalf("events: %v (after %d)", err, len(out))
		}
		out = append(out, ev)
	}
}

func pull(t *testing.T, seq iter.Seq2[*runs.Event, error]) (func() (*runs.Event, error, bool), func()) {
	next, stop := iter.Pull2(seq)
	t.Cleanup(stop)
	return next, stop
}

// brief is what the order test compares of an event.
type brief struct {
	Type       runs.EventType
	Phase      govern.Phase `json:",omitempty"`
	Text       string       `json:",omitempty"`
	Unverified bool         `json:",omitempty"`
	Tool       string       `json:",omitempty"`
	Tier       string       `json:",omitempty"`
	Args       string       `json:",omitempty"`
	Result     string       `json:",omitempty"`
	Status     runs.Status  `json:",omitempty"`
	Output     string       `json:",omitempty"`
	Durable    bool
}

func briefs(evs []*runs.Event) []brief {
	var out []brief
	for _, ev := range evs {
		b := brief{Type: ev.Type, Phase: ev.Phase, Text: ev.Text, Unverified: ev.Unverified, Tool: ev.Tool, Tier: ev.Tier,
			Args: string(ev.Args), Result: string(ev.Result), Status: ev.Status, Output: ev.Output, Durable: ev.Durable}
		for _, c := range ev.ToolCalls {
			args, _ := json.Marshal(c.Args)
			b.Tool, b.Args = c.Tool, string(args)
		}
		out = append(out, b)
	}
	return out
}

func durableOf(evs []*runs.Event) []*runs.Event {
	return slices.DeleteFunc(slices.Clone(evs), func(ev *runs.Event) bool { return !ev.Durable })
}

// TestEvents_OrderSeqResumeRestart: a run's events come in the order
// they happened, each with a larger Seq: the journal's (run started,
// phases, the call with its arguments and result) and the model's
// (its words, the tool calls it asked for; the words the governor held
// back until the run delivered come after the deliver). A subscription
// after a Seq gets the durable events after it; after a restart, the
// durable events are the same, numbered the same.
func TestEvents_OrderSeqResumeRestart(t *testing.T) {
	ctx := ctxT(t)
	model, open := gatedModel(t, chargeSteps...)
	b := newBench(t, model, runs.Options{})
	run, err := b.svc.Start(ctx, &runs.StartParams{Agent: "clerk", Input: "charge acct-1"})
	if err != nil {
		t.Fatal(err)
	}
	next, _ := pull(t, b.svc.Events(ctx, run.RequestID, 0))
	var evs []*runs.Event
	for len(evs) < 2 { // run_started, phase plan: the model has not spoken yet
		ev, err, ok := next()
		if !ok || err != nil {
			t.Fatalf("events: %v %v", err, ok)
		}
		evs = append(evs, ev)
	}
	close(open)
	evs = append(evs, collect(t, next)...)

	// The journal's events in their order, and the model's in theirs;
	// the agent streams with read-ahead, so the model's tool call may be
	// reported after what the governor journaled of it, but the words
	// held back until the deliver come after it.
	wantDurable := []brief{
		{Type: runs.EventRunStarted, Durable: true},
		{Type: runs.EventPhase, Phase: govern.Plan, Durable: true},
		{Type: runs.EventPhase, Phase: govern.Execute, Durable: true},
		{Type: runs.EventToolCall, Tool: "charge", Tier: "write_low_risk", Args: `{"account":"acct-1"}`, Durable: true},
		{Type: runs.EventToolResult, Tool: "charge", Result: `"charged"`, Durable: true},
		{Type: runs.EventPhase, Phase: govern.Verify, Durable: true},
		{Type: runs.EventPhase, Phase: govern.Deliver, Durable: true},
		{Type: runs.EventEnded, Status: runs.Delivered, Output: "Charged acct-1.", Durable: true},
	}
	wantModel := []brief{
		{Type: runs.EventModelTurn, Tool: "charge", Args: `{"account":"acct-1"}`},
		{Type: runs.EventModelText, Text: "Charged "},
		{Type: runs.EventModelText, Text: "acct-1."},
	}
	if diff := cmp.Diff(wantDurable, briefs(durableOf(evs))); diff != "" {
		t.Errorf("durable events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantModel, briefs(slices.DeleteFunc(slices.Clone(evs), func(ev *runs.Event) bool { return ev.Durable }))); diff != "" {
		t.Errorf("model events (-want +got):\n%s", diff)
	}
	n := len(evs)
	deliver := slices.IndexFunc(evs, func(ev *runs.Event) bool { return ev.Phase == govern.Deliver })
	words := slices.IndexFunc(evs, func(ev *runs.Event) bool { return ev.Text == "Charged " })
	if deliver < 0 || words < deliver || evs[n-1].Type != runs.EventEnded {
		t.Errorf("events %+v: want the held-back words after the deliver, and ended last", briefs(evs))
	}
	for i, ev := range evs {
		if ev.RequestID != run.RequestID || (i > 0 && ev.Seq <= evs[i-1].Seq) {
			t.Errorf("event %d: %+v after seq %d", i, ev, evs[max(i-1, 0)].Seq)
		}
	}

	// Resume after the tool call: the durable events after it.
	durable := durableOf(evs)
	after := durable[3].Seq
	resumed := collect(t, must(pull(t, b.svc.Events(ctx, run.RequestID, after))))
	if diff := cmp.Diff(durable[4:], resumed); diff != "" {
		t.Errorf("events after seq %d (-want +got):\n%s", after, diff)
	}
	b.restart(t)
	replayed := collect(t, must(pull(t, b.svc.Events(ctx, run.RequestID, 0))))
	if diff := cmp.Diff(durableOf(evs), replayed); diff != "" {
		t.Errorf("events after a restart (-want +got):\n%s", diff)
	}
	heldBack := evs[n-3].Seq // a transient seq
	resumed = collect(t, must(pull(t, b.svc.Events(ctx, run.RequestID, heldBack))))
	if diff := cmp.Diff(evs[n-1:], resumed); diff != "" {
		t.Errorf("events after a restart, after transient seq %d (-want +got):\n%s", heldBack, diff)
	}
	if evs := collect(t, must(pull(t, b.svc.Events(ctx, run.RequestID, evs[len(evs)-1].Seq)))); len(evs) != 0 {
		t.Errorf("events after the end: %v", briefs(evs))
	}
}

func must(next func() (*runs.Event, error, bool), _ func()) func() (*runs.Event, error, bool) {
	return next
}

// TestEvents_SlowConsumer: a subscriber that reads nothing does not hold
// the run up — it delivers — and when it reads, it gets every durable
// event, in order, although its buffer (one event) overflowed: it caught
// up from the journal.
func TestEvents_SlowConsumer(t *testing.T) {
	ctx := ctxT(t)
	model, open := gatedModel(t, chargeSteps...)
	b := newBench(t, model, runs.Options{EventBuffer: 1})
	run, err := b.svc.Start(ctx, &runs.StartParams{Agent: "clerk", Input: "charge acct-1"})
	if err != nil {
		t.Fatal(err)
	}
	next, _ := pull(t, b.svc.Events(ctx, run.RequestID, 0))
	first, err, _ := next()
	if err != nil {
		t.Fatal(err)
	}
	close(open)
	done, err := b.svc.Wait(ctx, run.RequestID) // while the subscriber reads nothing
	if err != nil || done.Status != runs.Delivered {
		t.Fatalf("Wait = %+v, %v", done, err)
	}
	got := append([]*runs.Event{first}, collect(t, next)...)
	all := collect(t, must(pull(t, b.svc.Events(ctx, run.RequestID, 0))))
	if diff := cmp.Diff(all, durableOf(got)); diff != "" {
		t.Errorf("durable events of the slow subscriber (-want +got):\n%s", diff)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq <= got[i-1].Seq {
			t.Errorf("seq %d after %d", got[i].Seq, got[i-1].Seq)
		}
	}
}

// TestEvents_BreakEndsSubscription: breaking the loop over the events of
// a run that goes on (paused for a human) ends the subscription; so does
// the end of its context, with the context's error. An unknown run fails
// at once with UnknownRun.
func TestEvents_BreakEndsSubscription(t *testing.T) {
	ctx := ctxT(t)
	f := newFixture(t)
	run, err := f.svc.Start(ctx, &runs.StartParams{Agent: "support", Input: "please refund o-1001"})
	if err != nil {
		t.Fatal(err)
	}
	var types []runs.EventType
	for ev, err := range f.svc.Events(ctx, run.RequestID, 0) {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
		if n := runs.Subscribers(f.svc, run.RequestID); n != 1 {
			t.Errorf("%d subscribers while reading", n)
		}
		if ev.Type == runs.EventPaused {
			break
		}
	}
	if n := runs.Subscribers(f.svc, run.RequestID); n != 0 {
		t.Errorf("%d subscribers after the loop broke", n)
	}
	if !slices.Contains(types, runs.EventApprovalRequested) || types[len(types)-1] != runs.EventPaused {
		t.Errorf("events %v, want an approval request, then paused", types)
	}

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var last error
	for ev, err := range f.svc.Events(sctx, run.RequestID, 0) {
		if err != nil {
			last = err
			continue
		}
		if ev.Type == runs.EventPaused {
			cancel() // the run waits for a human: only the context ends the stream
		}
	}
	if !errors.Is(last, context.Canceled) || runs.Subscribers(f.svc, run.RequestID) != 0 {
		t.Errorf("after the context ended: err %v, %d subscribers", last, runs.Subscribers(f.svc, run.RequestID))
	}
	for _, err := range f.svc.Events(ctx, "f47ac10b-58cc-4372-a567-0e02b2c3d479", 0) {
		if !errors.Is(err, runs.UnknownRun) {
			t.Errorf("events of an unknown run: %v", err)
		}
	}
}
