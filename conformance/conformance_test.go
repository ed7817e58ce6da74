package conformance_test

import (
	"encoding/json"
	"testing"

	"github.com/agentry-dev/agentry/conformance"
)

func TestResultStatusAndString(t *testing.T) {
	tests := []struct {
		r            conformance.Result
		status, line string
	}{
		{conformance.Result{Name: "a/ok", Clause: "§1", Passed: true, Expectation: "x"},
			"PASS", "PASS  a/ok  [§1]"},
		{conformance.Result{Name: "a/bad", Clause: "§2", Expectation: "HTTP 422", Got: "HTTP 200"},
			"FAIL", "FAIL  a/bad  [§2]  want: HTTP 422; got: HTTP 200"},
		{conformance.Result{Name: "a/skip", Clause: "§3", Skipped: true, Expectation: "x", Got: "no session"},
			"SKIP", "SKIP  a/skip  [§3]  skipped: no session"},
		// Skipped wins over a stray Passed.
		{conformance.Result{Name: "a/both", Clause: "§4", Passed: true, Skipped: true, Got: "why"},
			"SKIP", "SKIP  a/both  [§4]  skipped: why"},
	}
	for _, tt := range tests {
		if got := tt.r.Status(); got != tt.status {
			t.Errorf("%s: Status() = %q, want %q", tt.r.Name, got, tt.status)
		}
		if got := tt.r.String(); got != tt.line {
			t.Errorf("%s: String() = %q, want %q", tt.r.Name, got, tt.line)
		}
	}
}

func TestResultsCountsAndFind(t *testing.T) {
	tests := []struct {
		name                    string
		rs                      conformance.Results
		passed, failed, skipped int
	}{
		{"nil", nil, 0, 0, 0},
		{"one of each", conformance.Results{
			{Name: "p", Passed: true}, {Name: "f"}, {Name: "s", Skipped: true},
		}, 1, 1, 1},
		{"skipped is not passed", conformance.Results{
			{Name: "p1", Passed: true}, {Name: "p2", Passed: true}, {Name: "s", Passed: true, Skipped: true},
		}, 2, 0, 1},
	}
	for _, tt := range tests {
		if p, f, s := tt.rs.Passed(), tt.rs.Failed(), tt.rs.Skipped(); p != tt.passed || f != tt.failed || s != tt.skipped {
			t.Errorf("%s: %d passed, %d failed, %d skipped; want %d, %d, %d", tt.name, p, f, s, tt.passed, tt.failed, tt.skipped)
		}
	}

	rs := conformance.Results{{Name: "a", Got: "first"}, {Name: "b"}, {Name: "a", Got: "second"}}
	if r, ok := rs.Find("a"); !ok || r.Got != "first" {
		t.Errorf(`Find("a") = %+v, %v; want the first "a"`, r, ok)
	}
	if r, ok := rs.Find("zz"); ok || r != (conformance.Result{}) {
		t.Errorf(`Find("zz") = %+v, %v; want the zero Result, false`, r, ok)
	}
}

// TestResultJSON pins the wire form the kits' --json output carries:
// skipped and got are omitted when empty.
func TestResultJSON(t *testing.T) {
	tests := []struct {
		r    conformance.Result
		want string
	}{
		{conformance.Result{Name: "n", Clause: "c", Passed: true, Expectation: "e"},
			`{"name":"n","clause":"c","passed":true,"expectation":"e"}`},
		{conformance.Result{Name: "n", Clause: "c", Skipped: true, Expectation: "e", Got: "g"},
			`{"name":"n","clause":"c","passed":false,"skipped":true,"expectation":"e","got":"g"}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.r)
		if err != nil || string(b) != tt.want {
			t.Errorf("json.Marshal(%+v) = %s, %v; want %s", tt.r, b, err, tt.want)
		}
	}
}
