package agentfile

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentry-dev/agentry/internal/models"
	"github.com/agentry-dev/agentry/internal/schemas"
	"github.com/agentry-dev/agentry/internal/yamldoc"
)

//go:embed schema/agent.schema.json
var schemaJSON []byte

var fileSchema = sync.OnceValue(func() *jsonschema.Schema {
	return schemas.Embedded(schemas.NewCompiler(), "https://agentry.dev/schema/agent.schema.json", schemaJSON)
})

// Error is a problem found in an agent file: its File, Line (1-based; 0
// when unknown), Path (the JSON Pointer of the offending value) and
// Message; its Error is "FILE[:LINE]: [PATH: ]MESSAGE". Load and LoadDir
// return them joined (errors.Join).
type Error = yamldoc.Error

// Definition is one agent file, read and checked: what Build turns into
// an agent. Its exported fields describe it; changing them changes
// nothing Build does.
type Definition struct {
	// Name is the agent's name: the file's name key, else the file's
	// base name without its extension.
	Name string
	// Description and Model ("provider:model") are the file's.
	Description, Model string
	// File is the path the definition was read from.
	File string
	// Tools names the tools the file declares, as "kind:name".
	Tools []string

	name string
	file string
	doc  *yamldoc.Doc
	spec fileAgent
	// risk is govern.risk in file order.
	risk []riskRule
}

// The file form of an agent (docs/agents.md).
type (
	fileAgent struct {
		Name         string         `json:"name"`
		Description  string         `json:"description"`
		Model        string         `json:"model"`
		BaseURL      string         `json:"base_url"`
		APIKeyEnv    string         `json:"api_key_env"`
		Params       map[string]any `json:"params"`
		Instructions string         `json:"instructions"`
		Strategy     string         `json:"strategy"`
		Limits       fileLimits     `json:"limits"`
		OutputSchema map[string]any `json:"output_schema"`
		Tools        []fileTool     `json:"tools"`
		Govern       fileGovern     `json:"govern"`
	}
	fileLimits struct {
		MaxSteps  int `json:"max_steps"`
		MaxTokens int `json:"max_tokens"`
		Timeout   any `json:"timeout"`
	}
	fileGovern struct {
		Risk   map[string]string `json:"risk"`
		Policy string            `json:"policy"`
	}
	fileTool struct {
		Builtin  string        `json:"builtin"`
		Webhook  *fileWebhook  `json:"webhook"`
		MCP      *fileMCP      `json:"mcp"`
		Workflow any           `json:"workflow"` // a name or a fileWorkflow
		Agent    string        `json:"agent"`
		UAMP     *fileUAMP     `json:"uamp"`
		workflow *fileWorkflow // Workflow, decoded
	}
	fileCall struct {
		URL     string            `json:"url"`
		Method  string            `json:"method"`
		Headers map[string]string `json:"headers"`
		Timeout any               `json:"timeout"`
	}
	fileWebhook struct {
		fileCall
		Name        string         `json:"name"`
		Description string         `json:"description"`
		InputSchema map[string]any `json:"input_schema"`
		Risk        string         `json:"risk"`
		Idempotent  bool           `json:"idempotent"`
		Rollback    *fileCall      `json:"rollback"`
	}
	fileMCP struct {
		Command []string          `json:"command"`
		Env     map[string]string `json:"env"`
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
		Include []string          `json:"include"`
		Exclude []string          `json:"exclude"`
		Prefix  string            `json:"prefix"`
	}
	fileWorkflow struct {
		Name     string `json:"name"`
		URL      string `json:"url"`
		TokenEnv string `json:"token_env"`
	}
	fileUAMP struct {
		URL         string `json:"url"`
		DID         string `json:"did"`
		Name        string `json:"name"`
		Description string `json:"description"`
		// CA is a PEM file of the certificates that authenticate the
		// remote server, instead of the system roots.
		CA string `json:"ca"`
	}
	riskRule struct {
		glob, tier string
	}
)

// kind returns the tool's kind, the one key its object has.
func (t *fileTool) kind() string {
	switch {
	case t.Builtin != "":
		return "builtin"
	case t.Webhook != nil:
		return "webhook"
	case t.MCP != nil:
		return "mcp"
	case t.workflow != nil:
		return "workflow"
	case t.Agent != "":
		return "agent"
	case t.UAMP != nil:
		return "uamp"
	}
	return ""
}

