package uiapagent

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/uicontrol"
)

// Options configures a Toolset; nil or the zero value works.
type Options struct {
	// Timeout bounds each action on the app side (timeoutMs); 0 means
	// none (the tool call's context still bounds it).
	Timeout time.Duration
}

// Toolset offers the actions of a UIAP agent's session as the tools of
// an agent (agent.Toolset). The tools follow the capability document:
// each step is offered those of the document the app published last
// (capabilities.changed), so an action that changes the app's screen
// changes the next step's tools. Safe for concurrent use.
type Toolset struct {
	a    *uicontrol.Agent
	opts Options
}

var _ agent.Toolset = (*Toolset)(nil)

// NewToolset returns a Toolset over the session of a, reading the
// capability document first if a has none yet. opts may be nil.
func NewToolset(ctx context.Context, a *uicontrol.Agent, opts *Options) (*Toolset, error) {
	if a.Capabilities() == nil {
		if _, err := a.GetCapabilities(ctx); err != nil {
			return nil, err
		}
	}
	ts := &Toolset{a: a}
	if opts != nil {
		ts.opts = *opts
	}
	return ts, nil
}

// Tools returns one tool per action of the current capability document,
// in its order. A tool's name is the action ID with every character
// other than ASCII letters, digits, '_' and '-' replaced by '_' (what
// model providers accept; "transition:cart" is "transition_cart"), made
// unique with a numeric suffix; its parameters are the action's args
// schema; it runs the action with CallAction and returns its result. Its
// governance tier (govern.Declare) follows the action's risk: a
// read-only action (readOnly: true) read_only, low and medium
// write_low_risk, high and undeclared write_high_risk. Tools reads the
// document the session holds, without a request.
func (ts *Toolset) Tools(context.Context, *agent.State) ([]llm.Tool, error) {
	c := ts.a.Capabilities()
	if c == nil {
		return nil, nil
	}
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
			Run: func(ctx context.Context, args map[string]any) (any, error) { return ts.call(ctx, id, args) }}
		tools = append(tools, govern.Declare(t, govern.Declaration{Tier: tierOf(d.Risk, d.ReadOnly)}))
	}
	return tools, nil
}

// tierOf maps an action's risk to the governance tier its tool declares:
// read_only for a read-only action, write_low_risk for low and medium
// risk, write_high_risk otherwise (an undeclared risk counts as high).
func tierOf(r uicontrol.Risk, readOnly bool) govern.Tier {
	switch {
	case readOnly:
		return govern.ReadOnly
	case r == uicontrol.RiskLow || r == uicontrol.RiskMedium:
		return govern.WriteLowRisk
	}
	return govern.WriteHighRisk
}

func (ts *Toolset) call(ctx context.Context, id string, args map[string]any) (any, error) {
	if args == nil {
		args = map[string]any{}
	}
	r, err := ts.a.CallAction(ctx, &uicontrol.ActionRequest{ActionID: id, Args: args, Timeout: ts.opts.Timeout}, nil)
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
	e, ok := err.(*uicontrol.Error)
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
	Risk        uicontrol.Risk
	ReadOnly    bool
}

// declaredActions reads the actions section — an array of objects with
// an "id", or an object keyed by action ID — leniently: entries it cannot
// read are skipped. An entry's args schema is its "args" or "parameters"
// member (default: an object with any members); its risk its "risk"
// member or the risk section's entry for its ID ({"<id>": "low"}).
func declaredActions(doc *uicontrol.CapabilityDocument) []declaredAction {
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
func riskOf(raw json.RawMessage) uicontrol.Risk {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		var o struct {
			Level string `json:"level"`
		}
		_ = json.Unmarshal(raw, &o)
		s = o.Level
	}
	return uicontrol.Risk(strings.ToLower(s))
}
