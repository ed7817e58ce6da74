package envelope_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/agentry-dev/agentry/envelope"
)

// TestUAMP_9_ErrorCodes pins each code's retry flag (§9) and HTTP status
// (DESIGN §5), and the errors.Is/As contract.
func TestUAMP_9_ErrorCodes(t *testing.T) {
	cases := []struct {
		sentinel envelope.Code
		code     envelope.Code
		retry    bool
		status   int
	}{
		{envelope.CodeUnauthenticated, "4.01", false, http.StatusUnauthorized},
		{envelope.CodeUnauthorized, "4.03", false, http.StatusForbidden},
		{envelope.CodeMissingDeltaSeq, "4.09", true, http.StatusConflict},
		{envelope.CodePayloadTooLarge, "4.13", false, http.StatusRequestEntityTooLarge},
		{envelope.CodeBusy, "5.04", true, http.StatusServiceUnavailable},
		// Extensions.
		{envelope.CodeBadRequest, "4.00", false, http.StatusBadRequest},
		{envelope.CodeUnsupportedMediaType, "4.15", false, http.StatusUnsupportedMediaType},
		{envelope.CodeInternal, "5.00", false, http.StatusInternalServerError},
		{"5.02", "5.02", false, http.StatusBadGateway}, // a stream's producer died (messaging)
	}
	for _, c := range cases {
		t.Run(string(c.code), func(t *testing.T) {
			if c.sentinel != c.code || c.code.Retryable() != c.retry || !c.code.Known() {
				t.Errorf("sentinel %+v", c.sentinel)
			}
			if got := c.code.HTTPStatus(); got != c.status {
				t.Errorf("HTTP status %d, want %d", got, c.status)
			}
			cause := errors.New("internal detail")
			err := fmt.Errorf("handling: %w", envelope.NewError(c.code, "peer-visible", cause))
			if !errors.Is(err, c.sentinel) || !errors.Is(err, cause) {
				t.Errorf("errors.Is fails on %v", err)
			}
			for _, other := range cases {
				if other.code != c.code && errors.Is(err, other.sentinel) {
					t.Errorf("%v matches %s", err, other.code)
				}
			}
			var e *envelope.Error
			if !errors.As(err, &e) || e.HTTPStatus() != c.status || e.Retry != c.retry {
				t.Fatalf("errors.As: %+v", e)
			}
			// The wire form carries code, message and retry, never the cause.
			b, _ := json.Marshal(e)
			want := fmt.Sprintf(`{"code":%q,"message":"peer-visible","retry":%v}`, c.code, c.retry)
			if string(b) != want {
				t.Errorf("wire form %s, want %s", b, want)
			}
		})
	}
	if envelope.Code("9.99").HTTPStatus() != 500 || envelope.Code("9.99").Known() {
		t.Error("unknown code")
	}
	if envelope.AsError(nil) != nil {
		t.Error("AsError(nil)")
	}
	internal := envelope.AsError(errors.New("disk on fire at /var/lib/x"))
	if internal.Code != envelope.CodeInternal || internal.Message != "internal error" {
		t.Errorf("AsError leaks: %+v", internal)
	}
	busy := envelope.NewError(envelope.CodeBusy, "", nil)
	if busy.Message != "backend busy" || !busy.Retry {
		t.Errorf("default message: %+v", busy)
	}
}

// TestUAMP_9_ErrorEnvelope: an error travels as an error envelope whose
// body is {code, message, retry} (DESIGN §5).
func TestUAMP_9_ErrorEnvelope(t *testing.T) {
	req := sampleEnvelope()
	in := envelope.NewError(envelope.CodeMissingDeltaSeq, "gap after delta_seq 4", nil)
	e := envelope.NewErrorEnvelope("did:web:worker.example", []string{req.From}, req.ID, in)
	if e.Intent != envelope.IntentError || e.ReplyTo != req.ID || e.Body.Type != "application/json" {
		t.Fatalf("%+v", e)
	}
	if err := e.Validate(); err != nil {
		t.Fatal(err)
	}
	out, err := envelope.ParseErrorBody(e.Body)
	if err != nil || out.Code != in.Code || out.Message != in.Message || !out.Retry {
		t.Fatalf("%+v, %v", out, err)
	}
	for _, bad := range []envelope.Body{
		{Type: "text/plain", Content: e.Body.Content},
		{Type: "application/json", Content: `{"code":"4.09"}`},
		{Type: "application/json", Content: `{"code":4.09,"message":"","retry":true}`},
		{Type: "application/json", Content: `{"code":"4.09","code":"4.01","message":"","retry":true}`},
	} {
		if _, err := envelope.ParseErrorBody(bad); err == nil {
			t.Errorf("ParseErrorBody(%+v) accepted", bad)
		}
	}
}
