// Package conformance provides the result types of the black-box
// conformance kits in workflow/uaipconformance (UAIP-0.1),
// messaging/uampconformance (UAMP 1.0) and uicontrol/uiapconformance (UIAP Core
// 0.1): a Result per check, named after the spec clause it tests, and
// Results, the list each kit's Report carries.
package conformance

import "fmt"

// Result is the outcome of one check.
type Result struct {
	// Name identifies the check, e.g. "errors/422-invalid-action".
	Name string `json:"name"`
	// Clause is the spec section (or error-table row) the check tests.
	Clause string `json:"clause"`
	// Passed is true when the peer behaved as the clause requires.
	Passed bool `json:"passed"`
	// Skipped is true when the check could not run (Passed is then
	// false): e.g. a task whose parameters cannot be generated, or a
	// check that needs a session the handshake did not give.
	Skipped bool `json:"skipped,omitempty"`
	// Expectation says what the clause requires.
	Expectation string `json:"expectation"`
	// Got describes what the peer did (or why the check was skipped).
	Got string `json:"got,omitempty"`
}

// Status is "PASS", "FAIL" or "SKIP".
func (r Result) Status() string {
	switch {
	case r.Skipped:
		return "SKIP"
	case r.Passed:
		return "PASS"
	}
	return "FAIL"
}

// String formats the result on one line: status, name and clause; a
// failure adds the expectation and what the peer did, a skip the reason.
func (r Result) String() string {
	s := fmt.Sprintf("%s  %s  [%s]", r.Status(), r.Name, r.Clause)
	switch {
	case r.Skipped:
		s += "  skipped: " + r.Got
	case !r.Passed:
		s += "  want: " + r.Expectation + "; got: " + r.Got
	}
	return s
}

// Results are the outcomes of a run's checks, in the order they ran.
type Results []Result

// Passed counts the checks that passed.
func (rs Results) Passed() int {
	return rs.count(func(r Result) bool { return r.Passed && !r.Skipped })
}

// Failed counts the checks that failed.
func (rs Results) Failed() int {
	return rs.count(func(r Result) bool { return !r.Passed && !r.Skipped })
}

// Skipped counts the checks that could not run.
func (rs Results) Skipped() int {
	return rs.count(func(r Result) bool { return r.Skipped })
}

// Find returns the result of the first check with the given name, and
// whether there is one.
func (rs Results) Find(name string) (Result, bool) {
	for _, r := range rs {
		if r.Name == name {
			return r, true
		}
	}
	return Result{}, false
}

func (rs Results) count(f func(Result) bool) int {
	n := 0
	for _, r := range rs {
		if f(r) {
			n++
		}
	}
	return n
}
