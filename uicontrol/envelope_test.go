package uicontrol_test

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/google/go-cmp/cmp"
)

// validMessage is a request with every optional field.
const validMessage = `{"uiap":"0.1","kind":"request","type":"x.shop.add","id":"m-1","sessionId":"s-1",
	"correlationId":"m-0","ts":"2026-03-26T13:00:00.123Z","source":{"role":"agent","id":"a","instanceId":"i"},
	"target":{"role":"app","id":"shop"},"seq":7,"requires":["web@0.1"],"payload":{"sku":"A-1"},
	"ext":{"uiap.policy":{"decision":"allow"}}}`

func TestUIAP_4_DecodeEnvelopeFields(t *testing.T) {
	e, err := uicontrol.DecodeEnvelope([]byte(validMessage))
	if err != nil {
		t.Fatal(err)
	}
	want := &uicontrol.Envelope{UIAP: "0.1", Kind: uicontrol.KindRequest, Type: "x.shop.add", ID: "m-1", SessionID: "s-1",
		CorrelationID: "m-0", TS: time.Date(2026, 3, 26, 13, 0, 0, 123e6, time.UTC),
		Source: uicontrol.EndpointRef{Role: "agent", ID: "a", InstanceID: "i"}, Target: &uicontrol.EndpointRef{Role: "app", ID: "shop"},
		Seq: 7, Requires: []string{"web@0.1"}, Payload: json.RawMessage(`{"sku":"A-1"}`),
		Ext: map[string]json.RawMessage{"uiap.policy": json.RawMessage(`{"decision":"allow"}`)}}
	if d := cmp.Diff(want, e); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	const wire = `{"uiap":"0.1","kind":"request","type":"x.shop.add","id":"m-1","sessionId":"s-1","correlationId":"m-0",` +
		`"ts":"2026-03-26T13:00:00.123Z","source":{"role":"agent","id":"a","instanceId":"i"},"target":{"role":"app","id":"shop"},` +
		`"seq":7,"requires":["web@0.1"],"payload":{"sku":"A-1"},"ext":{"uiap.policy":{"decision":"allow"}}}`
	if string(b) != wire {
		t.Errorf("encoded:\n%s\nwant:\n%s", b, wire)
	}
}

