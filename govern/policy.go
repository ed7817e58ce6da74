package govern

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Effect is a policy decision's effect.
type Effect string

// The three effects (§5.3 "allowed with policy checks").
const (
	Allow  Effect = "allow"
	Deny   Effect = "deny"
	Review Effect = "needs_review" // the call needs a human approval first
)

// valid reports whether e is one of the three effects.
func (e Effect) valid() bool { return e == Allow || e == Deny || e == Review }

// Decision is a policy's answer for one call.
type Decision struct {
	Effect  Effect   `json:"effect"`
	Rule    string   `json:"rule,omitempty"`
	Reasons []string `json:"reasons,omitempty"`
}

// PolicyInput is what a policy decides on.
type PolicyInput struct {
	RequestID string
	TraceID   string
	Identity  Identity
	TaskClass string
	Tool      string
	// Tier is the call's effective tier (never read_only: read-only calls
	// are auto-allowed without asking the policy).
	Tier Tier
	Args map[string]any
}

// Policy decides whether a write may run (§5.3). The governor asks it for
// every write_low_risk and write_high_risk call; an error or an invalid
// effect counts as Deny (fail closed). Implementations must be safe for
// concurrent use.
type Policy interface {
	Decide(ctx context.Context, in PolicyInput) (Decision, error)
}

// PolicyFunc adapts a function to Policy.
type PolicyFunc func(ctx context.Context, in PolicyInput) (Decision, error)

// Decide calls f.
func (f PolicyFunc) Decide(ctx context.Context, in PolicyInput) (Decision, error) { return f(ctx, in) }

// AllowAll allows every call; tiers still apply (high-risk calls still
// need an approval and rollback). It is the policy of a governor without
// Options.Policy.
var AllowAll Policy = PolicyFunc(func(context.Context, PolicyInput) (Decision, error) {
	return Decision{Effect: Allow, Rule: "default"}, nil
})

// RulePolicy is the built-in policy: an ordered list of rules, the first
// that matches a call deciding it, and a default for calls no rule
// matches. It is usually loaded from YAML (ParseRulePolicy):
//
//	default: allow
//	rules:
//	  - name: big-refunds
//	    tools: ["refund_*"]
//	    when:
//	      - {arg: amount, op: gt, value: 1000}
//	    effect: needs_review
//	    reason: refunds over 1000 need a second pair of eyes
//	  - name: no-deletes-when-autonomous
//	    tools: ["delete_*"]
//	    control_classes: [autonomous]
//	    effect: deny
type RulePolicy struct {
	// Default is the effect when no rule matches; "" is Allow.
	Default Effect `yaml:"default"`
	Rules   []Rule `yaml:"rules"`
}

// Rule is one rule of a RulePolicy. Every non-empty matcher must match
// (tools, tiers, agents, owners and control classes match if any of their
// entries does; tool, agent and owner entries are path.Match patterns).
type Rule struct {
	Name           string      `yaml:"name"`
	Tools          []string    `yaml:"tools"`
	Tiers          []string    `yaml:"tiers"`
	Agents         []string    `yaml:"agents"`
	Owners         []string    `yaml:"owners"`
	ControlClasses []string    `yaml:"control_classes"`
	TaskClasses    []string    `yaml:"task_classes"`
	When           []Condition `yaml:"when"`
	Effect         Effect      `yaml:"effect"`
	Reason         string      `yaml:"reason"`
}

// Condition tests one argument, named by a dotted path into the arguments
// ("customer.id"). Op is one of eq, ne, gt, ge, lt, le (numbers), in
// (Value is a list), exists and absent (no Value), matches (a path.Match
// pattern on a string).
type Condition struct {
	Arg   string `yaml:"arg"`
	Op    string `yaml:"op"`
	Value any    `yaml:"value"`
}

var validOps = map[string]bool{"eq": true, "ne": true, "gt": true, "ge": true, "lt": true, "le": true, "in": true, "exists": true, "absent": true, "matches": true}