// label names the tool in listings: its name, or what it refers to.
func (t *fileTool) label() string {
	switch t.kind() {
	case "builtin":
		return t.Builtin
	case "webhook":
		return t.Webhook.Name
	case "mcp":
		if t.MCP.URL != "" {
			return t.MCP.URL
		}
		return strings.Join(t.MCP.Command, " ")
	case "workflow":
		return t.workflow.Name
	case "agent":
		return t.Agent
	case "uamp":
		return t.UAMP.DID
	}
	return ""
}

// toolKinds lists the kinds of tools, for messages.
const toolKinds = "builtin, webhook, mcp, workflow, agent or uamp"

var (
	nameRE      = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)
	toolPath    = regexp.MustCompile(`^/tools/[0-9]+$`)
	headersPath = regexp.MustCompile(`/headers$`)
)

// schemaMessages replace the schema's where its own would be cryptic.
var schemaMessages = &yamldoc.Messages{
	At: []yamldoc.PathMessage{
		{Path: regexp.MustCompile(`^/name$|^/tools/[0-9]+/agent$`), Message: "must be a name of 1 to 64 lowercase letters, digits, _ or -"},
		{Path: regexp.MustCompile(`/name$`), Message: "must be a name of 1 to 64 letters, digits, _ or -"},
		{Path: regexp.MustCompile(`^/model$`), Message: `must be provider:model, such as "openai:gpt-4.1" or "scripted:script.yaml"`},
		{Path: regexp.MustCompile(`/(api_key_env|token_env)$`), Message: "must be an environment variable name"},
		{Path: regexp.MustCompile(`/timeout$`), Message: `must be a duration such as "10s" or "2m", or a number of seconds`},
		{Path: regexp.MustCompile(`/headers/[^/]+$`), Message: "must be a string of at most 8192 bytes"},
		{Path: regexp.MustCompile(`^/tools/[0-9]+$`), Message: "must name exactly one tool kind: " + toolKinds},
	},
	Unknown: func(ptr string) string {
		switch {
		case toolPath.MatchString(ptr):
			return "unknown tool kind (want " + toolKinds + ")"
		case headersPath.MatchString(ptr):
			return "invalid header name"
		}
		return "unknown key"
	},
}

// Load reads one agent definition from r, named file in errors (its
// directory anchors relative paths: a scripted model, a policy). The
// agent's name defaults to file's base name without its extension.
// Everything wrong is reported, at most 20 problems, each an *Error
// naming the file and line; nothing is half-loaded.
func Load(r io.Reader, file string) (*Definition, error) {
	docs, err := yamldoc.Parse(r, file)
	if err != nil {
		return nil, err
	}
	switch len(docs) {
	case 0:
		return nil, &Error{File: file, Message: "no agent in file"}
	case 1:
	default:
		return nil, &Error{File: file, Line: docs[1].Line, Message: "one agent per file: a second document starts here"}
	}
	d := docs[0]
	if d.Value == nil {
		return nil, &Error{File: file, Line: d.Line, Message: "empty document"}
	}
	if err := fileSchema().Validate(d.Value); err != nil {
		return nil, d.SchemaErrors(err, schemaMessages)
	}
	b, err := json.Marshal(d.Value)
	if err != nil { // cannot happen: Value holds JSON values only
		return nil, &Error{File: file, Line: d.Line, Message: err.Error()}
	}
	def := &Definition{file: file, doc: d}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&def.spec); err != nil { // the schema should have caught it
		return nil, &Error{File: file, Line: d.Line, Message: err.Error()}
	}
	if errs := def.check(); len(errs) > 0 {
		return nil, yamldoc.Join(file, errs)
	}
	def.Name, def.Description, def.Model, def.File = def.name, def.spec.Description, def.spec.Model, file
	for _, t := range def.spec.Tools {
		def.Tools = append(def.Tools, t.kind()+":"+t.label())
	}
	return def, nil
}

// loadFile reads the agent file at path (see Load).
func loadFile(path string) (*Definition, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Load(f, path)
}

