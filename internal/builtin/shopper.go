package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/workflow/uaipagent"
)

// ShopperModelID names ShopperModel on the command line and in agent
// files ("scripted:shopper").
const ShopperModelID = "shopper"

// ShopperEmail is the address the shopper gives at checkout.
const ShopperEmail = "shopper@example.com"

var quantityRE = regexp.MustCompile(`\b([1-9][0-9]?)\b`)

// ShopperModel is the offline model of the example shopper agent, which
// drives the Store workflow through its UAIP tools (uaipagent): it
// searches the catalog for the product the task names (the first word of
// a product's name, "espresso" by default), moves to the cart, adds the
// quantity the task names (1 by default), gives ShopperEmail, checks out
// and places the order by card — a write_high_risk task, so a governed
// run pauses there for a human. It decides from the tools it is offered
// (the stage) and the results in the conversation, so it resumes
// correctly after a pause.
func ShopperModel() *scripted.Model {
	m := scripted.NewFunc(func(_ context.Context, req *llm.Request) (scripted.Step, error) {
		has := map[string]bool{}
		for _, t := range req.Tools {
			has[t.Name] = true
		}
		task, results := conversation(req)
		done, failed := map[string]any{}, map[string]string{}
		for name, r := range results {
			if r.IsError {
				failed[name] = llm.ResultText(r.Result)
			} else {
				done[name] = r.Result
			}
		}
		p := Catalog[0]
		lower := strings.ToLower(task)
		for _, c := range Catalog {
			if w, _, _ := strings.Cut(strings.ToLower(c.Name), " "); strings.Contains(lower, strings.Trim(w, ",")) {
				p = c
				break
			}
		}
		qty := 1
		if m := quantityRE.FindStringSubmatch(task); m != nil {
			qty, _ = strconv.Atoi(m[1])
		}
		call := func(name string, args map[string]any) (scripted.Step, error) {
			return scripted.Step{ToolCalls: []llm.ToolCall{{ToolName: name, Arguments: args}}}, nil
		}
		move := func(stage string) (scripted.Step, error) {
			return call(uaipagent.ToolTransition, map[string]any{"stage": stage})
		}
		if why, ok := failed["place_order"]; ok {
			return scripted.Step{Text: "I could not place the order: " + why}, nil
		}
		if r, ok := done["place_order"]; ok {
			var placed struct { // uaipagent's answer: the task's result under "result"
				Result struct {
					OrderID string `json:"order_id"`
				} `json:"result"`
			}
			b, _ := json.Marshal(r)
			json.Unmarshal(b, &placed)
			order := placed.Result.OrderID
			return scripted.Step{Text: fmt.Sprintf("Placed order %s: %d × %s, paid by card.", order, qty, p.Name)}, nil
		}
		first, _, _ := strings.Cut(strings.ToLower(p.Name), " ")
		switch {
		case has["search_products"] && done["search_products"] == nil:
			return call("search_products", map[string]any{"query": strings.Trim(first, ",")})
		case has["search_products"]:
			return move("cart")
		case has["add_to_cart"] && done["add_to_cart"] == nil:
			return call("add_to_cart", map[string]any{"product_id": p.ID, "quantity": qty})
		case has["add_to_cart"] && done[uaipagent.ToolStateInput] == nil:
			return call(uaipagent.ToolStateInput, map[string]any{"state_updates": map[string]any{keyEmail: ShopperEmail}})
		case has["add_to_cart"]:
			return move("checkout")
		case has["place_order"]:
			return call("place_order", map[string]any{"payment_method": "card"})
		}
		return scripted.Step{Text: "I cannot shop: the store workflow's tools are not offered."}, nil
	})
	m.ID = ShopperModelID
	return m
}
