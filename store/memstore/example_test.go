package memstore_test

import (
	"context"
	"fmt"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/store/memstore"
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