// LoadDir reads the agent files of dir: its *.yaml, *.yml and *.json
// files (not those of subdirectories, nor hidden ones), one agent each,
// in name order. Across the files, names must be unique and every
// sub-agent tool must name an agent of the directory, without cycles.
// Every problem of every file is reported; nothing is half-loaded.
func LoadDir(dir string) ([]*Definition, error) {
	files, err := yamldoc.Files(dir)
	if err != nil {
		return nil, err
	}
	var defs []*Definition
	var errs []error
	for _, f := range files {
		def, err := loadFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		defs = append(defs, def)
	}
	if err := checkSet(defs); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return defs, nil
}

// checkSet checks what refers across definitions: unique names, known
// sub-agents, no cycle of sub-agents.
func checkSet(defs []*Definition) error {
	var errs []*Error
	byName := map[string]*Definition{}
	for _, d := range defs {
		if prev, dup := byName[d.name]; dup {
			errs = append(errs, d.errorAt("", fmt.Sprintf("agent %q is also defined in %s", d.name, prev.file)))
			continue
		}
		byName[d.name] = d
	}
	for _, d := range defs {
		for i, t := range d.spec.Tools {
			if t.Agent == "" {
				continue
			}
			if _, ok := byName[t.Agent]; !ok {
				errs = append(errs, d.errorAt(toolPtr(i)+"/agent", fmt.Sprintf("no agent is named %q in this directory", t.Agent)))
			}
		}
	}
	if len(errs) == 0 {
		// A cycle of sub-agents: depth-first, reporting each cycle once
		// at the tool that closes it.
		const (
			unseen = iota
			active
			done
		)
		state := map[string]int{}
		var visit func(d *Definition, stack []string)
		visit = func(d *Definition, stack []string) {
			state[d.name] = active
			for i, t := range d.spec.Tools {
				if t.Agent == "" {
					continue
				}
				switch state[t.Agent] {
				case active:
					cycle := append(append([]string{}, stack...), d.name, t.Agent)
					for len(cycle) > 0 && cycle[0] != t.Agent {
						cycle = cycle[1:]
					}
					errs = append(errs, d.errorAt(toolPtr(i)+"/agent", "sub-agent cycle: "+strings.Join(cycle, " → ")))
				case unseen:
					visit(byName[t.Agent], append(stack, d.name))
				}
			}
			state[d.name] = done
		}
		names := make([]string, 0, len(byName))
		for n := range byName {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if state[n] == unseen {
				visit(byName[n], nil)
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	out := make([]error, len(errs))
	for i, e := range errs {
		out[i] = e
	}
	return errors.Join(out...)
}

func toolPtr(i int) string { return "/tools/" + strconv.Itoa(i) }

func (d *Definition) errorAt(ptr, msg string) *Error {
	if d.doc == nil {
		return &Error{File: d.file, Path: ptr, Message: msg}
	}
	return d.doc.ErrorAt(ptr, msg)
}

// check does what the schema cannot: the name, durations, the tool
// names and kinds, the tiers and their rollbacks.
func (d *Definition) check() []*Error {
	var errs []*Error
	s := &d.spec
	d.name = s.Name
	if d.name == "" {
		base := filepath.Base(d.file)
		d.name = strings.TrimSuffix(base, filepath.Ext(base))
		if !nameRE.MatchString(d.name) {
			errs = append(errs, d.errorAt("", fmt.Sprintf("the file name %q is not an agent name (1 to 64 lowercase letters, digits, _ or -): rename the file or set name", base)))
		}
	}
	// A model from the environment ("${NAME:-DEFAULT}") is checked by
	// Build, once expanded.
	provider, _, _ := strings.Cut(s.Model, ":")
	if !strings.Contains(s.Model, "${") && !knownProvider(provider) {
		errs = append(errs, d.errorAt("/model", fmt.Sprintf("unknown provider %q (want %s)", provider, strings.Join(providerNames(), ", "))))
	}
	if _, err := duration(s.Limits.Timeout); err != nil {
		errs = append(errs, d.errorAt("/limits/timeout", err.Error()))
	}
	seen := map[string]int{}
	for i := range s.Tools {
		t := &s.Tools[i]
		ptr := toolPtr(i)
		if t.Workflow != nil {
			switch w := t.Workflow.(type) {
			case string:
				t.workflow = &fileWorkflow{Name: w}
			case map[string]any:
				b, _ := json.Marshal(w)
				t.workflow = &fileWorkflow{}
				_ = json.Unmarshal(b, t.workflow) // the schema checked its shape
			}
		}
		var name string
		switch t.kind() {
		case "builtin":
			name = t.Builtin
		case "webhook":
			name = t.Webhook.Name
			errs = append(errs, d.checkCall(&t.Webhook.fileCall, ptr+"/webhook")...)
			if t.Webhook.Rollback != nil {
				errs = append(errs, d.checkCall(t.Webhook.Rollback, ptr+"/webhook/rollback")...)
			}
			if t.Webhook.Risk == "write_high_risk" && t.Webhook.Rollback == nil {
				errs = append(errs, d.errorAt(ptr+"/webhook/risk", "a write_high_risk tool needs a rollback (UAICP rollback_action): add rollback: {url: …} naming the compensating call, or lower its risk"))
			}
		case "agent":
			name = t.Agent
		case "uamp":
			name = t.UAMP.Name
			if name == "" {
				name = uampToolName(t.UAMP.DID)
			}
		}
		if name == "" { // workflow and mcp tools are named by their server
			continue
		}
		if prev, dup := seen[name]; dup {
			errs = append(errs, d.errorAt(ptr, fmt.Sprintf("two tools are named %q (the other is tools[%d])", name, prev)))
			continue
		}
		seen[name] = i
	}
	// govern.risk, in file order; a high-risk glob needs a rollback for
	// every webhook it catches.
	globs := make([]string, 0, len(s.Govern.Risk))
	for g := range s.Govern.Risk {
		globs = append(globs, g)
	}
	sort.Slice(globs, func(i, j int) bool {
		return d.doc.LineOf("/govern/risk/"+yamldoc.EscapePointer(globs[i])) < d.doc.LineOf("/govern/risk/"+yamldoc.EscapePointer(globs[j]))
	})
	for _, g := range globs {
		ptr := "/govern/risk/" + yamldoc.EscapePointer(g)
		if _, err := path.Match(g, ""); err != nil {
			errs = append(errs, d.errorAt(ptr, fmt.Sprintf("bad glob %q: %v", g, err)))
			continue
		}
		d.risk = append(d.risk, riskRule{glob: g, tier: s.Govern.Risk[g]})
		if s.Govern.Risk[g] != "write_high_risk" {
			continue
		}
		for i, t := range s.Tools {
			if t.Webhook != nil && t.Webhook.Rollback == nil && matches(g, t.Webhook.Name) {
				errs = append(errs, d.errorAt(ptr, fmt.Sprintf("makes tool %q (tools[%d]) write_high_risk, which needs a rollback: add rollback: {url: …} to it", t.Webhook.Name, i)))
			}
		}
	}
	return errs
}

func (d *Definition) checkCall(c *fileCall, ptr string) []*Error {
	if _, err := duration(c.Timeout); err != nil {
		return []*Error{d.errorAt(ptr+"/timeout", err.Error())}
	}
	return nil
}

func matches(glob, name string) bool {
	ok, _ := path.Match(glob, name)
	return ok
}

// uampToolName is the tool name of a remote agent without a name: the
// last segment of its DID, as a tool name.
func uampToolName(did string) string {
	s := did[strings.LastIndexAny(did, ":")+1:]
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	n := b.String()
	if len(n) > 64 {
		n = n[:64]
	}
	if n == "" {
		n = "remote_agent"
	}
	return n
}

// duration reads a timeout: a Go duration or a number of seconds, at
// most a day; nil is 0.
func duration(v any) (time.Duration, error) {
	var d time.Duration
	switch t := v.(type) {
	case nil:
		return 0, nil
	case string:
		var err error
		if d, err = time.ParseDuration(t); err != nil || d <= 0 {
			return 0, errors.New("must be a positive duration")
		}
	case float64:
		d = time.Duration(t * float64(time.Second))
	}
	if d > 24*time.Hour {
		return 0, errors.New("must be at most 24h")
	}
	return d, nil
}

func knownProvider(p string) bool { return slices.Contains(models.Providers(), p) }

func providerNames() []string { return models.Providers() }
