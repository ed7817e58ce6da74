// Package scenario is the scenario that bench/peers measures in agentry and
// in other Go agent frameworks (issue 17), shared by the modules that run it:
//
//   - the user asks one question;
//   - the model answers with two tool calls (weather and clock), which run
//     in parallel where the framework does that; each tool decodes a small
//     typed JSON input and returns a small typed output;
//   - the model, given both results, answers with text.
//
// The model is a zero-latency fake in each framework's own model interface.
// Every fake starts from the same JSON argument text and must hand the tool
// results on as JSON text, as a provider adapter would: a framework whose
// native interface carries arguments as a map gets them decoded by its fake
// ([DecodeArgs]), and results that are Go values are encoded by its fake
// ([Record.ResultJSON]). So each runner pays for one decode of the arguments
// and one encode of the results, wherever its design puts them.
//
// Each runner is built once (agent, tools, compiled graphs); an op is one
// turn of a fresh conversation. The package has no dependency on any
// framework, so that frameworks whose dependencies cannot be linked into one
// binary run in modules of their own.
package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The scenario's fixed texts.
const (
	Question = "What is the weather in Oslo for the next 2 days, and what time is it in Tokyo?"
	Answer   = "Oslo: 4 °C and cloudy. Tokyo: 21:30."

	WeatherName = "weather"
	WeatherDesc = "Weather forecast for a city."
	WeatherID   = "call_1"
	WeatherArgs = `{"city":"Oslo","days":2}`

	ClockName = "clock"
	ClockDesc = "Current time in a time zone."
	ClockID   = "call_2"
	ClockArgs = `{"zone":"Asia/Tokyo"}`
)

// WeatherIn is the weather tool's input.
type WeatherIn struct {
	City string `json:"city"`
	Days int    `json:"days"`
}

// WeatherOut is the weather tool's output.
type WeatherOut struct {
	City  string `json:"city"`
	TempC int    `json:"temp_c"`
	Sky   string `json:"sky"`
}

// ClockIn is the clock tool's input.
type ClockIn struct {
	Zone string `json:"zone"`
}

// ClockOut is the clock tool's output.
type ClockOut struct {
	Zone string `json:"zone"`
	Time string `json:"time"`
}

// Weather is the weather tool's body, shared by all runners.
func Weather(rec *Record, in WeatherIn) (WeatherOut, error) {
	rec.weather(in)
	if in.City == "" {
		return WeatherOut{}, errors.New("city is required")
	}
	return WeatherOut{City: in.City, TempC: 4, Sky: "cloudy"}, nil
}

// Clock is the clock tool's body, shared by all runners.
func Clock(rec *Record, in ClockIn) (ClockOut, error) {
	rec.clock(in)
	if in.Zone == "" {
		return ClockOut{}, errors.New("zone is required")
	}
	return ClockOut{Zone: in.Zone, Time: "21:30"}, nil
}

// Record collects what a runner did, for the test; benchmarks pass nil,
// which records nothing.
type Record struct {
	mu         sync.Mutex
	Weather    []WeatherIn
	Clock      []ClockIn
	ModelCalls int
	// Results are the tool results the model received on its second call,
	// as JSON text.
	Results []string
}

func (r *Record) weather(in WeatherIn) {
	if r != nil {
		r.mu.Lock()
		r.Weather = append(r.Weather, in)
		r.mu.Unlock()
	}
}

func (r *Record) clock(in ClockIn) {
	if r != nil {
		r.mu.Lock()
		r.Clock = append(r.Clock, in)
		r.mu.Unlock()
	}
}

// Model notes a model call.
func (r *Record) Model() {
	if r != nil {
		r.mu.Lock()
		r.ModelCalls++
		r.mu.Unlock()
	}
}

// Result notes a tool result, as JSON text, as the model received it.
func (r *Record) Result(text string) {
	if r != nil {
		r.mu.Lock()
		r.Results = append(r.Results, text)
		r.mu.Unlock()
	}
}

// ResultJSON encodes a tool result that a framework hands to its model as a
// Go value, as a provider adapter must, and records it.
func (r *Record) ResultJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	r.Result(string(b))
	return nil
}

// DecodeArgs decodes a call's argument text into the map a framework's
// model interface carries, as a provider adapter must.
func DecodeArgs(text string) (map[string]any, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		return nil, fmt.Errorf("arguments: %w", err)
	}
	return m, nil
}

// Turn runs one agent turn on a fresh conversation and returns the final
// answer's text.
type Turn func(ctx context.Context) (string, error)

// Runner is one framework's way of running the scenario.
type Runner struct {
	Name string
	// What says what the runner uses, for the README and the table.
	What string
	// New builds the agent once; rec may be nil.
	New func(rec *Record) (Turn, error)
}

// Check reports how a runner's turn departed from the scenario: the final
// answer, two model calls, each tool run once with the model's arguments,
// and both results handed to the model.
func Check(rec *Record, answer string) error {
	var errs []error
	if answer != Answer {
		errs = append(errs, fmt.Errorf("answer %q, want %q", answer, Answer))
	}
	if rec.ModelCalls != 2 {
		errs = append(errs, fmt.Errorf("%d model calls, want 2", rec.ModelCalls))
	}
	if diff := cmp.Diff([]WeatherIn{{City: "Oslo", Days: 2}}, rec.Weather); diff != "" {
		errs = append(errs, fmt.Errorf("weather calls (-want +got):\n%s", diff))
	}
	if diff := cmp.Diff([]ClockIn{{Zone: "Asia/Tokyo"}}, rec.Clock); diff != "" {
		errs = append(errs, fmt.Errorf("clock calls (-want +got):\n%s", diff))
	}
	results := []map[string]any{}
	for _, text := range rec.Results {
		var m map[string]any
		if err := json.Unmarshal([]byte(text), &m); err != nil {
			errs = append(errs, fmt.Errorf("result %q: %v", text, err))
			continue
		}
		results = append(results, m)
	}
	slices.SortFunc(results, func(a, b map[string]any) int { return len(b) - len(a) }) // weather (3 keys) first
	want := []map[string]any{
		{"city": "Oslo", "temp_c": 4.0, "sky": "cloudy"},
		{"zone": "Asia/Tokyo", "time": "21:30"},
	}
	if diff := cmp.Diff(want, results); diff != "" {
		errs = append(errs, fmt.Errorf("tool results the model received (-want +got):\n%s", diff))
	}
	return errors.Join(errs...)
}

// Test runs each runner's turn once and checks it with [Check], so that no
// runner is measured doing less than the others.
func Test(t *testing.T, runners []Runner) {
	for _, r := range runners {
		t.Run(r.Name, func(t *testing.T) {
			rec := &Record{}
			turn, err := r.New(rec)
			if err != nil {
				t.Fatal(err)
			}
			answer, err := turn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if err := Check(rec, answer); err != nil {
				t.Error(err)
			}
		})
	}
}

// Bench runs one turn per op for each runner, as sub-benchmarks named
// after the runners. run.sh runs each under callgrind with two fixed op
// counts and reports the instructions per op from their difference.
func Bench(b *testing.B, runners []Runner) {
	for _, r := range runners {
		b.Run(r.Name, func(b *testing.B) {
			turn, err := r.New(nil)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				answer, err := turn(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if answer != Answer {
					b.Fatalf("answer %q", answer)
				}
			}
		})
	}
}
