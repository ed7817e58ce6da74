// Package builtin holds the example workflows agentry serves when none are
// configured: a small online store (browse → cart → checkout → complete)
// whose tasks keep their data in the UAIP session state and declare their
// UAICP risk tiers.
package builtin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/agentry-dev/agentry/workflow"
)

// Product is an item of the example catalog.
type Product struct {
	ID       string  `json:"product_id"`
	Name     string  `json:"name"`
	Category string  `json:"category"`
	Price    float64 `json:"price"`
	Stock    int     `json:"stock"`
}

// Catalog is the store's fixed product list.
var Catalog = []Product{
	{"SKU-001", "Espresso beans, 1 kg", "coffee", 24.90, 40},
	{"SKU-002", "Filter coffee, 500 g", "coffee", 11.50, 25},
	{"SKU-003", "Ceramic pour-over dripper", "equipment", 19.00, 8},
	{"SKU-004", "Burr grinder", "equipment", 89.00, 3},
	{"SKU-005", "Paper filters (100)", "supplies", 4.20, 100},
	{"SKU-006", "Green tea, 250 g", "tea", 9.80, 15},
}

func product(id string) (Product, bool) {
	for _, p := range Catalog {
		if p.ID == id {
			return p, true
		}
	}
	return Product{}, false
}

// State keys the store uses. "user.email" is one literal key.
const (
	keyCart      = "cart"
	keyEmail     = "user.email"
	keyOrder     = "order.id"
	keyCancelled = "order.cancelled" // the id of the order cancel_order cancelled
)

var (
	productID = map[string]any{"type": "string", "pattern": "^SKU-[0-9]{3}$", "description": "e.g. SKU-001"}
	noArgs    = workflow.Schema{"type": "object", "properties": map[string]any{}, "additionalProperties": false}
)

// cartOf reads the cart (product id → quantity) from the state.
func cartOf(state map[string]any) map[string]int {
	cart := map[string]int{}
	if m, ok := state[keyCart].(map[string]any); ok {
		for id, q := range m {
			if n, ok := q.(float64); ok {
				cart[id] = int(n)
			} else if n, ok := q.(int); ok {
				cart[id] = n
			}
		}
	}
	return cart
}

func cartValue(cart map[string]int) map[string]any {
	if len(cart) == 0 {
		return nil // deletes the key
	}
	out := make(map[string]any, len(cart))
	for id, q := range cart {
		out[id] = float64(q) // a JSON number, as the state holds it
	}
	return out
}

type line struct {
	ProductID string  `json:"product_id"`
	Name      string  `json:"name"`
	Quantity  int     `json:"quantity"`
	Subtotal  float64 `json:"subtotal"`
}

func summary(cart map[string]int) map[string]any {
	lines := []line{}
	total := 0.0
	ids := make([]string, 0, len(cart))
	for id := range cart {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		p, _ := product(id)
		sub := math.Round(p.Price*float64(cart[id])*100) / 100
		lines = append(lines, line{id, p.Name, cart[id], sub})
		total += sub
	}
	return map[string]any{"items": lines, "total": math.Round(total*100) / 100, "currency": "EUR"}
}

func stringArg(args map[string]any, k string) string {
	s, _ := args[k].(string)
	return s
}

func task(name, description, risk string, params workflow.Schema, run workflow.TaskFunc) *workflow.Task {
	return &workflow.Task{Name: name, Description: description, Risk: risk, Parameters: params, Run: run}
}

func viewCart() *workflow.Task {
	return task("view_cart", "Show the cart with subtotals and the total.", workflow.RiskReadOnly, noArgs,
		func(_ context.Context, req *workflow.TaskRequest) (*workflow.TaskResponse, error) {
			return &workflow.TaskResponse{Result: summary(cartOf(req.State))}, nil
		})
}

