package workflow_test

import (
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/workflow"
	"github.com/google/go-cmp/cmp"
)

// goTypeName matches what would betray a Go type in an error detail.
var goTypeName = regexp.MustCompile(`\b(u?int(8|16|32|64)?|float(32|64)|map\[|\[\]|struct|interface|Go value)\b`)

// TestUAIP_Errors_HostileBodies: a body that is not exactly one JSON
// object of valid text is a 400 on /initialize and /execute before
// anything happens (DESIGN §2): trailing bytes, invalid UTF-8 and lone
// surrogates are refused rather than repaired, numbers out of range are
// named as such, and no detail names a Go type. Afterwards no session was
// created and the session acted on is as it was.
func TestUAIP_Errors_HostileBodies(t *testing.T) {
	store := newMapStore()
	e := workflow.NewEngine(store, nil)
	if err := e.Register(builtin.Store()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(workflow.NewHandler(e, nil))
	t.Cleanup(srv.Close)
	id := initSession(t, srv)
	if r := do(t, srv, "POST", "/execute", id, `{"workflow_name":"store","action":"stage_transition","stage":"cart"}`); r.status != 200 {
		t.Fatalf("stage_transition: %d %s", r.status, r.raw)
	}
	before := do(t, srv, "GET", "/api/sessions/"+id, "", "").body

	const addToCart = `{"workflow_name":"store","action":"method_call","task":"add_to_cart","args":{"product_id":"SKU-005","quantity":1}}`
	const stateInput = `{"workflow_name":"store","action":"state_input","state_updates":{"note":"hi"}}`
	tests := []struct {
		name, path, body, detail string
	}{
		{"initialize trailing }x", "/initialize", `{"workflow_name":"store"}}x`, "Request body must be a single JSON object (unexpected data after the JSON value at byte 25)"},
		{"initialize trailing {}", "/initialize", `{"workflow_name":"store"}{}`, "Request body must be a single JSON object (unexpected data after the JSON value at byte 25)"},
		{"initialize \\xff in a string", "/initialize", "{\"workflow_name\":\"sto\xffre\"}", "Invalid request body: workflow_name: invalid UTF-8 (byte 0xff) at byte 21"},
		{"initialize lone surrogate", "/initialize", `{"workflow_name":"store\ud800"}`, `Invalid request body: workflow_name: \ud800 at byte 23 is half a surrogate pair without its other half (not a character)`},
		{"initialize reversed surrogates", "/initialize", `{"workflow_name":"\udc00\ud800"}`, `Invalid request body: workflow_name: \udc00 at byte 18 is half a surrogate pair without its other half (not a character)`},
		{"initialize number for a string", "/initialize", `{"workflow_name":1e400}`, "Invalid request body: workflow_name: must be a string"},
		{"initialize member in another case", "/initialize", `{"Workflow_Name":"store"}`, `Invalid request body: unknown member "Workflow_Name" (member names are case-sensitive: "workflow_name")`},
		{"execute trailing }x", "/execute", addToCart + `}x`, "Request body must be a single JSON object (unexpected data after the JSON value at byte 114)"},
		{"execute trailing {}", "/execute", addToCart + `{}`, "Request body must be a single JSON object (unexpected data after the JSON value at byte 114)"},
		{"state_input trailing }x", "/execute", stateInput + `}x`, "Request body must be a single JSON object (unexpected data after the JSON value at byte 78)"},
		{"execute \\xff in a string", "/execute", "{\"workflow_name\":\"store\",\"action\":\"state_input\",\"state_updates\":{\"note\":\"h\xffi\"}}", "Invalid request body: state_updates.note: invalid UTF-8 (byte 0xff) at byte 74"},
		{"execute lone surrogate", "/execute", `{"workflow_name":"store","action":"state_input","state_updates":{"note":"\ud800"}}`, `Invalid request body: state_updates.note: \ud800 at byte 73 is half a surrogate pair without its other half (not a character)`},
		{"execute reversed surrogates", "/execute", `{"workflow_name":"store","action":"state_input","state_updates":{"note":"\udc00\ud800"}}`, `Invalid request body: state_updates.note: \udc00 at byte 73 is half a surrogate pair without its other half (not a character)`},
		{"execute lone surrogate in args", "/execute", `{"workflow_name":"store","action":"method_call","task":"add_to_cart","args":{"product_id":"SKU-005\udbff","quantity":1}}`, `Invalid request body: args.product_id: \udbff at byte 98 is half a surrogate pair without its other half (not a character)`},
		{"execute number out of range", "/execute", `{"workflow_name":"store","action":"method_call","task":"add_to_cart","args":{"product_id":"SKU-005","quantity":1e400}}`, "Invalid request body: args.quantity: number out of range"},
		{"execute wrong type", "/execute", `{"workflow_name":"store","action":"state_input","state_updates":[1]}`, "Invalid request body: state_updates: must be an object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			session := ""
			if tc.path == "/execute" {
				session = id
			}
			r := do(t, srv, "POST", tc.path, session, tc.body)
			if r.status != 400 {
				t.Fatalf("status %d, want 400: %s", r.status, r.raw)
			}
			d, _ := r.body["detail"].(string)
			if diff := cmp.Diff(tc.detail, d); diff != "" {
				t.Errorf("detail (-want +got):\n%s", diff)
			}
			if goTypeName.MatchString(d) {
				t.Errorf("detail %q names a Go type", d)
			}
		})
	}
	store.mu.Lock()
	n := len(store.m)
	store.mu.Unlock()
	if n != 1 {
		t.Errorf("%d sessions in the store, want the 1 created before", n)
	}
	after := do(t, srv, "GET", "/api/sessions/"+id, "", "").body
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("the session changed (-before +after):\n%s", diff)
	}
}
