package uiaptest

import (
	"encoding/json"
	"strings"

	"github.com/agentry-dev/agentry/internal/uiapwire"
	"github.com/agentry-dev/agentry/uicontrol"
)

func envelopeCases() []testCase {
	return []testCase{
		{"UIAP_4_1_RequiredFieldMissing", testRequiredFieldMissing},
		{"UIAP_4_1_RequiredFieldMissingBeforeHandshake", testRequiredFieldMissingBeforeHandshake},
		{"UIAP_4_1_PayloadMustBeObject", testPayloadMustBeObject},
		{"UIAP_4_1_ResponseWithoutCorrelationId", testResponseWithoutCorrelationID},
		{"UIAP_4_1_FieldTypes", testFieldTypes},
		{"UIAP_4_1_NullOptionalFieldsAbsent", testNullOptionalFields},
		{"UIAP_4_1_UnknownFieldsIgnored", testUnknownFieldsIgnored},
		{"UIAP_4_1_NotAMessage", testNotAMessage},
		{"UIAP_4_1_SizeLimit", testSizeLimit},
		{"UIAP_3_MessageIdLength", testMessageIDLength},
		{"UIAP_3_DuplicateMessageId", testDuplicateMessageID},
		{"UIAP_3_SessionIdOfAnotherSession", testForeignSessionID},
		{"UIAP_12_ExtNeverOverridesCore", testExtNeverOverridesCore},
		{"UIAP_12_RequiresEnforced", testRequiresEnforced},
		{"UIAP_11_VersionMismatchAfterHandshake", testVersionMismatch},
		{"UIAP_10_UnknownMessageType", testUnknownMessageType},
		{"UIAP_10_ErrorsAreNotAnswered", testErrorsNotAnswered},
		{"UIAP_10_HandlerErrors", testHandlerErrors},
		{"UIAP_5_EveryRequestAnsweredOnce", testEveryRequestAnswered},
	}
}

var requiredFields = []string{"uiap", "kind", "type", "id", "ts", "source", "payload"}

// §4.1 rule 1: each required field missing (or null) is invalid_message,
// correlated when the id could be read.
func testRequiredFieldMissing(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(initialize())
	for _, field := range requiredFields {
		for _, null := range []bool{false, true} {
			m := p.msg("request", uiapwire.TypeCapabilitiesGet, nil)
			id := m["id"].(string)
			if null {
				m[field] = nil
			} else {
				delete(m, field)
			}
			p.send(m)
			if field == "id" {
				id = ""
			}
			pl := p.error(id, uicontrol.CodeInvalidMessage)
			if field != "type" && pl["failedType"] != uiapwire.TypeCapabilitiesGet {
				h.Errorf("%s missing: failedType = %v", field, pl["failedType"])
			}
		}
	}
	// The session is still usable.
	id := p.request(uiapwire.TypeCapabilitiesGet, nil)
	p.response(id, uiapwire.TypeCapabilitiesList)
}

func testRequiredFieldMissingBeforeHandshake(h *h) {
	p := h.rawAgent(h.app(nil))
	for _, field := range requiredFields {
		m := p.msg("request", uiapwire.TypeInitialize, initialize())
		id := m["id"].(string)
		delete(m, field)
		p.send(m)
		if field == "id" {
			id = ""
		}
		p.error(id, uicontrol.CodeInvalidMessage)
	}
	p.handshake(initialize())
}

// §4.1 rule 2: payload is never null, always an object.
func testPayloadMustBeObject(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(initialize())
	for _, payload := range []any{nil, []any{}, []any{msg{}}, "x", 1, true} {
		m := p.msg("request", uiapwire.TypeCapabilitiesGet, nil)
		m["payload"] = payload
		p.send(m)
		p.error(m["id"].(string), uicontrol.CodeInvalidMessage)
	}
	// The payload of a core request must have its members' types too.
	id := p.request(uiapwire.TypeInitialize, msg{"supportedVersions": "0.1", "peer": msg{"role": "agent"}})
	p.error(id, uicontrol.CodeStateConflict) // the state is checked before the payload of a second initialize
	id = p.request(uiapwire.TypeCapabilitiesGet, msg{"include": "actions"})
	p.error(id, uicontrol.CodeInvalidMessage)
}

// §4.1 rule 3: correlationId is mandatory for responses.
func testResponseWithoutCorrelationID(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(initialize())
	m := p.msg("response", "x.test.answer", nil)
	p.send(m)
	p.error(m["id"].(string), uicontrol.CodeInvalidMessage)
	// A response to nothing pending is dropped.
	m = p.msg("response", "x.test.answer", nil)
	m["correlationId"] = "agent-999"
	p.send(m)
	p.silence()
}

