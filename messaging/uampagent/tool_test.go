package uampagent_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/messaging/uampagent"
)

var researchSchema = llm.MustSchema(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`)

// researcher is a sub-agent that looks its input up once, then answers
// "found: <tool result>".
func researcher(t *testing.T) *agent.Agent {
	m := scripted.NewFunc(func(_ context.Context, req *llm.Request) (scripted.Step, error) {
		last := req.Messages[len(req.Messages)-1]
		if last.Type() == llm.TypeToolResult {
			return scripted.Step{Text: "found: " + last.Text()}, nil
		}
		return scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "sub-1", ToolName: "lookup", Arguments: map[string]any{"q": last.Text()}}}}, nil
	})
	return newTestAgent(t, m, lookupTool())
}

// parentOf is an agent that calls tool "research" once, then says done.
func parentOf(t *testing.T, tool llm.Tool) *agent.Agent {
	m := scripted.New(
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "parent-1", ToolName: "research", Arguments: map[string]any{"query": "go iterators"}}}},
		scripted.Step{Text: "done"},
	)
	return newTestAgent(t, m, tool)
}

// streamRun runs a streamed and returns its result and events.
func streamRun(t *testing.T, a *agent.Agent) (*agent.Result, []agent.Event) {
	t.Helper()
	s := a.Stream(context.Background(), llm.Text("research go iterators"), nil)
	var evs []agent.Event
	for ev, err := range s.Events() {
		if err != nil {
			break
		}
		evs = append(evs, ev)
	}
	res, err := s.Result()
	if err != nil {
		t.Fatal(err)
	}
	return res, evs
}

// subagentView is what a parent's consumer sees of a sub-agent: its
// subagent_* events' keys, and the names of the forwarded events.
type subagentView struct {
	kinds    []string   // subagent_start, subagent_event…, subagent_end
	keys     [][]string // the data keys of each
	inner    []string   // eventName of each forwarded event
	innerUAP []string   // the UAP ones
}

func viewOf(t *testing.T, evs []agent.Event, subagentID string) subagentView {
	t.Helper()
	var v subagentView
	for _, e := range evs {
		if e.UAP == nil || !strings.HasPrefix(string(e.UAP.Type), "subagent_") {
			continue
		}
		if e.UAP.Data["subagentId"] != subagentID {
			t.Errorf("event for sub-agent %v, want %s", e.UAP.Data["subagentId"], subagentID)
		}
		keys := make([]string, 0, len(e.UAP.Data))
		for k := range e.UAP.Data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		v.kinds = append(v.kinds, string(e.UAP.Type))
		v.keys = append(v.keys, keys)
		if e.UAP.Type == agent.EventSubagentEvent {
			inner, ok := e.UAP.Data["event"].(agent.Event)
			if !ok {
				t.Fatalf("subagent_event without an agent.Event: %#v", e.UAP.Data["event"])
			}
			v.inner = append(v.inner, eventName(inner))
			if inner.UAP != nil {
				v.innerUAP = append(v.innerUAP, eventName(inner))
			}
		}
	}
	return v
}

// TestUAP_8_4_RemoteToolEvents: a remote UAMP agent used as a tool
// reaches the parent's stream with the subagent_* events a local
// sub-agent produces — the same kinds, keys and UAP events, its UPP
// events a subsequence of the local ones (framing is not sent over the
// wire) — and leaves the same trace.
func TestUAP_8_4_RemoteToolEvents(t *testing.T) {
	env := newTestEnv(t, uampagent.NewHandler(researcher(t), nil))
	for _, b := range bindings() {
		t.Run(b.name, func(t *testing.T) {
			remote, err := uampagent.NewTool(env.client(t, b.b), serverDID, &uampagent.ToolOptions{Name: "research", Description: "Researches a question.", Parameters: researchSchema})
			if err != nil {
				t.Fatal(err)
			}
			local, err := agent.SubagentTool(researcher(t), &agent.SubagentOptions{Name: "research", Description: "Researches a question.", Parameters: researchSchema})
			if err != nil {
				t.Fatal(err)
			}
			rres, revs := streamRun(t, parentOf(t, remote))
			lres, levs := streamRun(t, parentOf(t, local))

			rt, lt := rres.State.SubagentTraces(), lres.State.SubagentTraces()
			if len(rt) != 1 || len(lt) != 1 {
				t.Fatalf("traces: remote %d, local %d", len(rt), len(lt))
			}
			tr := rt[0]
			if !tr.Success || tr.SubagentType != "research" || tr.Prompt != "go iterators" || tr.Result != lt[0].Result ||
				tr.Result != "found: 42 for go iterators" || tr.Usage == nil || tr.Usage.TotalTokens == 0 || tr.ParentToolCallID != "parent-1" || tr.EndTime.Before(tr.StartTime) {
				t.Errorf("remote trace %+v (local %+v)", tr, lt[0])
			}
			if got := rres.Turn.ToolExecutions[0].Result; got != "found: 42 for go iterators" {
				t.Errorf("tool result %v", got)
			}

			rv, lv := viewOf(t, revs, tr.SubagentID), viewOf(t, levs, lt[0].SubagentID)
			if len(rv.kinds) < 3 || rv.kinds[0] != "subagent_start" || rv.kinds[len(rv.kinds)-1] != "subagent_end" {
				t.Fatalf("remote subagent events %v", rv.kinds)
			}
			if !slices.EqualFunc(rv.keys[:1], lv.keys[:1], slices.Equal) || !slices.Equal(rv.keys[len(rv.keys)-1], lv.keys[len(lv.keys)-1]) {
				t.Errorf("start/end keys: remote %v %v, local %v %v", rv.keys[0], rv.keys[len(rv.keys)-1], lv.keys[0], lv.keys[len(lv.keys)-1])
			}
			if !slices.Equal(rv.innerUAP, lv.innerUAP) {
				t.Errorf("forwarded UAP events:\nremote %v\nlocal  %v", rv.innerUAP, lv.innerUAP)
			}
			if !isSubsequence(rv.inner, lv.inner) || !slices.Contains(rv.inner, "upp:text_delta") {
				t.Errorf("forwarded events:\nremote %v\nlocal  %v", rv.inner, lv.inner)
			}

			// Not streamed: no events, the same trace.
			gres, err := parentOf(t, remote).Generate(context.Background(), llm.Text("research go iterators"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if gt := gres.State.SubagentTraces(); len(gt) != 1 || gt[0].Result != tr.Result {
				t.Errorf("Generate traces %+v", gt)
			}
		})
	}
}

func isSubsequence(sub, seq []string) bool {
	i := 0
	for _, s := range seq {
		if i < len(sub) && sub[i] == s {
			i++
		}
	}
	return i == len(sub)
}

// Aborting the parent run cancels the remote request: the remote run's
// model sees its context end.
func TestUAP_8_RemoteToolCancel(t *testing.T) {
	m, started, cancelled := blockingModel()
	env := newTestEnv(t, uampagent.NewHandler(newTestAgent(t, m), nil))
	for _, b := range bindings() {
		for _, when := range []agent.EventType{agent.EventSubagentStart, agent.EventSubagentEvent} {
			t.Run(b.name+"/"+string(when), func(t *testing.T) {
				remote, err := uampagent.NewTool(env.client(t, b.b), serverDID, &uampagent.ToolOptions{Name: "research", Description: "d", Parameters: researchSchema})
				if err != nil {
					t.Fatal(err)
				}
				s := parentOf(t, remote).Stream(context.Background(), llm.Text("research"), nil)
				aborted := false
				for ev, err := range s.Events() {
					if err != nil {
						break
					}
					if !aborted && ev.UAP != nil && ev.UAP.Type == when {
						wait(t, started, "the remote model call")
						s.Abort()
						aborted = true
					}
				}
				if _, err := s.Result(); err == nil {
					t.Error("an aborted run succeeded")
				}
				wait(t, cancelled, "the remote run's cancellation")
			})
		}
	}
}

func TestNewToolOptions(t *testing.T) {
	env := newTestEnv(t, messaging.Echo)
	c := env.client(t, false)
	for name, o := range map[string]uampagent.ToolOptions{
		"no name":   {Description: "d", Parameters: researchSchema},
		"no schema": {Name: "n", Description: "d"},
	} {
		if _, err := uampagent.NewTool(c, serverDID, &o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := uampagent.NewTool(nil, serverDID, &uampagent.ToolOptions{Name: "n", Description: "d", Parameters: researchSchema}); err == nil {
		t.Error("no client: accepted")
	}
	// Echo is an agent too: its chunks are the reply.
	tool, err := uampagent.NewTool(c, serverDID, &uampagent.ToolOptions{Name: "echo", Description: "d", Parameters: researchSchema})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tool.Run(context.Background(), map[string]any{"query": "Draw me a sheep"})
	if err != nil || got != "Draw me a sheep" {
		t.Errorf("echo via tool: %v %v", got, err)
	}
	if _, err := tool.Run(context.Background(), map[string]any{"other": 1}); err == nil {
		t.Error("no input: accepted")
	}
}

// A reply too large for one delta arrives in 64 KiB chunks, and the done
// delta goes without it: the remote tool reassembles the chunks.
func TestUAMP_Agent_LongReply(t *testing.T) {
	long := strings.Repeat("Grüße 🙂 ", 30_000) // ~360 KiB
	m := scripted.New(scripted.Step{Text: long, Chunks: []string{long}})
	env := newTestEnv(t, uampagent.NewHandler(newTestAgent(t, m), nil))
	tool, err := uampagent.NewTool(env.client(t, false), serverDID, &uampagent.ToolOptions{Name: "long", Description: "d", Parameters: researchSchema})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tool.Run(context.Background(), map[string]any{"prompt": "talk"})
	if err != nil || got != long {
		t.Errorf("reply of %d bytes (%v), want %d", len(fmt.Sprint(got)), err, len(long))
	}
}