// cancelOrder returns place_order's compensating task: it clears "order.id",
// so the cart can be ordered again, and keeps the cancelled id in
// "order.cancelled". It is idempotent, as a rollback must be (a crash in
// the middle of a rollback runs it again): with no order placed it
// changes nothing. Cancelling refunds the customer and can be undone by
// ordering again, hence write_low_risk.
func cancelOrder() *workflow.Task {
	return task("cancel_order", "Cancel the placed order.", workflow.RiskWriteLow, noArgs,
		func(_ context.Context, req *workflow.TaskRequest) (*workflow.TaskResponse, error) {
			id, ok := req.State[keyOrder]
			if !ok {
				return &workflow.TaskResponse{Result: orderStatus(req.State)}, nil
			}
			return &workflow.TaskResponse{Result: map[string]any{"order_id": id, "status": "cancelled"},
				StateUpdates: map[string]any{keyOrder: nil, keyCancelled: id}}, nil
		})
}

func orderStatus(state map[string]any) map[string]any {
	if id, ok := state[keyOrder]; ok {
		return map[string]any{"order_id": id, "status": "confirmed"}
	}
	if id, ok := state[keyCancelled]; ok {
		return map[string]any{"order_id": id, "status": "cancelled"}
	}
	return map[string]any{"order_id": nil, "status": "none"}
}

