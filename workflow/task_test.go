package workflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/workflow"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

type scalars struct {
	Flag     bool            `json:"flag"`
	Count    int             `json:"count"`
	Small    int8            `json:"small"`
	Port     uint16          `json:"port"`
	Big      uint64          `json:"big"`
	Ratio    float64         `json:"ratio"`
	Name     string          `json:"name"`
	At       time.Time       `json:"at"`
	Wait     time.Duration   `json:"wait"`
	Raw      json.RawMessage `json:"raw"`
	Any      any             `json:"any"`
	Blob     []byte          `json:"blob"`
	Num      json.Number     `json:"num"`
	Addr     netip.Addr      `json:"addr"`
	Untagged string
}

type optional struct {
	Required  string            `json:"required"`
	Omit      string            `json:"omit,omitempty"`
	Zero      time.Time         `json:"zero,omitzero"`
	Pointer   *int              `json:"pointer"`
	Skipped   string            `json:"-"`
	Dash      string            `json:"-,"`
	Quoted    int               `json:"quoted,string"`
	hidden    string            // unexported: not a property
	PtrStruct *struct{ X bool } `json:"ptr_struct,omitempty"`
}

type address struct {
	Street string `json:"street" desc:"Street and number"`
	City   string `json:"city"`
}

type composite struct {
	Tags     []string              `json:"tags"`
	Pair     [2]float64            `json:"pair"`
	Counts   map[string]int        `json:"counts"`
	Anything map[string]any        `json:"anything,omitempty"`
	ByID     map[int]string        `json:"by_id,omitempty"`
	Address  address               `json:"address"`
	Previous []address             `json:"previous,omitempty"`
	Matrix   [][]int               `json:"matrix,omitempty"`
	Nested   map[string][]*address `json:"nested,omitempty"`
}

type Base struct {
	ID    string `json:"id"`
	Note  string `json:"note,omitempty"`
	Extra string
}

type audit struct {
	By    string `json:"by"`
	Extra string // conflicts with Base.Extra at the same depth: dropped
}

type Labelled struct {
	Label string `json:"label"`
}

type Meta struct {
	Version int `json:"version,omitempty"`
}

type hiddenPointer struct {
	Secret string `json:"secret"`
}

type embedded struct {
	Base
	audit
	*Meta
	*hiddenPointer // encoding/json cannot decode into it: skipped
	Labelled       `json:"labelled"`
	Name           string `json:"name"`
	Note           string `json:"note"` // shallower: hides Base.Note
}

type tagged struct {
	Size     string   `json:"size" enum:"S, M, L" desc:"Shirt size"`
	Level    int      `json:"level" enum:"1,2,3"`
	Colors   []string `json:"colors" enum:"red,green"`
	Quantity int      `json:"quantity" minimum:"1" maximum:"99" desc:"How many"`
	Discount float64  `json:"discount,omitempty" minimum:"0" maximum:"0.5"`
	Grid     [][]int  `json:"grid,omitempty" minimum:"0"`
	Express  bool     `json:"express" enum:"true"`
}

type Tree struct {
	Value    string `json:"value"`
	Children []Tree `json:"children,omitempty"`
}

type Node struct {
	Value int   `json:"value"`
	Next  *Node `json:"next,omitempty"`
}

type Even struct {
	Odd *Odd `json:"odd,omitempty"`
}

type Odd struct {
	Even *Even `json:"even,omitempty"`
}

type recursive struct {
	First  *Node `json:"first" desc:"Head of the list"`
	Second *Node `json:"second,omitempty"`
	Even   Even  `json:"even"`
}

// TestSchemaOf pins the inferred schemas in testdata/schema/*.json
// (regenerate with -update).
func TestSchemaOf(t *testing.T) {
	tests := []struct {
		name   string
		schema workflow.Schema
	}{
		{"scalars", workflow.SchemaOf[scalars]()},
		{"optional", workflow.SchemaOf[optional]()},
		{"composite", workflow.SchemaOf[composite]()},
		{"embedded", workflow.SchemaOf[embedded]()},
		{"tagged", workflow.SchemaOf[tagged]()},
		{"recursive_root", workflow.SchemaOf[*Tree]()},
		{"recursive_defs", workflow.SchemaOf[recursive]()},
		{"map", workflow.SchemaOf[map[string]int]()},
		{"empty", workflow.SchemaOf[struct{}]()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.MarshalIndent(tt.schema, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			goldenFile(t, filepath.Join("testdata", "schema", tt.name+".json"), append(b, '\n'))

			// The schema is made of decoded JSON values…
			var back workflow.Schema
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(back, tt.schema); diff != "" {
				t.Errorf("schema differs from its JSON round trip (-json +schema):\n%s", diff)
			}
			// …and a valid draft 2020-12 schema.
			if _, err := compile(b); err != nil {
				t.Errorf("schema does not compile: %v", err)
			}
		})
	}
}

