//go:build unix

package govern_test

// The crash tests of UAICP-0.3 governance, the acceptance test of the
// governance issue: the process is killed at every write point — each
// fault point of the file journal (before the write, after it, after the
// fsync), before and after each append to the SQLite journal (which has
// no fault points of its own), and around every side effect: inside the
// tools and the rollback handler, and after each acknowledged API call.
// After recovery nothing acknowledged is lost, each in-doubt write is
// rolled back exactly once, no run stays open, and the chain holds. A
// second test shows that the chain detects deleted, edited and reordered
// records of a journal the governor wrote.
//
// The child process is this test binary again (TestCrashChild). It runs
// crashScenario against a journal in a directory of the parent's, counts
// the kill points it passes and, at the Nth, SIGKILLs itself. Its tools
// and rollback handler act on an "external system", an append-only file
// of "do <call>" and "undo <call>" lines, and it acknowledges every API
// call that returned with a line in an ack file before going on; both
// are fsynced, so that the parent can count them across processes. The
// parent reopens the journal, recovers it with a new governor whose
// rollback handler appends to the same file, and checks the outcome
// against what was acknowledged and done.
//
// A run without a kill lists the points; a kill at a point that leaves
// the same journal and effects as the next one (crashState) is left to
// that one, so each distinct crash state is killed and recovered once.
// A SIGKILL, unlike a power cut, loses nothing written, so what is
// tested is the order of the writes, not their fsyncs.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/journal"
	"github.com/agentry-dev/agentry/internal/recordkind"
	"github.com/agentry-dev/agentry/internal/sqlstore"
)

// The child's configuration travels in the environment.
const (
	crashEnvBackend = "AGENTRY_GOVERN_CRASH_BACKEND" // set: run as the child
	crashEnvDir     = "AGENTRY_GOVERN_CRASH_DIR"
	crashEnvKill    = "AGENTRY_GOVERN_CRASH_KILL" // the kill point; 0 runs to the end
)

// The scenario's runs (request IDs are fixed, so the parent knows them)
// and the governor's node.
const (
	crashRunA = "a0000000-0000-4000-8000-00000000000a" // writes, one call fails, Fail rolls back
	crashRunB = "b0000000-0000-4000-8000-00000000000b" // one write, delivers
	crashNode = "crash-node"
)

var crashBackends = []string{"file", "sqlite"}

// runOfCall names the run a call of the scenario belongs to.
func runOfCall(call string) string {
	if strings.HasPrefix(call, "b-") {
		return crashRunB
	}
	return crashRunA
}

// killer counts the kill points the child passes and kills the process at
// the chosen one. Every point gets a label (the journal's points name the
// records being appended), so that a failure says where the process died
// and the parent can check that each child died where the counting run
// said point N is: the scenario is deterministic.
type killer struct {
	at  int // 0: never
	dir string
	// state, in the run that is not killed, describes what a kill would
	// leave behind at each point (see crashState).
	state func() string

	mu     sync.Mutex
	batch  string   // the records of the append under way
	labels []string // "<state>\t<label>" of each point passed
}

func (k *killer) point(label string) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.state != nil {
		label = k.state() + "\t" + label
	}
	k.labels = append(k.labels, label)
	if len(k.labels) != k.at {
		return
	}
	_ = os.WriteFile(filepath.Join(k.dir, "killpoint"), []byte(label), 0o600)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	for {
		time.Sleep(time.Hour) // the signal is on its way; go no further
	}
}

func (k *killer) journalPoint(point string) {
	k.mu.Lock()
	batch := k.batch
	k.mu.Unlock()
	k.point("journal " + point + " [" + batch + "]")
}

// crashJournal wraps the child's journal: it names the records of each
// append for the kill points' labels and, for a journal without fault
// points of its own (SQLite), adds points before and after each append.
type crashJournal struct {
	govern.Journal
	k        *killer
	points   bool
	appended atomic.Int64
}

func (j *crashJournal) Append(ctx context.Context, sync bool, recs ...*govern.Record) error {
	var names []string
	for _, r := range recs {
		names = append(names, strings.TrimSpace(string(r.Kind)+" "+r.CallID))
	}
	j.k.mu.Lock()
	j.k.batch = strings.Join(names, ", ")
	j.k.mu.Unlock()
	if j.points {
		j.k.journalPoint("append")
	}
	err := j.Journal.Append(ctx, sync, recs...)
	j.appended.Add(1)
	if j.points {
		j.k.journalPoint("appended")
	}
	return err
}

