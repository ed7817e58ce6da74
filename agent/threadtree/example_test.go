package threadtree_test

import (
	"context"
	"fmt"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/threadtree"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
)

// Explore two answers to the same question on two branches.
func Example() {
	ctx := context.Background()
	model := scripted.New(
		scripted.Step{Text: "Plane or train?"},
		scripted.Step{Text: "Flight booked."},
		scripted.Step{Text: "Train booked."})
	a, _ := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: model.Ref()}})

	tree := threadtree.New()
	ask := func(prompt string) {
		res, err := a.Ask(ctx, llm.Text(prompt), tree.History())
		if err != nil {
			panic(err)
		}
		if err := tree.Update(res.State); err != nil {
			panic(err)
		}
	}

	ask("Book a trip to Lyon")
	plane, _ := tree.Branch(tree.Current().ID, "plane")
	train, _ := tree.Branch(tree.Current().ID, "train")
	_ = tree.Checkout(plane)
	ask("Plane")
	_ = tree.Checkout(train)
	ask("Train")

	for _, n := range tree.Nodes() {
		fmt.Printf("%-5s %d messages, last: %s\n", n.Name, n.State.Len(), n.State.Messages()[n.State.Len()-1].Text())
	}
	// Output:
	// root  2 messages, last: Plane or train?
	// plane 4 messages, last: Flight booked.
	// train 4 messages, last: Train booked.
}
