package uicontrol_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/uicontrol"
)

// TestSlowHandlersDoNotStallTheConnection: the goroutine that reads a
// request runs its handler, so the reading must go on elsewhere while a
// handler works. With several handlers blocked at once (more than the
// connection keeps spare goroutines for), other requests on the same
// session are still answered, and once the slow handlers finish each
// gets its own reply and the session goes on working.
func TestSlowHandlersDoNotStallTheConnection(t *testing.T) {
	for _, binding := range []string{"pair", "ws"} {
		t.Run(binding, func(t *testing.T) {
			release := make(chan struct{})
			var entered sync.WaitGroup
			app := uicontrol.NewApp(&uicontrol.AppOptions{Logger: discard})
			t.Cleanup(func() { _ = app.Close() })
			app.Handle("x.test.slow", func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.Envelope) (*uicontrol.Reply, error) {
				entered.Done()
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return &uicontrol.Reply{Type: "x.test.slowed", Payload: req.Payload}, nil
			})
			app.Handle("x.test.fast", func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.Envelope) (*uicontrol.Reply, error) {
				return &uicontrol.Reply{Type: "x.test.fasted", Payload: req.Payload}, nil
			})
			var tr uicontrol.Transport
			switch binding {
			case "pair":
				appEnd, agentEnd := uicontrol.Pair()
				go func() { _ = app.Serve(context.Background(), appEnd) }()
				tr = agentEnd
			case "ws":
				srv := httptest.NewServer(uicontrol.NewWSHandler(app.Serve, &uicontrol.WSOptions{Logger: discard}))
				t.Cleanup(srv.Close)
				var err error
				if tr, err = uicontrol.DialWS(t.Context(), "ws"+strings.TrimPrefix(srv.URL, "http"), nil); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			a, err := uicontrol.Connect(ctx, tr, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = a.Close() })

			const slow = 5 // more than the spare goroutines a connection keeps
			entered.Add(slow)
			results := make(chan error, slow)
			for i := range slow {
				go func() {
					r, err := a.Call(ctx, &uicontrol.Request{Type: "x.test.slow", Payload: map[string]any{"n": i}})
					if err == nil && (r.Type != "x.test.slowed" || string(r.Payload) != fmt.Sprintf(`{"n":%d}`, i)) {
						err = fmt.Errorf("slow call %d answered with %s %s", i, r.Type, r.Payload)
					}
					results <- err
				}()
			}
			waitOrFail(t, ctx, &entered, "every slow handler to start (is the reading stalled behind the first?)")
			for i := range 3 {
				r, err := a.Call(ctx, &uicontrol.Request{Type: "x.test.fast", Payload: map[string]any{"i": i}})
				if err != nil {
					t.Fatalf("fast call %d while %d handlers are blocked: %v", i, slow, err)
				}
				if want := fmt.Sprintf(`{"i":%d}`, i); r.Type != "x.test.fasted" || string(r.Payload) != want {
					t.Fatalf("fast call %d answered with %s %s, want x.test.fasted %s", i, r.Type, r.Payload, want)
				}
			}
			close(release)
			for range slow {
				if err := <-results; err != nil {
					t.Fatal(err)
				}
			}
			// The connection still works after the goroutines that ran the
			// slow handlers went back to being spares (or exited).
			for i := range 20 {
				if _, err := a.Call(ctx, &uicontrol.Request{Type: "x.test.fast", Payload: map[string]any{"i": i}}); err != nil {
					t.Fatalf("call %d after the slow handlers: %v", i, err)
				}
			}
		})
	}
}

// waitOrFail waits for wg, failing the test when ctx ends first.
func waitOrFail(t *testing.T, ctx context.Context, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("waiting for %s: %v", what, ctx.Err())
	}
}
