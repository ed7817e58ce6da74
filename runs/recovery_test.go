package runs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/recordkind"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/runs"
)

// stopJournal passes appends to the journal under it until it is stopped
// after a number of them, then fails every append: the process died right
// after that append. Every effect of a governed run is preceded by a synced
// append (an intent, a rollback_started), so once the journal fails the
// dead process does nothing more — except the one tool that already
// passed its intent, as a crash leaves it.
type stopJournal struct {
	govern.Journal

	mu       sync.Mutex
	left     int // appends still allowed; negative: no limit
	appended []string
}

var errCrashed = errors.New("the process crashed")

func (j *stopJournal) Append(ctx context.Context, sync bool, recs ...*govern.Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.left == 0 {
		return errCrashed
	}
	if j.left > 0 {
		j.left--
	}
	err := j.Journal.Append(ctx, sync, recs...)
	if err == nil {
		var kinds []string
		for _, r := range recs {
			kinds = append(kinds, fmt.Sprintf("%s %s", r.Kind, r.Tool))
		}
		j.appended = append(j.appended, fmt.Sprint(kinds))
	}
	return err
}

// stopAfter lets n more appends through; negative lifts the limit.
func (j *stopJournal) stopAfter(n int) {
	j.mu.Lock()
	j.left = n
	j.mu.Unlock()
}

// since returns the appends made after the first n, and whether the
// journal was stopped (it refused an append).
func (j *stopJournal) since(n int) (appends []string, stopped bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.appended[n:]), j.left == 0
}

func (j *stopJournal) count() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.appended)
}

// TestUAICP_5_3_ApprovalSurvivesCrash kills the server (in process: its
// journal stops) after each journal append from the approval decision of a
// paused refund to the run's deliver, restarts it on the same journal
// (Recover, then ResumeDecided, as agentry serve does) and checks the
// outcome: the approved refund ran exactly once and the run delivered —
// whether the crash came before the resume, before the refund's intent,
// after its commit or during the verification of the answer — except when
// the refund was in doubt (intent journaled, commit not): then it is
// rolled back and the run fails safe with RECOVERED_IN_DOUBT.
func TestUAICP_5_3_ApprovalSurvivesCrash(t *testing.T) {
	for n := 1; ; n++ {
		var finished bool
		t.Run(fmt.Sprintf("after %d appends", n), func(t *testing.T) {
			j := &stopJournal{Journal: govern.NewMemoryJournal(), left: -1}
			f := newFixtureWith(t, j, llm.ModelReference{})
			code, r := f.post(t, `{"agent":"support","input":"please refund o-1001","wait":true}`)
			if code != 200 || r.Status != runs.Paused || len(r.PendingApprovals) != 1 {
				t.Fatalf("%d %+v", code, r)
			}
			decided := make(chan struct{}, 1)
			f.onDecided = func() { decided <- struct{}{} }
			before := j.count()
			j.stopAfter(n)
			f.approve(t, r.PendingApprovals[0]) // the decision is the first append
			<-decided
			f.svc.Shutdown(context.Background()) // the old process is done: it did what it could before the crash
			appends, stopped := j.since(before)
			finished = !stopped
			t.Logf("appends before the crash: %v", appends)
			inDoubt := appends[len(appends)-1] == fmt.Sprint([]string{"invocation_intent refund_order"})

			j.stopAfter(-1)
			f.srv.Close()
			f.start(t) // restart: Recover and ResumeDecided over the same journal
			got := f.waitDone(t, r.RequestID)
			switch {
			case inDoubt:
				if got.Status != runs.FailSafe || !slices.Contains(got.Envelope.Metadata[govern.MetaReasons].([]any), any(string(govern.RecoveredInDoubt))) {
					t.Errorf("an in-doubt refund: run %+v, want fail_safe with RECOVERED_IN_DOUBT", got)
				}
				if log := f.ledger.Log(); !slices.Equal(log, []string{"refund o-1001", "reverse o-1001"}) {
					t.Errorf("ledger %v, want the refund rolled back", log)
				}
			default:
				if got.Status != runs.Delivered || got.Output == "" {
					t.Errorf("run %+v, want delivered", got)
				}
				if log := f.ledger.Log(); !slices.Equal(log, []string{"refund o-1001"}) {
					t.Errorf("ledger %v, want the refund once", log)
				}
			}
			commits := 0
			for rec, err := range f.journal.Records(context.Background(), 1) {
				if err != nil {
					t.Fatal(err)
				}
				if rec.RequestID == r.RequestID && rec.Tool == "refund_order" && rec.Kind == recordkind.Commit {
					commits++
				}
			}
			if commits > 1 {
				t.Errorf("%d commits of the refund", commits)
			}
		})
		if finished || n > 20 || t.Failed() {
			break
		}
	}
}

// waitDone polls a run until it is delivered or failed safe (the resume
// runs in the background); the minute is a safety net far beyond the work.
func (f *fixture) waitDone(t *testing.T, id string) runs.Run {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		if r := f.get(t, id); r.Status == runs.Delivered || r.Status == runs.FailSafe {
			return r
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("run %s never finished: %+v", id, f.get(t, id))
	return runs.Run{}
}
