package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/internal/sqlstore"
	"github.com/agentry-dev/agentry/workflow"
)

func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "agentry")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, "sqlite://"+filepath.Join(dir, "data", "agentry.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()

	checkpoints := st.Checkpoints() // pass as agent.Options.Checkpoints
	if err := checkpoints.Save(ctx, "session-1", agent.Initial().WithMetadata(agent.MetadataAgentID, "triage").WithStep(2)); err != nil {
		panic(err)
	}
	meta, _ := checkpoints.LoadMetadata(ctx, "session-1")
	fmt.Println(st.Driver(), meta.AgentID, meta.Step)
	// Output: sqlite triage 2
}

func ExampleStore_Sessions() {
	dir, _ := os.MkdirTemp("", "agentry")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	st, err := sqlstore.Open(ctx, "sqlite://"+filepath.Join(dir, "agentry.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()

	sessions := st.Sessions() // pass to workflow.NewEngine
	now := time.Now()
	s := &workflow.Session{ID: "session-1", Workflow: "store", Stage: "browse",
		State: map[string]any{"cart": []any{"SKU-001"}}, Version: 1, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
	if err := sessions.Create(ctx, s); err != nil { // durable (fsynced) when it returns
		panic(err)
	}
	next := s.Clone()
	next.Version, next.Stage = 2, "checkout"
	fmt.Println(sessions.Update(ctx, next))
	stale := s.Clone()
	stale.Version = 2
	fmt.Println(errors.Is(sessions.Update(ctx, stale), workflow.ErrConflict))
	got, _ := sessions.Get(ctx, "session-1")
	fmt.Println(got.Stage, got.Version, got.State["cart"])
	// Output:
	// <nil>
	// true
	// checkout 2 [SKU-001]
}
