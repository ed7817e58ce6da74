package uicontrol_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/agentry-dev/agentry/uicontrol"
)

// hostileMessages are wireInitialize with trailing bytes, invalid UTF-8
// or a lone surrogate escape: not one JSON text that can be read without
// changing it.
var hostileMessages = []struct{ name, msg string }{
	{"trailing }x", wireInitialize + `}x`},
	{"trailing {}", wireInitialize + `{}`},
	{"\\xff in a string", strings.Replace(wireInitialize, `"id":"a"`, "\"id\":\"a\xff\"", 1)},
	{"lone surrogate in the payload", strings.Replace(wireInitialize, `"role":"agent"}}`, `"role":"agent","name":"\ud800"}}`, 1)},
	{"reversed surrogates in an unknown member", strings.Replace(wireInitialize, `"uiap":"0.1"`, `"uiap":"0.1","x":"\udc00\ud800"`, 1)},
	{"lone surrogate in a member name", strings.Replace(wireInitialize, `"payload":{`, `"payload":{"\udbff":1,`, 1)},
}

// TestUIAP_4_1_DecodeEnvelopeRefusesUnreadableText: a message with
// trailing bytes, invalid UTF-8 or a lone surrogate escape anywhere is
// invalid_message (DESIGN §2) — encoding/json would read the escape as
// U+FFFD and the message would be acted on changed.
func TestUIAP_4_1_DecodeEnvelopeRefusesUnreadableText(t *testing.T) {
	if _, err := uicontrol.DecodeEnvelope([]byte(wireInitialize)); err != nil {
		t.Fatalf("the message before the changes: %v", err)
	}
	for _, tc := range hostileMessages {
		t.Run(tc.name, func(t *testing.T) {
			e, err := uicontrol.DecodeEnvelope([]byte(tc.msg))
			if e != nil || !errors.Is(err, uicontrol.CodeInvalidMessage) {
				t.Fatalf("DecodeEnvelope = %+v, %v; want an invalid_message error", e, err)
			}
		})
	}
}

// Over the HTTP binding the app answers such a first message with an
// invalid_message error instead of initializing a session.
func TestUIAP_HTTP_RefusesUnreadableText(t *testing.T) {
	for _, tc := range hostileMessages {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, s := httpServer(t, wireApp(t), nil)
				resp, body := do(t, s, "POST", "/uiap/sessions", "application/json", tc.msg)
				e, err := uicontrol.DecodeEnvelope(body)
				if resp.StatusCode != http.StatusCreated || err != nil {
					t.Fatalf("POST: %s %s (%v)", resp.Status, body, err)
				}
				if e.Kind != uicontrol.KindError || !strings.Contains(string(e.Payload), `"code":"invalid_message"`) {
					t.Errorf("answer %s %s, want an invalid_message error", e.Type, e.Payload)
				}
			})
		})
	}
}
