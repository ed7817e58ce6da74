package approvalapi_test

import (
	"net/http"
	"regexp"
	"testing"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/approvalapi"
	"github.com/google/go-cmp/cmp"
)

// goTypeName matches what would betray a Go type in an error message.
var goTypeName = regexp.MustCompile(`\b(u?int(8|16|32|64)?|float(32|64)|map\[|\[\]|struct|interface|Go value|json\.)\b`)

// TestUAICP_5_3_HostileDecisionBodies: a decision body is decoded
// strictly (DESIGN §2). A denial whose reason or approver holds a lone
// surrogate escape or invalid UTF-8, or that is followed by anything, is
// a 400 saying what is wrong, and the request stays pending with nothing
// journaled — rather than a denial recorded under a name or reason
// silently changed to U+FFFD.
func TestUAICP_5_3_HostileDecisionBodies(t *testing.T) {
	f := newFixture(t, approvalapi.Options{})
	r1 := f.request(t, "c1")
	one := f.srv.URL + "/v1/approvals/" + r1.ID
	const deny = `{"decision":"deny","approver":"bob","reason":"no"}`
	tests := []struct{ name, body, message string }{
		{"trailing }x", deny + `}x`, "the body must be a single JSON object (unexpected data after the JSON value at byte 50)"},
		{"trailing {}", deny + `{}`, "the body must be a single JSON object (unexpected data after the JSON value at byte 50)"},
		{"\\xff in a string", `{"decision":"deny","approver":"bob","reason":"n` + "\xff" + `o"}`, "the body is not valid JSON: reason: invalid UTF-8 (byte 0xff) at byte 47"},
		{"lone surrogate in the approver", `{"decision":"deny","approver":"bob\ud800","reason":"no"}`, `the body is not valid JSON: approver: \ud800 at byte 34 is half a surrogate pair without its other half (not a character)`},
		{"reversed surrogates in the reason", `{"decision":"deny","approver":"bob","reason":"\udc00\ud800"}`, `the body is not valid JSON: reason: \udc00 at byte 46 is half a surrogate pair without its other half (not a character)`},
		{"number for a string", `{"decision":"deny","approver":"bob","reason":1e400}`, `member "reason" must be a string`},
		{"duplicate member", `{"decision":"deny","approver":"bob","approver":"eve"}`, `duplicate member "approver"`},
		{"member in another case", `{"decision":"deny","Approver":"bob"}`, `unknown member "Approver"`},
		{"null", `null`, "the body must be a JSON object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := do(t, "POST", one, "application/json", tc.body)
			if a.status != http.StatusBadRequest || a.code != "BAD_REQUEST" {
				t.Fatalf("%d %s %q, want 400 BAD_REQUEST", a.status, a.code, a.msg)
			}
			if diff := cmp.Diff(tc.message, a.msg); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
			if goTypeName.MatchString(a.msg) {
				t.Errorf("message %q names a Go type", a.msg)
			}
		})
	}
	if f.status(t, r1.ID) != govern.StatusPending || f.decisions(t) != 0 {
		t.Fatal("a hostile body decided the request")
	}
}
