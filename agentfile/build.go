package agentfile

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/agent/execution"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/mcptools"
	"github.com/agentry-dev/agentry/internal/models"
	"github.com/agentry-dev/agentry/internal/yamldoc"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/messaging/uampagent"
	"github.com/agentry-dev/agentry/server"
	"github.com/agentry-dev/agentry/workflow"
	"github.com/agentry-dev/agentry/workflow/uaipagent"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure Build.
type Options struct {
	// Builtins are the tools a "builtin:" entry may name, declared for
	// governance with govern.Declare; a builtin without a declaration is
	// write_high_risk, as every undeclared tool is.
	Builtins map[string]llm.Tool
	// LookupEnv reads ${NAME} references, api_key_env and the
	// <PROVIDER>_BASE_URL variables; nil is os.LookupEnv.
	LookupEnv func(name string) (string, bool)
	// HTTPClient sends the webhooks' requests; nil uses a shared client
	// with bounded timeouts that does not follow redirects.
	HTTPClient *http.Client
	// WorkflowURL is the base URL of the server whose workflows a
	// "workflow: NAME" entry without a url means (the server the agents
	// run in), and WorkflowToken its bearer token; without it, such an
	// entry is an error.
	WorkflowURL, WorkflowToken string
	// UAMP is the client the "uamp:" tools ask remote agents with: its
	// Key signs the asks (the server's UAMP identity, say), its TLS
	// config holds the roots that authenticate the remote servers and a
	// client certificate. Without it, a uamp tool is an error.
	UAMP *messaging.ClientOptions

	// rb is what every Build with these Options shares.
	rb *shared
}

// shared is what the governor is given once, by the first Build with
// one Options, for the agents of every Build with it: each Build adds
// its own, so that the rollback handlers and the policy the first Build
// gave the governor also serve the agents a later Build made (a reload),
// and the runs still going on the old definitions.
type shared struct {
	mu sync.Mutex
	// hooks are the compensating webhooks, by "AGENT/TOOL".
	hooks map[string]*workflow.Webhook
	// clients are the workflow clients whose tasks' rollbacks the
	// governor may have to run.
	clients []*workflow.Client
	// policies are the agents' own policies (govern.policy), by agent ID;
	// the last Build's.
	policies map[string]govern.Policy
}

// rollbackType is the type of the rollback actions of webhook tools
// (UAICP rollback_action): the compensating call of the tool named by
// the action's Target, "AGENT/TOOL".
const rollbackType = "agentfile.webhook"

// defaultMaxSteps bounds a run when limits.max_steps is not set.
const defaultMaxSteps = 100

// Build adds the agents defs define to cfg.Agents, each under governance
// with its tools' tiers, and the rollback handler of their webhook tools
// to cfg.Governance (created when nil). Every problem of every
// definition is reported, each naming its file and line; on an error
// cfg is left as it was. Build a Config's agents with one call. Build
// again with the same Options to rebuild the agents (a reload,
// server.Server.SetAgents): the rollback handlers the first call gave
// the governor then undo the tools of every build. Do not call Build
// concurrently with the same Options.
//
// A sub-agent tool (agent:) must name one of defs; it is built by
// server.New (server.Agent.Prepare), governed by the server's governor.
// An MCP server is reached at the first step that needs its tools, and
// stopped by the server's Shutdown (server.Agent.Close). A workflow
// entry starts a UAIP session per run; a uamp entry asks a remote agent
// with Options.UAMP.
func Build(cfg *server.Config, defs []*Definition, opts *Options) error {
	if opts == nil {
		opts = &Options{}
	}
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	b := &builder{opts: opts, lookup: lookup, hooks: map[string]*workflow.Webhook{},
		defs: map[string]*Definition{}, built: map[string]server.Agent{}, policies: map[string]govern.Policy{}}
	for _, d := range defs {
		b.defs[d.name] = d
	}
	var agents []server.Agent
	var errs []*Error
	for _, d := range defs {
		a, e := b.agent(d)
		errs = append(errs, e...)
		if len(e) == 0 {
			agents = append(agents, a)
			b.built[d.name] = a
		}
	}
	if len(errs) > 0 {
		out := make([]error, len(errs))
		for i, e := range errs {
			out[i] = e
		}
		return errors.Join(out...)
	}
	cfg.Agents = append(cfg.Agents, agents...)
	first := opts.rb == nil
	if first {
		opts.rb = &shared{hooks: map[string]*workflow.Webhook{}}
	}
	rb := opts.rb
	rb.mu.Lock()
	maps.Copy(rb.hooks, b.hooks)
	rb.clients = append(rb.clients, b.rollbackClients...)
	rb.policies = b.policies
	hooks, clients := len(rb.hooks), len(rb.clients)
	rb.mu.Unlock()
	if cfg.Governance == nil {
		cfg.Governance = &govern.Options{}
	}
	if first || len(b.policies) > 0 {
		// The agents' policies, on top of the server's: a later Build
		// may bring some, so the first one installs the lookup.
		g := *cfg.Governance
		g.Policy = &agentPolicy{base: g.Policy, shared: rb}
		cfg.Governance = &g
	}
	if clients > 0 {
		addRollback(cfg, uaipagent.RollbackType, rb.workflow, false)
	}
	if hooks > 0 {
		addRollback(cfg, rollbackType, rb.webhook, true)
	}
	return nil
}

