package uiapworkflow_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/uicontrol/uiapworkflow"
)

// The Mux picks the workflow from the context, then from the
// session.initialize's ext, then takes the first by name.
func TestMuxSelectsTheWorkflow(t *testing.T) {
	engine := newEngine(t)
	other := builtin.Store()
	other.Name = "another"
	if err := engine.Register(other); err != nil {
		t.Fatal(err)
	}
	mux, err := uiapworkflow.NewMux(engine, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mux.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	initialize := func(ext string) string {
		return `{"uiap":"0.1","kind":"request","type":"session.initialize","id":"msg_1","ts":"2026-03-26T13:00:00.000Z",` +
			`"source":{"role":"agent","id":"a"},"payload":{"supportedVersions":["0.1"],"capabilityDelivery":"inline",` +
			`"peer":{"role":"agent"}}` + ext + `}`
	}
	for _, c := range []struct {
		name string
		ctx  context.Context
		ext  string
		want string
	}{
		{"default", ctx, "", "another"},
		{"ext", ctx, `,"ext":{"agentry.workflow":{"name":"store"}}`, "store"},
		{"context", uiapworkflow.WithWorkflow(ctx, "store"), `,"ext":{"agentry.workflow":{"name":"another"}}`, "store"},
	} {
		appT, agentT := uicontrol.Pair()
		go mux.Serve(c.ctx, appT)
		if err := agentT.Send(ctx, []byte(initialize(c.ext))); err != nil {
			t.Fatal(err)
		}
		raw, err := agentT.Receive(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Type    string `json:"type"`
			Payload struct {
				Capabilities struct {
					Workflow uiapworkflow.Info `json:"workflow"`
				} `json:"capabilities"`
			} `json:"payload"`
		}
		if err := json.Unmarshal(raw, &r); err != nil || r.Type != uicontrol.TypeInitialized || r.Payload.Capabilities.Workflow.Name != c.want {
			t.Errorf("%s: %s", c.name, raw)
		}
		agentT.Close()
	}
	// An unknown workflow closes the connection.
	appT, agentT := uicontrol.Pair()
	errc := make(chan error, 1)
	go func() { errc <- mux.Serve(ctx, appT) }()
	_ = agentT.Send(ctx, []byte(initialize(`,"ext":{"agentry.workflow":{"name":"nope"}}`)))
	if err := <-errc; err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown workflow: %v", err)
	}
}

// A session resumed over a new connection keeps its app and its UAIP
// session.
func TestResumeKeepsTheWorkflowSession(t *testing.T) {
	engine := newEngine(t)
	mux, err := uiapworkflow.NewMux(engine, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mux.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	appT, agentT := uicontrol.Pair()
	go mux.Serve(ctx, appT)
	a, err := uicontrol.Connect(ctx, agentT, agentOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	call(t, a, "transition:cart", nil)
	appT.Close() // the connection is lost
	deadline := time.Now().Add(10 * time.Second)
	for a.State() != uicontrol.StateInterrupted && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	appT2, agentT2 := uicontrol.Pair()
	go mux.Serve(ctx, appT2)
	if err := a.Resume(ctx, agentT2); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	call(t, a, "add_to_cart", map[string]any{"product_id": "SKU-003", "quantity": 1})
	caps, err := a.GetCapabilities(ctx)
	if err != nil || currentState(t, caps.Capabilities) != "cart" {
		t.Errorf("after resume: %v, %v", caps, err)
	}
	if err := a.Terminate(ctx, "done"); err != nil {
		t.Error(err)
	}
}
