package govern_test

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/cputime"
	"github.com/agentry-dev/agentry/internal/journal"
)

// benchJournal opens a journal for the governed benchmarks and returns
// its fsync counter (nil when it has no fsyncs).
type benchJournal struct {
	name string
	open func(b *testing.B) (govern.Journal, *atomic.Int64)
}

var benchJournals = []benchJournal{
	{"memory", func(*testing.B) (govern.Journal, *atomic.Int64) { return govern.NewMemoryJournal(), nil }},
	{"file", openFileJournal},
}

// openFileJournal opens a file journal in a temporary directory; its
// fsyncs are real, and counted through the fault hook.
func openFileJournal(b *testing.B) (govern.Journal, *atomic.Int64) {
	fsyncs := new(atomic.Int64)
	j, err := journal.Open(filepath.Join(b.TempDir(), "journal.jsonl"), &journal.Options{FaultHook: func(point string) {
		if point == journal.PointSynced {
			fsyncs.Add(1)
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { j.Close() })
	return j, fsyncs
}

var benchIdentity = govern.Identity{AgentID: "agent:bench", OwnerID: "org:bench", ControlClass: govern.Autonomous}

func benchTool(ctx context.Context) (any, error) { return map[string]any{"ok": true}, nil }

// benchSink keeps the ungoverned call's result alive, so that the
// compiler cannot drop the tool's work from the baseline.
var benchSink any

// callsPerRun bounds the calls made in one run, which keeps a run's
// call table and evidence small.
const callsPerRun = 200

// benchCall is a call ready to be made: for write_high_risk, with the
// approval request already open and its token signed.
type benchCall struct {
	run  *govern.Run
	call govern.Call
}

// BenchmarkToolCall measures one tool call made directly (the baseline)
// and gated by a governor, by tier and journal, in the same run:
//
//   - read_only: gate, tool_result evidence hashed, one unsynced commit
//     record.
//   - write_low_risk: policy (AllowAll), the intent record synced before
//     the tool runs and the commit record synced after.
//   - write_high_risk: the same plus rollback metadata and a presented
//     approval token (Ed25519 verification, binding check, the decision
//     record synced). Opening the approval request and signing the token
//     — the human's part — happen before the timer starts.
//
// The journals are the memory journal and the file journal in a
// temporary directory (real fsyncs; fsyncs/op reports them). cpu-ns/op
// is the process's CPU time per call (all goroutines, the garbage
// collector's included), steadier than ns/op on a shared machine. The g=N
// variants make the file journal's write calls from N goroutines, as
// concurrent agents would (calls made together belong to different
// runs), so that they share fsyncs (group commit); their ns/op is wall
// time divided by the calls. Every run starts outside the timer.
func BenchmarkToolCall(b *testing.B) {
	b.Run("ungoverned", func(b *testing.B) {
		ctx := b.Context()
		for b.Loop() {
			v, err := benchTool(ctx)
			if err != nil {
				b.Fatal(err)
			}
			benchSink = v
		}
	})
	for _, tier := range []govern.Tier{govern.ReadOnly, govern.WriteLowRisk, govern.WriteHighRisk} {
		for _, bj := range benchJournals {
			goroutines := []int{1}
			if bj.name == "file" && tier > govern.ReadOnly {
				goroutines = append(goroutines, 8, 64)
			}
			for _, n := range goroutines {
				p, actual := parallelism(n)
				b.Run(fmt.Sprintf("%s/journal=%s/g=%d", tier, bj.name, actual), func(b *testing.B) {
					benchGoverned(b, tier, bj, p)
				})
			}
		}
	}
}

// parallelism returns the b.SetParallelism value for about n goroutines
// (0: one goroutine, without RunParallel) and the goroutines it makes.
func parallelism(n int) (p, goroutines int) {
	if n == 1 {
		return 0, 1
	}
	procs := runtime.GOMAXPROCS(0)
	p = (n + procs - 1) / procs
	return p, p * procs
}

func benchGoverned(b *testing.B, tier govern.Tier, bj benchJournal, parallel int) {
	ctx := b.Context()
	pub, priv, _ := ed25519.GenerateKey(nil)
	keys := govern.NewKeyring()
	keys.Add("alice", pub)
	j, fsyncs := bj.open(b)
	g, err := govern.New(ctx, &govern.Options{Journal: j, Keyring: keys,
		Rollbacks: map[string]govern.RollbackFunc{"undo": func(context.Context, govern.RollbackAction) error { return nil }}})
	if err != nil {
		b.Fatal(err)
	}
	spec := govern.ToolSpec{Name: "lookup", Tier: tier}
	if tier > govern.ReadOnly {
		spec.Name = "refund"
		spec.Rollback = func(ctx context.Context, c govern.Call) (*govern.RollbackAction, error) {
			return &govern.RollbackAction{Type: "undo", Target: c.ID}, nil
		}
	}
	calls := prepareCalls(b, g, spec, priv, b.N)
	invoke := func(c benchCall) bool {
		_, err := c.run.Invoke(ctx, spec, c.call, benchTool)
		if err != nil {
			b.Error(err) // not Fatal: RunParallel's goroutines may not call it
		}
		return err == nil
	}
	var before int64
	if fsyncs != nil {
		before = fsyncs.Load()
	}
	cpu0, cpuOK := cputime.Process()
	b.ResetTimer()
	if parallel == 0 {
		for _, c := range calls {
			if !invoke(c) {
				return
			}
		}
	} else {
		var next atomic.Int64
		b.SetParallelism(parallel)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !invoke(calls[next.Add(1)-1]) {
					return
				}
			}
		})
	}
	b.StopTimer()
	if cpu1, ok := cputime.Process(); ok && cpuOK {
		b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
	}
	if fsyncs != nil {
		b.ReportMetric(float64(fsyncs.Load()-before)/float64(b.N), "fsyncs/op")
	}
}

