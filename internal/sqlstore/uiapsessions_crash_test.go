package sqlstore

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/uiapsession"
)

// The UIAP session crash test (DESIGN §8), as TestSessionsCrash: a child
// appends events to many stored UIAP sessions at once and prints each
// append the moment it is acknowledged; the parent kills it, reopens the
// database and checks that every acknowledged event is there, each
// session's events contiguous up to its seq. Three children in turn.

const (
	uiapCrashEnvDB    = "AGENTRY_UIAP_SESSIONS_CRASH_DB" // set: run as the child
	uiapCrashSessions = 32
	uiapCrashKeep     = 16
)

func uiapCrashID(i int) string { return fmt.Sprintf("uiap-crash-%02d", i) }

func uiapCrashEvent(seq int64) []byte { return fmt.Appendf(nil, `{"seq":%d,"pad":"%0100d"}`, seq, seq) }

// TestUIAPSessionsCrashChild is the child process of
// TestUIAPSessionsCrash; run directly it does nothing.
func TestUIAPSessionsCrashChild(t *testing.T) {
	url := os.Getenv(uiapCrashEnvDB)
	if url == "" {
		t.Skip("the child process of TestUIAPSessionsCrash")
	}
	st, err := Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	us := st.UIAPSessions()
	var mu sync.Mutex // one line per write(2)
	ack := func(id string, seq int64) {
		mu.Lock()
		defer mu.Unlock()
		if _, err := os.Stdout.WriteString("ack " + id + " " + strconv.FormatInt(seq, 10) + "\n"); err != nil {
			panic(err)
		}
	}
	deadline := time.Now().Add(crashChildMaxRun)
	var wg sync.WaitGroup
	for w := range crashWriters {
		wg.Go(func() {
			ctx := t.Context()
			for i := w; time.Now().Before(deadline); i += crashWriters {
				id := uiapCrashID(i % uiapCrashSessions) // each session has one writer
				cur, err := us.Get(ctx, id, time.Now())
				if errors.Is(err, uiapsession.ErrNotFound) {
					err = us.Create(ctx, &uiapsession.Session{ID: id, State: []byte(`{}`), ExpiresAt: time.Now().Add(time.Hour)})
					if err == nil {
						ack(id, 0)
						continue
					}
				}
				if err != nil {
					t.Error(err)
					return
				}
				seq := cur.Seq + 1
				if err := us.Append(ctx, id, cur.Version, uiapsession.Event{Seq: seq, Data: uiapCrashEvent(seq)}, uiapCrashKeep); err != nil {
					t.Error(err)
					return
				}
				ack(id, seq)
			}
		})
	}
	wg.Wait()
	t.Error("not killed within " + crashChildMaxRun.String())
}

func TestUIAPSessionsCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills child processes")
	}
	url := "sqlite://" + filepath.Join(t.TempDir(), "agentry.db")
	acked := map[string]int64{}
	for round := range 3 {
		n := runKilledChild(t, "TestUIAPSessionsCrashChild", uiapCrashEnvDB, url, 300+rand.IntN(1500), acked)
		st, err := Open(t.Context(), url)
		if err != nil {
			t.Fatalf("round %d: reopen after the kill: %v", round, err)
		}
		us := st.UIAPSessions()
		for i := range uiapCrashSessions {
			id := uiapCrashID(i)
			want, wasAcked := acked[id]
			got, err := us.Get(t.Context(), id, time.Now())
			if errors.Is(err, uiapsession.ErrNotFound) && !wasAcked {
				continue // its Create was never acknowledged
			}
			if err != nil {
				t.Errorf("round %d: Get(%s) (acknowledged seq %d): %v", round, id, want, err)
				continue
			}
			if got.Seq < want {
				t.Errorf("round %d: %s at seq %d, but seq %d was acknowledged", round, id, got.Seq, want)
			}
			evs, err := us.Events(t.Context(), id, 0)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(evs)) < min(got.Seq, uiapCrashKeep) {
				t.Errorf("round %d: %s at seq %d keeps %d events", round, id, got.Seq, len(evs))
			}
			for j, ev := range evs {
				if wantSeq := got.Seq - int64(len(evs)-1-j); ev.Seq != wantSeq || string(ev.Data) != string(uiapCrashEvent(wantSeq)) {
					t.Errorf("round %d: %s event %d is %d %s; want %d, contiguous up to %d", round, id, j, ev.Seq, ev.Data, wantSeq, got.Seq)
					break
				}
			}
			acked[id] = got.Seq
		}
		st.Close()
		t.Logf("round %d: killed after %d acknowledged writes", round, n)
		if t.Failed() {
			return
		}
	}
}
