package uampagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/messaging"
)

// ToolOptions describes the tool that exposes a remote UAMP agent as a
// sub-agent (UAP-1.1 §8). Name, Description and Parameters are required:
// the schema is always explicit (§8.1).
type ToolOptions struct {
	Name        string
	Description string
	Parameters  llm.Schema
	// From is the sender of the asks, the principal the client
	// authenticates as; default the DID of the client key's kid, when
	// that is a DID URL.
	From string
	// Input builds the ask's body.content from the arguments; nil uses
	// the string argument "prompt", "query", "task" or "input", in that
	// order.
	Input func(args map[string]any) (string, error)
	// Output turns the reply into the tool result; nil uses the reply
	// text.
	Output func(r *Result) any
	// Type names the sub-agent in traces; default Name.
	Type string
	// Window is the asks' delta_window; 0 leaves it to the protocol's
	// default (64).
	Window int
	// Sequential and DependsOn order the tool's calls within a round
	// (§8.3).
	Sequential bool
	DependsOn  []string
}

// Result is a remote agent's reply.
type Result struct {
	// Content is the reply text: the done payload's "content" when it
	// has one (NewHandler's), else the chunks' contents in order.
	Content string
	// Usage is the done payload's "usage", when it reports one.
	Usage llm.TokenUsage
	// Done is the done delta's payload as received (nil without one).
	Done json.RawMessage
}

// NewTool returns an llm.Tool that asks the UAMP agent to (a DID the
// server at the other end of c answers for) over c, a sub-agent
// over the wire. It behaves like agent.SubagentTool: when the parent
// run is streamed, the remote agent's deltas reach the parent's stream
// as subagent_event between subagent_start and subagent_end (§8.4),
// with the keys agent.SubagentTool uses, and every execution is
// recorded as an agent.SubagentTrace in the parent's state (§8.5). The
// forwarded "event" is an agent.Event: a chunk becomes a UPP text_delta
// (Unverified when the chunk says "unverified": true), a progress delta
// carrying {"event": …} (NewHandler's) the event it carries, any other
// progress payload a UAP event of type "progress" with the payload as
// data. The trace has no tool executions: a remote agent's tools are its
// own.
//
// When the parent run ends early (ctx cancelled), the remote request is
// cancelled too (a cancel envelope, on a fresh connection over
// WebSocket).
func NewTool(c *messaging.Client, to string, options *ToolOptions) (llm.Tool, error) {
	var opts ToolOptions
	if options != nil {
		opts = *options
	}
	switch {
	case c == nil || to == "":
		return llm.Tool{}, errors.New("uampagent: NewTool needs a client and the agent's DID")
	case opts.Name == "" || opts.Description == "":
		return llm.Tool{}, errors.New("uampagent: NewTool needs a name and a description")
	case opts.Parameters == nil:
		return llm.Tool{}, errors.New("uampagent: NewTool needs an explicit parameter schema (UAP-1.1 §8.1)")
	}
	from := opts.From
	if from == "" {
		if did, _, ok := strings.Cut(c.KeyID(), "#"); ok && strings.HasPrefix(did, "did:") {
			from = did
		} else {
			return llm.Tool{}, errors.New("uampagent: NewTool needs From: the client key's kid is not a DID URL")
		}
	}
	r := &remoteAgent{c: c, to: to, from: from, opts: opts, typ: opts.Type}
	if r.typ == "" {
		r.typ = opts.Name
	}
	if r.opts.Input == nil {
		r.opts.Input = defaultRemoteInput
	}
	if r.opts.Output == nil {
		r.opts.Output = func(res *Result) any { return res.Content }
	}
	t := llm.Tool{
		Name: opts.Name, Description: opts.Description, Parameters: opts.Parameters,
		Run: func(ctx context.Context, args map[string]any) (any, error) {
			prompt, err := r.opts.Input(args)
			if err != nil {
				return nil, err
			}
			return r.run(ctx, prompt)
		},
	}
	if opts.Sequential {
		t = agent.Sequential(t)
	}
	if len(opts.DependsOn) > 0 {
		t = agent.DependsOn(t, opts.DependsOn...)
	}
	return t, nil
}

type remoteAgent struct {
	c        *messaging.Client
	to, from string
	typ      string
	opts     ToolOptions
}

func defaultRemoteInput(args map[string]any) (string, error) {
	for _, k := range []string{"prompt", "query", "task", "input"} {
		if s, ok := args[k].(string); ok && strings.TrimSpace(s) != "" {
			return s, nil
		}
	}
	return "", errors.New(`sub-agent input missing: pass a string "prompt", "query", "task" or "input" argument`)
}

