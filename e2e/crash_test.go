package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/workflow"
)

// acked is what the server acknowledged (HTTP 200) for one session.
type acked struct {
	id      string
	version int64 // 1 for the created session, +1 per acknowledged /execute
	adds    int   // acknowledged add_to_cart calls (quantity 1 each)
	counter int   // last acknowledged value of state key "counter"
}

// SIGKILL during a load of state-changing calls with the SQLite store,
// restart on the same data: every acknowledged change is there and every
// session still works.
func TestUAIP_CrashKeepsAcknowledgedUpdates(t *testing.T) {
	data := t.TempDir()
	srv := startServer(t, "--data", data)
	const workers, opsPerSession = 8, 24
	client := srv.client(httpClient(workers))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var (
		mu       sync.Mutex
		sessions []*acked
		failures []string
		total    atomic.Int64
		killed   atomic.Bool
	)
	fail := func(format string, args ...any) {
		if killed.Load() {
			return // errors after the kill are expected
		}
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; !killed.Load() && ctx.Err() == nil; n++ {
				ir, err := client.Initialize(ctx, "store")
				if err != nil {
					fail("worker %d: initialize: %v", w, err)
					return
				}
				a := &acked{id: ir.SessionID, version: 1}
				mu.Lock()
				sessions = append(sessions, a)
				mu.Unlock()
				if _, err := client.Transition(ctx, a.id, "store", "cart"); err != nil {
					fail("worker %d: transition: %v", w, err)
					return
				}
				mu.Lock()
				a.version++
				mu.Unlock()
				for k := 1; k <= opsPerSession; k++ {
					if k%2 == 1 {
						_, err = client.Call(ctx, a.id, "store", "add_to_cart", map[string]any{"product_id": "SKU-005", "quantity": 1})
					} else {
						_, err = client.SetState(ctx, a.id, "store", map[string]any{"counter": k})
					}
					if err != nil {
						fail("worker %d: session %s op %d: %v", w, a.id, k, err)
						return
					}
					mu.Lock()
					a.version++
					if k%2 == 1 {
						a.adds++
					} else {
						a.counter = k
					}
					mu.Unlock()
					total.Add(1)
				}
			}
		}()
	}
	// Kill once the load is well under way.
	start := time.Now()
	deadline := time.Now().Add(20 * time.Second)
	for total.Load() < 1000 && time.Now().Before(deadline) && len(failures) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	killed.Store(true)
	srv.kill(t)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("failures before the kill:\n%s", strings.Join(failures, "\n"))
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("killed after %d acknowledged updates over %d sessions (%v)", total.Load(), len(sessions), time.Since(start).Round(time.Millisecond))

	srv = startServer(t, "--data", data)
	client = srv.client(httpClient(workers))
	var problems []string
	sort.Slice(sessions, func(i, j int) bool { return sessions[i].id < sessions[j].id })
	for _, a := range sessions {
		s, err := client.Session(ctx, a.id)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s (acknowledged version %d): %v", a.id, a.version, err))
			continue
		}
		// One request per session may have been in flight: it may or may
		// not have been committed.
		var adds float64
		if cart, ok := s.State["cart"].(map[string]any); ok {
			adds, _ = cart["SKU-005"].(float64)
		}
		counter, _ := s.State["counter"].(float64)
		switch {
		case s.Version < a.version || s.Version > a.version+1:
			problems = append(problems, fmt.Sprintf("%s: version %d, acknowledged %d", a.id, s.Version, a.version))
		case int(adds) < a.adds || int(adds) > a.adds+1:
			problems = append(problems, fmt.Sprintf("%s: %v adds in the cart, %d acknowledged", a.id, adds, a.adds))
		case int(counter) < a.counter:
			problems = append(problems, fmt.Sprintf("%s: counter %v, acknowledged %d", a.id, counter, a.counter))
		case a.version >= 2 && s.Stage != "cart":
			problems = append(problems, fmt.Sprintf("%s: stage %q after an acknowledged move to cart", a.id, s.Stage))
		}
		// Every session still works.
		if s.Stage == "cart" {
			if _, err := client.Call(ctx, a.id, "store", "view_cart", nil); err != nil {
				problems = append(problems, fmt.Sprintf("%s: view_cart after restart: %v", a.id, err))
			}
		} else if _, err := client.Transition(ctx, a.id, "store", "cart"); err != nil {
			problems = append(problems, fmt.Sprintf("%s: transition after restart: %v", a.id, err))
		}
	}
	t.Logf("restarted and checked in %v", time.Since(start).Round(time.Millisecond))
	if len(problems) > 0 {
		t.Errorf("%d of %d sessions lost acknowledged updates or broke:\n%s", len(problems), len(sessions), strings.Join(problems, "\n"))
	}
	// A session never acknowledged does not exist.
	if _, err := client.Session(ctx, "00000000-0000-4000-8000-000000000000"); !errors.Is(err, workflow.ErrSessionNotFound) {
		t.Errorf("unknown session: %v", err)
	}
	srv.stop(t)
}
