package uiapworkflow_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/internal/memstore"
	"github.com/agentry-dev/agentry/internal/uiapsession"
	"github.com/agentry-dev/agentry/internal/uiapsession/uiapsessiontest"
	"github.com/agentry-dev/agentry/internal/uiapwire"
	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/uicontrol/uiapworkflow"
	"github.com/agentry-dev/agentry/workflow"
)

// replicas returns n Muxes on one workflow store and one UIAP session
// store, as n `agentry serve` replicas on one database; each serves the
// workflows "another" (first by name) and "store".
func replicas(t *testing.T, n int) ([]*uiapworkflow.Mux, []*uiapsessiontest.Mortal, workflow.SessionStore) {
	t.Helper()
	sessions, uiap := memstore.New().Sessions(), uiapsession.NewMemory()
	var muxes []*uiapworkflow.Mux
	var stores []*uiapsessiontest.Mortal
	for range n {
		e := workflow.NewEngine(sessions, nil)
		other := builtin.Store()
		other.Name = "another"
		if err := e.Register(builtin.Store()); err != nil {
			t.Fatal(err)
		}
		if err := e.Register(other); err != nil {
			t.Fatal(err)
		}
		m := &uiapsessiontest.Mortal{Store: uiap}
		mux, err := uiapworkflow.NewMux(e, &uiapworkflow.Options{App: uicontrol.AppOptions{Sessions: m, Logger: slog.New(slog.DiscardHandler)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mux.Close() })
		muxes, stores = append(muxes, mux), append(stores, m)
	}
	return muxes, stores, sessions
}

// TestUIAP_8_2_ResumeOnAnotherReplica: a session of the store workflow
// started on one replica is resumed on another after the first died: the
// same UAIP session, at the stage it reached, with the same document;
// every event arrives once, numbered on from where it was.
func TestUIAP_8_2_ResumeOnAnotherReplica(t *testing.T) {
	muxes, stores, sessions := replicas(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	appT, agentT := uicontrol.Pair()
	go muxes[0].Serve(uiapworkflow.WithWorkflow(ctx, "store"), appT)
	var mu sync.Mutex
	var seqs []int64
	opts := agentOptions()
	opts.OnEvent = func(e *uicontrol.Envelope) {
		mu.Lock()
		seqs = append(seqs, e.Seq)
		mu.Unlock()
	}
	a, err := uicontrol.Connect(ctx, agentT, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	call(t, a, "transition:cart", nil)
	call(t, a, "add_to_cart", map[string]any{"product_id": "SKU-003", "quantity": 1})
	before := a.Capabilities()
	var info uiapworkflow.Info
	if err := json.Unmarshal(before.Capabilities.Extra["workflow"], &info); err != nil || info.Name != "store" {
		t.Fatalf("workflow member: %s, %v", before.Capabilities.Extra["workflow"], err)
	}
	mu.Lock()
	n := len(seqs)
	mu.Unlock()
	if n == 0 {
		t.Fatal("no events before the replica died")
	}

	stores[0].Kill() // replica 1 is killed
	appT.Close()
	deadline := time.Now().Add(10 * time.Second)
	for a.State() != uicontrol.StateInterrupted && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	appT2, agentT2 := uicontrol.Pair()
	go muxes[1].Serve(ctx, appT2) // no workflow named: the store names it
	if err := a.Resume(ctx, agentT2); err != nil {
		t.Fatalf("Resume on the other replica: %v", err)
	}
	caps, err := a.GetCapabilities(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if caps.Revision != before.Revision || currentState(t, caps.Capabilities) != "cart" {
		t.Errorf("document on the other replica: revision %s at %s; want %s at cart", caps.Revision, currentState(t, caps.Capabilities), before.Revision)
	}
	call(t, a, uiapworkflow.ActionStateInput, map[string]any{"state_updates": map[string]any{"user.email": "ada@example.com"}})
	call(t, a, "transition:checkout", nil)
	if got := currentState(t, a.Capabilities().Capabilities); got != "checkout" {
		t.Errorf("after transition:checkout on the other replica the document is at %q", got)
	}
	mu.Lock()
	got := append([]int64(nil), seqs...)
	mu.Unlock()
	if len(got) <= n {
		t.Fatalf("no events on the other replica: %v", got)
	}
	for i, s := range got {
		if s != int64(i+1) {
			t.Fatalf("event seqs %v: want 1, 2, 3, … once each", got)
		}
	}
	s, err := sessions.Get(ctx, info.SessionID)
	if err != nil || s.Stage != "checkout" || s.State["user.email"] != "ada@example.com" {
		t.Errorf("UAIP session %s: %+v, %v", info.SessionID, s, err)
	}
	if err := a.Terminate(ctx, "done"); err != nil {
		t.Error(err)
	}
}

// raw is a hand-driven agent end.
type raw struct {
	t  *testing.T
	tr uicontrol.Transport
	n  int
}

func (r *raw) request(ctx context.Context, typ string, payload any) string {
	r.t.Helper()
	r.n++
	id := typ + "-" + string(rune('a'+r.n))
	b, _ := json.Marshal(map[string]any{"uiap": "0.1", "kind": "request", "type": typ, "id": id, "ts": "2026-03-26T13:00:00.000Z",
		"source": map[string]any{"role": "agent", "id": "a"}, "payload": payload})
	if err := r.tr.Send(ctx, b); err != nil {
		r.t.Fatal(err)
	}
	return id
}

func (r *raw) next(ctx context.Context) *uicontrol.Envelope {
	r.t.Helper()
	b, err := r.tr.Receive(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	e, err := uicontrol.DecodeEnvelope(b)
	if err != nil {
		r.t.Fatal(err)
	}
	return e
}

// A replica serving a connection for another workflow (agentry serve's
// ?workflow=) does not take up a session of the store workflow: it is
// refused unknown_session, the token stays good, and the replica
// serving the right workflow resumes it.
func TestUIAP_8_2_ResumeOnAnotherReplicaOtherWorkflow(t *testing.T) {
	muxes, stores, _ := replicas(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	appT, agentT := uicontrol.Pair()
	go muxes[0].Serve(uiapworkflow.WithWorkflow(ctx, "store"), appT)
	p := &raw{t: t, tr: agentT}
	p.request(ctx, uiapwire.TypeInitialize, map[string]any{"supportedVersions": []string{"0.1"}, "peer": map[string]any{"role": "agent"}})
	var init struct {
		SessionID   string `json:"sessionId"`
		ResumeToken string `json:"resumeToken"`
	}
	if e := p.next(ctx); e.Type != uiapwire.TypeInitialized || json.Unmarshal(e.Payload, &init) != nil {
		t.Fatalf("initialize: %+v", e)
	}
	stores[0].Kill()
	appT.Close()
	for _, c := range []struct {
		workflow string
		want     string
	}{
		{"another", uiapwire.TypeError},
		{"store", uiapwire.TypeResumed},
	} {
		appT, agentT := uicontrol.Pair()
		go muxes[1].Serve(uiapworkflow.WithWorkflow(ctx, c.workflow), appT)
		q := &raw{t: t, tr: agentT, n: 10}
		q.request(ctx, uiapwire.TypeResume, map[string]any{"sessionId": init.SessionID, "resumeToken": init.ResumeToken})
		e := q.next(ctx)
		if e.Type != c.want {
			t.Fatalf("resume through workflow %s: %s %s; want %s", c.workflow, e.Type, e.Payload, c.want)
		}
		if e.Kind == uicontrol.KindError {
			var p uicontrol.Error
			if err := json.Unmarshal(e.Payload, &p); err != nil || p.Code != uicontrol.CodeUnknownSession {
				t.Errorf("resume through workflow %s: %s", c.workflow, e.Payload)
			}
		}
		agentT.Close()
	}
}

// A session resumed on another replica, moved on a stage there, and
// resumed back on the first — which still holds its old copy, a stage
// behind — is served at the stage it reached, not the stale one.
func TestUIAP_8_2_ResumeBackOnFormerReplica(t *testing.T) {
	muxes, _, _ := replicas(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connect := func(i int) (app, agent uicontrol.Transport) {
		app, agent = uicontrol.Pair()
		go muxes[i].Serve(uiapworkflow.WithWorkflow(ctx, "store"), app)
		return app, agent
	}
	lose := func(a *uicontrol.Agent, app uicontrol.Transport) {
		app.Close()
		deadline := time.Now().Add(10 * time.Second)
		for a.State() != uicontrol.StateInterrupted && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
	appT, agentT := connect(0)
	a, err := uicontrol.Connect(ctx, agentT, agentOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	call(t, a, "transition:cart", nil)
	call(t, a, "add_to_cart", map[string]any{"product_id": "SKU-003", "quantity": 1})
	lose(a, appT)
	appT, agentT = connect(1)
	if err := a.Resume(ctx, agentT); err != nil {
		t.Fatalf("Resume on the second replica: %v", err)
	}
	call(t, a, uiapworkflow.ActionStateInput, map[string]any{"state_updates": map[string]any{"user.email": "ada@example.com"}})
	call(t, a, "transition:checkout", nil)
	lose(a, appT)
	_, agentT = connect(0)
	if err := a.Resume(ctx, agentT); err != nil {
		t.Fatalf("Resume back on the first replica: %v", err)
	}
	caps, err := a.GetCapabilities(ctx)
	if err != nil || currentState(t, caps.Capabilities) != "checkout" {
		t.Fatalf("document back on the first replica: %v at %q, want checkout", err, currentState(t, caps.Capabilities))
	}
	call(t, a, "place_order", map[string]any{"payment_method": "invoice"})
	if err := a.Terminate(ctx, "done"); err != nil {
		t.Error(err)
	}
}
