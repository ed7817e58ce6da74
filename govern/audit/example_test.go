package audit_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/audit"
	"github.com/agentry-dev/agentry/internal/journal"
)

// An exporter copying a governor's journal to a JSONL audit file in the
// background, its position persisted so that a restart neither loses nor
// repeats records.
func ExampleExporter() {
	dir, _ := os.MkdirTemp("", "audit")
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithCancel(context.Background())

	j, _ := journal.Open(filepath.Join(dir, "journal.jsonl"), &journal.Options{})
	defer j.Close()
	sink := audit.JSONLFile(filepath.Join(dir, "audit.jsonl"))
	defer sink.Close()
	ex := audit.NewExporter(j, sink, &audit.Options{
		Cursor:       audit.FileCursor(filepath.Join(dir, "audit.cursor")),
		PollInterval: 10 * time.Millisecond,
		Logger:       slog.New(slog.DiscardHandler),
	})
	done := make(chan error)
	go func() { done <- ex.Run(ctx) }()

	g, _ := govern.New(ctx, &govern.Options{Journal: j})
	id := govern.Identity{AgentID: "agent:a", OwnerID: "org:x", ControlClass: govern.HumanSupervised}
	d, _ := g.Execute(ctx, &govern.RunOptions{Identity: id}, func(ctx context.Context, run *govern.Run, _ *govern.Verdict) (any, error) {
		return "done", nil
	})
	fmt.Println("run delivered:", d.Run.Phase())

	for ex.Exported() < 6 { // run_started, plan, execute, verify, a report, deliver
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	exported, _ := journal.Open(filepath.Join(dir, "audit.jsonl"), &journal.Options{ReadOnly: true})
	defer exported.Close()
	n, err := govern.VerifyChain(context.Background(), exported)
	fmt.Println(n, "records exported, chain ok:", err == nil)
	// Output:
	// run delivered: deliver
	// 6 records exported, chain ok: true
}
