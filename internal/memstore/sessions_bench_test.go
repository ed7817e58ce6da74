package memstore_test

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/internal/memstore"
	"github.com/agentry-dev/agentry/workflow"
)

// typicalState is the state of a session a few actions into the shop
// workflow: about 300 bytes of JSON.
func typicalState(i int) map[string]any {
	return map[string]any{
		"user.email": fmt.Sprintf("user%d@example.com", i),
		"cart": []any{
			map[string]any{"product_id": "SKU-001", "quantity": 2.0, "price": 19.99},
			map[string]any{"product_id": "SKU-042", "quantity": 1.0, "price": 5.5},
		},
		"cart_total": 45.48,
		"shipping":   map[string]any{"method": "standard", "country": "DE", "postcode": "10115"},
		"step":       float64(i % 7),
	}
}

func newBenchSession(i int) *workflow.Session {
	now := time.Now().UTC()
	return &workflow.Session{ID: ids.New(), Workflow: "shop", Stage: "cart", State: typicalState(i),
		Version: 1, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(24 * time.Hour)}
}

// BenchmarkSessionsUpdateParallel measures Updates (version after
// version) from c concurrent writers, each on its own session, and reports
// updates/s: alone ("update") and with the Get before it that the engine
// does for every action ("get+update").
func BenchmarkSessionsUpdateParallel(b *testing.B) {
	for _, c := range []int{1, 16} {
		for _, withGet := range []bool{false, true} {
			name := fmt.Sprintf("c=%d/update", c)
			if withGet {
				name = fmt.Sprintf("c=%d/get+update", c)
			}
			b.Run(name, func(b *testing.B) { benchUpdates(b, c, withGet) })
		}
	}
}

func benchUpdates(b *testing.B, c int, withGet bool) {
	st := memstore.New().Sessions()
	sess := make([]*workflow.Session, c)
	for i := range sess {
		sess[i] = newBenchSession(i)
		if err := st.Create(b.Context(), sess[i]); err != nil {
			b.Fatal(err)
		}
	}
	var n atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range c {
		wg.Go(func() {
			ctx, cur := b.Context(), sess[w]
			for n.Add(1) <= int64(b.N) {
				if withGet {
					var err error
					if cur, err = st.Get(ctx, cur.ID); err != nil {
						b.Error(err)
						return
					}
				}
				next := cur.Clone()
				next.Version++
				next.UpdatedAt = time.Now()
				next.State["step"] = float64(next.Version)
				if err := st.Update(ctx, next); err != nil {
					b.Error(err)
					return
				}
				cur = next
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "updates/s")
}

// BenchmarkSessionsMemory reports the heap one stored session of the
// typical state takes, over 10,000 sessions.
func BenchmarkSessionsMemory(b *testing.B) {
	const n = 10000
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		st := memstore.New().Sessions()
		for i := range n {
			if err := st.Create(b.Context(), newBenchSession(i)); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/session")
		runtime.KeepAlive(st)
	}
}
