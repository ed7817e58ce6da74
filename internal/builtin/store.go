// Package builtin holds the example workflows agentry serves when none are
// configured: a small online store (browse → cart → checkout → complete)
// whose tasks keep their data in the UAIP session state.
package builtin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/agentry-dev/agentry/llm"
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
	keyCart  = "cart"
	keyEmail = "user.email"
	keyOrder = "order.id"
)

var (
	productID = map[string]any{"type": "string", "pattern": "^SKU-[0-9]{3}$", "description": "e.g. SKU-001"}
	noArgs    = llm.Schema{"type": "object", "properties": map[string]any{}, "additionalProperties": false}
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

func task(name, description string, params llm.Schema, run workflow.TaskFunc) *workflow.Task {
	return &workflow.Task{Name: name, Description: description, Parameters: params, Run: run}
}

var viewCart = task("view_cart", "Show the cart with subtotals and the total.", noArgs,
	func(_ context.Context, req *workflow.TaskRequest) (*workflow.TaskResponse, error) {
		return &workflow.TaskResponse{Result: summary(cartOf(req.State))}, nil
	})

// Store returns the example store workflow:
//
//	browse ⇄ cart ⇄ checkout → complete
//
// Entering checkout needs "user.email" (set it with state_input) and a
// "cart"; completing needs an "order.id", which place_order sets.
func Store() *workflow.Workflow {
	return &workflow.Workflow{
		Name:         "store",
		Description:  "A small online store: find products, fill a cart, check out.",
		InitialStage: "browse",
		Stages: map[string]*workflow.Stage{
			"browse": {Name: "browse", Description: "Search the catalog and look at products.", Tasks: map[string]*workflow.Task{
				"search_products": task("search_products", "Search products by text and/or category.",
					llm.Schema{"type": "object", "properties": map[string]any{
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
				"get_product": task("get_product", "Get one product by id.",
					llm.Schema{"type": "object", "properties": map[string]any{"product_id": productID},
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
				"add_to_cart": task("add_to_cart", "Add a quantity of a product to the cart.",
					llm.Schema{"type": "object", "properties": map[string]any{
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
				"remove_from_cart": task("remove_from_cart", "Remove a product from the cart.",
					llm.Schema{"type": "object", "properties": map[string]any{"product_id": productID},
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
				"view_cart": viewCart,
			}},
			"checkout": {Name: "checkout", Description: "Pay for the cart.", Prerequisites: []string{keyEmail, keyCart},
				Tasks: map[string]*workflow.Task{
					"view_cart": viewCart,
					"place_order": task("place_order", "Place the order and pay.",
						llm.Schema{"type": "object", "properties": map[string]any{
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
						}),
				}},
			"complete": {Name: "complete", Description: "The order is placed.", Prerequisites: []string{keyOrder},
				Tasks: map[string]*workflow.Task{
					"order_status": task("order_status", "Status of the placed order.", noArgs,
						func(_ context.Context, req *workflow.TaskRequest) (*workflow.TaskResponse, error) {
							return &workflow.TaskResponse{Result: map[string]any{"order_id": req.State[keyOrder], "status": "confirmed"}}, nil
						}),
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
