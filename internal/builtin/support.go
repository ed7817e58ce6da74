package builtin

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

// The governed example agent agentry serves: a support agent that looks
// orders up (read_only) and refunds them (write_high_risk, reversed by
// RefundReversal), so every refund waits for a human approval.

// SupportAgentName names the example agent (its runs' resumer).
const SupportAgentName = "support"

// SupportTaskClass is the task class of its runs: it must hold tool_result
// evidence (an answer about an order rests on a lookup).
const SupportTaskClass = "support"

// RefundReversal is the rollback action type of a refund.
const RefundReversal = "ledger.reverse_refund"

// Order is an order of the example ledger.
type Order struct {
	ID       string  `json:"order_id"`
	Customer string  `json:"customer"`
	Amount   float64 `json:"amount"`
	Refunded bool    `json:"refunded"`
}

// Ledger is the example agent's order book, in memory. Refund and Reverse
// are idempotent, keyed by order.
type Ledger struct {
	mu     sync.Mutex
	orders map[string]*Order
	log    []string
}

// NewLedger returns the example orders o-1001 … o-1004.
func NewLedger() *Ledger {
	l := &Ledger{orders: map[string]*Order{}}
	for _, o := range []Order{{"o-1001", "ada@example.com", 30, false}, {"o-1002", "alan@example.com", 120, false}, {"o-1003", "grace@example.com", 7.5, false}, {"o-1004", "edsger@example.com", 999, false}} {
		o := o
		l.orders[o.ID] = &o
	}
	return l
}

// Order returns a copy of an order.
func (l *Ledger) Order(id string) (Order, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	o, ok := l.orders[id]
	if !ok {
		return Order{}, false
	}
	return *o, true
}

// Refund marks an order refunded.
func (l *Ledger) Refund(id string) (Order, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	o, ok := l.orders[id]
	if !ok {
		return Order{}, fmt.Errorf("no order %q", id)
	}
	if !o.Refunded {
		o.Refunded = true
		l.log = append(l.log, "refund "+id)
	}
	return *o, nil
}

// Reverse undoes a refund; reversing an order that is not refunded does
// nothing.
func (l *Ledger) Reverse(id string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	o, ok := l.orders[id]
	if !ok {
		return fmt.Errorf("no order %q", id)
	}
	if o.Refunded {
		o.Refunded = false
		l.log = append(l.log, "reverse "+id)
	}
	return nil
}

// Log returns the refunds and reversals made, in order.
func (l *Ledger) Log() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.log...)
}

// RollbackHandler executes RefundReversal actions.
func (l *Ledger) RollbackHandler() govern.RollbackFunc {
	return func(ctx context.Context, a govern.RollbackAction) error { return l.Reverse(a.Target) }
}

// SupportTools returns the example agent's tools, declared for governance.
func SupportTools(l *Ledger) []llm.Tool {
	orderParam := llm.Schema{"type": "object", "properties": map[string]any{"order_id": map[string]any{"type": "string"}},
		"required": []any{"order_id"}, "additionalProperties": false}
	lookup := govern.Declare(llm.Tool{Name: "lookup_order", Description: "Looks an order up by its ID.", Parameters: orderParam,
		Run: func(ctx context.Context, args map[string]any) (any, error) {
			id, _ := args["order_id"].(string)
			o, ok := l.Order(id)
			if !ok {
				return nil, fmt.Errorf("no order %q", id)
			}
			return o, nil
		}}, govern.Declaration{Tier: govern.ReadOnly})
	refund := govern.Declare(llm.Tool{Name: "refund_order", Description: "Refunds an order in full. Needs a human approval.", Parameters: orderParam,
		Run: func(ctx context.Context, args map[string]any) (any, error) {
			id, _ := args["order_id"].(string)
			return l.Refund(id)
		}}, govern.Declaration{Tier: govern.WriteHighRisk, Rollback: func(ctx context.Context, c govern.Call) (*govern.RollbackAction, error) {
		id, _ := c.Args["order_id"].(string)
		if id == "" {
			return nil, fmt.Errorf("refund_order needs an order_id")
		}
		return &govern.RollbackAction{Type: RefundReversal, Target: id, Payload: map[string]any{"reason": "governed run failed"}}, nil
	}})
	return []llm.Tool{lookup, refund}
}

var orderRef = regexp.MustCompile(`o-\d+`)

// SupportModelID names SupportModel on the command line and in agent
// files ("scripted:support").
const SupportModelID = "support"

// SupportModel is the offline model of the example agent: for "refund
// o-1001" it looks the order up, refunds it and confirms; for "status of
// o-1002" it only looks it up. It reads the conversation, so it resumes
// correctly after a pause.
func SupportModel() *scripted.Model {
	m := supportModel()
	m.ID = SupportModelID
	return m
}

func supportModel() *scripted.Model {
	return scripted.NewFunc(func(ctx context.Context, req *llm.Request) (scripted.Step, error) {
		prompt, done := conversation(req)
		order := orderRef.FindString(prompt)
		if order == "" {
			return scripted.Step{Text: "Which order? Give me its ID, like o-1001."}, nil
		}
		args := map[string]any{"order_id": order}
		lookup, looked := done["lookup_order"]
		switch {
		case !looked:
			return scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "lookup-" + order, ToolName: "lookup_order", Arguments: args}}}, nil
		case lookup.IsError:
			return scripted.Step{Text: fmt.Sprintf("I could not find order %s: %v", order, lookup.Result)}, nil
		}
		if !strings.Contains(strings.ToLower(prompt), "refund") {
			return scripted.Step{Text: fmt.Sprintf("Order %s: %s", order, llm.ResultText(lookup.Result))}, nil
		}
		refund, refunded := done["refund_order"]
		switch {
		case !refunded:
			return scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "refund-" + order, ToolName: "refund_order", Arguments: args}}}, nil
		case refund.IsError:
			return scripted.Step{Text: fmt.Sprintf("The refund of %s did not happen: %v", order, refund.Result)}, nil
		}
		return scripted.Step{Text: fmt.Sprintf("Refunded order %s: %s", order, llm.ResultText(refund.Result))}, nil
	})
}

// conversation reads what the offline models decide on: the latest user
// message, and the last result of each tool, by tool name.
func conversation(req *llm.Request) (task string, results map[string]llm.ToolResult) {
	results = map[string]llm.ToolResult{}
	calls := map[string]string{}
	for _, m := range req.Messages {
		switch m := m.(type) {
		case *llm.UserMessage:
			task = m.Text()
		case *llm.AssistantMessage:
			for _, c := range m.ToolCalls {
				calls[c.ToolCallID] = c.ToolName
			}
		case *llm.ToolResultMessage:
			for _, r := range m.Results {
				results[calls[r.ToolCallID]] = r
			}
		}
	}
	return task, results
}

// SupportClass is the example agent's task class.
func SupportClass() govern.TaskClass {
	return govern.TaskClass{Name: SupportTaskClass, RequiredEvidence: []govern.EvidenceType{govern.ToolResult}}
}

// OrderIDs lists the example orders.
func (l *Ledger) OrderIDs() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := make([]string, 0, len(l.orders))
	for id := range l.orders {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