// The spec's own examples decode.
func TestUIAP_14_SpecExamplesDecode(t *testing.T) {
	for _, f := range []string{"testdata/spec/session-initialize.example.json", "testdata/spec/session-initialized.example.json"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := uicontrol.DecodeEnvelope(b); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// with returns validMessage with each member name set to value (raw
// JSON), or removed if value is "".
func with(t *testing.T, nameValues ...string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(validMessage), &m); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(nameValues); i += 2 {
		if name, value := nameValues[i], nameValues[i+1]; value == "" {
			delete(m, name)
		} else {
			m[name] = json.RawMessage(value)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestUIAP_4_1_DecodeEnvelopeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, msg, field string
	}{
		{"uiap missing", with(t, "uiap", ""), "uiap"},
		{"kind missing", with(t, "kind", ""), "kind"},
		{"type missing", with(t, "type", ""), "type"},
		{"id missing", with(t, "id", ""), "id"},
		{"ts missing", with(t, "ts", ""), "ts"},
		{"source missing", with(t, "source", ""), "source"},
		{"payload missing", with(t, "payload", ""), "payload"},
		{"payload null", with(t, "payload", "null"), "payload"},
		{"payload array", with(t, "payload", "[]"), "payload"},
		{"payload string", with(t, "payload", `"{}"`), "payload"},
		{"response without correlationId", with(t, "kind", `"response"`, "correlationId", ""), "correlationId"},
		{"uiap malformed", with(t, "uiap", `"0.1.2"`), "uiap"},
		{"uiap a number", with(t, "uiap", `0.1`), "uiap"},
		{"kind unknown", with(t, "kind", `"command"`), "kind"},
		{"error type on request", with(t, "type", `"error"`), "type"},
		{"id too long", with(t, "id", `"`+strings.Repeat("x", 129)+`"`), "id"},
		{"id empty", with(t, "id", `""`), "id"},
		{"sessionId too long", with(t, "sessionId", `"`+strings.Repeat("ß", 129)+`"`), "sessionId"},
		{"ts with offset", with(t, "ts", `"2026-03-26T14:00:00+01:00"`), "ts"},
		{"ts not a date", with(t, "ts", `"now"`), "ts"},
		{"source without id", with(t, "source", `{"role":"agent"}`), "source.id"},
		{"source role empty", with(t, "source", `{"role":"","id":"a"}`), "source.role"},
		{"source duplicate member", with(t, "source", `{"role":"agent","id":"a","id":"b"}`), "source"},
		{"target not an object", with(t, "target", `[]`), "target"},
		{"seq fraction", with(t, "seq", `1.0`), "seq"},
		{"seq negative", with(t, "seq", `-1`), "seq"},
		{"seq too large", with(t, "seq", `9223372036854775808`), "seq"},
		{"requires not strings", with(t, "requires", `[1]`), "requires"},
		{"ext overrides payload", with(t, "ext", `{"payload":{}}`), "ext"},
		{"ext in core namespace", with(t, "ext", `{"session.x":{}}`), "ext"},
		{"ext duplicate entry", with(t, "ext", `{"x.a":1,"x.a":2}`), "ext"},
		{"ext an array", with(t, "ext", `[]`), "ext"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := uicontrol.DecodeEnvelope([]byte(tc.msg))
			if e != nil {
				t.Errorf("decoded %+v along with an error", e)
			}
			var ue *uicontrol.Error
			if !errors.As(err, &ue) || !errors.Is(err, uicontrol.CodeInvalidMessage) {
				t.Fatalf("error %v: want an invalid_message *Error", err)
			}
			if ue.Details["field"] != tc.field {
				t.Errorf("field = %v, want %s (%v)", ue.Details["field"], tc.field, err)
			}
		})
	}
}

func TestUIAP_4_1_DecodeEnvelopeNotJSON(t *testing.T) {
	for _, b := range []string{"", "null", "[]", "{", `{"a":1} {}`, "{\"a\":\"\xff\"}", `{"uiap":"0.1","uiap":"0.1"}`} {
		if _, err := uicontrol.DecodeEnvelope([]byte(b)); !errors.Is(err, uicontrol.CodeInvalidMessage) {
			t.Errorf("%q: %v", b, err)
		}
	}
	big := `{"x":"` + strings.Repeat("a", uicontrol.DefaultMaxMessageSize) + `"}`
	if _, err := uicontrol.DecodeEnvelope([]byte(big)); !errors.Is(err, uicontrol.CodeInvalidMessage) {
		t.Errorf("oversize: %v", err)
	}
}

// §4.1 rules 6 and 7: unknown members are ignored, null optional members
// are absent; names match exactly.
func TestUIAP_4_1_DecodeEnvelopeLenient(t *testing.T) {
	for _, msg := range []string{
		with(t, "x-unknown", `{"deep":[1,2]}`),
		with(t, "Payload", `7`),
		with(t, "sessionId", "null"),
		with(t, "target", "null"),
		with(t, "ext", "null"),
		with(t, "ext", `{"x.a":null}`),
		with(t, "seq", "0"),
		with(t, "ts", `"2026-03-26T13:00:00Z"`),
		with(t, "ts", `"2026-03-26T13:00:00.123456789-00:00"`),
		// An error whose failed message had no readable id has no
		// correlationId (DESIGN §5).
		with(t, "kind", `"error"`, "type", `"error"`, "correlationId", ""),
	} {
		if _, err := uicontrol.DecodeEnvelope([]byte(msg)); err != nil {
			t.Errorf("%s: %v", msg, err)
		}
	}
	e, _ := uicontrol.DecodeEnvelope([]byte(with(t, "ext", `{"x.a":null}`)))
	if e.Ext != nil {
		t.Errorf("null ext entry kept: %v", e.Ext)
	}
}

// A nil payload is written as {} (§4.1 rule 2).
func TestUIAP_4_1_EncodeNilPayload(t *testing.T) {
	b, err := json.Marshal(&uicontrol.Envelope{UIAP: "0.1", Kind: uicontrol.KindEvent, Type: "x.a", ID: "1", Source: uicontrol.EndpointRef{Role: "app", ID: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"payload":{}`) {
		t.Errorf("%s", b)
	}
	if _, err := uicontrol.DecodeEnvelope(b); err != nil {
		t.Errorf("own encoding refused: %v", err)
	}
}

func TestUIAP_10_Errors(t *testing.T) {
	// §10's codes, as the wire spells them.
	codes := map[uicontrol.Code]string{
		uicontrol.CodeBadRequest: "bad_request", uicontrol.CodeInvalidMessage: "invalid_message",
		uicontrol.CodeUnknownMessageType: "unknown_message_type", uicontrol.CodeUnsupportedVersion: "unsupported_version",
		uicontrol.CodeUnsupportedProfile: "unsupported_profile", uicontrol.CodeUnsupportedExtension: "unsupported_extension",
		uicontrol.CodeUnknownSession: "unknown_session", uicontrol.CodeSessionNotActive: "session_not_active",
		uicontrol.CodePermissionDenied: "permission_denied", uicontrol.CodeCapabilityUnavailable: "capability_unavailable",
		uicontrol.CodeTimeout: "timeout", uicontrol.CodeRateLimited: "rate_limited",
		uicontrol.CodeStateConflict: "state_conflict", uicontrol.CodeInternalError: "internal_error",
	}
	if len(codes) != 14 {
		t.Fatalf("%d codes, §10 has 14", len(codes))
	}
	for code, wire := range codes {
		if string(code) != wire {
			t.Errorf("code %q, §10 spells it %q", code, wire)
		}
		e := uicontrol.NewError(code, "m")
		if !errors.Is(e, code) {
			t.Errorf("%s does not match its code with errors.Is", code)
		}
		for other := range codes {
			if other != code && errors.Is(e, other) {
				t.Errorf("%s is also %s", code, other)
			}
		}
		if e.Retryable != (code == uicontrol.CodeRateLimited) {
			t.Errorf("%s: retryable %v", code, e.Retryable)
		}
		b, _ := json.Marshal(e)
		if want := `{"code":"` + string(code) + `","message":"m"`; !strings.HasPrefix(string(b), want) {
			t.Errorf("wire form %s", b)
		}
	}
	// A vendor code matches as the codes of §10 do.
	if e := uicontrol.NewError("x.vendor.oops", ""); !errors.Is(e, uicontrol.Code("x.vendor.oops")) || errors.Is(e, uicontrol.CodeInternalError) || e.Error() != "uiap: x.vendor.oops" {
		t.Errorf("vendor code: %v, unwraps to %v", e, errors.Unwrap(e))
	}
}
