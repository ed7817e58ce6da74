package govern_test

import (
	"context"
	"encoding/json"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// kindFiltering is a journal that reads one run's records by itself
// (govern.RunReader) and yields only the kinds asked for (RecordsOf, as
// sqlstore's journals do), noting every kind it yielded that way.
type kindFiltering struct {
	govern.Journal
	mu       sync.Mutex
	yielded  map[govern.RecordKind]int
	runReads int
}

func (k *kindFiltering) RunRecords(ctx context.Context, requestID string) ([]govern.Record, error) {
	k.mu.Lock()
	k.runReads++
	k.mu.Unlock()
	var out []govern.Record
	for rec, err := range k.Records(ctx, 1) {
		if err != nil {
			return nil, err
		}
		if rec.RequestID == requestID {
			out = append(out, rec)
		}
	}
	return out, nil
}

func (k *kindFiltering) RecordsOf(ctx context.Context, from uint64, kinds []govern.RecordKind) iter.Seq2[govern.Record, error] {
	return func(yield func(govern.Record, error) bool) {
		for rec, err := range k.Records(ctx, from) {
			if err == nil && !slices.Contains(kinds, rec.Kind) {
				continue
			}
			if err == nil {
				k.mu.Lock()
				k.yielded[rec.Kind]++
				k.mu.Unlock()
			}
			if !yield(rec, err) || err != nil {
				return
			}
		}
	}
}

// TestIndexReadsOnlyWhatItIndexes: on a journal that reads runs by
// itself and filters kinds, a governor following what another replica
// journals reads only the records its index needs — starts,
// transitions, pauses, resumes, approval requests and decisions, not
// the intents, commits and evidence of every replica's every call — and
// still lists the other replica's approvals and attaches its runs as
// they are, reading them from the journal.
func TestIndexReadsOnlyWhatItIndexes(t *testing.T) {
	j := &kindFiltering{Journal: govern.NewMemoryJournal(), yielded: map[govern.RecordKind]int{}}
	log := &rollbackLog{}
	opts := baseOpts(t, log)
	opts.Journal = j
	g1 := newGov(t, opts)
	g2 := newGov(t, opts)
	r := start(t, g1, govern.RunOptions{Resumer: "agent-x"})
	invoke(t, r, readOnly("get"), govern.Call{ID: "c0", Args: map[string]any{"k": 1}}, &tool{result: "read"})
	invoke(t, r, withRollback(lowRisk("put")), govern.Call{ID: "c1", Args: map[string]any{"k": 2}}, &tool{result: "written"})
	_, err := r.Invoke(bg, highRisk("deploy"), govern.Call{ID: "c2", Args: map[string]any{"env": "prod"}}, notCalled(t))
	approvalID := govErr(t, err).ApprovalID
	if err := r.Pause(bg, json.RawMessage(`{"step":3}`)); err != nil {
		t.Fatal(err)
	}

	list, err := g2.Approvals(bg, true)
	if err != nil || len(list) != 1 || list[0].ID != approvalID {
		t.Fatalf("the other replica's pending approvals: %+v, %v; want %s", list, err, approvalID)
	}
	reads := j.runReads
	r2, err := g2.Attach(bg, r.RequestID())
	if err != nil {
		t.Fatal(err)
	}
	if !r2.Paused() || r2.Resumer() != "agent-x" || len(r2.PendingApprovals()) != 1 {
		t.Errorf("attached on the other replica: paused %v, resumer %q, pending %v", r2.Paused(), r2.Resumer(), r2.PendingApprovals())
	}
	if j.runReads == reads {
		t.Error("Attach did not read the run from the journal")
	}
	indexed := []govern.RecordKind{recordkind.RunStarted, recordkind.Transition, recordkind.Paused, recordkind.Resumed,
		recordkind.ApprovalRequested, recordkind.ApprovalDecided}
	for k, n := range j.yielded {
		if !slices.Contains(indexed, k) {
			t.Errorf("the index read %d %s record(s)", n, k)
		}
	}
	if j.yielded[recordkind.ApprovalRequested] == 0 || j.yielded[recordkind.RunStarted] == 0 {
		t.Errorf("the index read %v: not the start and the approval request", j.yielded)
	}
}

// countingJournal counts the reads of a run's records.
type countingJournal struct {
	govern.Journal
	reads atomic.Int32
}

func (c *countingJournal) Records(ctx context.Context, from uint64) iter.Seq2[govern.Record, error] {
	c.reads.Add(1)
	return c.Journal.Records(ctx, from)
}

// TestAttachEndedRunFromMemory: a run that ended in this process is
// attached without reading the journal (a terminal run does not change);
// a governor that did not run it reads it.
func TestAttachEndedRunFromMemory(t *testing.T) {
	j := &countingJournal{Journal: govern.NewMemoryJournal()}
	opts := baseOpts(t, nil)
	opts.Journal = j
	g := newGov(t, opts)
	r, err := g.Start(context.Background(), &govern.RunOptions{Identity: testIdentity()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Invoke(context.Background(), readOnly("lookup"), govern.Call{ID: "c1"}, (&tool{}).fn); err != nil {
		t.Fatal(err)
	}
	if v, err := r.Verify(context.Background(), "done"); err != nil || !v.Passed {
		t.Fatalf("Verify: %v, %v", v, err)
	}
	if _, err := r.Deliver(context.Background(), "done"); err != nil {
		t.Fatal(err)
	}
	before := j.reads.Load()
	a, err := g.Attach(context.Background(), r.RequestID())
	if err != nil || a.Phase() != govern.Deliver {
		t.Fatalf("Attach = %v, %v; want the delivered run", a, err)
	}
	if n := j.reads.Load() - before; n != 0 {
		t.Errorf("attaching a run that ended here read the journal %d times", n)
	}
	other := newGov(t, opts)
	b, err := other.Attach(context.Background(), r.RequestID())
	if err != nil || b.Phase() != govern.Deliver || j.reads.Load() == before {
		t.Errorf("another governor: Attach = %v, %v after %d reads; want the delivered run, read from the journal", b, err, j.reads.Load()-before)
	}
}