// addRollback gives cfg's governor the rollback handler fn for actions of
// type typ, replacing one cfg has only with replace; the map is copied,
// never changed in place.
func addRollback(cfg *server.Config, typ string, fn govern.RollbackFunc, replace bool) {
	if cfg.Governance == nil {
		cfg.Governance = &govern.Options{}
	}
	if _, set := cfg.Governance.Rollbacks[typ]; set && !replace {
		return
	}
	rb := maps.Clone(cfg.Governance.Rollbacks)
	if rb == nil {
		rb = map[string]govern.RollbackFunc{}
	}
	rb[typ] = fn
	cfg.Governance.Rollbacks = rb
}

type builder struct {
	opts   *Options
	lookup func(string) (string, bool)
	// hooks are the compensating calls of the webhook tools, by
	// "AGENT/TOOL".
	hooks map[string]*workflow.Webhook
	// defs are the definitions being built, and built their agents, by
	// name: what sub-agent tools refer to.
	defs  map[string]*Definition
	built map[string]server.Agent
	// rollbackClients are the workflow clients whose tasks' rollbacks
	// the governor may have to run.
	rollbackClients []*workflow.Client
	// policies are the agents' govern.policy, by agent ID.
	policies map[string]govern.Policy
}

func (b *builder) expand(d *Definition, ptr, s string, errs *[]*Error) string {
	v, err := yamldoc.ExpandEnv(s, b.lookup)
	if err != nil {
		*errs = append(*errs, d.errorAt(ptr, err.Error()))
	}
	return v
}

