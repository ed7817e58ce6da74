package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/internal/memstore"
	"github.com/agentry-dev/agentry/workflow"
)

func ExampleStore_Checkpoints() {
	ctx := context.Background()
	checkpoints := memstore.New().Checkpoints()
	checkpoints.Save(ctx, "session-1", agent.Initial().WithStep(3))
	meta, _ := checkpoints.LoadMetadata(ctx, "session-1")
	sessions, _ := checkpoints.List(ctx)
	fmt.Println(meta.Step, meta.AgentID, sessions)
	// Output: 3 unknown [session-1]
}

func ExampleStore_Sessions() {
	ctx := context.Background()
	sessions := memstore.New().Sessions() // pass to workflow.NewEngine
	now := time.Now()
	s := &workflow.Session{ID: "session-1", Workflow: "store", Stage: "browse",
		State: map[string]any{"user.email": "user@example.com"}, Version: 1, CreatedAt: now, UpdatedAt: now}
	sessions.Create(ctx, s)

	next := s.Clone()
	next.Version, next.Stage = 2, "checkout"
	fmt.Println(sessions.Update(ctx, next))
	fmt.Println(sessions.Update(ctx, next)) // version 2 is no longer current
	got, _ := sessions.Get(ctx, "session-1")
	fmt.Println(got.Stage, got.Version, got.State["user.email"])
	// Output:
	// <nil>
	// memstore: update session "session-1" from version 1 (stored: 2): session changed concurrently
	// checkout 2 user@example.com
}
