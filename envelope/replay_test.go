package envelope_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/envelope/replaytest"
)

func TestUAMP_6_ReplayStoreMemory(t *testing.T) {
	replaytest.Run(t, func(t *testing.T) (envelope.ReplayStore, func() envelope.ReplayStore) {
		return envelope.NewMemoryReplayStore(0), nil
	})
}

func TestUAMP_6_ReplayStoreFile(t *testing.T) {
	replaytest.Run(t, func(t *testing.T) (envelope.ReplayStore, func() envelope.ReplayStore) {
		path := filepath.Join(t.TempDir(), "replay.log")
		open := func() envelope.ReplayStore {
			f, err := envelope.OpenReplayFile(path, 0, time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f
		}
		return open(), open
	})
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestUAMP_6_ReplayWindow: a (from, id) pair is accepted once while its
// ts is within the window, whatever the spelling of the id; a ts beyond
// the window either way is refused (4.01).
func TestUAMP_6_ReplayWindow(t *testing.T) {
	c := &clock{t: time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)}
	w := envelope.NewReplayWindow(&envelope.ReplayOptions{Window: time.Minute, Now: c.Now})
	const id = "urn:uuid:6f1c2a4e-8d3b-4c1a-9e2f-0a1b2c3d4e5f"
	ts := c.Now()
	if err := w.Check(ctx, "did:web:a", id, ts); err != nil {
		t.Fatal(err)
	}
	for _, spelling := range []string{id, "6f1c2a4e-8d3b-4c1a-9e2f-0a1b2c3d4e5f", "URN:UUID:6F1C2A4E-8D3B-4C1A-9E2F-0A1B2C3D4E5F"} {
		err := w.Check(ctx, "did:web:a", spelling, ts)
		wantCode(t, err, envelope.CodeUnauthenticated)
		if !errors.Is(err, envelope.ErrReplayed) {
			t.Errorf("%s: %v is not ErrReplayed", spelling, err)
		}
	}
	if err := w.Check(ctx, "did:web:b", id, ts); err != nil {
		t.Errorf("another sender's id: %v", err)
	}
	// The pair is remembered as long as its ts is acceptable.
	c.Add(time.Minute)
	wantCode(t, w.Check(ctx, "did:web:a", id, ts), envelope.CodeUnauthenticated)
	c.Add(time.Millisecond)
	err := w.Check(ctx, "did:web:a", id, ts)
	wantCode(t, err, envelope.CodeUnauthenticated)
	if errors.Is(err, envelope.ErrReplayed) {
		t.Errorf("too old an envelope is refused for its ts, not as a replay: %v", err)
	}
	now := c.Now()
	wantCode(t, w.Check(ctx, "did:web:a", envelope.NewID(), now.Add(time.Minute+time.Millisecond)), envelope.CodeUnauthenticated)
	if err := w.Check(ctx, "did:web:a", envelope.NewID(), now.Add(time.Minute)); err != nil {
		t.Errorf("ts at the edge of the window: %v", err)
	}
	wantCode(t, w.Check(ctx, "did:web:a", "1111", now), envelope.CodeBadRequest)

	// A full store refuses (5.04, retryable) rather than forget.
	small := envelope.NewReplayWindow(&envelope.ReplayOptions{Store: envelope.NewMemoryReplayStore(2), Now: c.Now})
	for range 2 {
		if err := small.Check(ctx, "did:web:a", envelope.NewID(), now); err != nil {
			t.Fatal(err)
		}
	}
	err = small.Check(ctx, "did:web:a", envelope.NewID(), now)
	wantCode(t, err, envelope.CodeBusy)
	c.Add(envelope.DefaultReplayWindow + time.Second)
	if err := small.Check(ctx, "did:web:a", envelope.NewID(), c.Now()); err != nil {
		t.Errorf("after expiry the store has room: %v", err)
	}
}

// TestUAMP_6_ReplayFileTornTail: a torn last line (a crash during an
// unacknowledged append) is dropped; a corrupt line elsewhere is an error.
func TestUAMP_6_ReplayFileTornTail(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "replay.log")
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	f, err := envelope.OpenReplayFile(path, 0, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Remember(ctx, "did:web:a", "x", now.Add(time.Minute), now); err != nil {
		t.Fatal(err)
	}
	f.Close()
	af, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	af.WriteString(`{"from":"did:web:a","id":"y","ex`)
	af.Close()
	f, err = envelope.OpenReplayFile(path, 0, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Remember(ctx, "did:web:a", "x", now.Add(time.Minute), now); !errors.Is(err, envelope.ErrReplayed) {
		t.Errorf("x forgotten: %v", err)
	}
	if err := f.Remember(ctx, "did:web:a", "y", now.Add(time.Minute), now); err != nil {
		t.Errorf("the torn y: %v", err)
	}
	f.Close()
	// Expired pairs are dropped when the file is opened.
	if f, err = envelope.OpenReplayFile(path, 0, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if b, _ := os.ReadFile(path); len(b) != 0 {
		t.Errorf("expired pairs kept: %q", b)
	}
	os.WriteFile(path, []byte("garbage\n"+`{"from":"a","id":"b","exp":1}`+"\n"), 0o600)
	if _, err := envelope.OpenReplayFile(path, 0, now); err == nil {
		t.Error("a corrupt line is accepted")
	}
}

// The kill -9 test: a child process remembers pairs and acknowledges each
// on stdout once Remember returned; the parent SIGKILLs it while it is
// appending, reopens the file and checks that no acknowledged pair is
// forgotten. Three rounds, each child starting where the last stopped,
// so that every round reopens a file a killed process left.
const (
	replayChildEnv   = "AGENTRY_UAMP_REPLAY_CHILD"
	replayChildStart = "AGENTRY_UAMP_REPLAY_START"
)

func TestUAMP_6_ReplayFileCrashChild(t *testing.T) {
	path := os.Getenv(replayChildEnv)
	if path == "" {
		t.Skip("run by TestUAMP_6_ReplayFileSurvivesKill")
	}
	start, _ := strconv.Atoi(os.Getenv(replayChildStart))
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	f, err := envelope.OpenReplayFile(path, 0, now)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	for i := start; ; i++ {
		if err := f.Remember(context.Background(), "did:web:a", strconv.Itoa(i), now.Add(time.Hour), now); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Println("ack", i)
	}
}

func TestUAMP_6_ReplayFileSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "replay.log")
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var acked []int
	for round, stopAfter := range []int{1, 25, 100} {
		start := 1000 * round
		cmd := exec.Command(os.Args[0], "-test.run=^TestUAMP_6_ReplayFileCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), replayChildEnv+"="+path, replayChildStart+"="+strconv.Itoa(start))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		n := 0
		for n < stopAfter && sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "ack "); ok {
				i, _ := strconv.Atoi(rest)
				acked = append(acked, i)
				n++
			} else if strings.HasPrefix(line, "error") {
				t.Fatalf("child: %s", line)
			}
		}
		cmd.Process.Kill() // SIGKILL: the child is in the middle of appending
		cmd.Wait()
		if n < stopAfter {
			t.Fatalf("round %d: the child acknowledged %d pairs, want %d", round, n, stopAfter)
		}
		f, err := envelope.OpenReplayFile(path, 0, now)
		if err != nil {
			t.Fatalf("round %d: reopening after kill -9: %v", round, err)
		}
		for _, i := range acked {
			if err := f.Remember(ctx, "did:web:a", strconv.Itoa(i), now.Add(time.Hour), now); !errors.Is(err, envelope.ErrReplayed) {
				t.Fatalf("round %d: acknowledged pair %d forgotten after kill -9: %v", round, i, err)
			}
		}
		f.Close()
	}
}
