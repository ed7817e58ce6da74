package uiapworkflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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
// to the workflow whose session it names. Its methods are safe for
// concurrent use.
type Mux struct {
	servers map[string]*Server
	order   []string
}

// NewMux returns a Mux over the workflows registered on engine; opts
// (may be nil) applies to each.
func NewMux(engine *workflow.Engine, opts *Options) (*Mux, error) {
	m := &Mux{servers: map[string]*Server{}}
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
// a workflow the Mux does not serve (the connection is closed).
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
	if name == "" && msg.Type == uicontrol.TypeResume {
		for _, n := range m.order {
			if m.servers[n].knows(msg.Payload.SessionID) {
				name = n
				break
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
		_ = t.Close()
		return fmt.Errorf("%w %q", ErrUnknownWorkflow, name)
	}
	return s.serve(ctx, t, first)
}

// Close closes every Server.
func (m *Mux) Close() error {
	for _, s := range m.servers {
		_ = s.Close()
	}
	return nil
}
