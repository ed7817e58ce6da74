package sqlstore

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/workflow"
)

// The session crash test (DESIGN §7): a child process — this test binary
// again — runs many concurrent Updates against a SQLite store and prints
// each one the moment Update acknowledges it; the parent kills it
// (SIGKILL, mid-load, mid-fsync as often as not), reopens the database,
// and checks that every acknowledged version is there and every session
// reads back whole. Three children in turn, each continuing from what the
// previous one left.

const (
	crashEnvDB       = "AGENTRY_SESSIONS_CRASH_DB" // set: run as the child
	crashSessions    = 64
	crashWriters     = 16
	crashChildMaxRun = 60 * time.Second
)

func crashID(i int) string { return fmt.Sprintf("crash-%02d", i) }

// crashState is the state stored at a version: it names the version, so
// that a row whose state and version columns disagree is caught.
func crashState(id string, version int64) map[string]any {
	return map[string]any{"session": id, "version": float64(version), "pad": strings.Repeat("ß", 100),
		"nested": map[string]any{"list": []any{float64(version), "x", true}}}
}

// TestSessionsCrashChild is the child process of TestSessionsCrash; run
// directly it does nothing.
func TestSessionsCrashChild(t *testing.T) {
	url := os.Getenv(crashEnvDB)
	if url == "" {
		t.Skip("the child process of TestSessionsCrash")
	}
	st, err := Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	ss := st.Sessions()
	var mu sync.Mutex // one line per write(2): the parent reads whole lines
	ack := func(id string, version int64) {
		mu.Lock()
		defer mu.Unlock()
		if _, err := os.Stdout.WriteString("ack " + id + " " + strconv.FormatInt(version, 10) + "\n"); err != nil {
			panic(err)
		}
	}
	deadline := time.Now().Add(crashChildMaxRun)
	var wg sync.WaitGroup
	for w := range crashWriters {
		wg.Go(func() {
			ctx := t.Context()
			for i := w; time.Now().Before(deadline); i += crashWriters {
				id := crashID(i % crashSessions)
				cur, err := ss.Get(ctx, id)
				if errors.Is(err, workflow.ErrSessionNotFound) {
					now := time.Now()
					err = ss.Create(ctx, &workflow.Session{ID: id, Workflow: "crash", Stage: "s", State: crashState(id, 1),
						Version: 1, CreatedAt: now, UpdatedAt: now})
					if err == nil {
						ack(id, 1)
					}
					if err != nil {
						t.Error(err)
						return
					}
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				next := cur.Clone()
				next.Version++
				next.Stage = "s" + strconv.FormatInt(next.Version, 10)
				next.UpdatedAt = time.Now()
				next.State = crashState(id, next.Version)
				if err := ss.Update(ctx, next); err != nil {
					t.Error(err) // each session has one writer: no conflict
					return
				}
				ack(id, next.Version)
			}
		})
	}
	wg.Wait()
	t.Error("not killed within " + crashChildMaxRun.String())
}

func TestSessionsCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills child processes")
	}
	url := "sqlite://" + filepath.Join(t.TempDir(), "agentry.db")
	acked := map[string]int64{}
	for round := range 3 {
		killAfter := 300 + rand.IntN(1500)
		n := runCrashChild(t, url, killAfter, acked)
		st, err := Open(t.Context(), url)
		if err != nil {
			t.Fatalf("round %d: reopen after the kill: %v", round, err)
		}
		var integrity string
		if err := st.db.QueryRowContext(t.Context(), `PRAGMA integrity_check`).Scan(&integrity); err != nil || integrity != "ok" {
			t.Errorf("round %d: integrity_check = %q, %v", round, integrity, err)
		}
		ss := st.Sessions()
		ahead := 0
		for i := range crashSessions {
			id := crashID(i)
			want, wasAcked := acked[id]
			got, err := ss.Get(t.Context(), id)
			if errors.Is(err, workflow.ErrSessionNotFound) && !wasAcked {
				continue // its Create was never acknowledged
			}
			if err != nil {
				t.Errorf("round %d: Get(%s) (acknowledged version %d): %v", round, id, want, err)
				continue
			}
			if got.Version < want {
				t.Errorf("round %d: %s at version %d, but version %d was acknowledged", round, id, got.Version, want)
			}
			if got.Version > want {
				ahead++ // committed, killed before it was acknowledged
			}
			if got.State["version"] != float64(got.Version) || got.State["session"] != id ||
				got.Stage != "s" && got.Stage != "s"+strconv.FormatInt(got.Version, 10) {
				t.Errorf("round %d: %s at version %d holds stage %q and state %v", round, id, got.Version, got.Stage, got.State)
			}
			acked[id] = got.Version // the next child continues from here
		}
		st.Close()
		t.Logf("round %d: killed after %d acknowledged writes; %d sessions committed a version beyond the last acknowledged", round, n, ahead)
		if t.Failed() {
			return
		}
	}
}

// runCrashChild runs a child on the database, kills it after killAfter
// acknowledged writes, and records in acked the highest version
// acknowledged per session. It returns how many writes were acknowledged.
func runCrashChild(t *testing.T, url string, killAfter int, acked map[string]int64) int {
	t.Helper()
	return runKilledChild(t, "TestSessionsCrashChild", crashEnvDB, url, killAfter, acked)
}

// runKilledChild is runCrashChild for the child test named child, which
// reads the database's URL from the environment variable env and prints
// "ack ID N" lines.
func runKilledChild(t *testing.T, child, env, url string, killAfter int, acked map[string]int64) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$")
	cmd.Env = append(os.Environ(), env+"="+url)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(stdout)
	n, killed := 0, false
	timeout := time.AfterFunc(crashChildMaxRun, func() { cmd.Process.Kill() })
	defer timeout.Stop()
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			break // a last line without its newline was cut by the kill: not acknowledged to us
		}
		if err != nil {
			t.Fatal(err)
		}
		var id string
		var v int64
		if _, err := fmt.Sscanf(line, "ack %s %d\n", &id, &v); err != nil {
			t.Fatalf("child wrote %q", line)
		}
		acked[id] = max(acked[id], v)
		if n++; n == killAfter {
			// A random pause, so that the kill lands anywhere in a batch.
			time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	err = cmd.Wait()
	if !killed {
		t.Fatalf("child exited after %d acknowledged writes, before it was killed: %v\n%s", n, err, stderr.String())
	}
	return n
}
