package govern

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/recordkind"
)

// checkMarshalData compares marshalData with json.Marshal on data, and
// the canonical form written with it with jcs.Transform's; it returns
// whether the direct path took it.
func checkMarshalData(t *testing.T, data any) bool {
	t.Helper()
	want, werr := json.Marshal(data)
	var direct []byte
	ok := false
	switch d := data.(type) {
	case CallOutcome:
		direct, ok = appendCallOutcome(nil, &d)
	case CallIntent:
		direct, ok = appendCallIntent(nil, &d)
	}
	if a, isAction := data.(*RollbackAction); isAction {
		direct, ok = appendRollback(nil, a)
		got, herr := a.Hash()
		want, werr := hashJSON(a)
		if got != want || (herr == nil) != (werr == nil) {
			t.Errorf("RollbackAction.Hash = %q, %v; by json.Marshal %q, %v", got, herr, want, werr)
		}
	}
	got, gerr := marshalData(data)
	if !bytes.Equal(got, want) || (gerr == nil) != (werr == nil) {
		t.Errorf("marshalData = %s, %v; json.Marshal = %s, %v", got, gerr, want, werr)
	}
	checkCanonicalData(t, data, want, werr)
	switch {
	case !ok:
		return false
	case werr != nil:
		t.Errorf("the direct path wrote %s where json.Marshal fails: %v", direct, werr)
	case !bytes.Equal(direct, want):
		t.Errorf("direct %s\njson.Marshal %s", direct, want)
	}
	return true
}

func sampleEvidence() Evidence {
	return Evidence{EvidenceID: "e-1", EvidenceType: ToolResult, Source: "lookup", RequestID: "r-1", TraceID: "t-1",
		ParentTraceID: "p-1", Actor: "tool:lookup", Hash: "sha256:00", CollectedAt: Time{time.Date(2026, 11, 29, 1, 2, 3, 456_789_000, time.FixedZone("x", -3600))},
		Payload: json.RawMessage(`{"ok":true,"n":[1,2.5,null]}`), Extra: map[string]any{MetaCallID: "call-1", "x.z": []any{1.0, "<&>"}, "hash": "dropped"}}
}

// TestMarshalDataMatchesEncodingJSON: the Data of a call's intent and
// outcome is written byte for byte as json.Marshal writes it; what the
// direct path does not take goes to json.Marshal.
func TestMarshalDataMatchesEncodingJSON(t *testing.T) {
	ev := sampleEvidence()
	bare := Evidence{EvidenceID: "e-2", EvidenceType: CustomEvidence, Source: "s"}
	intent := CallIntent{Tier: WriteHighRisk, DeclaredTier: "unknown", Args: json.RawMessage(`{"order":1042,"sku":"A-1"}`),
		ArgsHash: "sha256:aa", Rollback: &RollbackAction{Type: "undo", Target: "o-1", Payload: map[string]any{"amount": 30, "note": "<x>"}},
		RollbackHash: "sha256:bb", Attempt: 2, Policy: &Decision{Effect: Review, Rule: "r", Reasons: []string{"big", "\u2028"}},
		ApprovalID: "a-1", Approver: "alice", TokenID: "jti-1", Detail: "detail \"quoted\""}
	with := func(f func(in *CallIntent)) CallIntent { in := intent; f(&in); return in }
	withEv := func(f func(e *Evidence)) CallOutcome {
		e := sampleEvidence()
		f(&e)
		return CallOutcome{Evidence: []Evidence{e}}
	}
	taken := []any{
		CallOutcome{},
		CallOutcome{ArgsHash: "sha256:aa", ResultHash: "sha256:bb", Evidence: []Evidence{ev, bare}, Error: "bad <thing> & \xff", DurationMS: -3},
		CallOutcome{Evidence: []Evidence{}, DurationMS: math.MaxInt64},
		withEv(func(e *Evidence) { e.Extra = nil; e.Payload = nil }),
		withEv(func(e *Evidence) { e.Payload = json.RawMessage(`"\u003c"`) }),
		CallIntent{Tier: ReadOnly},
		intent,
		with(func(in *CallIntent) { in.Rollback = &RollbackAction{Type: "t"} }),
		with(func(in *CallIntent) { in.Rollback.Payload = "a string" }),
		with(func(in *CallIntent) { in.Policy = &Decision{} }),
		intent.Rollback,
		&RollbackAction{Type: "t"},
	}
	for _, d := range taken {
		if !checkMarshalData(t, d) {
			t.Errorf("the direct path did not take %#v", d)
		}
	}
	left := []any{
		withEv(func(e *Evidence) { e.Payload = json.RawMessage(`{"a": 1}`) }),
		withEv(func(e *Evidence) { e.Payload = json.RawMessage(`"<"`) }),
		withEv(func(e *Evidence) { e.Payload = json.RawMessage(`{`) }),
		withEv(func(e *Evidence) { e.Extra = map[string]any{"x": struct{ A int }{1}} }),
		withEv(func(e *Evidence) { e.Extra = map[string]any{"x": math.NaN()} }),
		with(func(in *CallIntent) { in.Tier = 0 }),
		with(func(in *CallIntent) { in.Args = json.RawMessage(" {}") }),
		with(func(in *CallIntent) { in.Rollback.Payload = json.RawMessage(`{}`) }),
		with(func(in *CallIntent) { in.Rollback.Payload = math.Inf(1) }),
		&RollbackAction{Type: "t", Payload: json.RawMessage(` {}`)},
	}
	for _, d := range left {
		if checkMarshalData(t, d) {
			t.Errorf("the direct path took %#v; it is json.Marshal's", d)
		}
	}
}

