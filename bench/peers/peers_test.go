package peers

import (
	"testing"

	"github.com/agentry-dev/agentry/bench/peers/scenario"
)

// TestPeers runs each runner's turn once and checks that it did the whole
// scenario (scenario.Check), so no runner is measured doing less.
func TestPeers(t *testing.T) { scenario.Test(t, Runners) }

// BenchmarkPeers runs one turn per op for each runner.
func BenchmarkPeers(b *testing.B) { scenario.Bench(b, Runners) }