func compile(schema []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		return nil, err
	}
	return c.Compile("schema.json")
}

// TestSchemaOfMatchesEncodingJSON checks that the properties SchemaOf
// lists are exactly the keys encoding/json writes.
func TestSchemaOfMatchesEncodingJSON(t *testing.T) {
	check := func(t *testing.T, schema workflow.Schema, v any) {
		t.Helper()
		b, _ := json.Marshal(v)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		props := schema["properties"].(map[string]any)
		var got, want []string
		for k := range props {
			got = append(got, k)
		}
		for k := range m {
			want = append(want, k)
		}
		if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
			t.Errorf("properties (-encoding/json +schema):\n%s", diff)
		}
	}
	n := 1
	check(t, workflow.SchemaOf[embedded](), embedded{Meta: &Meta{Version: 1}, Note: "x", Base: Base{Note: "y"}})
	check(t, workflow.SchemaOf[optional](), optional{Omit: "x", Zero: time.Now(), Pointer: &n, PtrStruct: &struct{ X bool }{}})
	check(t, workflow.SchemaOf[scalars](), scalars{})
}

func TestSchemaOfPanics(t *testing.T) {
	tests := []struct {
		name string
		f    func()
		want string
	}{
		{"channel", func() { workflow.SchemaOf[struct{ C chan int }]() }, "chan int has no JSON form"},
		{"func", func() { workflow.SchemaOf[struct{ F func() }]() }, "has no JSON form"},
		{"complex", func() { workflow.SchemaOf[complex128]() }, "complex128 has no JSON form"},
		{"bool map key", func() { workflow.SchemaOf[map[bool]int]() }, "map key type bool"},
		{"bad enum", func() {
			workflow.SchemaOf[struct {
				N int `enum:"1,two"`
			}]()
		}, `field N: enum value "two"`},
		{"minimum on string", func() {
			workflow.SchemaOf[struct {
				S string `minimum:"1"`
			}]()
		}, "minimum applies to numbers only"},
		{"enum on struct", func() {
			workflow.SchemaOf[struct {
				A address `enum:"x"`
			}]()
		}, "enum, minimum and maximum apply to scalar types only"},
		{"NewTask of a non-object", func() {
			workflow.NewTask("t", "d", func(context.Context, []int, *workflow.TaskState) (any, error) { return nil, nil })
		}, "are not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				r := recover()
				msg, _ := r.(string)
				if !strings.Contains(msg, tt.want) {
					t.Errorf("panic = %v, want one containing %q", r, tt.want)
				}
			}()
			tt.f()
		})
	}
}

type addArgs struct {
	ProductID string `json:"product_id" desc:"e.g. SKU-001"`
	Quantity  int    `json:"quantity" minimum:"1"`
	Note      string `json:"note,omitempty"`
}

