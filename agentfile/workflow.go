package agentfile

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/workflow"
	"github.com/agentry-dev/agentry/workflow/uaipagent"
)

// workflowTools is a workflow tool entry: a UAIP session per run, started
// when the run starts — its ID kept in the run's state, so that a run
// resumed after a pause, or a restart, goes on in its session — and the
// session's current stage as the run's tools (uaipagent.Toolset). It is
// both the agent's middleware (it starts the session) and its toolset.
type workflowTools struct {
	d        *Definition
	workflow string
	c        *workflow.Client
	key      string // the state metadata key holding the session ID

	mu       sync.Mutex
	sessions map[string]*uaipagent.Toolset
}

func newWorkflowTools(d *Definition, name string, c *workflow.Client, i int) *workflowTools {
	return &workflowTools{d: d, workflow: name, c: c, key: fmt.Sprintf("agentfile.workflow.%d", i),
		sessions: map[string]*uaipagent.Toolset{}}
}

// Name implements agent.Middleware.
func (w *workflowTools) Name() string { return "workflow:" + w.workflow }

// Before starts the run's session, unless its state has one (a resumed
// run).
func (w *workflowTools) Before(ctx context.Context, mc *agent.MiddlewareContext) (*agent.MiddlewareContext, error) {
	st := mc.State
	if st == nil {
		st = agent.Initial()
	}
	if id, _ := st.Metadata()[w.key].(string); id != "" {
		return nil, nil
	}
	ts, err := uaipagent.NewToolset(ctx, w.c, w.workflow)
	if err != nil {
		return nil, fmt.Errorf("workflow %s: starting a session: %w", w.workflow, err)
	}
	w.mu.Lock()
	w.sessions[ts.SessionID()] = ts
	w.mu.Unlock()
	next := *mc
	next.State = st.WithMetadata(w.key, ts.SessionID())
	return &next, nil
}

// After implements agent.Middleware: the result is the run's.
func (w *workflowTools) After(_ context.Context, mc *agent.MiddlewareContext, r *agent.Result) (*agent.Result, error) {
	w.forget(mc)
	return r, nil
}

// OnError implements agent.Middleware: the error is the run's.
func (w *workflowTools) OnError(_ context.Context, mc *agent.MiddlewareContext, _ error) (*agent.Result, error) {
	w.forget(mc)
	return nil, nil
}

// forget drops the run's toolset from the cache; a paused run attaches
// to its session again when it resumes.
func (w *workflowTools) forget(mc *agent.MiddlewareContext) {
	if mc.State == nil {
		return
	}
	if id, _ := mc.State.Metadata()[w.key].(string); id != "" {
		w.mu.Lock()
		delete(w.sessions, id)
		w.mu.Unlock()
	}
}

// Tools implements agent.Toolset: the current stage of the run's
// session, with the tiers its tasks declare, raised (never lowered) by
// govern.risk.
func (w *workflowTools) Tools(ctx context.Context, s *agent.State) ([]llm.Tool, error) {
	id, _ := s.Metadata()[w.key].(string)
	if id == "" {
		return nil, fmt.Errorf("workflow %s: the run has no session", w.workflow)
	}
	w.mu.Lock()
	ts, ok := w.sessions[id]
	w.mu.Unlock()
	if !ok {
		var err error
		if ts, err = uaipagent.AttachToolset(ctx, w.c, id); err != nil {
			return nil, fmt.Errorf("workflow %s: session %s: %w", w.workflow, id, err)
		}
		w.mu.Lock()
		w.sessions[id] = ts
		w.mu.Unlock()
	}
	tools, err := ts.Tools(ctx, s)
	if err != nil {
		return nil, err
	}
	out := make([]llm.Tool, len(tools))
	for i, t := range tools {
		out[i] = t
		decl, _ := govern.DeclarationOf(t)
		if tier, err := w.d.tierFor(t.Name, decl.Tier, true); err == nil && tier != decl.Tier && decl.Tier != 0 {
			decl.Tier = tier
			out[i] = govern.Declare(t, decl)
		}
	}
	return out, nil
}

// workflowClient returns the client of a workflow entry: the server's own
// workflows (Options.WorkflowURL) or a remote UAIP server.
func (b *builder) workflowClient(d *Definition, w *fileWorkflow, ptr string, errs *[]*Error) *workflow.Client {
	base, token := b.opts.WorkflowURL, b.opts.WorkflowToken
	if w.URL != "" {
		base = strings.TrimRight(b.expand(d, ptr+"/url", w.URL, errs), "/")
		token = ""
		if w.TokenEnv != "" {
			v, ok := b.lookup(w.TokenEnv)
			if !ok || v == "" {
				*errs = append(*errs, d.errorAt(ptr+"/token_env", fmt.Sprintf("environment variable %s is not set", w.TokenEnv)))
			}
			token = v
		}
	} else if base == "" {
		*errs = append(*errs, d.errorAt(ptr, fmt.Sprintf("workflow %q is the server's own, but no server serves workflows here: give its url", w.Name)))
		return nil
	}
	return workflow.NewClient(base, &workflow.ClientOptions{BearerToken: token, HTTPClient: b.opts.HTTPClient})
}
