package uicontrol

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/llm"
)

// The agent-side bridge: an app's actions as llm.Tools for a model
// (docs/spec-notes/uiap.md, "Actions as tools").

// ToolOptions configures Tools. The zero value works.
type ToolOptions struct {
	// Timeout bounds each action on the app side (timeoutMs); 0 means
	// none (the tool call's context still bounds it).
	Timeout time.Duration
}

// Toolbox offers the actions of an agent's session as llm.Tools. The
// tools follow the capability document: Tools returns those of the
// current document, and Changed says when the app replaced it
// (capabilities.changed) since. Its methods are safe for concurrent use.
type Toolbox struct {
	a    *Agent
	opts ToolOptions

	mu  sync.Mutex
	rev string // of the document the last Tools call built from
}

// Tools returns a Toolbox over the session of a, reading the capability
// document first if the agent has none yet. opts may be nil.
func Tools(ctx context.Context, a *Agent, opts *ToolOptions) (*Toolbox, error) {
	if a.Capabilities() == nil {
		if _, err := a.GetCapabilities(ctx); err != nil {
			return nil, err
		}
	}
	tb := &Toolbox{a: a}
	if opts != nil {
		tb.opts = *opts
	}
	return tb, nil
}

// Changed reports whether the capability document was replaced since the
// last Tools call.
func (tb *Toolbox) Changed() bool {
	c := tb.a.Capabilities()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return c != nil && c.Revision != tb.rev
}

// Tools returns one tool per action of the current capability document,
// in its order. A tool's name is the action ID with every character
// other than ASCII letters, digits, '_' and '-' replaced by '_' (what
// model providers accept; "transition:cart" is "transition_cart"), made
// unique with a numeric suffix; its parameters are the action's args
// schema; it runs the action with CallAction and returns its result. Its
// governance tier (govern.Declare) follows the action's risk: a
// read-only action (readOnly: true) read_only, low and medium
// write_low_risk, high and undeclared write_high_risk.
func (tb *Toolbox) Tools() []llm.Tool {
	c := tb.a.Capabilities()
	if c == nil {
		return nil
	}
	tb.mu.Lock()
	tb.rev = c.Revision
	tb.mu.Unlock()
	var tools []llm.Tool
	used := map[string]bool{}
	for _, d := range declaredActions(c.Capabilities) {
		name := toolName(d.ID)
		for i := 2; used[name]; i++ {
			name = fmt.Sprintf("%s_%d", toolName(d.ID), i)
		}
		used[name] = true
		desc := strings.TrimSpace(d.Description)
		if desc == "" {
			desc = "Run the app's action " + d.ID
		}
		if !strings.HasSuffix(desc, ".") {
			desc += "."
		}
		if d.Risk != "" {
			desc += " Risk: " + string(d.Risk) + "."
		}
		id := d.ID
		t := llm.Tool{Name: name, Description: desc, Parameters: d.Args,
			Run: func(ctx context.Context, args map[string]any) (any, error) { return tb.call(ctx, id, args) }}
		tools = append(tools, govern.Declare(t, govern.Declaration{Tier: TierOf(d.Risk, d.ReadOnly)}))
	}
	return tools
}

// TierOf maps an action's risk to the governance tier its tool declares:
// read_only for a read-only action, write_low_risk for low and medium
// risk, write_high_risk otherwise (an undeclared risk counts as high).
func TierOf(r Risk, readOnly bool) govern.Tier {
	switch {
	case readOnly:
		return govern.ReadOnly
	case r == RiskLow || r == RiskMedium:
		return govern.WriteLowRisk
	}
	return govern.WriteHighRisk
}

