// Package replaytest is the conformance suite of envelope.ReplayStore
// (UAMP 1.0, uamp.dev §6: replay protection): every
// implementation — in memory, file, database — runs Run.
package replaytest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/envelope"
)

// Open returns a fresh, empty store, and a function that reopens it as
// after a restart (nil when the store does not survive one; the suite
// then skips the durability checks). The suite closes nothing: register
// cleanups with t.
type Open func(t *testing.T) (store envelope.ReplayStore, reopen func() envelope.ReplayStore)

// Run runs the suite against the stores open returns.
func Run(t *testing.T, open Open) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const id = "6f1c2a4e-8d3b-4c1a-9e2f-0a1b2c3d4e5f"

	t.Run("RememberOnce", func(t *testing.T) {
		s, _ := open(t)
		if err := s.Remember(ctx, "did:web:a", id, t0.Add(time.Minute), t0); err != nil {
			t.Fatal(err)
		}
		err := s.Remember(ctx, "did:web:a", id, t0.Add(time.Minute), t0.Add(time.Second))
		if !errors.Is(err, envelope.ErrReplayed) {
			t.Fatalf("second Remember: %v, want ErrReplayed", err)
		}
	})
	t.Run("PairsAreIndependent", func(t *testing.T) {
		s, _ := open(t)
		for _, p := range [][2]string{{"did:web:a", id}, {"did:web:b", id}, {"did:web:a", "00000000-0000-4000-8000-000000000000"}} {
			if err := s.Remember(ctx, p[0], p[1], t0.Add(time.Minute), t0); err != nil {
				t.Fatalf("%v: %v", p, err)
			}
		}
	})
	t.Run("Expiry", func(t *testing.T) {
		s, _ := open(t)
		if err := s.Remember(ctx, "did:web:a", id, t0.Add(time.Minute), t0); err != nil {
			t.Fatal(err)
		}
		if err := s.Remember(ctx, "did:web:a", id, t0.Add(2*time.Minute), t0.Add(time.Minute)); !errors.Is(err, envelope.ErrReplayed) {
			t.Fatalf("at expiry (inclusive): %v", err)
		}
		if err := s.Remember(ctx, "did:web:a", id, t0.Add(2*time.Minute), t0.Add(time.Minute+time.Millisecond)); err != nil {
			t.Fatalf("after expiry: %v", err)
		}
		if err := s.Remember(ctx, "did:web:a", id, t0.Add(3*time.Minute), t0.Add(90*time.Second)); !errors.Is(err, envelope.ErrReplayed) {
			t.Fatalf("the renewed pair is forgotten: %v", err)
		}
	})
	t.Run("Concurrent", func(t *testing.T) {
		s, _ := open(t)
		const n = 16
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.Remember(ctx, "did:web:a", id, t0.Add(time.Minute), t0)
			}()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, envelope.ErrReplayed):
				t.Errorf("unexpected error %v", err)
			}
		}
		if ok != 1 {
			t.Fatalf("%d of %d concurrent Remembers of one pair succeeded", ok, n)
		}
	})
	t.Run("Durable", func(t *testing.T) {
		s, reopen := open(t)
		if reopen == nil {
			t.Skip("the store does not survive a restart")
		}
		for i := range 10 {
			if err := s.Remember(ctx, "did:web:a", fmt.Sprintf("00000000-0000-4000-8000-%012d", i), t0.Add(time.Duration(i+1)*time.Minute), t0); err != nil {
				t.Fatal(err)
			}
		}
		s = reopen()
		for i := range 10 {
			err := s.Remember(ctx, "did:web:a", fmt.Sprintf("00000000-0000-4000-8000-%012d", i), t0.Add(time.Hour), t0.Add(time.Minute/2))
			if !errors.Is(err, envelope.ErrReplayed) {
				t.Errorf("pair %d forgotten across a restart: %v", i, err)
			}
		}
	})
}