// The envelope fields must have their types (§3, §4).
func testFieldTypes(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(initialize())
	for _, tc := range []struct {
		field string
		value any
	}{
		{"uiap", 0.1}, {"uiap", "v0.1"}, {"uiap", "1"}, {"uiap", ""},
		{"kind", "notify"}, {"kind", "Request"}, {"kind", 1},
		{"type", ""}, {"type", 7}, {"type", "error"},
		{"ts", "yesterday"}, {"ts", "2026-03-26T13:00:00+01:00"}, {"ts", "2026-03-26"}, {"ts", 1774530000},
		{"source", "agent"}, {"source", msg{"role": "agent"}}, {"source", msg{"id": "x"}}, {"source", msg{"role": "", "id": "x"}},
		{"target", msg{"role": 1, "id": "x"}}, {"target", "app"},
		{"sessionId", ""}, {"sessionId", 5}, {"sessionId", strings.Repeat("s", 129)},
		{"correlationId", ""}, {"correlationId", 5},
		{"seq", -1}, {"seq", 1.5}, {"seq", "1"},
		{"requires", "web@0.1"}, {"requires", []any{""}}, {"requires", []any{1}},
		{"ext", []any{}}, {"ext", "x"},
	} {
		m := p.msg("request", uiapwire.TypeCapabilitiesGet, nil)
		m[tc.field] = tc.value
		p.send(m)
		p.error(m["id"].(string), uicontrol.CodeInvalidMessage)
	}
	// Accepted forms.
	for _, tc := range []struct {
		field string
		value any
	}{
		{"ts", "2026-03-26T13:00:00Z"}, {"ts", "2026-03-26T13:00:00.123456+00:00"},
		{"target", msg{"role": "app", "id": "uiaptest-app", "instanceId": "tab-1"}},
		{"source", msg{"role": "bridge", "id": "b", "x-extra": 1}},
		{"seq", 0}, {"seq", 42},
	} {
		m := p.msg("request", uiapwire.TypeCapabilitiesGet, nil)
		m[tc.field] = tc.value
		p.send(m)
		p.response(m["id"].(string), uiapwire.TypeCapabilitiesList)
	}
}

// §4.1 rule 7: null where an optional field could be is its absence.
func testNullOptionalFields(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(initialize())
	m := p.msg("request", uiapwire.TypeCapabilitiesGet, msg{"include": nil})
	for _, f := range []string{"sessionId", "correlationId", "target", "seq", "requires", "ext"} {
		m[f] = nil
	}
	p.send(m)
	pl := p.response(m["id"].(string), uiapwire.TypeCapabilitiesList)
	if d := jsonEqual(h, rawJSON(sampleCapabilities), pl["capabilities"]); d != "" {
		h.Errorf("include null is absent: full document expected (-want +got):\n%s", d)
	}
}

// §2 rule 4, §4.1 rule 6: unknown optional fields are ignored, in the
// envelope and in payloads.
func testUnknownFieldsIgnored(h *h) {
	p := h.rawAgent(h.app(nil))
	init := initialize()
	init["x-future"] = msg{"a": 1}
	init["peer"].(msg)["mood"] = "curious"
	m := p.msg("request", uiapwire.TypeInitialize, init)
	m["priority"] = "high"
	m["Payload"] = "case matters: this is not payload"
	p.send(m)
	pl := p.response(m["id"].(string), uiapwire.TypeInitialized)
	p.sessionID = pl["sessionId"].(string)
	m = p.msg("request", typeEcho, msg{"x": 1})
	m["trace"] = []any{1, 2}
	p.send(m)
	if got := p.response(m["id"].(string), "x.test.echoed"); got["x"] != 1.0 {
		h.Errorf("echo payload = %v", got)
	}
}

// Bytes that are not one JSON object are invalid_message without a
// correlationId (no id could be read).
func testNotAMessage(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(initialize())
	valid, _ := json.Marshal(p.msg("request", uiapwire.TypeCapabilitiesGet, nil))
	for _, b := range [][]byte{
		[]byte("hello"), []byte(""), []byte("null"), []byte("[]"), []byte(`"x"`),
		[]byte(`{"uiap":"0.1"`),
		append(append([]byte{}, valid...), valid...),       // two objects
		append([]byte(`{"x":"`+"\xff"+`",`), valid[1:]...), // invalid UTF-8
		[]byte(`{"id":"a","id":"b"}`),                      // duplicate member
		[]byte(strings.Replace(string(valid), `"kind":"request"`, `"kind":"request","kind":"event"`, 1)),
	} {
		p.sendRaw(b)
		p.error("", uicontrol.CodeInvalidMessage)
	}
}

// Decoding is size-limited: a message over the limit is refused unread.
func testSizeLimit(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(initialize())
	m := p.msg("request", typeEcho, msg{"pad": strings.Repeat("x", 64<<10)})
	p.send(m)
	p.error("", uicontrol.CodeInvalidMessage)
	m = p.msg("request", typeEcho, msg{"pad": strings.Repeat("x", 60<<10)})
	p.send(m)
	p.response(m["id"].(string), "x.test.echoed")
}