// FuzzMarshalData: wherever the direct path writes a call's Data, it
// writes json.Marshal's bytes.
func FuzzMarshalData(f *testing.F) {
	f.Add("lookup", "call-1", []byte(`{"ok":true}`), []byte(`{"order":1}`), int64(3))
	f.Add("<&>\u2028", "\xff", []byte(`[1e21, "x"]`), []byte(`"\u003c"`), int64(-1))
	f.Add("\u00e9t\u00e9", "a.b", []byte(`{"z":1,"a":[{"y":2,"b":"\u00e9"}],"m":1.5e-7}`), []byte(`{"b":1, "a":"\ud83d\ude00"}`), int64(1)<<53+1)
	f.Add("payload", "actor", []byte(` "x" `), []byte(`[0.1,-0,1E400]`), int64(-1)<<60)
	f.Fuzz(func(t *testing.T, s, id string, payload, args []byte, n int64) {
		var extra any = s
		if json.Unmarshal(args, &extra) != nil {
			extra = s
		}
		e := Evidence{EvidenceID: id, EvidenceType: EvidenceType(s), Source: s, RequestID: id, Actor: s, Hash: s,
			CollectedAt: Time{time.Unix(n, n).UTC()}, Payload: payload, Extra: map[string]any{s: extra, id: n}}
		checkMarshalData(t, CallOutcome{ArgsHash: s, ResultHash: id, Evidence: []Evidence{e}, Error: s, DurationMS: n})
		checkMarshalData(t, &RollbackAction{Type: s, Target: id, Payload: extra})
		checkMarshalData(t, CallIntent{Tier: Tier(n%4 + 1), DeclaredTier: s, Args: args, ArgsHash: id,
			Rollback: &RollbackAction{Type: s, Target: id, Payload: extra}, Attempt: int(n), Policy: &Decision{Effect: Effect(s), Rule: id, Reasons: []string{s}},
			ApprovalID: id, Approver: s, TokenID: id, Detail: s})
	})
}

// TestMarshalDataGoldenJournal: the Data of the calls in a journal written
// before the direct path (internal/journal's golden journal) is written
// back by marshalData byte for byte.
func TestMarshalDataGoldenJournal(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("..", "internal", "journal", "testdata", "golden_journal.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, line := range bytes.Split(bytes.TrimSpace(golden), []byte("\n")) {
		var rec Record
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatal(err)
		}
		var data any
		switch rec.Kind {
		case recordkind.Intent, recordkind.Blocked:
			var in CallIntent
			err = json.Unmarshal(rec.Data, &in)
			data = in
		case recordkind.Commit, recordkind.Failed:
			var out CallOutcome
			err = json.Unmarshal(rec.Data, &out)
			data = out
		default:
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if !checkMarshalData(t, data) {
			t.Errorf("record %d (%s): the direct path did not take its data", rec.Seq, rec.Kind)
		}
		if got, _ := marshalData(data); !bytes.Equal(got, rec.Data) {
			t.Errorf("record %d (%s): data written back differs:\n%s\n%s", rec.Seq, rec.Kind, rec.Data, got)
		}
		checked++
	}
	if checked < 8 {
		t.Errorf("checked %d records' data", checked)
	}
}
