package uicontrol

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// actionDecoders are the decoders of the Action Runtime's payloads, each
// returning what it decoded as a value that encodes to the wire form.
var actionDecoders = []struct {
	name   string
	decode func(json.RawMessage) (any, *Error)
}{
	{"action.request", func(r json.RawMessage) (any, *Error) { return decodeActionRequest(r) }},
	{"action.progress", func(r json.RawMessage) (any, *Error) { return decodeActionProgress(r) }},
	{"action.result", func(r json.RawMessage) (any, *Error) { return decodeActionResult(r) }},
	{"action.cancel", func(r json.RawMessage) (any, *Error) { return decodeActionCancel(r) }},
	{"action.cancelled", func(r json.RawMessage) (any, *Error) { return decodeActionCancelled(r) }},
	{"action.confirm", func(r json.RawMessage) (any, *Error) { return decodeActionConfirm(r) }},
	{"action.confirmed", func(r json.RawMessage) (any, *Error) { return decodeActionConfirmed(r) }},
}

var actionSeeds = []string{
	`{"actionId":"cart.add","target":{"ref":{"stableId":"cart.add"},"expectedRole":"button","expectedName":"Add","expectedScopeId":"s","expectedDocumentId":"d","allowAmbiguous":false},"args":{"sku":"A-1","n":[1,2.5,"x",null]},"preferredExecutionModes":["appAction","semanticDom"],"verification":{"signals":["toast"]},"presentation":{"ghostCursor":true},"timeoutMs":1500,"idempotencyKey":"k-1","metadata":{"m":1}}`,
	`{"requestId":"r-1","actionId":"cart.add","state":"EXECUTING","progress":0.5,"message":"halfway","data":[1,{"a":null}]}`,
	`{"requestId":"r-1","actionId":"cart.add","state":"FAILED","error":{"code":"timeout","message":"late","retryable":false,"details":{"x":1e2}},"idempotencyKey":"k","deduplicated":true}`,
	`{"requestId":"r-1","actionId":"cart.add","state":"SUCCEEDED","result":"ok"}`,
	`{"requestId":"r-1","reason":"changed my mind"}`,
	`{"requestId":"r-1","state":"AWAITING_CONFIRMATION"}`,
	`{"requestId":"r-1","actionId":"checkout.pay","args":{"amount":12.5},"risk":"high","reason":"high-risk action","target":{"expectedRole":"button"}}`,
	`{"requestId":"r-1","confirmed":true,"reason":"ok"}`,
	`{}`, `{"actionId":null}`, `{"actionId":"a","timeoutMs":9223372036854775807}`, `{"actionId":"a","args":[]}`,
	`{"requestId":"` + string(bytes.Repeat([]byte("x"), 129)) + `"}`, `{"progress":-0,"state":"RECEIVED","requestId":"r","actionId":"a"}`,
	`null`, `[]`, `"x"`, `{"actionId":"a","actionId":"b"}`,
}

// FuzzActionPayloads checks the Action Runtime's payload decoders on
// arbitrary bytes: they never panic; a refusal is an invalid_message
// *Error naming a field; what they accept encodes to a payload they
// accept again, and that encoding is a fixpoint.
func FuzzActionPayloads(f *testing.F) {
	for i := range actionDecoders {
		for _, s := range actionSeeds {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, b []byte) {
		d := actionDecoders[int(which)%len(actionDecoders)]
		v, err := d.decode(b)
		if err != nil {
			if err.Code != CodeInvalidMessage || err.Details["field"] == nil {
				t.Fatalf("%s: refusal %+v", d.name, err)
			}
			return
		}
		enc1, merr := json.Marshal(v)
		if merr != nil {
			t.Fatalf("%s: encode %+v: %v", d.name, v, merr)
		}
		v2, err := d.decode(enc1)
		if err != nil {
			t.Fatalf("%s: own encoding refused: %v\n%s", d.name, err, enc1)
		}
		enc2, merr := json.Marshal(v2)
		if merr != nil || !bytes.Equal(enc1, enc2) {
			t.Fatalf("%s: encoding not a fixpoint (%v):\n%s\n%s", d.name, merr, enc1, enc2)
		}
	})
}

// TestUIAP_Action_5_RequestWireForm pins the encoding of an
// ActionRequest: the draft's member names, timeoutMs in whole
// milliseconds (at least 1), absent members omitted.
func TestUIAP_Action_5_RequestWireForm(t *testing.T) {
	for _, tc := range []struct {
		req  ActionRequest
		want string
	}{
		{ActionRequest{ActionID: "a"}, `{"actionId":"a"}`},
		{ActionRequest{ActionID: "a", Args: json.RawMessage(nil), Timeout: time.Microsecond, RequestID: "not sent"}, `{"actionId":"a","timeoutMs":1}`},
		{ActionRequest{ActionID: "a", Target: &ActionTarget{ExpectedRole: "button"}, Args: map[string]int{"n": 1},
			PreferredExecutionModes: []string{"appAction"}, Timeout: 1500 * time.Millisecond, IdempotencyKey: "k"},
			`{"actionId":"a","target":{"expectedRole":"button"},"args":{"n":1},"preferredExecutionModes":["appAction"],"timeoutMs":1500,"idempotencyKey":"k"}`},
	} {
		b, err := json.Marshal(&tc.req)
		if err != nil || string(b) != tc.want {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", tc.req, b, err, tc.want)
		}
	}
}

// TestUIAP_16_TokenBucket pins the bucket's arithmetic: a burst, then one
// token per 1/rate, the wait rounded up to a millisecond.
func TestUIAP_16_TokenBucket(t *testing.T) {
	if newTokenBucket(RateLimit{}) != nil || newTokenBucket(RateLimit{Rate: -1}) != nil {
		t.Fatal("a zero or negative rate limits")
	}
	var nilBucket *tokenBucket
	if _, ok := nilBucket.take(time.Now()); !ok {
		t.Fatal("a nil bucket refuses")
	}
	t0 := time.Date(2026, 3, 26, 13, 0, 0, 0, time.UTC)
	b := &tokenBucket{rate: 3, burst: 2, tokens: 2, last: t0}
	steps := []struct {
		at   time.Duration
		ok   bool
		wait time.Duration
	}{
		{0, true, 0}, {0, true, 0}, {0, false, 334 * time.Millisecond},
		{100 * time.Millisecond, false, 234 * time.Millisecond},
		{334 * time.Millisecond, true, 0}, {334 * time.Millisecond, false, 333 * time.Millisecond},
		{time.Hour, true, 0}, {time.Hour, true, 0}, {time.Hour, false, 334 * time.Millisecond},
	}
	for i, s := range steps {
		wait, ok := b.take(t0.Add(s.at))
		if ok != s.ok || wait != s.wait {
			t.Errorf("step %d at %v: %v, %v; want %v, %v", i, s.at, wait, ok, s.wait, s.ok)
		}
	}
	if b := newTokenBucket(RateLimit{Rate: 0.5}); b.burst != 1 {
		t.Errorf("burst for rate 0.5 = %v, want 1", b.burst)
	}
	if b := newTokenBucket(RateLimit{Rate: 2.5}); b.burst != 3 {
		t.Errorf("burst for rate 2.5 = %v, want 3", b.burst)
	}
}
