package store_test

import (
	"context"
	"fmt"
	"log"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/store"
	"github.com/agentry-dev/agentry/workflow"
)

// One URL opens the stores of every layer: here in memory; a server
// would use "sqlite:///var/lib/agentry/agentry.db" or a postgres:// URL.
func ExampleOpen() {
	ctx := context.Background()
	st, err := store.Open(ctx, "memory:")
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	engine := workflow.NewEngine(st.Sessions(), nil)
	g, err := govern.New(ctx, &govern.Options{Journal: st.Journal()})
	if err != nil {
		log.Fatal(err)
	}
	_, _ = engine, g
	fmt.Println(st, "shared by replicas:", st.Shared())
	// Output: memory: shared by replicas: false
}