// RunRecords keeps the wrapped journal's index in use (govern.RunReader).
func (j *crashJournal) RunRecords(ctx context.Context, requestID string) ([]govern.Record, error) {
	return j.Journal.(govern.RunReader).RunRecords(ctx, requestID)
}

// openCrashJournal opens the journal of backend in dir; with a killer, it
// is the child's, wrapped and with fault points.
func openCrashJournal(t testing.TB, backend, dir string, k *killer) (govern.Journal, func()) {
	t.Helper()
	switch backend {
	case "file":
		opts := journal.Options{}
		if k != nil {
			// No background flush: its fsyncs would make the fault points
			// depend on timing.
			opts.FlushInterval, opts.FaultHook = -1, k.journalPoint
		}
		f, err := journal.Open(filepath.Join(dir, "journal.jsonl"), &opts)
		if err != nil {
			t.Fatalf("journal.Open: %v", err)
		}
		if k == nil {
			return f, func() { f.Close() }
		}
		return &crashJournal{Journal: f, k: k}, func() { f.Close() }
	case "sqlite":
		st, err := sqlstore.Open(bg, "sqlite://"+filepath.Join(dir, "agentry.db"))
		if err != nil {
			t.Fatalf("sqlstore.Open: %v", err)
		}
		j := st.Journal()
		closeAll := func() { j.Close(); st.Close() }
		if k == nil {
			return j, closeAll
		}
		return &crashJournal{Journal: j, k: k, points: true}, closeAll
	}
	t.Fatalf("unknown backend %q", backend)
	return nil, nil
}

// appendLine appends line to the file at path and fsyncs it.
func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line + "\n"); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func readLines(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(strings.Split(string(b), "\n"), func(l string) bool { return l == "" })
}

// externalSystem is where the scenario's tools and rollbacks act: an
// append-only file of "do <call>" and "undo <call>" lines, shared by the
// child and the parent's recovery.
type externalSystem struct {
	path  string
	point func(label string)
}

func (e *externalSystem) writeTool(call string, fail bool) func(context.Context) (any, error) {
	return func(context.Context) (any, error) {
		e.point("tool " + call + ": before its write")
		if err := appendLine(e.path, "do "+call); err != nil {
			return nil, err
		}
		e.point("tool " + call + ": after its write")
		if fail {
			return nil, errors.New("the backend timed out after the write")
		}
		return map[string]any{"ok": true}, nil
	}
}

// undo is the rollback handler (type undoType; the target is the call).
// Each execution appends a line, so that the parent counts them: a
// handler runs again only when a crash interrupted it before its
// rollback_done was journaled.
func (e *externalSystem) undo(_ context.Context, a govern.RollbackAction) error {
	e.point("rollback " + a.Target + ": before the undo")
	if err := appendLine(e.path, "undo "+a.Target); err != nil {
		return err
	}
	e.point("rollback " + a.Target + ": after the undo")
	return nil
}

func crashOptions(t testing.TB, j govern.Journal, ext *externalSystem) *govern.Options {
	return &govern.Options{Journal: j, Node: crashNode, Keyring: keyring(t, alice), Logger: quietLogger,
		Rollbacks: map[string]govern.RollbackFunc{undoType: ext.undo}}
}

