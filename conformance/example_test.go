package conformance_test

import (
	"fmt"

	"github.com/agentry-dev/agentry/conformance"
)

// A kit's report prints one line per check, then the counts — what
// agentry conformance does.
func ExampleResults() {
	rs := conformance.Results{
		{Name: "initialize/response", Clause: "POST /initialize: Response", Passed: true, Expectation: "200 with a session_id"},
		{Name: "errors/422-invalid-action", Clause: "Errors: 422 Invalid action type", Expectation: "HTTP 422", Got: "HTTP 200"},
		{Name: "execute/method-call/checkout", Clause: "POST /execute: Action method_call", Skipped: true, Got: "parameter zip has a pattern"},
	}
	for _, r := range rs {
		fmt.Println(r)
	}
	fmt.Printf("%d passed, %d failed (%d skipped)\n", rs.Passed(), rs.Failed(), rs.Skipped())
	if r, ok := rs.Find("errors/422-invalid-action"); ok {
		fmt.Println(r.Status(), r.Got)
	}
	// Output:
	// PASS  initialize/response  [POST /initialize: Response]
	// FAIL  errors/422-invalid-action  [Errors: 422 Invalid action type]  want: HTTP 422; got: HTTP 200
	// SKIP  execute/method-call/checkout  [POST /execute: Action method_call]  skipped: parameter zip has a pattern
	// 1 passed, 1 failed (1 skipped)
	// FAIL HTTP 200
}