func TestNewTaskRun(t *testing.T) {
	var gotArgs addArgs
	task := workflow.NewTask("add", "Adds a product", func(ctx context.Context, args addArgs, st *workflow.TaskState) (any, error) {
		gotArgs = args
		if st.SessionID() != "s1" {
			t.Errorf("SessionID = %q", st.SessionID())
		}
		cart, _ := st.Get("cart")
		if cart != "old" {
			t.Errorf("Get(cart) = %v", cart)
		}
		st.Set("cart", map[string]int{args.ProductID: args.Quantity})
		st.Set("count", args.Quantity)
		st.Delete("stale")
		st.Set("fresh", nil) // deletes too
		if v, ok := st.Get("stale"); ok {
			t.Errorf("Get(stale) after Delete = %v, true", v)
		}
		if v, _ := st.Get("count"); v != 2.0 {
			t.Errorf("Get(count) after Set = %#v, want the JSON form 2.0", v)
		}
		if diff := cmp.Diff([]string{"cart", "count", "kept"}, st.Keys()); diff != "" {
			t.Errorf("Keys (-want +got):\n%s", diff)
		}
		return map[string]any{"ok": true}, nil
	})
	if err := (&workflow.Workflow{Name: "w", InitialStage: "s", Stages: map[string]*workflow.Stage{
		"s": {Tasks: map[string]*workflow.Task{"add": task}}}}).Validate(); err != nil {
		t.Fatal(err)
	}
	resp, err := task.Run(context.Background(), &workflow.TaskRequest{
		SessionID: "s1", Task: "add",
		Args:  map[string]any{"product_id": "SKU-001", "quantity": 2.0},
		State: map[string]any{"cart": "old", "stale": 1.0, "kept": true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(addArgs{ProductID: "SKU-001", Quantity: 2}, gotArgs); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	want := &workflow.TaskResponse{
		Result: map[string]any{"ok": true},
		StateUpdates: map[string]any{
			"cart":  map[string]any{"SKU-001": 2.0},
			"count": 2.0,
			"stale": nil,
			"fresh": nil,
		},
	}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}

func TestNewTaskInvalidArguments(t *testing.T) {
	task := workflow.NewTask("add", "Adds", func(ctx context.Context, args addArgs, st *workflow.TaskState) (any, error) {
		t.Error("fn called with invalid arguments")
		return nil, nil
	})
	tests := []struct {
		name string
		args map[string]any
		want workflow.FieldError
	}{
		{"wrong type", map[string]any{"product_id": 7.0, "quantity": 1.0}, workflow.FieldError{Path: "/product_id", Message: "cannot use number here"}},
		{"fraction", map[string]any{"product_id": "x", "quantity": 1.5}, workflow.FieldError{Path: "/quantity", Message: "cannot use number 1.5 here"}},
		{"unknown", map[string]any{"product_id": "x", "quantity": 1.0, "colour": "red"}, workflow.FieldError{Message: `unknown argument "colour"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := task.Run(context.Background(), &workflow.TaskRequest{Task: "add", Args: tt.args})
			var we *workflow.Error
			if !errors.As(err, &we) || !errors.Is(err, workflow.ErrInvalidArguments) || we.Status != 422 {
				t.Fatalf("err = %#v, want a 422 *Error wrapping ErrInvalidArguments", err)
			}
			if diff := cmp.Diff([]workflow.FieldError{tt.want}, we.Errors); diff != "" {
				t.Errorf("Errors (-want +got):\n%s", diff)
			}
			if strings.Contains(we.Detail, "addArgs") || strings.Contains(we.Detail, "Go") {
				t.Errorf("detail leaks Go names: %q", we.Detail)
			}
		})
	}
}

func TestTaskStateSetPanicsOnNonJSON(t *testing.T) {
	task := workflow.NewTask("t", "d", func(ctx context.Context, args struct{}, st *workflow.TaskState) (any, error) {
		st.Set("f", func() {})
		return nil, nil
	})
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), `TaskState.Set("f")`) {
			t.Errorf("recover() = %v", r)
		}
	}()
	task.Run(context.Background(), &workflow.TaskRequest{})
}

// TestNewTaskThroughEngine runs a typed task through Engine.Execute: the
// engine validates the arguments against the inferred schema and applies
// the state updates.
func TestNewTaskThroughEngine(t *testing.T) {
	task := workflow.NewTask("add", "Adds a product", func(ctx context.Context, args addArgs, st *workflow.TaskState) (any, error) {
		st.Set("last", args)
		return args.Quantity * 2, nil
	})
	w := &workflow.Workflow{Name: "w", InitialStage: "s", Stages: map[string]*workflow.Stage{
		"s": {Tasks: map[string]*workflow.Task{"add": task}}}}
	e := workflow.NewEngine(&taskTestStore{m: map[string]*workflow.Session{}}, nil)
	if err := e.Register(w); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := e.Initialize(ctx, "w")
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Execute(ctx, s.ID, &workflow.ExecuteRequest{WorkflowName: "w", Action: workflow.ActionMethodCall, Task: "add",
		Args: map[string]any{"product_id": "SKU-1", "quantity": 3.0}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Result != 6 {
		t.Errorf("result = %v", res.Result)
	}
	want := map[string]any{"last": map[string]any{"product_id": "SKU-1", "quantity": 3.0}}
	if diff := cmp.Diff(want, res.Session.State); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	_, err = e.Execute(ctx, s.ID, &workflow.ExecuteRequest{WorkflowName: "w", Action: workflow.ActionMethodCall, Task: "add",
		Args: map[string]any{"product_id": "SKU-1", "quantity": 0.0}})
	if !errors.Is(err, workflow.ErrInvalidArguments) {
		t.Errorf("quantity 0: err = %v, want ErrInvalidArguments (minimum:\"1\")", err)
	}
}

// taskTestStore is the minimal SessionStore the engine test needs.
type taskTestStore struct {
	mu sync.Mutex
	m  map[string]*workflow.Session
}

func (s *taskTestStore) Create(_ context.Context, x *workflow.Session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[x.ID] = x.Clone()
	return nil
}

func (s *taskTestStore) Get(_ context.Context, id string) (*workflow.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if x, ok := s.m[id]; ok {
		return x.Clone(), nil
	}
	return nil, workflow.ErrSessionNotFound
}

func (s *taskTestStore) Update(ctx context.Context, x *workflow.Session) error {
	return s.Create(ctx, x)
}

func (s *taskTestStore) Delete(_ context.Context, id string) error { return nil }

func (s *taskTestStore) DeleteExpired(context.Context, time.Time) (int, error) { return 0, nil }

// goldenFile compares got with the file at path, rewriting it with -update.
func goldenFile(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s (-golden +got):\n%s", path, diff)
	}
}
