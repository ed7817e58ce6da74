package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/workflow"
	"github.com/google/go-cmp/cmp"
)

// storeFlow is one full walk through the built-in store workflow, taken
// one step at a time so that a worker can interleave many flows.
type storeFlow struct {
	i       int
	id      string
	step    int
	p1, p2  string
	q1, q2  int
	email   string
	orderID string
}

const flowSteps = 10

func newStoreFlow(i int) *storeFlow {
	products := []string{"SKU-001", "SKU-002", "SKU-003"}
	seconds := []string{"SKU-005", "SKU-006", "SKU-001"}
	return &storeFlow{i: i, p1: products[i%3], q1: 1 + i%3, p2: seconds[(i/3)%3], q2: 1 + i%2,
		email: fmt.Sprintf("flow-%d@example.com", i)}
}

func (f *storeFlow) cart() map[string]any {
	c := map[string]any{f.p1: float64(f.q1)}
	c[f.p2] = float64(f.q2)
	if f.p1 == f.p2 {
		c[f.p1] = float64(f.q1 + f.q2)
	}
	return c
}

// next runs the flow's next step.
func (f *storeFlow) next(ctx context.Context, c *workflow.Client) error {
	const wf = "store"
	step := f.step
	f.step++
	var r *workflow.ExecuteResponse
	var err error
	wantStage := ""
	switch step {
	case 0:
		ir, err := c.Initialize(ctx, wf)
		if err != nil {
			return fmt.Errorf("initialize: %w", err)
		}
		if ir.InitialStage != "browse" {
			return fmt.Errorf("initialize: initial stage %q", ir.InitialStage)
		}
		f.id = ir.SessionID
		return nil
	case 1:
		r, err = c.Call(ctx, f.id, wf, "search_products", map[string]any{"category": "coffee"})
		wantStage = "browse"
	case 2:
		r, err = c.Transition(ctx, f.id, wf, "cart")
		wantStage = "cart"
	case 3:
		r, err = c.Call(ctx, f.id, wf, "add_to_cart", map[string]any{"product_id": f.p1, "quantity": f.q1})
		wantStage = "cart"
	case 4:
		r, err = c.Call(ctx, f.id, wf, "add_to_cart", map[string]any{"product_id": f.p2, "quantity": f.q2})
		wantStage = "cart"
	case 5:
		r, err = c.SetState(ctx, f.id, wf, map[string]any{"user.email": f.email})
		wantStage = "cart"
	case 6:
		r, err = c.Transition(ctx, f.id, wf, "checkout")
		wantStage = "checkout"
	case 7:
		r, err = c.Call(ctx, f.id, wf, "place_order", map[string]any{"payment_method": "card"})
		wantStage = "checkout"
		if err == nil {
			f.orderID, _ = r.State["order.id"].(string)
		}
	case 8:
		r, err = c.Transition(ctx, f.id, wf, "complete")
		wantStage = "complete"
	case 9:
		s, err := c.Session(ctx, f.id)
		if err != nil {
			return fmt.Errorf("get session: %w", err)
		}
		if s.Stage != "complete" {
			return fmt.Errorf("final stage %q", s.Stage)
		}
		if diff := cmp.Diff(f.cart(), s.State["cart"]); diff != "" {
			return fmt.Errorf("cart (-want +got):\n%s", diff)
		}
		if s.State["user.email"] != f.email || f.orderID == "" || s.State["order.id"] != f.orderID {
			return fmt.Errorf("state %v (order %q)", s.State, f.orderID)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("step %d: %w", step, err)
	}
	if r.SessionID != f.id || r.CurrentStage != wantStage {
		return fmt.Errorf("step %d: session %s at %q, want %s at %q", step, r.SessionID, r.CurrentStage, f.id, wantStage)
	}
	return nil
}

// 200 full store flows interleaved over 16 workers sharing a client of 16
// connections: no failure, every session complete with its own cart.
func TestUAIP_ConcurrentStoreFlows(t *testing.T) {
	for _, tc := range []struct{ name, store string }{{"memory", "memory:"}, {"sqlite", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--data", t.TempDir()}
			if tc.store != "" {
				args = append(args, "--store", tc.store)
			}
			srv := startServer(t, args...)
			const flows, workers = 200, 16
			client := srv.client(httpClient(workers))
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()

			var mu sync.Mutex
			var failures []string
			var wg sync.WaitGroup
			start := time.Now()
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// Each worker advances its flows round-robin, one step
					// at a time, so sessions interleave on every connection.
					var mine []*storeFlow
					for i := w; i < flows; i += workers {
						mine = append(mine, newStoreFlow(i))
					}
					for range flowSteps {
						for _, f := range mine {
							if f.step < 0 {
								continue
							}
							if err := f.next(ctx, client); err != nil {
								mu.Lock()
								failures = append(failures, fmt.Sprintf("flow %d: %v", f.i, err))
								mu.Unlock()
								f.step = -1
							}
						}
					}
				}()
			}
			wg.Wait()
			t.Logf("%d flows (%d requests) over %d workers in %v", flows, flows*flowSteps, workers, time.Since(start).Round(time.Millisecond))
			if len(failures) > 0 {
				t.Errorf("%d of %d flows failed:\n%s", len(failures), flows, strings.Join(failures[:min(len(failures), 10)], "\n"))
			}
			srv.stop(t)
		})
	}
}
