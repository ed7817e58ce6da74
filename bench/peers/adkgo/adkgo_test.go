package adkgo

import (
	"testing"

	"github.com/agentry-dev/agentry/bench/peers/scenario"
)

var runners = []scenario.Runner{
	{Name: "adk-go", What: "Google ADK Go llmagent via runner.Runner (in-memory session), functiontool.New", New: newADKGo},
}

// TestPeers runs the runner's turn once and checks that it did the whole
// scenario (scenario.Check).
func TestPeers(t *testing.T) { scenario.Test(t, runners) }

// BenchmarkPeers runs one turn per op.
func BenchmarkPeers(b *testing.B) { scenario.Bench(b, runners) }
