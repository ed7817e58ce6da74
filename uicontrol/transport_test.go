package uicontrol_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentry-dev/agentry/uicontrol"
)

// Pair keeps the Transport contract: order, delivery of what was sent
// before a close, ErrClosed after it, context cancellation.
func TestPair(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		a, b := uicontrol.Pair()
		for _, m := range []string{"1", "2", "3"} {
			if err := a.Send(ctx, []byte(m)); err != nil {
				t.Fatal(err)
			}
		}
		got, _ := b.Receive(ctx)
		if string(got) != "1" {
			t.Errorf("first = %s", got)
		}
		_ = a.Close()
		for _, want := range []string{"2", "3"} {
			if got, err := b.Receive(ctx); err != nil || string(got) != want {
				t.Errorf("after the peer's close: %s, %v; want %s", got, err, want)
			}
		}
		if _, err := b.Receive(ctx); !errors.Is(err, uicontrol.ErrClosed) {
			t.Errorf("Receive after close: %v", err)
		}
		if err := b.Send(ctx, []byte("x")); !errors.Is(err, uicontrol.ErrClosed) {
			t.Errorf("Send after close: %v", err)
		}
		if _, err := a.Receive(ctx); !errors.Is(err, uicontrol.ErrClosed) {
			t.Errorf("Receive on the closed end: %v", err)
		}

		c, d := uicontrol.Pair()
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if _, err := d.Receive(tctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Receive with nothing sent: %v", err)
		}
		for {
			if err := c.Send(tctx, []byte("fill")); err != nil {
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Send on a full pair: %v", err)
				}
				break
			}
		}
		_ = d.Close()
		_ = d.Close()
	})
}

// The core namespaces belong to the package (§6): applications cannot
// handle, emit or call into them.
func TestUIAP_6_CoreNamespacesReserved(t *testing.T) {
	app := uicontrol.NewApp(nil)
	defer app.Close()
	for _, typ := range []string{"session.x", "capabilities.get", "error", ""} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Handle(%q) did not panic", typ)
				}
			}()
			app.Handle(typ, nil)
		}()
	}
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		app := uicontrol.NewApp(nil)
		defer app.Close()
		appEnd, agentEnd := uicontrol.Pair()
		go app.Serve(ctx, appEnd)
		a, err := uicontrol.Connect(ctx, agentEnd, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		for _, typ := range []string{"session.terminate", "error", ""} {
			if _, err := a.Call(ctx, &uicontrol.Request{Type: typ}); err == nil {
				t.Errorf("Call(%q) accepted", typ)
			}
		}
		s := app.Session(a.Session().ID)
		for _, typ := range []string{"session.x", "capabilities.changed", "error"} {
			if err := s.Emit(ctx, typ, nil); err == nil {
				t.Errorf("Emit(%q) accepted", typ)
			}
		}
		if info := s.Info(); info.ID != a.Session().ID || info.Peer.Role != "agent" || info.CapabilityDelivery != uicontrol.DeliveryDeferred {
			t.Errorf("app's SessionInfo %+v", info)
		}
		if doc, rev := app.Capabilities(); doc == nil || rev == "" {
			t.Errorf("Capabilities: %v %q", doc, rev)
		}
	})
}
