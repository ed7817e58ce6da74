package govern_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/recordkind"
	"github.com/gowebpki/jcs"
)

// independentHash is DESIGN §5's evidence hash computed without the
// governor: "sha256:" + hex(SHA-256(JCS(payload))).
func independentHash(t testing.TB, payload []byte) string {
	t.Helper()
	c, err := jcs.Transform(payload)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(c)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func evidenceClass(types ...govern.EvidenceType) govern.Options {
	return govern.Options{Classes: []govern.TaskClass{{Name: "needs", RequiredEvidence: types}}}
}

// TestUAICP_5_1_MissingEvidenceBlocksDeliver: a class that requires
// evidence of a type the run lacks cannot deliver; the verdict and the
// fail-safe envelope carry EVIDENCE_MISSING (§7).
func TestUAICP_5_1_MissingEvidenceBlocksDeliver(t *testing.T) {
	g := newGov(t, evidenceClass(govern.ToolResult, govern.TestReport))
	r := start(t, g, govern.RunOptions{TaskClass: "needs"})
	invoke(t, r, readOnly("lookup"), govern.Call{ID: "c1"}, &tool{}) // tool_result, but no test_report
	v, err := r.Verify(bg, "out")
	if err != nil {
		t.Fatal(err)
	}
	checkVerdict(t, v)
	if v.Passed || !slices.Contains(v.Reasons, govern.EvidenceMissing) {
		t.Fatalf("verdict passed=%v reasons=%v, want EVIDENCE_MISSING", v.Passed, v.Reasons)
	}
	gate := v.Reports[0]
	checks := map[string]govern.CheckResult{}
	for _, c := range gate.Checks {
		checks[c.CheckID] = c.Result
	}
	if checks["EVIDENCE_GATING:tool_result"] != govern.CheckPass || checks["EVIDENCE_GATING:test_report"] != govern.CheckFail {
		t.Errorf("gate checks %v", checks)
	}
	if _, err := r.Deliver(bg, "out"); !errors.Is(err, govern.ErrNotVerified) {
		t.Errorf("Deliver: err = %v, want ErrNotVerified", err)
	}
	env, err := r.Fail(bg, "no test report", v.Reasons...)
	if err != nil {
		t.Fatal(err)
	}
	checkWire(t, env)
	wantEnvReasons(t, env, govern.EvidenceMissing)
	if env.Outcome != govern.Uncertain {
		t.Errorf("outcome %s", env.Outcome)
	}

	t.Run("Execute", func(t *testing.T) {
		_, err := g.Execute(bg, &govern.RunOptions{Identity: testIdentity(), TaskClass: "needs"}, func(context.Context, *govern.Run, *govern.Verdict) (any, error) {
			return "out", nil
		})
		wantReasons(t, err, govern.EvidenceMissing, govern.RepairsExhausted)
		if ge := govErr(t, err); ge.Envelope == nil || ge.Envelope.Outcome != govern.Uncertain {
			t.Fatalf("envelope %+v", ge.Envelope)
		}
	})
	t.Run("present", func(t *testing.T) {
		r := start(t, g, govern.RunOptions{TaskClass: "needs"})
		invoke(t, r, readOnly("lookup"), govern.Call{ID: "c1"}, &tool{})
		ev, err := r.AddEvidence(bg, govern.Evidence{EvidenceType: govern.TestReport, Source: "ci", Payload: json.RawMessage(`{"passed":12}`)})
		if err != nil {
			t.Fatal(err)
		}
		checkWire(t, ev)
		verifyPass(t, r, "out")
	})
}

// TestUAICP_5_1_TamperedEvidence: evidence whose hash does not match its
// payload is refused (EVIDENCE_INVALID) and never counts.
func TestUAICP_5_1_TamperedEvidence(t *testing.T) {
	g := newGov(t, evidenceClass(govern.SourceCitation))
	r := start(t, g, govern.RunOptions{TaskClass: "needs"})
	payload := json.RawMessage(`{"url":"https://example.org/a","quote":"x"}`)
	other := independentHash(t, []byte(`{"url":"https://example.org/b","quote":"x"}`))
	_, err := r.AddEvidence(bg, govern.Evidence{EvidenceType: govern.SourceCitation, Source: "web", Payload: payload, Hash: other})
	wantReasons(t, err, govern.EvidenceInvalid)
	for _, bad := range []string{"sha256:zz", "md5:abc", independentHash(t, payload) + "0"} {
		_, err := r.AddEvidence(bg, govern.Evidence{EvidenceType: govern.SourceCitation, Source: "web", Payload: payload, Hash: bad})
		wantReasons(t, err, govern.EvidenceInvalid)
	}
	_, err = r.AddEvidence(bg, govern.Evidence{EvidenceType: govern.SourceCitation, Source: "web", Payload: json.RawMessage(`{"broken"`)})
	wantReasons(t, err, govern.EvidenceInvalid)
	_, err = r.AddEvidence(bg, govern.Evidence{EvidenceType: "screenshot", Source: "web", Payload: payload})
	wantReasons(t, err, govern.EvidenceInvalid)
	_, err = r.AddEvidence(bg, govern.Evidence{EvidenceType: govern.SourceCitation, Payload: payload})
	wantReasons(t, err, govern.EvidenceInvalid)
	if evs := r.Evidence(); len(evs) != 0 {
		t.Fatalf("refused evidence was kept: %+v", evs)
	}
	for _, rec := range runRecords(t, g.Journal(), r.RequestID()) {
		if rec.Kind == recordkind.Evidence {
			t.Errorf("refused evidence was journaled: %s", rec.Data)
		}
	}
	v, err := r.Verify(bg, "out")
	if err != nil {
		t.Fatal(err)
	}
	if v.Passed || !slices.Contains(v.Reasons, govern.EvidenceMissing) {
		t.Fatalf("verdict passed=%v reasons=%v", v.Passed, v.Reasons)
	}
	if _, err := r.Deliver(bg, "out"); !errors.Is(err, govern.ErrNotVerified) {
		t.Errorf("Deliver: %v", err)
	}
	if _, err := r.Fail(bg, "tampered", v.Reasons...); err != nil {
		t.Fatal(err)
	}
}

// TestUAICP_5_1_ForeignEvidence: evidence naming another run's request
// or trace is refused and does not count.
func TestUAICP_5_1_ForeignEvidence(t *testing.T) {
	g := newGov(t, evidenceClass(govern.CustomEvidence))
	r := start(t, g, govern.RunOptions{TaskClass: "needs"})
	other := start(t, g, govern.RunOptions{})
	payload := json.RawMessage(`"data"`)
	for name, ev := range map[string]govern.Evidence{
		"request":      {Source: "s", Payload: payload, RequestID: other.RequestID()},
		"trace":        {Source: "s", Payload: payload, TraceID: other.TraceID()},
		"both":         {Source: "s", Payload: payload, RequestID: other.RequestID(), TraceID: other.TraceID()},
		"parent trace": {Source: "s", Payload: payload, ParentTraceID: other.TraceID()},
	} {
		if _, err := r.AddEvidence(bg, ev); !errors.Is(err, govern.EvidenceInvalid) {
			t.Errorf("%s of another run: err = %v, want EVIDENCE_INVALID", name, err)
		}
	}
	// A tool's evidence of another run is refused the same way.
	f := &tool{body: func(ctx context.Context) error {
		_, err := govern.AddEvidence(ctx, govern.Evidence{Source: "s", Payload: payload, RequestID: other.RequestID()})
		if !errors.Is(err, govern.EvidenceInvalid) {
			t.Errorf("govern.AddEvidence of another run: err = %v", err)
		}
		return nil
	}}
	invoke(t, r, readOnly("t"), govern.Call{ID: "c1"}, f)
	for _, e := range r.Evidence() {
		if e.EvidenceType == govern.CustomEvidence {
			t.Errorf("foreign evidence counted: %+v", e)
		}
	}
	v, err := r.Verify(bg, "out")
	if err != nil {
		t.Fatal(err)
	}
	if v.Passed {
		t.Fatal("verdict passed on foreign evidence")
	}
	// Evidence naming this run explicitly is fine.
	if _, err := other.AddEvidence(bg, govern.Evidence{Source: "s", Payload: payload, RequestID: other.RequestID(), TraceID: other.TraceID()}); err != nil {
		t.Errorf("own evidence: %v", err)
	}
	for _, run := range []*govern.Run{r, other} {
		if _, err := run.Fail(bg, "done"); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUAICP_5_1_EvidenceHash: the governor computes the hash (DESIGN §5)
// whatever the payload's formatting, and accepts a matching hash given
// with it.
func TestUAICP_5_1_EvidenceHash(t *testing.T) {
	g := newGov(t, govern.Options{})
	r := start(t, g, govern.RunOptions{})
	payloads := []string{
		`{"b":1,"a":[1.0,"x",true,null],"c":{"z":"\u00e9","y":1e2}}`,
		"{ \"a\" : 1,\n \"b\" : [ ] }",
		`"just a string"`, `42`, `[3,2,1]`, `null`,
	}
	for _, p := range payloads {
		want := independentHash(t, []byte(p))
		ev, err := r.AddEvidence(bg, govern.Evidence{Source: "s", Payload: json.RawMessage(p)})
		if err != nil {
			t.Fatalf("AddEvidence(%s): %v", p, err)
		}
		checkWire(t, ev)
		if ev.Hash != want {
			t.Errorf("hash of %s = %s, want %s", p, ev.Hash, want)
		}
		if h, _ := govern.PayloadHash(json.RawMessage(p)); h != want {
			t.Errorf("PayloadHash(%s) = %s, want %s", p, h, want)
		}
		// The same payload presented with its correct hash is accepted.
		if _, err := r.AddEvidence(bg, govern.Evidence{Source: "s", Payload: json.RawMessage(p), Hash: want}); err != nil {
			t.Errorf("AddEvidence with the right hash: %v", err)
		}
	}
	// The journaled evidence carries the same hash.
	n := 0
	for _, rec := range runRecords(t, g.Journal(), r.RequestID()) {
		if rec.Kind != recordkind.Evidence {
			continue
		}
		var ev govern.Evidence
		if err := json.Unmarshal(rec.Data, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.Hash != independentHash(t, ev.Payload) {
			t.Errorf("journaled evidence %s: hash %s does not match its payload", ev.EvidenceID, ev.Hash)
		}
		n++
	}
	if n != 2*len(payloads) {
		t.Errorf("%d evidence records, want %d", n, 2*len(payloads))
	}
	if _, err := r.Fail(bg, "done"); err != nil {
		t.Fatal(err)
	}
}

// TestUAICP_5_1_ToolResultEvidence: a call's result becomes tool_result
// evidence linked to the run's request and trace, hashed by the governor;
// evidence a tool adds with govern.AddEvidence joins it, and counts.
func TestUAICP_5_1_ToolResultEvidence(t *testing.T) {
	g := newGov(t, evidenceClass(govern.ToolResult, govern.SourceCitation))
	r := start(t, g, govern.RunOptions{TaskClass: "needs"})
	var added govern.Evidence
	f := &tool{result: map[string]any{"rows": []any{1.0, 2.0}, "name": "x"}, body: func(ctx context.Context) error {
		info, ok := govern.CallFrom(ctx)
		if !ok || info.CallID != "c1" || info.Tool != "search" || info.RequestID != r.RequestID() || info.Tier != govern.ReadOnly {
			t.Errorf("CallFrom = %+v, %v", info, ok)
		}
		var err error
		added, err = govern.AddEvidence(ctx, govern.Evidence{EvidenceType: govern.SourceCitation, Payload: json.RawMessage(`{"url":"https://example.org"}`)})
		if err != nil {
			t.Errorf("govern.AddEvidence: %v", err)
		}
		_, err = govern.AddEvidence(ctx, govern.Evidence{EvidenceType: govern.SourceCitation, Payload: json.RawMessage(`{"url":"x"}`), Hash: "sha256:00"})
		if !errors.Is(err, govern.EvidenceInvalid) {
			t.Errorf("tampered govern.AddEvidence: err = %v", err)
		}
		return nil
	}}
	inv := invoke(t, r, readOnly("search"), govern.Call{ID: "c1", Args: map[string]any{"q": "x"}}, f)
	if len(inv.Evidence) != 2 {
		t.Fatalf("invocation evidence %+v, want the tool_result and the citation", inv.Evidence)
	}
	tr := inv.Evidence[0]
	resJSON, _ := json.Marshal(f.result)
	switch {
	case tr.EvidenceType != govern.ToolResult:
		t.Errorf("first evidence type %s", tr.EvidenceType)
	case tr.RequestID != r.RequestID() || tr.TraceID != r.TraceID():
		t.Errorf("tool_result request/trace %s/%s, want %s/%s", tr.RequestID, tr.TraceID, r.RequestID(), r.TraceID())
	case tr.Hash != independentHash(t, resJSON):
		t.Errorf("tool_result hash %s, want %s", tr.Hash, independentHash(t, resJSON))
	case tr.Extra[govern.MetaCallID] != "c1":
		t.Errorf("tool_result call id %v", tr.Extra[govern.MetaCallID])
	case tr.Source == "" || tr.EvidenceID == "" || tr.CollectedAt.IsZero():
		t.Errorf("tool_result %+v lacks source, id or time", tr)
	}
	if c := inv.Evidence[1]; c.EvidenceID != added.EvidenceID || c.RequestID != r.RequestID() || c.TraceID != r.TraceID() || c.Source != "tool:search" {
		t.Errorf("citation %+v (added %+v)", c, added)
	}
	if _, err := govern.AddEvidence(bg, govern.Evidence{Source: "s"}); err == nil {
		t.Error("govern.AddEvidence outside a call succeeded")
	}
	// A failed call's evidence does not count.
	failing := &tool{err: errors.New("down"), body: func(ctx context.Context) error {
		_, err := govern.AddEvidence(ctx, govern.Evidence{EvidenceType: govern.TestReport, Payload: json.RawMessage(`1`)})
		return err
	}}
	if _, err := r.Invoke(bg, readOnly("flaky"), govern.Call{ID: "c2"}, failing.fn); !errors.Is(err, govern.ToolFailed) {
		t.Errorf("failing tool: err = %v", err)
	}
	for _, e := range r.Evidence() {
		if e.EvidenceType == govern.TestReport {
			t.Error("evidence of a failed call counted")
		}
	}
	verifyPass(t, r, "out")
}

// TestUAICP_5_1_UnhashablePayloads: payloads whose hash would be
// ambiguous — duplicate members, integers JCS rounds — are refused as
// evidence; a tool whose result cannot be hashed fails its call, and the
// failure is journaled.
func TestUAICP_5_1_UnhashablePayloads(t *testing.T) {
	g := newGov(t, govern.Options{})
	r := start(t, g, govern.RunOptions{})
	for _, p := range []string{`{"a":1,"a":2}`, `{"id":9007199254740993}`, `[-9007199254740993]`, `1e400`} {
		if _, err := r.AddEvidence(bg, govern.Evidence{Source: "s", Payload: json.RawMessage(p)}); !errors.Is(err, govern.EvidenceInvalid) {
			t.Errorf("AddEvidence(%s): err = %v, want EVIDENCE_INVALID", p, err)
		}
	}
	for _, p := range []string{`{"id":9007199254740992}`, `-9007199254740992`, `12345678901234567890.5`, `1e300`} {
		if _, err := r.AddEvidence(bg, govern.Evidence{Source: "s", Payload: json.RawMessage(p)}); err != nil {
			t.Errorf("AddEvidence(%s): %v", p, err)
		}
	}
	f := &tool{result: json.RawMessage(`{"a":1,"a":2}`)}
	_, err := r.Invoke(bg, lowRisk("put"), govern.Call{ID: "c1"}, f.fn)
	wantReasons(t, err, govern.EvidenceInvalid)
	recs := runRecords(t, g.Journal(), r.RequestID())
	if last := recs[len(recs)-1]; last.Kind != recordkind.Failed || last.CallID != "c1" {
		t.Errorf("last record %s of %s, want invocation_failed of c1", last.Kind, last.CallID)
	}
	// The call is over: asked again, it runs again rather than hanging
	// as "already running".
	f.result = map[string]any{"a": 1}
	invoke(t, r, lowRisk("put"), govern.Call{ID: "c1"}, f)
	if _, err := r.Fail(bg, "done"); err != nil {
		t.Fatal(err)
	}
}