// crashScenario is what the child runs: run A reads, writes twice with
// rollbacks, makes an approved write_high_risk call (the token presented
// with the call, so nothing pauses), and a write whose tool fails after
// writing; run B starts meanwhile and writes; A fails (rolling back its
// four writes), B verifies and delivers. ack is called after each API
// call that returned as the scenario expects, with "<op> <run or call>".
func crashScenario(t testing.TB, g *govern.Governor, k *killer, ext *externalSystem, ackPath string) {
	t.Helper()
	ack := func(what string) {
		if err := appendLine(ackPath, what); err != nil {
			t.Fatal(err)
		}
		k.point("acked: " + what)
	}
	put, wire := withRollback(lowRisk("put")), highRisk("wire")
	startRun := func(id, name string) *govern.Run {
		r, err := g.Start(bg, &govern.RunOptions{RequestID: id, Identity: testIdentity()})
		if err != nil {
			t.Fatalf("Start %s: %v", name, err)
		}
		ack("start " + name)
		return r
	}
	invokeOK := func(r *govern.Run, spec govern.ToolSpec, call govern.Call, fn func(context.Context) (any, error)) {
		if _, err := r.Invoke(bg, spec, call, fn); err != nil {
			t.Fatalf("Invoke %s: %v", call.ID, err)
		}
		ack("invoke " + call.ID)
	}

	a := startRun(crashRunA, "a")
	invokeOK(a, readOnly("lookup"), govern.Call{ID: "a-read"}, func(context.Context) (any, error) {
		k.point("tool a-read: running")
		return map[string]any{"balance": 42}, nil
	})
	invokeOK(a, put, govern.Call{ID: "a-w1", Args: map[string]any{"n": 1}}, ext.writeTool("a-w1", false))
	invokeOK(a, put, govern.Call{ID: "a-w2", Args: map[string]any{"n": 2}}, ext.writeTool("a-w2", false))

	b := startRun(crashRunB, "b")
	invokeOK(b, put, govern.Call{ID: "b-w1", Args: map[string]any{"n": 1}}, ext.writeTool("b-w1", false))

	h1 := govern.Call{ID: "a-h1", Args: map[string]any{"amount": 100}}
	_, err := a.Invoke(bg, wire, h1, notCalled(t))
	var ge *govern.Error
	if !errors.Is(err, govern.ApprovalRequired) || !errors.As(err, &ge) || ge.ApprovalID == "" {
		t.Fatalf("a-h1 without approval: %v", err)
	}
	ack("requested a-h1")
	req, err := g.Approval(bg, ge.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	h1.Approval = sign(t, alice, claimsFor(alice, req))
	invokeOK(a, wire, h1, ext.writeTool("a-h1", false))

	if _, err := a.Invoke(bg, put, govern.Call{ID: "a-w3", Args: map[string]any{"n": 3}}, ext.writeTool("a-w3", true)); !errors.Is(err, govern.ToolFailed) {
		t.Fatalf("a-w3: %v, want TOOL_FAILED", err)
	}
	ack("failed a-w3")
	if _, err := a.Fail(bg, "a tool failed", govern.ToolFailed); err != nil {
		t.Fatalf("Fail: %v", err)
	}
	ack("fail a")

	v, err := b.Verify(bg, "done")
	if err != nil || !v.Passed {
		t.Fatalf("Verify: %v %v", v, err)
	}
	ack("verify b")
	if _, err := b.Deliver(bg, "done"); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	ack("deliver b")
}

// TestCrashChild is the child process of TestCrashRecovery; run directly
// it does nothing.
func TestCrashChild(t *testing.T) {
	backend := os.Getenv(crashEnvBackend)
	if backend == "" {
		t.Skip("the child process of TestCrashRecovery")
	}
	dir := os.Getenv(crashEnvDir)
	at, err := strconv.Atoi(os.Getenv(crashEnvKill))
	if err != nil {
		t.Fatal(err)
	}
	k := &killer{at: at, dir: dir}
	ext := &externalSystem{path: filepath.Join(dir, "effects"), point: k.point}
	j, closeJ := openCrashJournal(t, backend, dir, k)
	if at == 0 {
		k.state = func() string { return crashState(backend, dir, j.(*crashJournal)) }
	}
	g, err := govern.New(bg, crashOptions(t, j, ext))
	if err != nil {
		t.Fatal(err)
	}
	crashScenario(t, g, k, ext, filepath.Join(dir, "acks"))
	closeJ()
	if err := os.WriteFile(filepath.Join(dir, "points"), []byte(strings.Join(k.labels, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
}

// crashState describes what a kill leaves for recovery: the size of the
// journal file (or the SQLite journal's committed appends) and of the
// effects. A SIGKILL loses nothing the process wrote — written is as good
// as fsynced — so kills at points with equal states leave the same files
// to recover, and recovery does the same; of such points the last, which
// has the most acknowledgements to check, stands for them all.
func crashState(backend, dir string, j *crashJournal) string {
	size := func(name string) int64 {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	journal := size("journal.jsonl")
	if backend == "sqlite" {
		journal = j.appended.Load()
	}
	return fmt.Sprintf("%d/%d", journal, size("effects"))
}

// runCrashChild runs the child on dir, killed at point n (0: never). It
// returns the labels of the points it passed (n == 0) or the one it died
// at.
func runCrashChild(backend, dir string, n int) ([]string, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1", "-test.v")
	// The children are short and sequential: no GC, one P, is faster.
	cmd.Env = append(os.Environ(), crashEnvBackend+"="+backend, crashEnvDir+"="+dir, crashEnvKill+"="+strconv.Itoa(n),
		"GOGC=off", "GOMAXPROCS=1")
	out, err := cmd.CombinedOutput()
	if n == 0 {
		if err != nil {
			return nil, fmt.Errorf("child (no kill): %v\n%s", err, out)
		}
		b, err := os.ReadFile(filepath.Join(dir, "points"))
		return strings.Split(string(b), "\n"), err
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return nil, fmt.Errorf("child to be killed at %d exited: %v\n%s", n, err, out)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return nil, fmt.Errorf("child to be killed at %d: %v, not SIGKILL\n%s", n, err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "killpoint"))
	return []string{string(b)}, err
}

// journalFacts is what a journal holds about the scenario.
type journalFacts struct {
	runs      map[string]bool         // run_started
	phase     map[string]govern.Phase // the last phase of each run
	failSafe  map[string]govern.Record
	intents   map[string]*govern.RollbackAction // by call; nil: no rollback action
	commits   map[string]bool
	failed    map[string]bool
	requested map[string]bool
	rbStarted map[string]int
	rbDone    map[string]int
}

func factsOf(t testing.TB, recs []govern.Record) journalFacts {
	t.Helper()
	f := journalFacts{runs: map[string]bool{}, phase: map[string]govern.Phase{}, failSafe: map[string]govern.Record{},
		intents: map[string]*govern.RollbackAction{}, commits: map[string]bool{}, failed: map[string]bool{},
		requested: map[string]bool{}, rbStarted: map[string]int{}, rbDone: map[string]int{}}
	for _, r := range recs {
		switch r.Kind {
		case recordkind.RunStarted:
			f.runs[r.RequestID], f.phase[r.RequestID] = true, govern.Intake
		case recordkind.Transition:
			f.phase[r.RequestID] = r.To
			if r.To == govern.FailSafe {
				f.failSafe[r.RequestID] = r
			}
		case recordkind.Intent:
			var in govern.CallIntent
			if err := json.Unmarshal(r.Data, &in); err != nil {
				t.Fatalf("intent %d: %v", r.Seq, err)
			}
			f.intents[r.CallID] = in.Rollback
		case recordkind.Commit:
			f.commits[r.CallID] = true
		case recordkind.Failed:
			f.failed[r.CallID] = true
		case recordkind.ApprovalRequested:
			f.requested[r.CallID] = true
		case recordkind.RollbackStarted:
			f.rbStarted[r.CallID]++
		case recordkind.RollbackDone:
			f.rbDone[r.CallID]++
		}
	}
	return f
}

func (f journalFacts) open(run string) bool { return f.runs[run] && !f.phase[run].Terminal() }

// count counts the lines "<op> <subject>" of lines by subject.
func count(lines []string, op string) map[string]int {
	out := map[string]int{}
	for _, l := range lines {
		if s, ok := strings.CutPrefix(l, op+" "); ok {
			out[s]++
		}
	}
	return out
}

// unsyncedAcks are the operations of the scenario whose records the
// governor appends without sync (a read-only call's commit, a
// verification): a journal may lose them in a crash — the SQL journal
// defers them to the next synced append — until a later operation's
// synced records make them durable (the journal keeps order).
var unsyncedAcks = map[string]bool{"invoke a-read": true, "verify b": true}

// checkAcked checks that every acknowledged operation is in the journal,
// those of unsyncedAcks once an operation acknowledged after them is.
func checkAcked(t *testing.T, acks []string, f journalFacts) {
	t.Helper()
	runs := map[string]string{"a": crashRunA, "b": crashRunB}
	synced := false // an operation acknowledged after this one was synced
	for i := len(acks) - 1; i >= 0; i-- {
		a := acks[i]
		if unsyncedAcks[a] && !synced {
			continue
		}
		synced = synced || !unsyncedAcks[a]
		op, subj, _ := strings.Cut(a, " ")
		var ok bool
		switch op {
		case "start":
			ok = f.runs[runs[subj]]
		case "invoke":
			ok = f.commits[subj]
		case "failed":
			ok = f.failed[subj]
		case "requested":
			ok = f.requested[subj]
		case "fail":
			rec, closed := f.failSafe[runs[subj]]
			ok = closed && slices.Contains(rec.Reasons, govern.ToolFailed) && rec.Actor.Kind == govern.ActorAgent
		case "verify":
			ph := f.phase[runs[subj]]
			ok = ph == govern.Verify || ph == govern.Deliver
		case "deliver":
			ok = f.phase[runs[subj]] == govern.Deliver
		default:
			t.Fatalf("unknown ack %q", a)
		}
		if !ok {
			t.Errorf("acknowledged %q is not in the journal", a)
		}
	}
}

// checkCrash recovers the journal the child left in dir and checks it;
// audit adds checkAudit, whose schema checks of the records' contract
// objects need doing once: the child writes the same ones at every kill.
func checkCrash(t *testing.T, backend, dir string, audit bool) {
	t.Helper()
	acks := readLines(t, filepath.Join(dir, "acks"))
	effectsPath := filepath.Join(dir, "effects")
	childEffects := readLines(t, effectsPath)
	j, closeJ := openCrashJournal(t, backend, dir, nil)
	defer closeJ()
	recs := records(t, j)
	var chain govern.ChainVerifier
	for _, r := range recs {
		if err := chain.Next(r); err != nil {
			t.Fatalf("the chain after the crash: %v", err)
		}
	}
	pre := factsOf(t, recs)

	// Nothing acknowledged is lost.
	checkAcked(t, acks, pre)
	// Write-ahead: no effect without its journaled intent, no rollback
	// without its journaled rollback_started; the child did each once.
	for call, n := range count(childEffects, "do") {
		if _, ok := pre.intents[call]; !ok || n != 1 {
			t.Errorf("write %s happened %d times, intent journaled: %v", call, n, ok)
		}
	}
	childUndo := count(childEffects, "undo")
	for call, n := range childUndo {
		if pre.rbStarted[call] == 0 || n != 1 {
			t.Errorf("rollback of %s ran %d times before the crash, %d rollback_started", call, n, pre.rbStarted[call])
		}
	}
	// What recovery must do: close the open runs, rolling back each of
	// their writes not yet rolled back.
	var wantClosed []string
	wantRolledBack := 0
	for _, run := range []string{crashRunA, crashRunB} {
		if !pre.open(run) {
			continue
		}
		wantClosed = append(wantClosed, run)
		for call, action := range pre.intents {
			if runOfCall(call) == run && action != nil && pre.rbDone[call] == 0 {
				wantRolledBack++
			}
		}
	}

	ext := &externalSystem{path: effectsPath, point: func(string) {}}
	opts := crashOptions(t, j, ext)
	g, err := govern.New(bg, opts)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := g.Recover(bg)
	if err != nil {
		t.Fatalf("Recover: %v", err)
	}
	slices.Sort(rep.Closed)
	if !slices.Equal(rep.Closed, wantClosed) || rep.RolledBack != wantRolledBack || rep.RollbackFailures != 0 || len(rep.Paused) != 0 {
		t.Errorf("Recover = %+v, want closed %v and %d rolled back", rep, wantClosed, wantRolledBack)
	}
	effects := readLines(t, effectsPath)
	postRecs := records(t, j)
	post := factsOf(t, postRecs)

	// No run stays open; those recovery closed say so.
	for run := range post.runs {
		switch ph := post.phase[run]; {
		case ph == govern.Deliver:
		case ph == govern.FailSafe && slices.Contains(wantClosed, run):
			if rec := post.failSafe[run]; !slices.Contains(rec.Reasons, govern.RecoveredInDoubt) || rec.Actor.Kind != govern.ActorSystem {
				t.Errorf("run %s closed by recovery: reasons %v, actor %+v", run, rec.Reasons, rec.Actor)
			}
		case ph == govern.FailSafe:
		default:
			t.Errorf("run %s is still open in phase %s", run, ph)
		}
	}
	// Each write of a failed run rolled back exactly once: by the child,
	// by recovery, or by both when the crash fell between the handler's
	// start and its rollback_done (handlers are idempotent for this); a
	// delivered run's writes are never undone, and a write without intent
	// has nothing to undo.
	undo := count(effects, "undo")
	recoveryUndo := map[string]int{}
	for call, n := range undo {
		recoveryUndo[call] = n - childUndo[call]
	}
	calls := map[string]bool{}
	for _, l := range effects {
		_, call, _ := strings.Cut(l, " ")
		calls[call] = true
	}
	for call := range pre.intents {
		calls[call] = true
	}
	for call := range calls {
		action, journaled := pre.intents[call]
		run := runOfCall(call)
		wantRecovery := 0
		if journaled && action != nil && pre.open(run) && pre.rbDone[call] == 0 {
			wantRecovery = 1
		}
		wantTotal := 0
		if journaled && action != nil && post.phase[run] == govern.FailSafe {
			wantTotal = 1
			if childUndo[call] == 1 && pre.rbDone[call] == 0 {
				wantTotal = 2 // interrupted rollback, run again
			}
		}
		if recoveryUndo[call] != wantRecovery || undo[call] != wantTotal {
			t.Errorf("write %s (run %s in %s, rollback_started %d, rollback_done %d before recovery): undone %d times by the child and %d by recovery, want %d by recovery and %d in all",
				call, run, post.phase[run], pre.rbStarted[call], pre.rbDone[call], childUndo[call], recoveryUndo[call], wantRecovery, wantTotal)
		}
		if post.rbDone[call] > 1 {
			t.Errorf("write %s: %d rollback_done records", call, post.rbDone[call])
		}
	}
	// Recovery is done once: neither this governor nor a new one finds
	// anything more to do.
	g2, err := govern.New(bg, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range []*govern.Governor{g, g2} {
		rep, err := g.Recover(bg)
		if err != nil || len(rep.Closed) != 0 || rep.RolledBack != 0 || len(rep.Paused) != 0 {
			t.Errorf("Recover again (governor %d): %+v, %v", i+1, rep, err)
		}
	}
	if again := readLines(t, effectsPath); !slices.Equal(again, effects) {
		t.Errorf("a second recovery acted: %v", again[len(effects):])
	}
	// The chain holds, and the trail recovery completed is well formed.
	if n, err := govern.VerifyChain(bg, j); err != nil {
		t.Errorf("the chain after recovery (%d records): %v", n, err)
	}
	checkTrail(t, postRecs)
	if audit {
		checkAudit(t, j)
	}
}

// checkTrail checks what recovery can break in a trail: every record
// carries what §5.4 requires, each run opens with run_started, its
// transitions are edges taken from the phase it was in, and nothing
// follows its terminal phase.
func checkTrail(t *testing.T, recs []govern.Record) {
	t.Helper()
	phase := map[string]govern.Phase{}
	for _, r := range recs {
		where := fmt.Sprintf("record %d (%s %s)", r.Seq, r.Kind, r.CallID)
		if r.RequestID == "" || !govern.ValidTraceID(r.TraceID) || r.Timestamp.IsZero() || r.Actor.ID == "" || r.Actor.Kind == "" || r.Outcome == "" {
			t.Errorf("%s lacks a field §5.4 requires: %+v", where, r)
		}
		if r.Kind == recordkind.RunStarted {
			phase[r.RequestID] = govern.Intake
			continue
		}
		ph, ok := phase[r.RequestID]
		switch {
		case !ok:
			t.Errorf("%s: before its run_started", where)
		case ph.Terminal():
			t.Errorf("%s: after the run's terminal phase %s", where, ph)
		case r.Kind == recordkind.Transition && (r.From != ph || !govern.CanTransition(r.From, r.To)):
			t.Errorf("%s: transition %s→%s while the run was in %s", where, r.From, r.To, ph)
		case r.Kind == recordkind.Transition:
			phase[r.RequestID] = r.To
		}
	}
}

// TestCrashRecovery kills the child at the last kill point of each state
// it passes (crashState: the other points leave the same journal and
// effects, with fewer acknowledgements), for the file and the SQLite
// journal, and checks each recovery (checkCrash). The child must die at
// the point the counting run labelled so: the scenario is deterministic.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the scenario in a child process once per kill point")
	}
	for _, backend := range crashBackends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			// The SQLite children start from a migrated, empty database,
			// as a restarted server would: migrating is not under test.
			template := filepath.Join(dir, "template")
			if backend == "sqlite" {
				_, closeJ := openCrashJournal(t, backend, template, nil)
				closeJ()
			}
			prepare := func(dir string) error {
				if backend == "sqlite" {
					return copySQLite(filepath.Join(template, "agentry.db"), filepath.Join(dir, "agentry.db"))
				}
				return nil
			}
			counting := filepath.Join(dir, "0")
			if err := os.Mkdir(counting, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := prepare(counting); err != nil {
				t.Fatal(err)
			}
			points, err := runCrashChild(backend, counting, 0)
			if err != nil {
				t.Fatal(err)
			}
			acks := readLines(t, filepath.Join(counting, "acks"))
			if len(acks) != 12 {
				t.Fatalf("the scenario acknowledged %d operations: %v", len(acks), acks)
			}
			checkCrash(t, backend, counting, true)
			states, labels := make([]string, len(points)), make([]string, len(points))
			for i, p := range points {
				states[i], labels[i], _ = strings.Cut(p, "\t")
			}
			kills := 0
			for n := 1; n <= len(points); n++ {
				if n < len(points) && states[n-1] == states[n] {
					continue // the next point leaves the same, with more acks
				}
				kills++
				t.Run(fmt.Sprintf("kill%03d", n), func(t *testing.T) {
					t.Parallel()
					dir := t.TempDir()
					if err := prepare(dir); err != nil {
						t.Fatal(err)
					}
					got, err := runCrashChild(backend, dir, n)
					if err != nil {
						t.Fatal(err)
					}
					if got[0] != labels[n-1] {
						t.Fatalf("died at %q, the counting run passed %q there: the scenario is not deterministic", got[0], labels[n-1])
					}
					checkCrash(t, backend, dir, false)
					if t.Failed() {
						t.Logf("killed at point %d of %d: %s", n, len(points), got[0])
					}
				})
			}
			t.Logf("%d kill points, %d distinct crash states: killing the child in each", len(points), kills)
		})
	}
}

// TestCrashTamperedJournal: deleting, editing or reordering records of a
// journal the governor wrote (the crash scenario, run to its end) breaks
// the chain — the file journal refuses to open, VerifyChain names the
// record — so recovery never acts on a doctored history. The journal
// tests tamper with synthetic records, the audit test with a copy in
// memory; this is the governor's own records in the file and in SQLite.
func TestCrashTamperedJournal(t *testing.T) {
	cases := []struct {
		how string
		// The record tampered with: the first of kind (of call, or a
		// transition to phase to).
		kind govern.RecordKind
		call string
		to   govern.Phase
		// breaks is where the chain breaks, after that record.
		breaks uint64
	}{
		// Deleting A's fail_safe transition would reopen the run.
		{how: "delete", kind: recordkind.Transition, to: govern.FailSafe, breaks: 1},
		// Editing a-w2's rollback action would undo something else.
		{how: "edit", kind: recordkind.Intent, call: "a-w2"},
		// Swapping a-h1's intent and commit would put the write before
		// its write-ahead record.
		{how: "reorder", kind: recordkind.Intent, call: "a-h1", breaks: 1},
	}
	for _, backend := range crashBackends {
		t.Run(backend, func(t *testing.T) {
			dir := t.TempDir()
			j, closeJ := openCrashJournal(t, backend, dir, nil)
			ext := &externalSystem{path: filepath.Join(dir, "effects"), point: func(string) {}}
			g, err := govern.New(bg, crashOptions(t, j, ext))
			if err != nil {
				t.Fatal(err)
			}
			crashScenario(t, g, nil, ext, filepath.Join(dir, "acks"))
			recs := records(t, j)
			if n, err := govern.VerifyChain(bg, j); err != nil || n != uint64(len(recs)) {
				t.Fatalf("untouched: VerifyChain = %d, %v", n, err)
			}
			closeJ()
			for _, tc := range cases {
				t.Run(tc.how, func(t *testing.T) {
					i := slices.IndexFunc(recs, func(r govern.Record) bool {
						return r.Kind == tc.kind && r.CallID == tc.call && r.To == tc.to
					})
					if i < 0 {
						t.Fatalf("no %s record of %q %q", tc.kind, tc.call, tc.to)
					}
					seq := recs[i].Seq
					var err error
					switch backend {
					case "file":
						err = tamperFile(t, filepath.Join(dir, "journal.jsonl"), tc.how, seq)
					case "sqlite":
						err = tamperSQLite(t, filepath.Join(dir, "agentry.db"), tc.how, seq)
					}
					var ce *govern.ChainError
					if !errors.Is(err, govern.ErrChainBroken) || !errors.As(err, &ce) || ce.Seq != seq+tc.breaks {
						t.Errorf("%s record %d: %v, want the chain broken at %d", tc.how, seq, err, seq+tc.breaks)
					}
				})
			}
		})
	}
}

// tamperFile applies how (delete, edit, reorder) to record seq of a copy
// of the journal file at path and returns the error of opening the copy;
// it checks that VerifyChain over a read-only open reports the same.
func tamperFile(t *testing.T, path, how string, seq uint64) error {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	lines = lines[:len(lines)-1]
	i := int(seq - 1)
	switch how {
	case "delete":
		lines = slices.Delete(lines, i, i+1)
	case "edit":
		edited := strings.Replace(lines[i], `"target":"a-w2"`, `"target":"a-w1"`, 1)
		if edited == lines[i] {
			t.Fatalf("record %d has no rollback target a-w2: %s", seq, lines[i])
		}
		lines[i] = edited
	case "reorder":
		lines[i], lines[i+1] = lines[i+1], lines[i]
	}
	copyPath := filepath.Join(t.TempDir(), "tampered.jsonl")
	if err := os.WriteFile(copyPath, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	ro, err := journal.Open(copyPath, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_, verr := govern.VerifyChain(bg, ro)
	ro.Close()
	f, err := journal.Open(copyPath, &journal.Options{})
	if err == nil {
		f.Close()
		return errors.New("journal.Open accepted the tampered file")
	}
	var ce, vce *govern.ChainError
	if !errors.As(err, &ce) || !errors.As(verr, &vce) || *ce != *vce {
		t.Errorf("VerifyChain on a read-only open: %v; Open: %v", verr, err)
	}
	return err
}

// tamperSQLite applies how to record seq of a copy of the SQLite database
// at path, through SQL as an intruder would, and returns VerifyChain's
// error on the copy.
func tamperSQLite(t *testing.T, path, how string, seq uint64) error {
	t.Helper()
	copyPath := filepath.Join(t.TempDir(), "agentry.db")
	if err := copySQLite(path, copyPath); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", copyPath)
	if err != nil {
		t.Fatal(err)
	}
	change := func(q string, args ...any) {
		t.Helper()
		res, err := db.ExecContext(bg, q, args...)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("%s: %d rows", q, n)
		}
	}
	switch how {
	case "delete":
		change(`DELETE FROM governance_journal WHERE seq = $1`, seq)
	case "edit":
		change(`UPDATE governance_journal SET record = replace(record, '"target":"a-w2"', '"target":"a-w1"') WHERE seq = $1 AND instr(record, '"target":"a-w2"') > 0`, seq)
	case "reorder":
		var a, b string
		if err := db.QueryRowContext(bg, `SELECT record FROM governance_journal WHERE seq = $1`, seq).Scan(&a); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRowContext(bg, `SELECT record FROM governance_journal WHERE seq = $1`, seq+1).Scan(&b); err != nil {
			t.Fatal(err)
		}
		change(`UPDATE governance_journal SET record = $1 WHERE seq = $2`, b, seq)
		change(`UPDATE governance_journal SET record = $1 WHERE seq = $2`, a, seq+1)
	}
	db.Close()
	st, err := sqlstore.Open(bg, "sqlite://"+copyPath)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, err = govern.VerifyChain(bg, st.Journal())
	return err
}

// copySQLite copies a closed SQLite database (with its WAL, if any).
func copySQLite(from, to string) error {
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(from + suffix)
		if errors.Is(err, os.ErrNotExist) && suffix != "" {
			continue
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(to+suffix, b, 0o600); err != nil {
			return err
		}
	}
	return nil
}
