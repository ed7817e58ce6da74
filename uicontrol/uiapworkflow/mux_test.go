package uiapworkflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/uiapwire"
	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/uicontrol/uiapworkflow"
	"github.com/agentry-dev/agentry/workflow"
	"github.com/google/go-cmp/cmp"
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
		if err := json.Unmarshal(raw, &r); err != nil || r.Type != uiapwire.TypeInitialized || r.Payload.Capabilities.Workflow.Name != c.want {
			t.Errorf("%s: %s", c.name, raw)
		}
		agentT.Close()
	}
	// An unknown workflow: the request is answered bad_request, then the
	// connection closes.
	appT, agentT := uicontrol.Pair()
	errc := make(chan error, 1)
	go func() { errc <- mux.Serve(ctx, appT) }()
	_ = agentT.Send(ctx, []byte(initialize(`,"ext":{"agentry.workflow":{"name":"nope"}}`)))
	wantRefusal(t, ctx, agentT, "msg_1", uicontrol.CodeBadRequest, map[string]any{"workflow": "nope"})
	if err := <-errc; !errors.Is(err, uiapworkflow.ErrUnknownWorkflow) || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown workflow: %v", err)
	}
}

// wantRefusal checks that the next message on t is the error answering
// the request id with code and details, and that the connection then
// closes (UIAP Core §10 rule 1: the request is answered before).
func wantRefusal(t *testing.T, ctx context.Context, tr uicontrol.Transport, id string, code uicontrol.Code, details map[string]any) {
	t.Helper()
	raw, err := tr.Receive(ctx)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	e, err := uicontrol.DecodeEnvelope(raw)
	if err != nil {
		t.Fatalf("answer %s: %v", raw, err)
	}
	var p uicontrol.Error
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		t.Fatal(err)
	}
	want := uicontrol.Error{Code: code, Message: p.Message, FailedType: uiapwire.TypeInitialize, Details: details}
	if e.Kind != uicontrol.KindError || e.CorrelationID != id || e.Source.Role != "app" || p.Message == "" {
		t.Errorf("answer %s: want an error from the app correlated to %s", raw, id)
	}
	if d := cmp.Diff(want, p); d != "" {
		t.Errorf("error payload (-want +got):\n%s", d)
	}
	if raw, err := tr.Receive(ctx); !errors.Is(err, uicontrol.ErrClosed) {
		t.Errorf("after the refusal: %s, %v; want the connection closed", raw, err)
	}
}

// failingSessions is a session store whose Create fails: the engine cannot
// make a UAIP session. Every other method is unexpected.
type failingSessions struct{}

func (failingSessions) Create(context.Context, *workflow.Session) error {
	return errors.New("disk full at /var/lib/secret")
}
func (failingSessions) Get(context.Context, string) (*workflow.Session, error) {
	panic("unexpected Get")
}
func (failingSessions) Update(context.Context, *workflow.Session) error { panic("unexpected Update") }
func (failingSessions) Delete(context.Context, string) error            { panic("unexpected Delete") }
func (failingSessions) DeleteExpired(context.Context, time.Time) (int, error) {
	panic("unexpected DeleteExpired")
}

// When the engine cannot make the UAIP session, session.initialize is
// answered internal_error (the cause stays in the log) before the
// connection closes.
func TestInitializeAnsweredWhenTheEngineFails(t *testing.T) {
	engine := workflow.NewEngine(failingSessions{}, nil)
	if err := engine.Register(builtin.Store()); err != nil {
		t.Fatal(err)
	}
	mux, err := uiapworkflow.NewMux(engine, &uiapworkflow.Options{App: uicontrol.AppOptions{Logger: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	defer mux.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	appT, agentT := uicontrol.Pair()
	errc := make(chan error, 1)
	go func() { errc <- mux.Serve(ctx, appT) }()
	_, err = uicontrol.Connect(ctx, agentT, nil)
	var ue *uicontrol.Error
	if !errors.As(err, &ue) || ue.Code != uicontrol.CodeInternalError || ue.Message != "internal error" {
		t.Errorf("Connect: %v, want internal_error without the cause", err)
	}
	<-errc

	appT, agentT = uicontrol.Pair()
	go func() { errc <- mux.Serve(ctx, appT) }()
	init := `{"uiap":"0.1","kind":"request","type":"session.initialize","id":"msg_1","ts":"2026-03-26T13:00:00.000Z",` +
		`"source":{"role":"agent","id":"a"},"payload":{"supportedVersions":["0.1"],"peer":{"role":"agent"}}}`
	_ = agentT.Send(ctx, []byte(init))
	wantRefusal(t, ctx, agentT, "msg_1", uicontrol.CodeInternalError, nil)
	<-errc
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