// §3: a MessageId has 1..128 characters.
func testMessageIDLength(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(initialize())
	for _, id := range []string{"", strings.Repeat("i", 129), strings.Repeat("é", 129)} {
		m := p.msg("request", uiapwire.TypeCapabilitiesGet, nil)
		m["id"] = id
		p.send(m)
		p.error("", uicontrol.CodeInvalidMessage)
	}
	for _, id := range []string{"1", strings.Repeat("i", 128), strings.Repeat("é", 128)} {
		m := p.msg("request", uiapwire.TypeCapabilitiesGet, nil)
		m["id"] = id
		p.send(m)
		p.response(id, uiapwire.TypeCapabilitiesList)
	}
}

// §3: a MessageId is unique within a session.
func testDuplicateMessageID(h *h) {
	p := h.rawAgent(h.app(nil))
	init := p.msg("request", uiapwire.TypeInitialize, initialize())
	p.send(init)
	p.sessionID = p.response(init["id"].(string), uiapwire.TypeInitialized)["sessionId"].(string)
	m := p.msg("request", uiapwire.TypeCapabilitiesGet, nil)
	p.send(m)
	p.response(m["id"].(string), uiapwire.TypeCapabilitiesList)
	m["type"] = typeEcho
	p.send(m)
	p.error(m["id"].(string), uicontrol.CodeInvalidMessage)
	m = p.msg("event", "x.test.happened", nil)
	m["id"] = init["id"]
	p.send(m)
	p.error(init["id"].(string), uicontrol.CodeInvalidMessage)
}

// A message naming another session than the connection's is refused.
func testForeignSessionID(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(initialize())
	m := p.msg("request", uiapwire.TypeCapabilitiesGet, nil)
	m["sessionId"] = "another-session"
	p.send(m)
	p.error(m["id"].(string), uicontrol.CodeUnknownSession)
	// sessionId SHOULD be present after the handshake, but its absence is
	// no error.
	m = p.msg("request", uiapwire.TypeCapabilitiesGet, nil)
	delete(m, "sessionId")
	p.send(m)
	p.response(m["id"].(string), uiapwire.TypeCapabilitiesList)
}

// §4.1 rule 5, §12 rules 1, 2 and 5: ext holds extension data by
// extension ID, never a core field; unnegotiated extensions are ignored.
func testExtNeverOverridesCore(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(initialize())
	for _, ext := range []msg{
		{"payload": msg{"include": []any{"roles"}}},
		{"type": "x.test.echo"},
		{"sessionId": "s"},
		{"session.resume": msg{}},
		{"capabilities": msg{}},
		{"": 1},
	} {
		m := p.msg("request", uiapwire.TypeCapabilitiesGet, nil)
		m["ext"] = ext
		p.send(m)
		p.error(m["id"].(string), uicontrol.CodeInvalidMessage)
	}
	m := p.msg("request", uiapwire.TypeCapabilitiesGet, nil)
	m["ext"] = msg{"x.vendor.unknown": msg{"payload": "ignored"}, extPolicy: msg{"decision": "allow"}, "uicp.policy": msg{}}
	p.send(m)
	pl := p.response(m["id"].(string), uiapwire.TypeCapabilitiesList)
	if d := jsonEqual(h, rawJSON(sampleCapabilities), pl["capabilities"]); d != "" {
		h.Errorf("ext changed the request (-want +got):\n%s", d)
	}
}

// §12 rules 3–4: an unfulfilled requires is unsupported_extension or
// unsupported_profile.
func testRequiresEnforced(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(initialize())
	for _, tc := range []struct {
		requires []any
		code     uicontrol.Code
	}{
		{[]any{"x.vendor.feature"}, uicontrol.CodeUnsupportedExtension},
		{[]any{"uiap.workflow"}, uicontrol.CodeUnsupportedExtension},
		{[]any{"uiap.policy@0.2"}, uicontrol.CodeUnsupportedExtension},
		{[]any{"mobile@0.1"}, uicontrol.CodeUnsupportedProfile},
		{[]any{"web@0.2"}, uicontrol.CodeUnsupportedProfile},
		{[]any{"web@0.1", "x.vendor.feature"}, uicontrol.CodeUnsupportedExtension},
	} {
		m := p.msg("request", uiapwire.TypeCapabilitiesGet, nil)
		m["requires"] = tc.requires
		p.send(m)
		p.error(m["id"].(string), tc.code)
	}
	for _, req := range [][]any{{"web@0.1"}, {"web"}, {"uiap.policy"}, {"uicp.policy@0.1"}, {"web@0.1", "uiap.policy@0.1"}, {}} {
		m := p.msg("request", uiapwire.TypeCapabilitiesGet, nil)
		m["requires"] = req
		p.send(m)
		p.response(m["id"].(string), uiapwire.TypeCapabilitiesList)
	}
	// Events with unfulfilled requires are answered too: requires is
	// checked for every kind.
	m := p.msg("event", "x.test.happened", nil)
	m["requires"] = []any{"x.vendor.feature"}
	p.send(m)
	p.error(m["id"].(string), uicontrol.CodeUnsupportedExtension)
}