// prepareCalls starts the runs (advanced to execute) for n calls of spec
// and, for write_high_risk, opens each call's approval request and signs
// its token. Call i is made on run i mod runs, so that consecutive calls —
// those concurrent goroutines pick up together — belong to different
// runs, as the calls of concurrent agents do. Runs are prepared
// concurrently, sharing the file journal's fsyncs.
func prepareCalls(b *testing.B, g *govern.Governor, spec govern.ToolSpec, priv ed25519.PrivateKey, n int) []benchCall {
	b.Helper()
	ctx := b.Context()
	runs := make([]*govern.Run, (n+callsPerRun-1)/callsPerRun)
	calls := make([]benchCall, n)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for k := range runs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			run, err := g.Start(ctx, &govern.RunOptions{Identity: benchIdentity})
			if err == nil {
				err = run.Advance(ctx, govern.Execute)
			}
			if err != nil {
				b.Error(err)
				return
			}
			runs[k] = run
			for i := k; i < n; i += len(runs) {
				c := benchCall{run: run, call: govern.Call{ID: fmt.Sprint("call-", i), Args: map[string]any{"order": i, "sku": "A-1", "qty": 2}}}
				if spec.Tier == govern.WriteHighRisk {
					if c.call.Approval, err = benchApprove(ctx, g, run, spec, c.call, priv); err != nil {
						b.Error(err)
						return
					}
				}
				calls[i] = c
			}
		})
	}
	wg.Wait()
	if b.Failed() {
		b.FailNow()
	}
	return calls
}

// benchApprove opens the approval request of call and returns the token that
// answers it.
func benchApprove(ctx context.Context, g *govern.Governor, run *govern.Run, spec govern.ToolSpec, call govern.Call, priv ed25519.PrivateKey) (string, error) {
	_, err := run.Invoke(ctx, spec, call, benchTool)
	var ge *govern.Error
	if !errors.As(err, &ge) || ge.ApprovalID == "" {
		return "", fmt.Errorf("want an approval request, got %v", err)
	}
	req, err := g.Approval(ctx, ge.ApprovalID)
	if err != nil {
		return "", err
	}
	now := time.Now()
	return govern.SignApproval(priv, govern.ApprovalClaims{Issuer: "alice", Audience: govern.TokenAudience,
		ID: "jti-" + call.ID, IssuedAt: now.Unix(), Expiry: now.Add(time.Hour).Unix(), Binding: req.Binding()})
}