// Store returns the example store workflow:
//
//	browse ⇄ cart ⇄ checkout → complete
//
// Entering checkout needs "user.email" (set it with state_input) and a
// "cart"; completing needs an "order.id", which place_order sets.
//
// Risk tiers: the searches, product and cart views and the order status
// only read (read_only); filling the cart and cancelling an order are
// write_low_risk; place_order pays, so it is write_high_risk. A governor
// refuses a write_high_risk call without rollback metadata
// (ROLLBACK_REQUIRED), which would leave a governed agent unable to ever
// check out; place_order therefore declares cancel_order as its rollback.
// A governed agent driving the store over UAIP (uaipagent.NewToolset, with
// govern.Options.Rollbacks[uaipagent.RollbackType] set to
// uaipagent.RollbackHandler) then gets place_order approved by a human, and
// a run that fails afterwards cancels the order. (UIAP actions carry no
// rollback: a governed agent using the store's UIAP tools is still refused
// place_order.)
func Store() *workflow.Workflow {
	cartView := viewCart() // one task, listed in two stages
	return &workflow.Workflow{
		Name:         "store",
		Description:  "A small online store: find products, fill a cart, check out.",
		InitialStage: "browse",
		Stages: map[string]*workflow.Stage{
			"browse": {Name: "browse", Description: "Search the catalog and look at products.", Tasks: map[string]*workflow.Task{
				"search_products": task("search_products", "Search products by text and/or category.", workflow.RiskReadOnly,
					workflow.Schema{"type": "object", "properties": map[string]any{
						"query":    map[string]any{"type": "string", "description": "words to look for in the name"},
						"category": map[string]any{"type": "string", "enum": []any{"coffee", "tea", "equipment", "supplies"}},
					}, "additionalProperties": false},
					func(_ context.Context, req *workflow.TaskRequest) (*workflow.TaskResponse, error) {
						q, cat := strings.ToLower(stringArg(req.Args, "query")), stringArg(req.Args, "category")
						found := []Product{}
						for _, p := range Catalog {
							if (cat == "" || p.Category == cat) && strings.Contains(strings.ToLower(p.Name), q) {
								found = append(found, p)
							}
						}
						return &workflow.TaskResponse{Result: map[string]any{"products": found}}, nil
					}),
				"get_product": task("get_product", "Get one product by id.", workflow.RiskReadOnly,
					workflow.Schema{"type": "object", "properties": map[string]any{"product_id": productID},
						"required": []any{"product_id"}, "additionalProperties": false},
					func(_ context.Context, req *workflow.TaskRequest) (*workflow.TaskResponse, error) {
						p, ok := product(stringArg(req.Args, "product_id"))
						if !ok {
							return nil, fmt.Errorf("no product %s", stringArg(req.Args, "product_id"))
						}
						return &workflow.TaskResponse{Result: p}, nil
					}),
			}},
			"cart": {Name: "cart", Description: "Fill the cart.", Tasks: map[string]*workflow.Task{
				"add_to_cart": task("add_to_cart", "Add a quantity of a product to the cart.", workflow.RiskWriteLow,
					workflow.Schema{"type": "object", "properties": map[string]any{
						"product_id": productID,
						"quantity":   map[string]any{"type": "integer", "minimum": 1, "maximum": 100},
					}, "required": []any{"product_id", "quantity"}, "additionalProperties": false},
					func(_ context.Context, req *workflow.TaskRequest) (*workflow.TaskResponse, error) {
						id := stringArg(req.Args, "product_id")
						p, ok := product(id)
						if !ok {
							return nil, fmt.Errorf("no product %s", id)
						}
						q, _ := req.Args["quantity"].(float64)
						cart := cartOf(req.State)
						if cart[id]+int(q) > p.Stock {
							return nil, fmt.Errorf("only %d of %s in stock", p.Stock, id)
						}
						cart[id] += int(q)
						return &workflow.TaskResponse{Result: summary(cart), StateUpdates: map[string]any{keyCart: cartValue(cart)}}, nil
					}),
				"remove_from_cart": task("remove_from_cart", "Remove a product from the cart.", workflow.RiskWriteLow,
					workflow.Schema{"type": "object", "properties": map[string]any{"product_id": productID},
						"required": []any{"product_id"}, "additionalProperties": false},
					func(_ context.Context, req *workflow.TaskRequest) (*workflow.TaskResponse, error) {
						cart := cartOf(req.State)
						id := stringArg(req.Args, "product_id")
						if _, ok := cart[id]; !ok {
							return nil, fmt.Errorf("%s is not in the cart", id)
						}
						delete(cart, id)
						return &workflow.TaskResponse{Result: summary(cart), StateUpdates: map[string]any{keyCart: cartValue(cart)}}, nil
					}),
				"view_cart": cartView,
			}},
			"checkout": {Name: "checkout", Description: "Pay for the cart.", Prerequisites: []string{keyEmail, keyCart},
				Tasks: map[string]*workflow.Task{
					"view_cart":   cartView,
					"place_order": placeOrder(),
				}},
			"complete": {Name: "complete", Description: "The order is placed.", Prerequisites: []string{keyOrder},
				Tasks: map[string]*workflow.Task{
					"order_status": task("order_status", "Status of the placed order.", workflow.RiskReadOnly, noArgs,
						func(_ context.Context, req *workflow.TaskRequest) (*workflow.TaskResponse, error) {
							return &workflow.TaskResponse{Result: orderStatus(req.State)}, nil
						}),
					"cancel_order": cancelOrder(),
				}},
		},
		Transitions: map[string][]string{
			"browse":   {"cart"},
			"cart":     {"browse", "checkout"},
			"checkout": {"cart", "complete"},
			"complete": {},
		},
	}
}

// placeOrder places the order and pays: write_high_risk, with cancel_order
// as its rollback (see Store).
func placeOrder() *workflow.Task {
	t := task("place_order", "Place the order and pay.", workflow.RiskWriteHigh,
		workflow.Schema{"type": "object", "properties": map[string]any{
			"payment_method": map[string]any{"type": "string", "enum": []any{"card", "invoice"}},
		}, "required": []any{"payment_method"}, "additionalProperties": false},
		func(_ context.Context, req *workflow.TaskRequest) (*workflow.TaskResponse, error) {
			if _, done := req.State[keyOrder]; done {
				return nil, errors.New("the order was already placed")
			}
			cart := cartOf(req.State)
			if len(cart) == 0 {
				return nil, errors.New("the cart is empty")
			}
			order := "ORD-" + strings.ToUpper(req.SessionID[:8])
			sum := summary(cart)
			sum["order_id"], sum["email"], sum["payment_method"] = order, req.State[keyEmail], stringArg(req.Args, "payment_method")
			return &workflow.TaskResponse{Result: sum, StateUpdates: map[string]any{keyOrder: order}}, nil
		})
	t.Rollback = &workflow.TaskRollback{Task: "cancel_order"}
	return t
}