// §11: after the handshake every message carries uiap = selectedVersion.
func testVersionMismatch(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(initialize())
	for _, v := range []string{"0.2", "1.0", "00.1"} {
		m := p.msg("request", uiapwire.TypeCapabilitiesGet, nil)
		m["uiap"] = v
		p.send(m)
		pl := p.error(m["id"].(string), uicontrol.CodeUnsupportedVersion)
		if d, _ := pl["details"].(msg); d["selectedVersion"] != "0.1" {
			h.Errorf("details = %v, want selectedVersion 0.1", pl["details"])
		}
	}
	id := p.request(uiapwire.TypeCapabilitiesGet, nil)
	p.response(id, uiapwire.TypeCapabilitiesList)
}

// §10 unknown_message_type: a request of a type nobody handles; unknown
// events need no reply and get none.
func testUnknownMessageType(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(initialize())
	for _, typ := range []string{"x.nope.do", "session.nope", "capabilities.list", "capabilities.changed", "uiap.workflow.start"} {
		id := p.request(typ, nil)
		pl := p.error(id, uicontrol.CodeUnknownMessageType)
		if pl["failedType"] != typ {
			h.Errorf("failedType = %v, want %s", pl["failedType"], typ)
		}
	}
	p.send(p.msg("event", "x.nope.happened", nil))
	p.silence()
}

// Errors are never answered, not even invalid ones (no error loops).
func testErrorsNotAnswered(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(initialize())
	m := p.msg("error", "error", msg{"code": "internal_error", "message": "x"})
	m["correlationId"] = "app-1"
	p.send(m)
	m = p.msg("error", "error", msg{"code": 7})
	p.send(m)
	m = p.msg("error", "error", nil)
	delete(m, "ts")
	p.send(m)
	p.silence()
}

// Application handlers answer with a response or a spec error; a panic
// or an unencodable reply is internal_error.
func testHandlerErrors(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(initialize())
	id := p.request(typeEcho, msg{"n": 1, "nested": msg{"a": []any{true}}})
	if d := jsonEqual(h, msg{"n": 1, "nested": msg{"a": []any{true}}}, p.response(id, "x.test.echoed")); d != "" {
		h.Errorf("echo (-want +got):\n%s", d)
	}
	for _, code := range []uicontrol.Code{uicontrol.CodeCapabilityUnavailable, uicontrol.CodePermissionDenied, uicontrol.CodeRateLimited, "x.test.vendor_error"} {
		id := p.request(typeFail, msg{"Code": string(code)})
		pl := p.error(id, code)
		if got, _ := pl["retryable"].(bool); got != (code == uicontrol.CodeRateLimited) {
			h.Errorf("%s: retryable = %v", code, pl["retryable"])
		}
		if pl["failedType"] != typeFail {
			h.Errorf("failedType = %v", pl["failedType"])
		}
	}
	id = p.request(typePanic, nil)
	if pl := p.error(id, uicontrol.CodeInternalError); strings.Contains(pl["message"].(string), "uiaptest") {
		h.Errorf("internal text leaked: %v", pl["message"])
	}
	id = p.request(typeBadReply, nil)
	p.error(id, uicontrol.CodeInternalError)
}

// §5, §10 rule 1: every request is answered by exactly one response or
// error.
func testEveryRequestAnswered(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(initialize())
	want := map[string]bool{}
	for i := range 30 {
		var m msg
		switch i % 6 {
		case 0:
			m = p.msg("request", uiapwire.TypeCapabilitiesGet, nil)
		case 1:
			m = p.msg("request", typeEcho, msg{"i": i})
		case 2:
			m = p.msg("request", "x.nope.do", nil)
		case 3:
			m = p.msg("request", uiapwire.TypeCapabilitiesGet, nil)
			m["payload"] = []any{}
		case 4:
			m = p.msg("request", uiapwire.TypePing, msg{"nonce": "n"})
		case 5:
			m = p.msg("request", typeFail, msg{"Code": "timeout"})
		}
		want[m["id"].(string)] = true
		p.send(m)
	}
	for range len(want) {
		m := p.next()
		c, _ := m["correlationId"].(string)
		if !want[c] {
			h.Fatalf("unexpected or second answer: %v", m)
		}
		delete(want, c)
	}
	p.silence()
}
