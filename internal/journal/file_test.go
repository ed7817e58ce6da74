package journal_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/journaltest"
	"github.com/agentry-dev/agentry/internal/journal"
	"github.com/agentry-dev/agentry/internal/journalfixture"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

func openT(t *testing.T, path string, opts journal.Options) *journal.File {
	t.Helper()
	f, err := journal.Open(path, &opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestFileJournal(t *testing.T) {
	journaltest.RunDurable(t, func(t *testing.T) (govern.Journal, journaltest.Opener) {
		path := filepath.Join(t.TempDir(), "journal.jsonl")
		return openT(t, path, journal.Options{}), func(t *testing.T) govern.Journal { return openT(t, path, journal.Options{}) }
	})
}

// appendN appends n records of request reqID, one per Append.
func appendN(t *testing.T, j govern.Journal, reqID string, n int) []*govern.Record {
	t.Helper()
	out := make([]*govern.Record, n)
	for i := range out {
		out[i] = journalfixture.Record(recordkind.Transition, reqID, fmt.Sprintf(`{"i":%d}`, i))
		if err := j.Append(t.Context(), i%2 == 0, out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestLockedInThisProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	f := openT(t, path, journal.Options{})
	if _, err := journal.Open(path, &journal.Options{}); !errors.Is(err, journal.ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	// A reader needs no lock.
	ro := openT(t, path, journal.Options{ReadOnly: true})
	if err := ro.Append(t.Context(), true, journalfixture.Record(recordkind.Transition, "r", "")); !errors.Is(err, journal.ErrReadOnly) {
		t.Errorf("Append on a read-only journal = %v, want ErrReadOnly", err)
	}
	if err := ro.Flush(t.Context()); !errors.Is(err, journal.ErrReadOnly) {
		t.Errorf("Flush on a read-only journal = %v, want ErrReadOnly", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	openT(t, path, journal.Options{}) // the lock went with Close
}

const lockEnvPath = "AGENTRY_JOURNAL_LOCK_CHILD"

// TestLockChild is the child process of TestLockedInAnotherProcess.
func TestLockChild(t *testing.T) {
	path := os.Getenv(lockEnvPath)
	if path == "" {
		t.Skip("the child process of TestLockedInAnotherProcess")
	}
	f, err := journal.Open(path, &journal.Options{})
	switch {
	case errors.Is(err, journal.ErrLocked):
		fmt.Println("LOCKED")
	case err != nil:
		fmt.Println("ERROR", err)
	default:
		fmt.Println("OPENED", f.Len())
		f.Close()
	}
}

func TestLockedInAnotherProcess(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("no flock")
	}
	path := filepath.Join(t.TempDir(), "j.jsonl")
	f := openT(t, path, journal.Options{})
	appendN(t, f, "r", 3)
	child := func() string {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLockChild$")
		cmd.Env = append(os.Environ(), lockEnvPath+"="+path)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child: %v\n%s", err, out)
		}
		return string(out)
	}
	if out := child(); !strings.HasPrefix(out, "LOCKED") {
		t.Fatalf("another process opened a locked journal: %s", out)
	}
	f.Close()
	if out := child(); !strings.HasPrefix(out, "OPENED 3") {
		t.Fatalf("after Close, the other process: %s", out)
	}
}

// writeFile writes a journal file of n records and returns its bytes
// and the records.
func writeFile(t *testing.T, path string, n int) ([]byte, []*govern.Record) {
	t.Helper()
	f, err := journal.Open(path, &journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	recs := appendN(t, f, "r", n)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b, recs
}

func TestTornTail(t *testing.T) {
	dir := t.TempDir()
	good, _ := writeFile(t, filepath.Join(dir, "good.jsonl"), 5)
	lines := bytes.SplitAfter(good, []byte("\n"))
	partial := lines[4][:len(lines[4])/2] // a record half written
	for name, tc := range map[string]struct {
		tail    []byte
		records uint64
	}{
		"half a line":           {partial, 5},
		"line without newline":  {bytes.TrimSuffix(lines[0], []byte("\n")), 5},
		"NUL run":               {make([]byte, 4096), 5},
		"half a line then NULs": {append(slices.Clone(partial), make([]byte, 100)...), 5},
		"NULs then half a line": {append(make([]byte, 100), partial...), 5},
		"a single byte":         {[]byte("{"), 5},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.jsonl")
			content := append(slices.Clone(good), tc.tail...)
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			// Read-only: reported, left in place.
			ro := openT(t, path, journal.Options{ReadOnly: true})
			if ro.TornBytes() != int64(len(tc.tail)) || ro.Len() != tc.records {
				t.Errorf("read-only: TornBytes %d, %d records; want %d, %d", ro.TornBytes(), ro.Len(), len(tc.tail), tc.records)
			}
			if n, err := govern.VerifyChain(t.Context(), ro); err != nil || n != tc.records {
				t.Errorf("read-only VerifyChain = %d, %v", n, err)
			}
			ro.Close()
			if b, _ := os.ReadFile(path); !bytes.Equal(b, content) {
				t.Fatal("a read-only Open changed the file")
			}
			// Writable: cut.
			f := openT(t, path, journal.Options{})
			if f.TornBytes() != int64(len(tc.tail)) {
				t.Errorf("TornBytes = %d, want %d", f.TornBytes(), len(tc.tail))
			}
			if b, _ := os.ReadFile(path); !bytes.Equal(b, good) {
				t.Fatalf("after Open the file holds %d bytes, want the %d of its complete lines", len(b), len(good))
			}
			next := journalfixture.Record(recordkind.Transition, "r", "")
			if err := f.Append(t.Context(), true, next); err != nil || next.Seq != tc.records+1 {
				t.Fatalf("append after the cut: seq %d, %v", next.Seq, err)
			}
			f.Close()
			f = openT(t, path, journal.Options{})
			if f.TornBytes() != 0 || f.Len() != tc.records+1 {
				t.Errorf("reopened: TornBytes %d, %d records", f.TornBytes(), f.Len())
			}
		})
	}
	t.Run("only a torn line", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "j.jsonl")
		os.WriteFile(path, partial, 0o600)
		f := openT(t, path, journal.Options{})
		if f.TornBytes() != int64(len(partial)) || f.Len() != 0 {
			t.Errorf("TornBytes %d, %d records", f.TornBytes(), f.Len())
		}
	})
}

// chainErrorAt checks that err is a *govern.ChainError at seq.
func chainErrorAt(t *testing.T, what string, err error, seq uint64) {
	t.Helper()
	var ce *govern.ChainError
	if !errors.As(err, &ce) || !errors.Is(err, govern.ErrChainBroken) {
		t.Errorf("%s: error %v, want a *govern.ChainError", what, err)
		return
	}
	if ce.Seq != seq {
		t.Errorf("%s: chain broken at %d (%s), want %d", what, ce.Seq, ce.Reason, seq)
	}
}

// checkTampered checks that a tampered file fails Open at seq, and that
// a read-only Open reports the same through VerifyChain.
func checkTampered(t *testing.T, what, path string, seq uint64) {
	t.Helper()
	if f, err := journal.Open(path, &journal.Options{}); err == nil {
		f.Close()
		t.Errorf("%s: Open succeeded", what)
	} else {
		chainErrorAt(t, what+": Open", err, seq)
	}
	ro, err := journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("%s: read-only Open: %v", what, err)
	}
	defer ro.Close()
	_, err = govern.VerifyChain(t.Context(), ro)
	chainErrorAt(t, what+": VerifyChain", err, seq)
}

// Tamper runs edit on the lines of a good journal file of n records and
// checks the result breaks at seq.
func tamper(t *testing.T, good []byte, what string, seq uint64, edit func(lines [][]byte) [][]byte) {
	t.Helper()
	lines := bytes.SplitAfter(good, []byte("\n"))
	lines = lines[:len(lines)-1] // the empty string after the last '\n'
	for i := range lines {
		lines[i] = slices.Clone(lines[i])
	}
	path := filepath.Join(t.TempDir(), "tampered.jsonl")
	if err := os.WriteFile(path, bytes.Join(edit(lines), nil), 0o600); err != nil {
		t.Fatal(err)
	}
	checkTampered(t, what, path, seq)
}

func TestTamperDetected(t *testing.T) {
	good, recs := writeFile(t, filepath.Join(t.TempDir(), "good.jsonl"), 10)
	forge := func(r govern.Record) []byte {
		b, err := journal.AppendRecord(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tamper(t, good, "delete record 4", 5, func(l [][]byte) [][]byte { return slices.Delete(l, 3, 4) })
	tamper(t, good, "delete record 1", 2, func(l [][]byte) [][]byte { return l[1:] })
	tamper(t, good, "edit record 6's outcome", 6, func(l [][]byte) [][]byte {
		l[5] = bytes.Replace(l[5], []byte(`"outcome":"pending"`), []byte(`"outcome":"success"`), 1)
		return l
	})
	tamper(t, good, "edit record 3's data", 3, func(l [][]byte) [][]byte {
		l[2] = bytes.Replace(l[2], []byte(`{"i":2}`), []byte(`{"i":7}`), 1)
		return l
	})
	tamper(t, good, "swap records 7 and 8", 8, func(l [][]byte) [][]byte { l[6], l[7] = l[7], l[6]; return l })
	tamper(t, good, "duplicate record 2", 2, func(l [][]byte) [][]byte { return slices.Insert(l, 2, l[1]) })
	tamper(t, good, "forged record appended (hash copied)", 11, func(l [][]byte) [][]byte {
		r := *recs[9]
		r.Seq, r.Prev = 11, recs[9].Hash
		return append(l, forge(r))
	})
	tamper(t, good, "forged record appended (wrong prev)", 11, func(l [][]byte) [][]byte {
		r := *recs[9]
		r.Seq, r.Prev = 11, recs[8].Hash
		r.Hash, _ = r.ComputeHash()
		return append(l, forge(r))
	})
	tamper(t, good, "record 9 replaced with a rehashed forgery", 10, func(l [][]byte) [][]byte {
		r := *recs[8]
		r.Outcome = govern.Success
		r.Hash, _ = r.ComputeHash() // consistent itself, but record 10's prev names the original
		l[8] = forge(r)
		return l
	})
	tamper(t, good, "a line that is not a record", 4, func(l [][]byte) [][]byte {
		l[3] = []byte("{\"seq\":4}\n")
		return l
	})
	tamper(t, good, "an unknown member", 2, func(l [][]byte) [][]byte {
		l[1] = bytes.Replace(l[1], []byte(`{"seq"`), []byte(`{"extra":1,"seq"`), 1)
		return l
	})
	tamper(t, good, "a member twice", 5, func(l [][]byte) [][]byte {
		l[4] = bytes.Replace(l[4], []byte(`{"seq"`), []byte(`{"outcome":"success","seq"`), 1)
		return l
	})
	tamper(t, good, "NULs before a complete line", 10, func(l [][]byte) [][]byte {
		l[9] = append(make([]byte, 8), l[9]...)
		return l
	})
}

// TestTamperDetectedFirst: in a journal longer than what Open reads at
// once, the first broken record is the one reported, whatever follows it
// (a later broken record, a line too long to read).
func TestTamperDetectedFirst(t *testing.T) {
	good, _ := writeFile(t, filepath.Join(t.TempDir(), "good.jsonl"), 700)
	outcome := func(l [][]byte, i int) {
		l[i] = bytes.Replace(l[i], []byte(`"outcome":"pending"`), []byte(`"outcome":"success"`), 1)
	}
	long := append(bytes.Repeat([]byte("x"), journal.MaxRecordSize+1), '\n')
	tamper(t, good, "records 300 and 600 edited", 300, func(l [][]byte) [][]byte {
		outcome(l, 299)
		outcome(l, 599)
		return l
	})
	tamper(t, good, "record 300 edited, line 500 too long", 300, func(l [][]byte) [][]byte {
		outcome(l, 299)
		l[499] = long
		return l
	})
	tamper(t, good, "line 300 too long, record 500 edited", 300, func(l [][]byte) [][]byte {
		l[299] = long
		outcome(l, 499)
		return l
	})
	tamper(t, good, "line 129 not a record, record 600 edited", 129, func(l [][]byte) [][]byte {
		l[128] = []byte("{}\n")
		outcome(l, 599)
		return l
	})
}

// A journal being written, read by a read-only Open: whatever it holds at
// that moment verifies, a line being written is a torn tail.
func TestReadOnlyOnLiveJournal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	f := openT(t, path, journal.Options{})
	appendN(t, f, "r", 20)
	ro := openT(t, path, journal.Options{ReadOnly: true})
	appendN(t, f, "r", 5)
	if n, err := govern.VerifyChain(t.Context(), ro); err != nil || n != 20 {
		t.Errorf("read-only snapshot: %d records, %v", n, err)
	}
	recs, err := ro.RunRecords(t.Context(), "r")
	if err != nil || len(recs) != 20 {
		t.Errorf("read-only RunRecords: %d, %v", len(recs), err)
	}
}

// The file changed under a writable journal: Records reports it.
func TestChangedUnderneath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	f := openT(t, path, journal.Options{})
	appendN(t, f, "r", 3)
	b, _ := os.ReadFile(path)
	b = bytes.Replace(b, []byte(`"seq":2`), []byte(`"seq":7`), 1)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := govern.VerifyChain(t.Context(), f)
	chainErrorAt(t, "VerifyChain", err, 2)
}

// TestGroupCommit: synced appends that arrive while an fsync runs share
// the next one. The first fsync is held (in the fault hook) until the
// other appenders have written; then exactly one more fsync covers them
// all.
func TestGroupCommit(t *testing.T) {
	const followers = 15
	var (
		mu      sync.Mutex
		syncs   int
		written int
	)
	release := make(chan struct{})
	allWritten := make(chan struct{})
	hook := func(p string) {
		mu.Lock()
		switch p {
		case journal.PointWritten:
			if written++; written == followers+1 {
				close(allWritten)
			}
		case journal.PointSynced:
			syncs++
			if syncs == 1 {
				mu.Unlock()
				<-release
				return
			}
		}
		mu.Unlock()
	}
	f := openT(t, filepath.Join(t.TempDir(), "j.jsonl"), journal.Options{FaultHook: hook, FlushInterval: -1})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := f.Append(t.Context(), true, journalfixture.Record(recordkind.Intent, "leader", `{}`)); err != nil {
			t.Error(err)
		}
	})
	// Wait for the leader's fsync to be under way before the others.
	for {
		mu.Lock()
		s := syncs
		mu.Unlock()
		if s == 1 {
			break
		}
		runtime.Gosched()
	}
	for i := range followers {
		wg.Go(func() {
			if err := f.Append(t.Context(), true, journalfixture.Record(recordkind.Intent, fmt.Sprint("f", i), `{}`)); err != nil {
				t.Error(err)
			}
		})
	}
	<-allWritten
	close(release)
	wg.Wait()
	if syncs != 2 {
		t.Errorf("%d fsyncs for %d synced appends, want 2 (the held one and one shared by the %d that waited)", syncs, followers+1, followers)
	}
	if n, err := govern.VerifyChain(t.Context(), f); err != nil || n != followers+1 {
		t.Errorf("VerifyChain = %d, %v", n, err)
	}
}

