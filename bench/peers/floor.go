package peers

import (
	"context"
	"encoding/json"
	"errors"
	"sync"

	"github.com/agentry-dev/agentry/bench/peers/scenario"
)

// The floor is the least a runtime can do for the scenario: call the model,
// run the two tools concurrently (decode JSON arguments into the typed
// input, encode the output as JSON), append the results, call the model
// again. It has no tool registry, no error results and no events.

type floorCall struct{ ID, Name, Args string }

type floorMessage struct {
	Role    string // "user", "assistant", "tool"
	Content string
	Calls   []floorCall
	CallID  string
}

type floorModel func(ctx context.Context, msgs []floorMessage) (floorMessage, error)

type floorTool func(ctx context.Context, args []byte) ([]byte, error)

func floorTyped[In, Out any](fn func(In) (Out, error)) floorTool {
	return func(_ context.Context, args []byte) ([]byte, error) {
		var in In
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, err
		}
		out, err := fn(in)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}
}

func newFloorModel(rec *scenario.Record) floorModel {
	return func(_ context.Context, msgs []floorMessage) (floorMessage, error) {
		rec.Model()
		if msgs[len(msgs)-1].Role == "tool" {
			for _, m := range msgs {
				if m.Role == "tool" {
					rec.Result(m.Content)
				}
			}
			return floorMessage{Role: "assistant", Content: scenario.Answer}, nil
		}
		return floorMessage{Role: "assistant", Calls: []floorCall{
			{ID: scenario.WeatherID, Name: scenario.WeatherName, Args: scenario.WeatherArgs},
			{ID: scenario.ClockID, Name: scenario.ClockName, Args: scenario.ClockArgs},
		}}, nil
	}
}

func newFloor(rec *scenario.Record) (scenario.Turn, error) {
	model := newFloorModel(rec)
	weather := floorTyped(func(in scenario.WeatherIn) (scenario.WeatherOut, error) { return scenario.Weather(rec, in) })
	clock := floorTyped(func(in scenario.ClockIn) (scenario.ClockOut, error) { return scenario.Clock(rec, in) })
	return func(ctx context.Context) (string, error) {
		msgs := []floorMessage{{Role: "user", Content: scenario.Question}}
		reply, err := model(ctx, msgs)
		if err != nil {
			return "", err
		}
		msgs = append(msgs, reply)
		results := make([]floorMessage, len(reply.Calls))
		errs := make([]error, len(reply.Calls))
		var wg sync.WaitGroup
		for i, c := range reply.Calls {
			tool := weather
			if c.Name == scenario.ClockName {
				tool = clock
			}
			wg.Go(func() {
				out, err := tool(ctx, []byte(c.Args))
				results[i] = floorMessage{Role: "tool", Content: string(out), CallID: c.ID}
				errs[i] = err
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return "", err
		}
		msgs = append(msgs, results...)
		final, err := model(ctx, msgs)
		return final.Content, err
	}, nil
}
