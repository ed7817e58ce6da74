// Command embed is a program that runs agentry's server with its own
// workflow and its own agent: what `agentry serve` does, written against
// the public packages (server, store, workflow, agent, govern, llm).
//
//	go run ./examples/embed -addr 127.0.0.1:8080 -store sqlite://./embed.db
//	curl -s localhost:8080/initialize -d '{"workflow_name":"helpdesk"}'
//	curl -s localhost:8080/v1/runs -d '{"agent":"triage","input":"status of T-7?","wait":true}'
//
// The agent's model is scripted (offline, deterministic); give it any
// provider's model reference instead (llm/openai, llm/anthropic, …).
// SIGINT or SIGTERM stop it gracefully.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"regexp"
	"syscall"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/server"
	"github.com/agentry-dev/agentry/store"
	"github.com/agentry-dev/agentry/workflow"
)

func main() {
	addr := flag.String("addr", server.DefaultAddr, "listen address")
	storeURL := flag.String("store", "memory:", "store URL: sqlite:///path, postgres://…, file:DIR or memory:")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, *storeURL); err != nil {
		fmt.Fprintln(os.Stderr, "embed:", err)
		os.Exit(1)
	}
}

var tickets = map[string]string{"T-7": "open: printer on floor 2 is jammed", "T-8": "closed: VPN access granted"}

func run(ctx context.Context, addr, storeURL string) error {
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		return err
	}
	defer st.Close()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv, err := server.New(ctx, &server.Config{
		Store:     st,
		Listener:  ln,
		Workflows: []*workflow.Workflow{helpdesk()},
		Agents:    []server.Agent{{Name: "triage", Options: agent.Options{LLMOptions: llm.LLMOptions{Model: triageModel().Ref(), Tools: []llm.Tool{lookup()}}}}},
	})
	if err != nil {
		return err
	}
	defer srv.Shutdown(context.Background())
	fmt.Fprintf(os.Stderr, "embed: listening on http://%s\n", ln.Addr())
	return srv.Serve(ctx)
}

// helpdesk is a UAIP workflow: report a ticket, then it is filed.
func helpdesk() *workflow.Workflow {
	type report struct {
		Summary string `json:"summary" desc:"What is wrong"`
	}
	file := workflow.NewTask("file_ticket", "Files a ticket", func(ctx context.Context, r report, st *workflow.TaskState) (any, error) {
		st.Set("ticket", r.Summary)
		return map[string]any{"ticket": "T-9"}, nil
	})
	file.Risk = workflow.RiskWriteLow
	return &workflow.Workflow{Name: "helpdesk", InitialStage: "report",
		Stages: map[string]*workflow.Stage{
			"report": {Name: "report", Tasks: map[string]*workflow.Task{"file_ticket": file}},
			"filed":  {Name: "filed", Tasks: map[string]*workflow.Task{}, Prerequisites: []string{"ticket"}},
		},
		Transitions: map[string][]string{"report": {"filed"}}}
}

// lookup is the agent's one tool, read-only for the governor.
func lookup() llm.Tool {
	return govern.Declare(llm.Tool{Name: "lookup_ticket", Description: "Looks a ticket up by its ID.",
		Parameters: llm.Schema{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}, "required": []any{"id"}},
		Run: func(ctx context.Context, args map[string]any) (any, error) {
			id, _ := args["id"].(string)
			t, ok := tickets[id]
			if !ok {
				return nil, fmt.Errorf("no ticket %q", id)
			}
			return t, nil
		}}, govern.Declaration{Tier: govern.ReadOnly})
}

var ticketRef = regexp.MustCompile(`T-\d+`)

// triageModel looks the ticket the user names up, then answers with what
// the tool returned.
func triageModel() *scripted.Model {
	return scripted.NewFunc(func(ctx context.Context, req *llm.Request) (scripted.Step, error) {
		switch m := req.Messages[len(req.Messages)-1].(type) {
		case *llm.ToolResultMessage:
			return scripted.Step{Text: "Ticket status: " + llm.ResultText(m.Results[0].Result)}, nil
		case *llm.UserMessage:
			if id := ticketRef.FindString(m.Text()); id != "" {
				return scripted.Step{ToolCalls: []llm.ToolCall{{ToolName: "lookup_ticket", Arguments: map[string]any{"id": id}}}}, nil
			}
		}
		return scripted.Step{Text: "Which ticket? Name it like T-7."}, nil
	})
}