func TestFlushAndBackgroundFlush(t *testing.T) {
	synced := make(chan struct{}, 100)
	hook := func(p string) {
		if p == journal.PointSynced {
			synced <- struct{}{}
		}
	}
	f := openT(t, filepath.Join(t.TempDir(), "j.jsonl"), journal.Options{FaultHook: hook, FlushInterval: -1})
	if err := f.Append(t.Context(), false, journalfixture.Record(recordkind.Transition, "r", "")); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 0 {
		t.Fatal("an append without sync fsynced")
	}
	if err := f.Flush(t.Context()); err != nil || len(synced) != 1 {
		t.Fatalf("Flush: %v, %d fsyncs", err, len(synced))
	}
	if err := f.Flush(t.Context()); err != nil || len(synced) != 1 {
		t.Fatalf("Flush with nothing new: %v, %d fsyncs; want no fsync", err, len(synced))
	}
	f.Close()

	synced = make(chan struct{}, 100)
	f = openT(t, filepath.Join(t.TempDir(), "j.jsonl"), journal.Options{FaultHook: hook, FlushInterval: time.Millisecond})
	if err := f.Append(t.Context(), false, journalfixture.Record(recordkind.Transition, "r", "")); err != nil {
		t.Fatal(err)
	}
	<-synced // the background flush came (without it, the test times out)
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := journal.Open(filepath.Join(dir, "missing.jsonl"), &journal.Options{ReadOnly: true}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read-only Open of a missing file = %v, want ErrNotExist", err)
	}
	if _, err := journal.Open(dir, &journal.Options{}); err == nil {
		t.Error("Open of a directory succeeded")
	}
	// A new journal is created with its directories, owner-only.
	path := filepath.Join(dir, "a", "b", "j.jsonl")
	f := openT(t, path, journal.Options{})
	fi, err := os.Stat(path)
	if err != nil || (runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600) {
		t.Errorf("created journal: %v, mode %v", err, fi.Mode())
	}
	if f.Path() != path {
		t.Errorf("Path() = %q", f.Path())
	}
}
