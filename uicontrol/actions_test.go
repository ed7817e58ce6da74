package uicontrol_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/uiapwire"
	"github.com/agentry-dev/agentry/uicontrol"
)

// FuzzAppActionMessage sends arbitrary bytes to an App in a session that
// selected the Action Runtime and the policy extension, with actions of
// each risk registered, and checks what comes back: events and the
// app's own requests aside, at most one answer, correlated to the
// input's id when it has one, never a panic; the session then still
// answers a ping unless the input ended it.
func FuzzAppActionMessage(f *testing.F) {
	const head = `{"uiap":"0.1","kind":"request","id":"r","ts":"2026-03-26T13:00:00Z","source":{"role":"a","id":"b"},"requires":["uiap.action"],`
	for _, s := range []string{
		head + `"type":"action.request","payload":{"actionId":"low","args":{"a":1},"idempotencyKey":"k","timeoutMs":10}}`,
		head + `"type":"action.request","payload":{"actionId":"high","target":{"ref":"x"}}}`,
		head + `"type":"action.request","payload":{"actionId":"wait","timeoutMs":5}}`,
		head + `"type":"action.request","payload":{"actionId":"nope"}}`,
		head + `"type":"action.cancel","payload":{"requestId":"r"}}`,
		head + `"type":"action.confirm","payload":{"requestId":"r","actionId":"low"}}`,
		`{"uiap":"0.1","kind":"response","type":"action.confirmed","id":"c","correlationId":"x","ts":"2026-03-26T13:00:00Z","source":{"role":"a","id":"b"},"payload":{"confirmed":true}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		app := uicontrol.NewApp(&uicontrol.AppOptions{MaxMessageSize: 4 << 10, Logger: discard,
			Extensions: []uicontrol.ExtensionOffer{{ID: "uiap.policy", Versions: []string{"0.1"}}}})
		defer app.Close()
		run := func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.ActionRequest, progress func(uicontrol.ActionProgress)) (any, error) {
			progress(uicontrol.ActionProgress{Progress: 0.5})
			return req.Args, nil
		}
		app.HandleAction("low", uicontrol.RiskLow, run)
		app.HandleAction("high", uicontrol.RiskHigh, run)
		app.HandleAction("wait", uicontrol.RiskLow, func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.ActionRequest, progress func(uicontrol.ActionProgress)) (any, error) {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(20 * time.Millisecond):
				return nil, nil
			}
		})
		appEnd, agentEnd := uicontrol.Pair()
		defer agentEnd.Close()
		go app.Serve(ctx, appEnd)
		send := func(s []byte) {
			if err := agentEnd.Send(ctx, s); err != nil && !errors.Is(err, uicontrol.ErrClosed) {
				t.Fatal(err)
			}
		}
		recv := func() *uicontrol.Envelope {
			m, err := agentEnd.Receive(ctx)
			if errors.Is(err, uicontrol.ErrClosed) {
				return nil
			}
			if err != nil {
				t.Fatal(err)
			}
			e, err := uicontrol.DecodeEnvelope(m)
			if err != nil {
				t.Fatalf("app sent an invalid message: %v\n%s", err, m)
			}
			return e
		}
		send([]byte(`{"uiap":"0.1","kind":"request","type":"session.initialize","id":"fuzz-init","ts":"2026-03-26T13:00:00Z","source":{"role":"agent","id":"f"},"payload":{"supportedVersions":["0.1"],"supportedExtensions":[{"id":"uiap.action","versions":["0.1"]},{"id":"uiap.policy","versions":["0.1"]}],"peer":{"role":"agent"}}}`))
		if e := recv(); e == nil || e.Type != uiapwire.TypeInitialized {
			t.Fatalf("handshake: %+v", e)
		}
		send(b)
		send([]byte(`{"uiap":"0.1","kind":"request","type":"session.ping","id":"fuzz-ping","ts":"2026-03-26T13:00:00Z","source":{"role":"agent","id":"f"},"payload":{}}`))
		in, _ := uicontrol.DecodeEnvelope(b)
		answers := 0
		for {
			e := recv()
			if e == nil {
				return // the input terminated the session
			}
			if e.CorrelationID == "fuzz-ping" && e.Type == uiapwire.TypePong {
				break
			}
			if (in != nil && in.ID == "fuzz-ping") || e.Kind == uicontrol.KindEvent || e.Kind == uicontrol.KindRequest {
				continue
			}
			answers++
			if in != nil && e.CorrelationID != in.ID {
				t.Fatalf("answer correlated to %q, input id %q", e.CorrelationID, in.ID)
			}
		}
		if answers > 1 {
			t.Fatalf("%d answers to one message", answers)
		}
	})
}
