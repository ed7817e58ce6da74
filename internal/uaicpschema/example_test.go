package uaicpschema_test

import (
	"fmt"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/uaicpschema"
)

func ExampleValidate() {
	rep := govern.Report{
		ReportID:  "vr-1",
		RequestID: "f47ac10b-58cc-4372-a567-0e02b2c3d479",
		Status:    govern.ReportPass,
		Checks:    []govern.Check{{CheckID: "EVIDENCE_GATING", Result: govern.CheckPass}},
	}
	fmt.Println(uaicpschema.Validate(rep))

	rep.RequestID = "not-a-uuid"
	rep.Checks[0].Result = "maybe"
	fmt.Println(uaicpschema.Validate(&rep))
	// Output:
	// <nil>
	// uaicp: does not match verification-report.schema.json: /checks/0/result: value must be one of 'pass', 'fail', 'skip'; /request_id: 'not-a-uuid' is not valid uuid: must have 5 elements
}
