package uiapworkflow

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/workflow"
)

// state is an entry of the document's states section: a stage.
type state struct {
	ID            string   `json:"id"`
	Description   string   `json:"description,omitempty"`
	Current       bool     `json:"current,omitempty"`
	Prerequisites []string `json:"prerequisites,omitempty"`
}

// action is an entry of the document's actions section.
type action struct {
	ID          string `json:"id"`
	Kind        string `json:"kind"` // "task", "transition" or "state_input"
	Description string `json:"description"`
	// Args is the JSON Schema of the action's args.
	Args map[string]any `json:"args"`
	Risk uicontrol.Risk `json:"risk"`
	// ReadOnly marks a task whose declared tier is read_only: the agent
	// side may run it ungoverned (uiapagent maps it to read_only).
	ReadOnly bool `json:"readOnly,omitempty"`
}

// Info is the document's "workflow" member: the UAIP session behind the
// UIAP session, reachable over UAIP as well.
type Info struct {
	Name      string `json:"name"`
	SessionID string `json:"sessionId"`
	Stage     string `json:"stage"`
}

var noArgs = map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false}

// document builds the capability document of a UAIP session.
func (s *Server) document(sess *workflow.Session) *uicontrol.CapabilityDocument {
	wf := s.wf
	var states []state
	for _, name := range wf.StageNames() {
		st := wf.Stages[name]
		states = append(states, state{ID: name, Description: st.Description, Current: name == sess.Stage,
			Prerequisites: st.Prerequisites})
	}
	var actions []action
	risk := map[string]uicontrol.Risk{}
	if st := wf.Stages[sess.Stage]; st != nil {
		names := make([]string, 0, len(st.Tasks))
		for n := range st.Tasks {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			t := st.Tasks[n]
			actions = append(actions, action{ID: n, Kind: "task", Description: t.Description, Args: t.Parameters,
				Risk: riskOf(t.Risk), ReadOnly: t.Risk == workflow.RiskReadOnly})
		}
	}
	for _, to := range wf.Transitions[sess.Stage] {
		d := fmt.Sprintf("Move the %s workflow from stage %q to stage %q", wf.Name, sess.Stage, to)
		if st := wf.Stages[to]; st != nil {
			if st.Description != "" {
				d += " (" + strings.TrimSuffix(st.Description, ".") + ")"
			}
			if len(st.Prerequisites) > 0 {
				d += "; needs the state keys " + strings.Join(st.Prerequisites, ", ") + " set (" + ActionStateInput + ")"
			}
		}
		actions = append(actions, action{ID: TransitionPrefix + to, Kind: "transition", Description: d + ".",
			Args: noArgs, Risk: uicontrol.RiskMedium})
	}
	actions = append(actions, action{ID: ActionStateInput, Kind: "state_input",
		Description: `Set values in the workflow session state (keys are flat strings such as "user.email"); some stages need keys set before they can be entered. A null value removes a key.`,
		Args: map[string]any{"type": "object", "properties": map[string]any{"state_updates": map[string]any{"type": "object"}},
			"required": []any{"state_updates"}, "additionalProperties": false},
		Risk: uicontrol.RiskMedium})
	for _, a := range actions {
		risk[a.ID] = a.Risk
	}
	doc := &uicontrol.CapabilityDocument{States: mustJSON(states), Actions: mustJSON(actions), Risk: mustJSON(risk),
		Extra: map[string]json.RawMessage{"workflow": mustJSON(Info{Name: wf.Name, SessionID: sess.ID, Stage: sess.Stage})}}
	return doc
}

// mustJSON encodes v, which is made of JSON values (task schemas are
// checked when the workflow is registered).
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("uiapworkflow: " + err.Error())
	}
	return b
}

func (s *Server) logger() *slog.Logger {
	if s.opts.App.Logger != nil {
		return s.opts.App.Logger
	}
	return slog.Default()
}