func (tb *Toolbox) call(ctx context.Context, id string, args map[string]any) (any, error) {
	if args == nil {
		args = map[string]any{}
	}
	r, err := tb.a.CallAction(ctx, &ActionRequest{ActionID: id, Args: args, Timeout: tb.opts.Timeout}, nil)
	if err != nil {
		return nil, describe(err)
	}
	var v any
	if len(r.Result) > 0 {
		if err := json.Unmarshal(r.Result, &v); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// describe turns an action's failure into what the model reads: the
// code, the message and the details (what a workflow stage lacks…).
func describe(err error) error {
	e, ok := err.(*Error)
	if !ok || len(e.Details) == 0 {
		return err
	}
	d, jerr := json.Marshal(e.Details)
	if jerr != nil {
		return err
	}
	return fmt.Errorf("%w; details: %s", err, d)
}

func toolName(id string) string {
	b := []byte(id)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 60 {
		b = b[:60]
	}
	if len(b) == 0 {
		return "action"
	}
	return string(b)
}

// declaredAction is an action as a capability document declares it.
type declaredAction struct {
	ID          string
	Description string
	Args        llm.Schema
	Risk        Risk
	ReadOnly    bool
}

// declaredActions reads the actions section — an array of objects with
// an "id", or an object keyed by action ID — leniently: entries it cannot
// read are skipped. An entry's args schema is its "args" or "parameters"
// member (default: an object with any members); its risk its "risk"
// member or the risk section's entry for its ID ({"<id>": "low"}).
func declaredActions(doc *CapabilityDocument) []declaredAction {
	if doc == nil {
		return nil
	}
	type entry struct {
		ID          string          `json:"id"`
		Description string          `json:"description"`
		Name        string          `json:"name"`
		Args        json.RawMessage `json:"args"`
		Parameters  json.RawMessage `json:"parameters"`
		Risk        json.RawMessage `json:"risk"`
		ReadOnly    bool            `json:"readOnly"`
	}
	var entries []entry
	var list []json.RawMessage
	if json.Unmarshal(doc.Actions, &list) == nil {
		for _, raw := range list {
			var e entry
			if json.Unmarshal(raw, &e) == nil && e.ID != "" {
				entries = append(entries, e)
			}
		}
	} else {
		var byID map[string]json.RawMessage
		if json.Unmarshal(doc.Actions, &byID) == nil {
			ids := make([]string, 0, len(byID))
			for id := range byID {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			for _, id := range ids {
				var e entry
				_ = json.Unmarshal(byID[id], &e) // a non-object entry still names an action
				e.ID = id
				entries = append(entries, e)
			}
		}
	}
	var risks map[string]json.RawMessage
	_ = json.Unmarshal(doc.Risk, &risks)
	out := make([]declaredAction, 0, len(entries))
	for _, e := range entries {
		d := declaredAction{ID: e.ID, Description: e.Description, ReadOnly: e.ReadOnly}
		if d.Description == "" {
			d.Description = e.Name
		}
		for _, raw := range []json.RawMessage{e.Args, e.Parameters} {
			var s llm.Schema
			if json.Unmarshal(raw, &s) == nil && s != nil {
				d.Args = s
				break
			}
		}
		if d.Args == nil {
			d.Args = llm.Schema{"type": "object", "properties": map[string]any{}}
		}
		d.Risk = riskOf(e.Risk)
		if d.Risk == "" {
			d.Risk = riskOf(risks[e.ID])
		}
		out = append(out, d)
	}
	return out
}

// riskOf reads a risk: a level string, or an object with a "level".
func riskOf(raw json.RawMessage) Risk {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		var o struct {
			Level string `json:"level"`
		}
		_ = json.Unmarshal(raw, &o)
		s = o.Level
	}
	return Risk(strings.ToLower(s))
}

// RunAgent runs an agent on opts with the toolbox's tools (replacing
// opts.Tools) and, whenever an action changed the app's capabilities,
// rebuilds it with the new tools and continues from the state reached
// (no new input), until a run ends without a change. opts.Strategy's
// stop condition is kept and checked too. A governed agent
// (govern.Governor.Middleware) keeps one run across the rebuilt agents.
func RunAgent(ctx context.Context, tb *Toolbox, opts agent.Options, input llm.Input, state *agent.State) (*agent.Result, error) {
	return agent.GenerateRebuilt(ctx, opts, input, state, agent.Rebuild{Tools: tb.Tools, Changed: tb.Changed, Context: govern.Segments})
}