func (b *builder) agent(d *Definition) (server.Agent, []*Error) {
	var errs []*Error
	s := &d.spec
	ref, err := b.model(d)
	if err != nil {
		errs = append(errs, d.errorAt("/model", err.Error()))
	}
	o := agent.Options{}
	o.Model = ref
	o.System = s.Instructions
	o.Params = map[string]any{}
	for k, v := range s.Params {
		o.Params[k] = v
	}
	if s.Limits.MaxTokens > 0 && err == nil {
		for k, v := range models.MaxTokens(ref, s.Limits.MaxTokens) {
			o.Params[k] = v
		}
	}
	if len(o.Params) == 0 {
		o.Params = nil
	}
	if s.OutputSchema != nil {
		o.Structure = llm.Schema(s.OutputSchema)
	}
	steps := s.Limits.MaxSteps
	if steps == 0 {
		steps = defaultMaxSteps
	}
	switch s.Strategy {
	case "", "loop":
		o.Execution = execution.Loop(&execution.LoopOptions{MaxIterations: steps})
	case "react":
		o.Execution = execution.ReAct(&execution.ReActOptions{MaxSteps: steps})
	case "plan":
		p, err := execution.Plan(&execution.PlanOptions{MaxPlanSteps: steps})
		if err != nil {
			errs = append(errs, d.errorAt("/strategy", err.Error()))
		}
		o.Execution = p
	}
	var subs []int // the sub-agent tools, built once the governor is known
	var closers []func() error
	for i := range s.Tools {
		if s.Tools[i].Agent != "" {
			errs = append(errs, b.checkSubagent(d, i)...)
			subs = append(subs, i)
			continue
		}
		if w := s.Tools[i].workflow; w != nil {
			ptr := toolPtr(i) + "/workflow"
			var werrs []*Error
			c := b.workflowClient(d, w, ptr, &werrs)
			errs = append(errs, werrs...)
			if len(werrs) == 0 {
				wt := newWorkflowTools(d, w.Name, c, i)
				o.Middleware = append(o.Middleware, wt)
				o.Toolsets = append(o.Toolsets, wt)
				b.rollbackClients = append(b.rollbackClients, c)
			}
			continue
		}
		if s.Tools[i].UAMP != nil {
			t, e := b.uamp(d, i)
			errs = append(errs, e...)
			if len(e) == 0 {
				o.Tools = append(o.Tools, t)
			}
			continue
		}
		if s.Tools[i].MCP != nil {
			ts, e := b.mcp(d, i)
			errs = append(errs, e...)
			if len(e) == 0 {
				o.Toolsets = append(o.Toolsets, ts)
				closers = append(closers, ts.Close)
			}
			continue
		}
		t, e := b.tool(d, i)
		errs = append(errs, e...)
		if len(e) == 0 {
			o.Tools = append(o.Tools, t)
		}
	}
	if s.Govern.Policy != "" {
		path := b.expand(d, "/govern/policy", s.Govern.Policy, &errs)
		if !filepath.IsAbs(path) {
			path = filepath.Join(filepath.Dir(d.file), path)
		}
		if p, err := readPolicy(path); err != nil {
			errs = append(errs, d.errorAt("/govern/policy", err.Error()))
		} else {
			b.policies["agent:"+d.name] = p
		}
	}
	timeout, _ := duration(s.Limits.Timeout) // Load checked it
	a := server.Agent{Name: d.name, Description: s.Description, Timeout: timeout, Options: o,
		Govern: govern.AgentOptions{Identity: govern.Identity{AgentID: "agent:" + d.name, OwnerID: "agentry:agents", ControlClass: govern.HumanSupervised}}}
	if len(closers) > 0 {
		a.Close = func() error {
			var errs []error
			for _, c := range closers {
				errs = append(errs, c())
			}
			return errors.Join(errs...)
		}
	}
	if len(subs) > 0 {
		a.Prepare = func(g *govern.Governor, o *agent.Options) error {
			tools := slices.Clip(o.Tools)
			for _, i := range subs {
				t, err := b.subagentTool(g, d, i)
				if err != nil {
					return err
				}
				tools = append(tools, t)
			}
			o.Tools = tools
			return nil
		}
	}
	return a, errs
}

