package uaipconformance_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/memstore"
	"github.com/agentry-dev/agentry/workflow"
	"github.com/agentry-dev/agentry/workflow/uaipconformance"
)

// Run the suite against a UAIP server; here ours, in-process.
func ExampleRun() {
	engine := workflow.NewEngine(memstore.New().Sessions(), nil)
	if err := engine.Register(builtin.Store()); err != nil {
		panic(err)
	}
	srv := httptest.NewServer(workflow.NewHandler(engine, nil))
	defer srv.Close()

	rep := uaipconformance.Run(context.Background(), &uaipconformance.Options{BaseURL: srv.URL, Workflow: "store"})
	for _, r := range rep.Results {
		if !r.Passed && !r.Skipped {
			fmt.Println(r)
		}
	}
	fmt.Printf("%d passed, %d failed\n", rep.Passed(), rep.Failed())
	// Output:
	// 36 passed, 0 failed
}
