package journal_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/journal"
)

// A governor journaling into a file; after a restart, the journal is
// reopened, its chain verified, and the runs a crash left open are
// recovered.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "journal")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "journal.jsonl")
	ctx := context.Background()

	j, err := journal.Open(path, &journal.Options{})
	if err != nil {
		panic(err)
	}
	g, _ := govern.New(ctx, &govern.Options{Journal: j, Node: "node-1"})
	id := govern.Identity{AgentID: "agent:a", OwnerID: "org:x", ControlClass: govern.HumanSupervised}
	run, _ := g.Start(ctx, &govern.RunOptions{Identity: id})
	inv, _ := run.Invoke(ctx, govern.ToolSpec{Name: "lookup", Tier: govern.ReadOnly}, govern.Call{ID: "c1"},
		func(ctx context.Context) (any, error) { return "4 °C", nil })
	fmt.Println("tool said", inv.Result)
	j.Close() // the process stops here, the run still open

	j, err = journal.Open(path, &journal.Options{})
	if err != nil {
		panic(err)
	}
	defer j.Close()
	n, err := govern.VerifyChain(ctx, j)
	fmt.Println(n, "records, chain ok:", err == nil)
	g, _ = govern.New(ctx, &govern.Options{Journal: j, Node: "node-1"})
	rep, _ := g.Recover(ctx)
	fmt.Println("recovered", len(rep.Closed), "run(s)")
	// Output:
	// tool said 4 °C
	// 4 records, chain ok: true
	// recovered 1 run(s)
}
