package uaipconformance

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
)

// workflowSchema is what the suite learns from GET /api/workflows/{name}.
type workflowSchema struct {
	name    string
	initial string
	stages  map[string]*stageSchema
}

type stageSchema struct {
	name          string
	tasks         map[string]map[string]any // task → its parameters schema (nil: none given)
	tiers         map[string]string         // task → its declared risk_tier ("" when none)
	transitions   []string
	prerequisites []string
}

// readOnly reports whether a task declares itself read-only: risk_tier
// "read_only", the UAICP tier agentry's schemas carry (an extension of
// UAIP). A task without a declaration may write.
func (s *stageSchema) readOnly(task string) bool { return s.tiers[task] == readOnlyTier }

// readOnlyTier is the risk_tier of a task that only reads.
const readOnlyTier = "read_only"

// taskNames returns the stage's task names sorted.
func (s *stageSchema) taskNames() []string {
	names := make([]string, 0, len(s.tasks))
	for n := range s.tasks {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// stageNames returns the stage names sorted.
func (w *workflowSchema) stageNames() []string {
	names := make([]string, 0, len(w.stages))
	for n := range w.stages {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// parseSchema reads the spec's workflow schema shape:
//
//	{name, description, initial_stage,
//	 stages: {<stage>: {name, description, tasks: {<task>: {name, description, parameters}}, transitions: [..]}}}
//
// A top-level "transitions" object (the spec's Workflow type) is accepted
// for stages that do not list their own. It returns the schema (nil when
// it is unusable) and every deviation from the shape.
func parseSchema(m map[string]any, want string) (*workflowSchema, []string) {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	w := &workflowSchema{stages: map[string]*stageSchema{}}
	name, ok := m["name"].(string)
	switch {
	case !ok:
		bad("name is not a string")
	case name != want:
		bad("name is %q, not %q", name, want)
	}
	w.name = name
	if d, ok := m["description"]; ok {
		if _, ok := d.(string); !ok {
			bad("description is not a string")
		}
	}
	w.initial, ok = m["initial_stage"].(string)
	if !ok {
		bad("initial_stage is not a string")
	}
	stages, ok := m["stages"].(map[string]any)
	if !ok || len(stages) == 0 {
		bad("stages is not a non-empty object keyed by stage name")
		return nil, problems
	}
	top, _ := m["transitions"].(map[string]any)
	for key, v := range stages {
		sm, ok := v.(map[string]any)
		if !ok {
			bad("stages.%s is not an object", key)
			continue
		}
		st := &stageSchema{name: key, tasks: map[string]map[string]any{}, tiers: map[string]string{}}
		w.stages[key] = st
		if n, _ := sm["name"].(string); n != key {
			bad("stages.%s.name is %s, not %q", key, describe(sm["name"]), key)
		}
		tasks, ok := sm["tasks"].(map[string]any)
		if !ok {
			bad("stages.%s.tasks is not an object", key)
		}
		for tn, tv := range tasks {
			tm, ok := tv.(map[string]any)
			if !ok {
				bad("stages.%s.tasks.%s is not an object", key, tn)
				continue
			}
			if n, _ := tm["name"].(string); n != tn {
				bad("stages.%s.tasks.%s.name is %s, not %q", key, tn, describe(tm["name"]), tn)
			}
			if _, ok := tm["description"].(string); !ok {
				bad("stages.%s.tasks.%s.description is not a string", key, tn)
			}
			params, ok := tm["parameters"].(map[string]any)
			if !ok {
				bad("stages.%s.tasks.%s.parameters is not a JSON Schema object", key, tn)
			}
			st.tasks[tn] = params
			if tier, ok := tm["risk_tier"].(string); ok { // an extension: not checked
				st.tiers[tn] = tier
			}
		}
		tr, has := sm["transitions"]
		if !has && top != nil {
			tr, has = top[key]
		}
		if !has {
			bad("stages.%s has no transitions list", key)
		}
		if list, ok := stringList(tr); has && !ok {
			bad("stages.%s.transitions is not a list of stage names", key)
		} else {
			st.transitions = list
		}
		if p, has := sm["prerequisites"]; has {
			list, ok := stringList(p)
			if !ok {
				bad("stages.%s.prerequisites is not a list of strings", key)
			}
			st.prerequisites = list
		}
	}
	for _, st := range w.stages {
		for _, to := range st.transitions {
			if w.stages[to] == nil {
				bad("stages.%s.transitions names unknown stage %q", st.name, to)
			}
		}
	}
	if w.initial != "" && w.stages[w.initial] == nil {
		bad("initial_stage %q is not one of the stages", w.initial)
		return nil, problems
	}
	if w.initial == "" {
		return nil, problems
	}
	return w, problems
}

func stringList(v any) ([]string, bool) {
	xs, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		s, ok := x.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

func describe(v any) string {
	if v == nil {
		return "missing"
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// maxDepth bounds how deep generated arguments nest.
const maxDepth = 8

// genArgs generates arguments satisfying a task's parameters schema: the
// required properties only, each with a value of the right type (a
// const, default, example or the first enum value when the schema gives
// one; otherwise the smallest value the bounds allow). It returns an
// error naming what it cannot satisfy generically.
func genArgs(params map[string]any) (map[string]any, error) {
	if params == nil {
		return map[string]any{}, nil
	}
	v, err := genValue(params, "", 0)
	if err != nil {
		return nil, err
	}
	args, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("parameters describe %s, not an object", describe(v))
	}
	return args, nil
}

// unsupported lists keywords whose constraints a generic generator
// cannot meet reliably.
var unsupported = []string{"$ref", "$dynamicRef", "allOf", "anyOf", "oneOf", "not", "if", "pattern",
	"patternProperties", "dependentRequired", "dependentSchemas", "propertyNames", "contains",
	"unevaluatedProperties", "unevaluatedItems", "multipleOf", "uniqueItems"}

func genValue(s map[string]any, path string, depth int) (any, error) {
	at := path
	if at == "" {
		at = "/"
	}
	if depth > maxDepth {
		return nil, fmt.Errorf("%s nests too deep", at)
	}
	if v, ok := s["const"]; ok {
		return v, nil
	}
	if v, ok := s["default"]; ok {
		return v, nil
	}
	if ex, ok := s["examples"].([]any); ok && len(ex) > 0 {
		return ex[0], nil
	}
	if enum, ok := s["enum"].([]any); ok {
		if len(enum) == 0 {
			return nil, fmt.Errorf("%s: empty enum", at)
		}
		return enum[0], nil
	}
	for _, k := range unsupported {
		if _, ok := s[k]; ok {
			return nil, fmt.Errorf("%s: %q cannot be satisfied generically", at, k)
		}
	}
	typ, err := schemaType(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", at, err)
	}
	switch typ {
	case "null":
		return nil, nil
	case "boolean":
		return true, nil
	case "integer", "number":
		return genNumber(s, typ == "integer", at)
	case "string":
		return genString(s, at)
	case "array":
		n, _ := number(s["minItems"])
		items, _ := s["items"].(map[string]any)
		out := []any{}
		for i := 0; i < int(n); i++ {
			if items == nil {
				return nil, fmt.Errorf("%s: minItems without an items schema", at)
			}
			v, err := genValue(items, fmt.Sprintf("%s/%d", path, i), depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		if max, ok := number(s["maxItems"]); ok && float64(len(out)) > max {
			return nil, fmt.Errorf("%s: minItems > maxItems", at)
		}
		return out, nil
	case "object":
		return genObject(s, path, depth)
	}
	return nil, fmt.Errorf("%s: type %q is not supported", at, typ)
}

func schemaType(s map[string]any) (string, error) {
	switch t := s["type"].(type) {
	case string:
		return t, nil
	case []any:
		for _, x := range t {
			if str, ok := x.(string); ok && str != "null" {
				return str, nil
			}
		}
		if len(t) > 0 {
			return "null", nil
		}
	case nil:
		if _, ok := s["properties"]; ok {
			return "object", nil
		}
		return "", fmt.Errorf("no type")
	}
	return "", fmt.Errorf("type %s is not understood", describe(s["type"]))
}

func genObject(s map[string]any, path string, depth int) (any, error) {
	props, _ := s["properties"].(map[string]any)
	required, _ := stringList(s["required"])
	out := map[string]any{}
	for _, name := range required {
		ps, ok := props[name].(map[string]any)
		if !ok {
			switch ap := s["additionalProperties"].(type) {
			case map[string]any:
				ps = ap
			case bool:
				if !ap {
					return nil, fmt.Errorf("%s/%s: required but not allowed", path, name)
				}
			}
		}
		if ps == nil {
			out[name] = "conformance" // any value fits an unconstrained property
			continue
		}
		v, err := genValue(ps, path+"/"+name, depth+1)
		if err != nil {
			return nil, err
		}
		out[name] = v
	}
	if n, ok := number(s["minProperties"]); ok && float64(len(out)) < n {
		return nil, fmt.Errorf("%s: minProperties exceeds the required properties", orRoot(path))
	}
	return out, nil
}

func orRoot(path string) string {
	if path == "" {
		return "/"
	}
	return path
}

// genNumber returns 1, or the smallest value the lower bound allows, or
// the upper bound when 1 exceeds it.
func genNumber(s map[string]any, integer bool, at string) (any, error) {
	step := 0.5
	if integer {
		step = 1
	}
	lo, hasLo := number(s["minimum"])
	if x, ok := number(s["exclusiveMinimum"]); ok && (!hasLo || x >= lo) {
		lo, hasLo = x+step, true
	}
	hi, hasHi := number(s["maximum"])
	if x, ok := number(s["exclusiveMaximum"]); ok && (!hasHi || x <= hi) {
		hi, hasHi = x-step, true
	}
	v := 1.0
	if hasLo {
		v = lo
	}
	if integer {
		v = math.Ceil(v)
	}
	if hasHi && v > hi {
		v = hi
		if integer {
			v = math.Floor(hi)
		}
		if hasLo && v < lo {
			return nil, fmt.Errorf("%s: no number in the allowed range", at)
		}
	}
	if integer {
		return int64(v), nil
	}
	return v, nil
}

func genString(s map[string]any, at string) (any, error) {
	format, hasFormat := s["format"].(string)
	var v string
	switch format {
	case "":
		v = "conformance"
	case "email":
		v = "conformance@example.com"
	case "uuid":
		v = uuid.NewString()
	case "date-time":
		v = time.Now().UTC().Format(time.RFC3339)
	case "date":
		v = time.Now().UTC().Format(time.DateOnly)
	case "time":
		v = time.Now().UTC().Format("15:04:05Z")
	case "uri", "iri":
		v = "https://example.com/"
	case "hostname":
		v = "example.com"
	default:
		return nil, fmt.Errorf("%s: format %q cannot be satisfied generically", at, format)
	}
	min, hasMin := number(s["minLength"])
	max, hasMax := number(s["maxLength"])
	n := float64(len([]rune(v)))
	if (hasMin && n < min) || (hasMax && n > max) {
		if hasFormat || (hasMin && hasMax && min > max) {
			return nil, fmt.Errorf("%s: its length bounds cannot be satisfied generically", at)
		}
		if hasMin && n < min {
			v += strings.Repeat("x", int(min-n))
		} else {
			v = string([]rune(v)[:int(max)])
		}
	}
	return v, nil
}

// number reads a JSON number decoded as json.Number or float64.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	}
	return 0, false
}

// tasksOnlyIn returns the tasks of a that b does not have, sorted.
func tasksOnlyIn(a, b *stageSchema) []string {
	var out []string
	for _, t := range a.taskNames() {
		if _, ok := b.tasks[t]; !ok {
			out = append(out, t)
		}
	}
	return out
}

func contains(xs []string, x string) bool { return slices.Contains(xs, x) }
