package uiapworkflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/internal/uiapwire"
	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/workflow"
)

// ExtWorkflow is the ext entry of a session.initialize that selects the
// workflow a session drives: "ext": {"agentry.workflow": {"name": "store"}}.
const ExtWorkflow = "agentry.workflow"

// Mux serves every workflow registered on an engine (when it is made)
// through one Serve function, one Server per workflow. A connection's
// workflow is, in this order: the one its context names (WithWorkflow —
// agentry serve sets it from the WebSocket URL's ?workflow=), the one the
// session.initialize's ext entry ExtWorkflow names, or the engine's
// first workflow by name (the only one, usually). A session.resume goes
// to the workflow whose session it names — also one another replica
// started, when Options.App.Sessions is a store they share. Its methods
// are safe for concurrent use.
type Mux struct {
	servers map[string]*Server
	order   []string
	source  uicontrol.EndpointRef // the apps' source, for the refusals the Mux sends itself
}

// NewMux returns a Mux over the workflows registered on engine; opts
// (may be nil) applies to each.
func NewMux(engine *workflow.Engine, opts *Options) (*Mux, error) {
	m := &Mux{servers: map[string]*Server{}}
	if opts != nil {
		m.source = opts.App.Source
	}
	for _, w := range engine.Workflows() {
		s, err := New(engine, w.Name, opts)
		if err != nil {
			return nil, err
		}
		m.servers[w.Name] = s
		m.order = append(m.order, w.Name)
	}
	if len(m.order) == 0 {
		return nil, errors.New("uiapworkflow: the engine has no workflows")
	}
	return m, nil
}

// Has reports whether the Mux serves the workflow name.
func (m *Mux) Has(name string) bool { return m.servers[name] != nil }

type workflowKey struct{}

// WithWorkflow returns ctx naming the workflow the connections served
// under it drive.
func WithWorkflow(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, workflowKey{}, name)
}

// ErrUnknownWorkflow is what Serve returns for a connection that selects
// a workflow the Mux does not serve: its first message, a request, is
// answered bad_request (details.workflow names the workflow) and the
// connection is closed.
var ErrUnknownWorkflow = errors.New("uiapworkflow: unknown workflow")

// Serve runs one connection (see uicontrol.App.Serve) on the Server of
// its workflow.
func (m *Mux) Serve(ctx context.Context, t uicontrol.Transport) error {
	first, err := t.Receive(ctx)
	if err != nil {
		_ = t.Close()
		return nil
	}
	var msg struct {
		Type    string `json:"type"`
		Payload struct {
			SessionID string `json:"sessionId"`
		} `json:"payload"`
		Ext map[string]struct {
			Name string `json:"name"`
		} `json:"ext"`
	}
	_ = json.Unmarshal(first, &msg) // the app decodes it strictly
	name, _ := ctx.Value(workflowKey{}).(string)
	if name == "" && msg.Type == uiapwire.TypeResume {
		for _, n := range m.order {
			if m.servers[n].knows(msg.Payload.SessionID) {
				name = n
				break
			}
		}
		if s := m.servers[m.order[0]]; name == "" && s.opts.App.Sessions != nil && msg.Payload.SessionID != "" {
			// Started by another replica: the store names the workflow.
			if data, _ := s.lookup(ctx, msg.Payload.SessionID); data != nil && m.servers[data.Workflow] != nil {
				name = data.Workflow
			}
		}
	}
	if name == "" {
		name = msg.Ext[ExtWorkflow].Name
	}
	if name == "" {
		name = m.order[0]
	}
	s := m.servers[name]
	if s == nil {
		e := uicontrol.NewError(uicontrol.CodeBadRequest, fmt.Sprintf("unknown workflow %q", name))
		e.Details = map[string]any{"workflow": name}
		refuse(ctx, t, first, m.source, e)
		_ = t.Close()
		return fmt.Errorf("%w %q", ErrUnknownWorkflow, name)
	}
	return s.serve(ctx, t, first)
}

// refuse answers raw, a message no app will read, with e when raw is a
// readable request, so that the request is not left unanswered (UIAP
// Core §5, §10 rule 1). What cannot be read is not answered (there is no
// app to say what is wrong with it); the caller then closes the
// connection. It sends on t directly: the caller must be its only
// sender.
func refuse(ctx context.Context, t uicontrol.Transport, raw []byte, source uicontrol.EndpointRef, e *uicontrol.Error) {
	req, err := uicontrol.DecodeEnvelope(raw)
	if err != nil || req.Kind != uicontrol.KindRequest {
		return
	}
	if source.Role == "" {
		source.Role = "app"
	}
	if source.ID == "" {
		source.ID = "agentry-app"
	}
	p := *e
	p.FailedType = req.Type
	payload, err := json.Marshal(&p)
	if err != nil {
		return
	}
	out := &uicontrol.Envelope{UIAP: uicontrol.Version, Kind: uicontrol.KindError, Type: uiapwire.TypeError, ID: ids.New(),
		CorrelationID: req.ID, TS: ids.Now(), Source: source, Payload: payload}
	if b, err := out.MarshalJSON(); err == nil {
		_ = t.Send(ctx, b)
	}
}

// Close closes every Server.
func (m *Mux) Close() error {
	for _, s := range m.servers {
		_ = s.Close()
	}
	return nil
}
