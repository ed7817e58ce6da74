package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentry-dev/agentry/workflow"
)

func ExampleNewTask() {
	type addToCart struct {
		ProductID string `json:"product_id" desc:"Catalog id, e.g. SKU-001"`
		Quantity  int    `json:"quantity" minimum:"1" maximum:"10"`
		GiftWrap  bool   `json:"gift_wrap,omitempty"`
	}
	task := workflow.NewTask("add_to_cart", "Adds a product to the cart",
		func(ctx context.Context, args addToCart, st *workflow.TaskState) (any, error) {
			cart, _ := st.Get("cart")
			items, _ := cart.(map[string]any)
			next := map[string]any{}
			for id, q := range items {
				next[id] = q
			}
			next[args.ProductID] = args.Quantity
			st.Set("cart", next)
			return map[string]any{"items": len(next)}, nil
		})

	params, _ := json.MarshalIndent(task.Parameters, "", "  ")
	fmt.Println(string(params))

	resp, err := task.Run(context.Background(), &workflow.TaskRequest{
		Task:  "add_to_cart",
		Args:  map[string]any{"product_id": "SKU-002", "quantity": 2},
		State: map[string]any{"cart": map[string]any{"SKU-001": 1.0}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Result, resp.StateUpdates)
	// Output:
	// {
	//   "additionalProperties": false,
	//   "properties": {
	//     "gift_wrap": {
	//       "type": "boolean"
	//     },
	//     "product_id": {
	//       "description": "Catalog id, e.g. SKU-001",
	//       "type": "string"
	//     },
	//     "quantity": {
	//       "maximum": 10,
	//       "minimum": 1,
	//       "type": "integer"
	//     }
	//   },
	//   "required": [
	//     "product_id",
	//     "quantity"
	//   ],
	//   "type": "object"
	// }
	// map[items:2] map[cart:map[SKU-001:1 SKU-002:2]]
}