// run asks the remote agent, forwarding its events and recording the
// trace as agent.SubagentTool does.
func (r *remoteAgent) run(ctx context.Context, prompt string) (any, error) {
	tc, inRun := agent.ToolContextFrom(ctx)
	call, _ := llm.ToolCallFrom(ctx)
	trace := agent.SubagentTrace{SubagentID: ids.New(), SubagentType: r.typ, ParentToolCallID: call.ToolCallID, Prompt: prompt, StartTime: time.Now().UTC()}
	base := func() map[string]any {
		return map[string]any{"subagentId": trace.SubagentID, "subagentType": r.typ, "parentToolCallId": call.ToolCallID}
	}
	emit := func(agent.Event) {}
	if inRun && tc.Streaming() {
		start := base()
		start["prompt"] = prompt
		tc.Emit(agent.EventSubagentStart, start)
		emit = func(ev agent.Event) {
			d := base()
			d["event"] = ev
			tc.Emit(agent.EventSubagentEvent, d)
		}
	}
	res, err := r.ask(ctx, prompt, emit)
	trace.EndTime = time.Now().UTC()
	end := base()
	var result any
	if err != nil {
		trace.Error = err.Error()
		end["success"], end["error"] = false, err.Error()
	} else {
		result = r.opts.Output(res)
		trace.Success, trace.Result = true, llm.ResultText(result)
		usage := res.Usage
		trace.Usage = &usage
		end["success"], end["result"] = true, trace.Result
	}
	if inRun {
		tc.Emit(agent.EventSubagentEnd, end)
		tc.RecordTrace(trace)
	}
	if err != nil {
		return nil, fmt.Errorf("sub-agent %s failed: %w", r.typ, err)
	}
	return result, nil
}

// ask sends the ask and reads its stream to the end.
func (r *remoteAgent) ask(ctx context.Context, prompt string, emit func(agent.Event)) (*Result, error) {
	req := envelope.New(r.from, []string{r.to}, envelope.IntentAsk, envelope.Body{Type: "text/plain", Content: prompt})
	req.DeltaWindow = r.opts.Window
	reply, err := r.c.Ask(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			// The server may have accepted the ask before the parent
			// run ended.
			withdraw(r.c, req)
		}
		return nil, err
	}
	var text strings.Builder
	for d, err := range reply.Deltas() {
		if err != nil {
			if ctx.Err() != nil {
				withdraw(r.c, req) // the parent run ended
			}
			return nil, err
		}
		switch d.Type {
		case envelope.DeltaChunk:
			var p chunkPayload
			json.Unmarshal(d.Payload, &p)
			text.WriteString(p.Content)
			emit(agent.Event{Source: agent.SourceUPP, UPP: &llm.StreamEvent{Type: llm.TextDelta, Delta: llm.EventDelta{Text: p.Content}}, Unverified: p.Unverified})
		case envelope.DeltaProgress:
			emit(progressEvent(d.Payload))
		case envelope.DeltaDone:
			res := &Result{Content: text.String(), Done: d.Payload}
			var p struct {
				Content *string         `json:"content"`
				Usage   *llm.TokenUsage `json:"usage"`
			}
			if json.Unmarshal(d.Payload, &p) == nil {
				if p.Content != nil {
					res.Content = *p.Content
				}
				if p.Usage != nil {
					res.Usage = *p.Usage
				}
			}
			return res, nil
		case envelope.DeltaCancel:
			return nil, errors.New("the remote agent's request was cancelled")
		}
	}
	return nil, errors.New("the remote agent's stream ended without a final delta")
}

// withdraw cancels request req (§4.1 cancel), best effort: its
// requester's context has ended, which also closed a WebSocket, so the
// cancel goes on a fresh connection (messaging.Client.Cancel).
func withdraw(c *messaging.Client, req *envelope.Envelope) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.Cancel(ctx, req)
}

// progressEvent is the agent.Event a progress delta forwards: the event
// NewHandler put in it, or a UAP event of type "progress" carrying
// another agent's payload.
func progressEvent(payload json.RawMessage) agent.Event {
	var p struct {
		Event *agent.Event `json:"event"`
	}
	if json.Unmarshal(payload, &p) == nil && p.Event != nil {
		return *p.Event
	}
	var data map[string]any
	json.Unmarshal(payload, &data)
	return agent.Event{Source: agent.SourceUAP, UAP: &agent.UAPEvent{Type: "progress", Data: data}}
}
