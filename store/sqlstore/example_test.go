package sqlstore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/store/sqlstore"
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