// mcp builds the MCP tool entry tools[i]: the server's tools as a
// toolset, each with the tier its annotations say, which govern.risk may
// change either way (annotations are untrusted hints).
func (b *builder) mcp(d *Definition, i int) (*mcptools.Toolset, []*Error) {
	m := d.spec.Tools[i].MCP
	ptr := toolPtr(i) + "/mcp"
	var errs []*Error
	o := &mcptools.Options{Include: m.Include, Exclude: m.Exclude, Prefix: m.Prefix, Dir: filepath.Dir(d.file), HTTPClient: b.opts.HTTPClient,
		Tier: func(name string, a *mcp.ToolAnnotations) govern.Tier {
			t, _ := d.tierFor(name, mcptools.AnnotationTier(a), false) // a lowering is allowed here
			return t
		}}
	for j, arg := range m.Command {
		o.Command = append(o.Command, b.expand(d, ptr+"/command/"+strconv.Itoa(j), arg, &errs))
	}
	if len(m.Env) > 0 {
		o.Env = map[string]string{}
		for _, k := range slices.Sorted(maps.Keys(m.Env)) {
			o.Env[k] = b.expand(d, ptr+"/env/"+yamldoc.EscapePointer(k), m.Env[k], &errs)
		}
	}
	if m.URL != "" {
		o.URL = b.expand(d, ptr+"/url", m.URL, &errs)
		if u, err := url.Parse(o.URL); len(errs) == 0 && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
			errs = append(errs, d.errorAt(ptr+"/url", "must be an absolute http or https URL"))
		}
	}
	if len(m.Headers) > 0 {
		o.Headers = map[string]string{}
		for _, k := range slices.Sorted(maps.Keys(m.Headers)) {
			o.Headers[k] = b.expand(d, ptr+"/headers/"+yamldoc.EscapePointer(k), m.Headers[k], &errs)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	ts, err := mcptools.New(o)
	if err != nil {
		return nil, []*Error{d.errorAt(ptr, err.Error())}
	}
	return ts, nil
}

// uamp builds the uamp entry tools[i]: a remote agent, asked over UAMP,
// as a sub-agent tool (uampagent.NewTool), write_low_risk unless
// govern.risk says otherwise (never write_high_risk: no rollback).
func (b *builder) uamp(d *Definition, i int) (llm.Tool, []*Error) {
	u := d.spec.Tools[i].UAMP
	ptr := toolPtr(i) + "/uamp"
	if b.opts.UAMP == nil || b.opts.UAMP.Key == nil {
		return llm.Tool{}, []*Error{d.errorAt(ptr, "a uamp tool needs a UAMP identity to ask with: serve UAMP (agentry serve with --tls-addr), or give agentfile.Options.UAMP")}
	}
	var errs []*Error
	base := strings.TrimRight(b.expand(d, ptr+"/url", u.URL, &errs), "/")
	if pu, err := url.Parse(base); len(errs) == 0 && (err != nil || pu.Scheme != "https" || pu.Host == "") {
		errs = append(errs, d.errorAt(ptr+"/url", "must be an absolute https URL: UAMP is served over TLS only"))
	}
	name := u.Name
	if name == "" {
		name = uampToolName(u.DID)
	}
	tier, err := d.tierFor(name, govern.WriteLowRisk, false)
	switch {
	case err != nil:
		errs = append(errs, d.errorAt(ptr, err.Error()))
	case tier == govern.WriteHighRisk:
		errs = append(errs, d.errorAt(ptr, fmt.Sprintf("remote agent %q cannot be write_high_risk: it has no rollback", name)))
	}
	if len(errs) > 0 {
		return llm.Tool{}, errs
	}
	opts := *b.opts.UAMP
	if u.CA != "" {
		path := b.expand(d, ptr+"/ca", u.CA, &errs)
		if len(errs) > 0 {
			return llm.Tool{}, errs
		}
		if !filepath.IsAbs(path) {
			path = filepath.Join(filepath.Dir(d.file), path)
		}
		pem, err := os.ReadFile(path)
		if err != nil {
			return llm.Tool{}, []*Error{d.errorAt(ptr+"/ca", err.Error())}
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return llm.Tool{}, []*Error{d.errorAt(ptr+"/ca", path+" holds no PEM certificate")}
		}
		conf := &tls.Config{}
		if opts.TLS != nil {
			conf = opts.TLS.Clone()
		}
		conf.RootCAs = roots
		opts.TLS = conf
	}
	c, err := messaging.NewClient(base, &opts)
	if err != nil {
		return llm.Tool{}, []*Error{d.errorAt(ptr, err.Error())}
	}
	desc := u.Description
	if desc == "" {
		desc = "Asks the remote agent " + u.DID + " to do a task and returns its answer."
	}
	tool, err := uampagent.NewTool(c, u.DID, &uampagent.ToolOptions{Name: name, Description: desc, Parameters: subagentSchema})
	if err != nil {
		return llm.Tool{}, []*Error{d.errorAt(ptr, err.Error())}
	}
	return govern.Declare(tool, govern.Declaration{Tier: tier}), nil
}

// subagentSchema is the parameters of a sub-agent tool: the task, as
// its input.
var subagentSchema = llm.Schema{"type": "object", "additionalProperties": false, "required": []any{"input"},
	"properties": map[string]any{"input": map[string]any{"type": "string", "description": "What the agent is asked to do."}}}

// checkSubagent checks what Build can of the sub-agent tool tools[i]:
// the agent it names is built too, and its tier has no rollback to need.
func (b *builder) checkSubagent(d *Definition, i int) []*Error {
	name := d.spec.Tools[i].Agent
	ptr := toolPtr(i) + "/agent"
	if _, ok := b.defs[name]; !ok {
		return []*Error{d.errorAt(ptr, fmt.Sprintf("agent %q is not among the agents built (load its directory with LoadDir)", name))}
	}
	tier, err := d.tierFor(name, govern.WriteLowRisk, false)
	if err != nil {
		return []*Error{d.errorAt(ptr, err.Error())}
	}
	if tier == govern.WriteHighRisk {
		return []*Error{d.errorAt(ptr, fmt.Sprintf("sub-agent %q cannot be write_high_risk: it has no rollback (its own high-risk tools are governed by its own file)", name))}
	}
	return nil
}

// subagentTool builds the sub-agent tool tools[i] of d: the agent it
// names, governed by g — each call a child run — as a tool (UAP-1.1 §8).
func (b *builder) subagentTool(g *govern.Governor, d *Definition, i int) (llm.Tool, error) {
	name := d.spec.Tools[i].Agent
	sa, ok := b.built[name]
	if !ok {
		return llm.Tool{}, fmt.Errorf("sub-agent %q was not built", name)
	}
	o := sa.Options
	if sa.Prepare != nil {
		if err := sa.Prepare(g, &o); err != nil {
			return llm.Tool{}, err
		}
	}
	gov := sa.Govern
	gov.Name = name
	o.Middleware = append(slices.Clip(o.Middleware), g.Middleware(&gov))
	if o.Name == "" {
		o.Name = name
	}
	sub, err := agent.New(&o)
	if err != nil {
		return llm.Tool{}, fmt.Errorf("sub-agent %q: %w", name, err)
	}
	desc := b.defs[name].spec.Description
	if desc == "" {
		desc = "Asks the agent " + name + " to do a task and returns its answer."
	}
	tool, err := agent.SubagentTool(sub, &agent.SubagentOptions{Name: name, Description: desc, Parameters: subagentSchema})
	if err != nil {
		return llm.Tool{}, err
	}
	tier, _ := d.tierFor(name, govern.WriteLowRisk, false) // checkSubagent checked it
	return govern.Declare(tool, govern.Declaration{Tier: tier}), nil
}

// model resolves the agent's model: base_url, api_key_env, and a
// scripted model's file relative to the agent file.
func (b *builder) model(d *Definition) (llm.ModelReference, error) {
	s := &d.spec
	var errs []*Error
	spec := b.expand(d, "/model", s.Model, &errs)
	if len(errs) > 0 {
		return llm.ModelReference{}, errors.New(errs[0].Message)
	}
	if p, m, _ := strings.Cut(spec, ":"); p == "scripted" && isScriptFile(m) && !filepath.IsAbs(m) {
		spec = "scripted:" + filepath.Join(filepath.Dir(d.file), m)
	}
	base := ""
	if s.BaseURL != "" {
		base = b.expand(d, "/base_url", s.BaseURL, &errs)
	}
	if len(errs) > 0 {
		return llm.ModelReference{}, errors.New(errs[0].Message)
	}
	provider, _, _ := strings.Cut(spec, ":")
	for _, name := range models.BaseURLEnv(provider) {
		if base != "" {
			break
		}
		v, _ := b.lookup(name)
		base = strings.TrimSpace(v)
	}
	ref, err := models.Resolve(spec, base)
	if err != nil {
		return ref, err
	}
	if s.APIKeyEnv != "" {
		key, ok := b.lookup(s.APIKeyEnv)
		if !ok || key == "" {
			return ref, fmt.Errorf("api_key_env: environment variable %s is not set", s.APIKeyEnv)
		}
		cfg := llm.ProviderConfig{}
		if ref.Config != nil {
			cfg = *ref.Config
		}
		cfg.APIKey = llm.StaticKey(key)
		ref.Config = &cfg
	}
	return ref, nil
}

// isScriptFile reports whether a scripted model names a script file (a
// path, or a name ending in .yaml, .yml or .json) rather than a model the
// binary has built in (scripted:demo).
func isScriptFile(m string) bool {
	switch strings.ToLower(filepath.Ext(m)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return strings.ContainsAny(m, `/\`)
}

// tool builds tools[i].
func (b *builder) tool(d *Definition, i int) (llm.Tool, []*Error) {
	t := &d.spec.Tools[i]
	ptr := toolPtr(i)
	switch t.kind() {
	case "builtin":
		bt, ok := b.opts.Builtins[t.Builtin]
		if !ok {
			return llm.Tool{}, []*Error{d.errorAt(ptr+"/builtin", fmt.Sprintf("no builtin tool is named %q (have %s)", t.Builtin, strings.Join(slices.Sorted(maps.Keys(b.opts.Builtins)), ", ")))}
		}
		decl, _ := govern.DeclarationOf(bt)
		tier, err := d.tierFor(bt.Name, decl.Tier, true)
		if err != nil {
			return llm.Tool{}, []*Error{d.errorAt(ptr, err.Error())}
		}
		decl.Tier = tier
		if tier == govern.WriteHighRisk && decl.Rollback == nil {
			return llm.Tool{}, []*Error{d.errorAt(ptr, fmt.Sprintf("builtin %q is write_high_risk here but has no rollback", bt.Name))}
		}
		return govern.Declare(bt, decl), nil
	case "webhook":
		return b.webhook(d, i, ptr+"/webhook")
	}
	return llm.Tool{}, []*Error{d.errorAt(ptr, fmt.Sprintf("no builder for tools of kind %q", t.kind()))} // Load admits no other kind
}

// tierFor is the tier of the tool named name: its own (declared) tier,
// changed by the last govern.risk glob that matches. With onlyRaise, a
// glob may make the tier stricter, never laxer (builtins and workflow
// tasks declare what they do).
func (d *Definition) tierFor(name string, own govern.Tier, onlyRaise bool) (govern.Tier, error) {
	if own == 0 {
		own = govern.WriteHighRisk
	}
	tier := own
	for _, r := range d.risk {
		if !matches(r.glob, name) {
			continue
		}
		t, err := govern.ParseTier(r.tier)
		if err != nil {
			return 0, err
		}
		if onlyRaise && t < own {
			return 0, fmt.Errorf("govern.risk %q would lower tool %q from %s to %s: a builtin or workflow task's tier can only be raised", r.glob, name, own, t)
		}
		tier = t
	}
	return tier, nil
}

// webhook builds a webhook tool: the call is the YAML workflows' webhook
// (workflow.Webhook) with the tool's name as the task and the agent's as
// the workflow, its result the tool's result.
func (b *builder) webhook(d *Definition, i int, ptr string) (llm.Tool, []*Error) {
	w := d.spec.Tools[i].Webhook
	var errs []*Error
	hook := b.call(d, &w.fileCall, ptr, &errs)
	hook.Idempotent = w.Idempotent
	if !w.Idempotent {
		hook.Retries = -1
	}
	run, err := workflow.NewWebhookFunc(hook)
	if err != nil && len(errs) == 0 {
		errs = append(errs, d.errorAt(ptr+"/url", err.Error()))
	}
	own := govern.WriteLowRisk
	if w.Risk != "" {
		own, _ = govern.ParseTier(w.Risk) // the schema checked it
	}
	tier, err := d.tierFor(w.Name, own, false)
	if err != nil {
		errs = append(errs, d.errorAt(ptr, err.Error()))
	}
	decl := govern.Declaration{Tier: tier}
	if w.Rollback != nil {
		rb := b.call(d, w.Rollback, ptr+"/rollback", &errs)
		rb.Retries = -1
		if _, err := workflow.NewWebhookFunc(rb); err != nil && len(errs) == 0 {
			errs = append(errs, d.errorAt(ptr+"/rollback/url", err.Error()))
		}
		target := d.name + "/" + w.Name
		b.hooks[target] = rb
		decl.Rollback = func(_ context.Context, c govern.Call) (*govern.RollbackAction, error) {
			return &govern.RollbackAction{Type: rollbackType, Target: target, Payload: c.Args}, nil
		}
	}
	if len(errs) > 0 {
		return llm.Tool{}, errs
	}
	params := llm.Schema(w.InputSchema)
	if params == nil {
		params = llm.Schema{"type": "object"}
	}
	agentName := d.name
	tool := llm.Tool{Name: w.Name, Description: w.Description, Parameters: params,
		Run: func(ctx context.Context, args map[string]any) (any, error) {
			req := &workflow.TaskRequest{Workflow: agentName, Task: w.Name, Args: args, State: map[string]any{}}
			if c, ok := govern.CallFrom(ctx); ok {
				req.SessionID = c.RequestID
			}
			resp, err := run(ctx, req)
			if err != nil {
				return nil, toolError(err)
			}
			return resp.Result, nil
		}}
	return govern.Declare(tool, decl), nil
}

// call builds the webhook of a call: ${NAME} expanded in the URL and the
// headers, the URL checked.
func (b *builder) call(d *Definition, c *fileCall, ptr string, errs *[]*Error) *workflow.Webhook {
	h := &workflow.Webhook{Method: c.Method, Client: b.opts.HTTPClient}
	h.URL = b.expand(d, ptr+"/url", c.URL, errs)
	if u, err := url.Parse(h.URL); h.URL != "" && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
		*errs = append(*errs, d.errorAt(ptr+"/url", "must be an absolute http or https URL"))
	}
	h.Timeout, _ = duration(c.Timeout) // Load checked it
	if len(c.Headers) > 0 {
		h.Header = http.Header{}
		for _, k := range slices.Sorted(maps.Keys(c.Headers)) {
			h.Header.Add(k, b.expand(d, ptr+"/headers/"+yamldoc.EscapePointer(k), c.Headers[k], errs))
		}
	}
	return h
}

// webhook is the rollback handler of webhook tools: the compensating
// call of the tool the action targets, with the original arguments.
func (rb *shared) webhook(ctx context.Context, a govern.RollbackAction) error {
	rb.mu.Lock()
	hook, ok := rb.hooks[a.Target]
	rb.mu.Unlock()
	if !ok {
		return fmt.Errorf("agentfile: no rollback for tool %q", a.Target)
	}
	run, err := workflow.NewWebhookFunc(hook)
	if err != nil {
		return err
	}
	agentName, tool, _ := strings.Cut(a.Target, "/")
	args, _ := a.Payload.(map[string]any)
	_, err = run(ctx, &workflow.TaskRequest{Workflow: agentName, Task: tool, Args: args, State: map[string]any{}})
	return err
}

// toolError is the error the model sees for a failed webhook: the
// detail a 4xx answer gave, or that the service is unavailable.
func toolError(err error) error {
	var we *workflow.Error
	if errors.As(err, &we) {
		return errors.New(we.Detail)
	}
	return err
}

// workflow runs a workflow task's rollback through the clients in turn
// until one knows the session: the action names the session, not the
// server.
func (rb *shared) workflow(ctx context.Context, a govern.RollbackAction) error {
	rb.mu.Lock()
	clients := slices.Clone(rb.clients)
	rb.mu.Unlock()
	var errs []error
	for _, c := range clients {
		err := uaipagent.RollbackHandler(c)(ctx, a)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// agentPolicy decides a call with the server's policy (base; nil allows)
// and, for an agent with a govern.policy of its own, with that one too:
// the stricter decision stands (deny, then needs_review, then allow).
type agentPolicy struct {
	base   govern.Policy
	shared *shared
}

func (p *agentPolicy) Decide(ctx context.Context, in govern.PolicyInput) (govern.Decision, error) {
	base := p.base
	if base == nil {
		base = govern.AllowAll
	}
	d, err := base.Decide(ctx, in)
	if err != nil || d.Effect == govern.Deny {
		return d, err
	}
	p.shared.mu.Lock()
	own := p.shared.policies[in.Identity.AgentID]
	p.shared.mu.Unlock()
	if own == nil {
		return d, nil
	}
	od, err := own.Decide(ctx, in)
	if err != nil {
		return od, err
	}
	if strictness(od.Effect) > strictness(d.Effect) {
		return od, nil
	}
	return d, nil
}

// strictness orders effects: allow, needs_review, deny (and anything
// else, which the governor refuses, as deny).
func strictness(e govern.Effect) int {
	switch e {
	case govern.Allow:
		return 0
	case govern.Review:
		return 1
	}
	return 2
}

// readPolicy reads the rule policy file at path.
func readPolicy(path string) (*govern.RulePolicy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := govern.ParseRulePolicy(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}