// ParseRulePolicy reads a RulePolicy from YAML (known fields only) and
// validates it.
func ParseRulePolicy(b []byte) (*RulePolicy, error) {
	var p RulePolicy
	d := yaml.NewDecoder(bytes.NewReader(b))
	d.KnownFields(true)
	if err := d.Decode(&p); err != nil {
		return nil, fmt.Errorf("govern: policy: %w", err)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Validate checks effects, tiers, control classes, patterns and
// conditions.
func (p *RulePolicy) Validate() error {
	var errs []error
	if p.Default != "" && !p.Default.valid() {
		errs = append(errs, fmt.Errorf("default effect %q is not allow, deny or needs_review", p.Default))
	}
	for i, r := range p.Rules {
		where := fmt.Sprintf("rule %d", i+1)
		if r.Name != "" {
			where += " (" + r.Name + ")"
		}
		if !r.Effect.valid() {
			errs = append(errs, fmt.Errorf("%s: effect %q is not allow, deny or needs_review", where, r.Effect))
		}
		for _, t := range r.Tiers {
			if _, err := ParseTier(t); err != nil {
				errs = append(errs, fmt.Errorf("%s: %v", where, err))
			}
		}
		for _, c := range r.ControlClasses {
			if !ControlClass(c).valid() {
				errs = append(errs, fmt.Errorf("%s: control class %q is not autonomous, human-supervised or human-directed", where, c))
			}
		}
		for _, pats := range [][]string{r.Tools, r.Agents, r.Owners, r.TaskClasses} {
			for _, pat := range pats {
				if _, err := path.Match(pat, ""); err != nil {
					errs = append(errs, fmt.Errorf("%s: bad pattern %q", where, pat))
				}
			}
		}
		for j, c := range r.When {
			switch {
			case c.Arg == "":
				errs = append(errs, fmt.Errorf("%s: condition %d has no arg", where, j+1))
			case !validOps[c.Op]:
				errs = append(errs, fmt.Errorf("%s: condition %d: unknown op %q", where, j+1, c.Op))
			case (c.Op == "exists" || c.Op == "absent") != (c.Value == nil):
				errs = append(errs, fmt.Errorf("%s: condition %d: op %s takes %s value", where, j+1, c.Op, map[bool]string{true: "no", false: "a"}[c.Op == "exists" || c.Op == "absent"]))
			case c.Op == "in":
				if _, ok := c.Value.([]any); !ok {
					errs = append(errs, fmt.Errorf("%s: condition %d: op in needs a list", where, j+1))
				}
			case c.Op == "matches":
				s, ok := c.Value.(string)
				if _, err := path.Match(s, ""); !ok || err != nil {
					errs = append(errs, fmt.Errorf("%s: condition %d: op matches needs a valid pattern", where, j+1))
				}
			case c.Op == "gt" || c.Op == "ge" || c.Op == "lt" || c.Op == "le":
				if _, ok := toFloat(c.Value); !ok {
					errs = append(errs, fmt.Errorf("%s: condition %d: op %s needs a number", where, j+1, c.Op))
				}
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("govern: policy: %w", errors.Join(errs...))
	}
	return nil
}

// Decide returns the effect of the first matching rule, or the default.
func (p *RulePolicy) Decide(_ context.Context, in PolicyInput) (Decision, error) {
	for i, r := range p.Rules {
		if r.matches(in) {
			name := r.Name
			if name == "" {
				name = fmt.Sprintf("rule %d", i+1)
			}
			d := Decision{Effect: r.Effect, Rule: name}
			if r.Reason != "" {
				d.Reasons = []string{r.Reason}
			}
			return d, nil
		}
	}
	eff := p.Default
	if eff == "" {
		eff = Allow
	}
	return Decision{Effect: eff, Rule: "default"}, nil
}

func (r *Rule) matches(in PolicyInput) bool {
	if !anyMatch(r.Tools, in.Tool) || !anyMatch(r.Agents, in.Identity.AgentID) ||
		!anyMatch(r.Owners, in.Identity.OwnerID) || !anyMatch(r.TaskClasses, in.TaskClass) {
		return false
	}
	if len(r.Tiers) > 0 && !contains(r.Tiers, in.Tier.String()) {
		return false
	}
	if len(r.ControlClasses) > 0 && !contains(r.ControlClasses, string(in.Identity.ControlClass)) {
		return false
	}
	for _, c := range r.When {
		if !c.holds(in.Args) {
			return false
		}
	}
	return true
}

func anyMatch(patterns []string, s string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(p, s); ok {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (c *Condition) holds(args map[string]any) bool {
	v, ok := lookup(args, c.Arg)
	switch c.Op {
	case "exists":
		return ok
	case "absent":
		return !ok
	}
	if !ok {
		return false
	}
	switch c.Op {
	case "eq":
		return equal(v, c.Value)
	case "ne":
		return !equal(v, c.Value)
	case "in":
		list, _ := c.Value.([]any)
		for _, x := range list {
			if equal(v, x) {
				return true
			}
		}
		return false
	case "matches":
		s, ok := v.(string)
		pat, _ := c.Value.(string)
		m, _ := path.Match(pat, s)
		return ok && m
	}
	a, ok1 := toFloat(v)
	b, ok2 := toFloat(c.Value)
	if !ok1 || !ok2 {
		return false
	}
	switch c.Op {
	case "gt":
		return a > b
	case "ge":
		return a >= b
	case "lt":
		return a < b
	case "le":
		return a <= b
	}
	return false
}

func lookup(args map[string]any, dotted string) (any, bool) {
	var cur any = args
	for _, part := range strings.Split(dotted, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[part]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func equal(a, b any) bool {
	if x, ok := toFloat(a); ok {
		y, ok := toFloat(b)
		return ok && x == y
	}
	return reflect.DeepEqual(a, b)
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case uint64:
		return float64(n), true
	case uint:
		return float64(n), true
	}
	return 0, false
}
