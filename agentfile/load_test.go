package agentfile_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentry-dev/agentry/agentfile"
)

// full uses every key of the format.
const full = `name: support
description: Answers order questions
model: compat:fake
base_url: http://127.0.0.1:9/v1
api_key_env: FAKE_KEY
params: {temperature: 0}
instructions: |
  You are a support agent.
strategy: react
limits: {max_steps: 8, max_tokens: 1024, timeout: 2m}
output_schema: {type: object}
tools:
  - builtin: calculate
  - webhook:
      name: lookup_order
      description: Looks an order up.
      url: "http://127.0.0.1:9/hook"
      method: POST
      headers: {Authorization: "Bearer ${HOOK_TOKEN}"}
      timeout: 5s
      input_schema: {type: object, properties: {order_id: {type: string}}}
      risk: read_only
      idempotent: true
  - webhook:
      name: refund_order
      url: "http://127.0.0.1:9/refund"
      risk: write_high_risk
      rollback: {url: "http://127.0.0.1:9/reverse", method: POST, headers: {X-A: b}, timeout: 3}
  - mcp: {command: [node, server.js, stdio], env: {K: v}, include: [echo], exclude: [add], prefix: ev_}
  - mcp: {url: "http://127.0.0.1:9/mcp", headers: {X-B: c}}
  - workflow: store
  - workflow: {name: store, url: "http://127.0.0.1:9", token_env: T}
  - agent: triage
  - uamp: {url: "https://127.0.0.1:9443", did: "did:web:127.0.0.1%3A9443", name: remote, description: A remote agent, ca: certs/remote.pem}
govern:
  risk: {"lookup_*": read_only, "refund_*": write_high_risk}
  policy: policies/support.yaml
`

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoad_EveryKey(t *testing.T) {
	d, err := agentfile.Load(strings.NewReader(full), "agents/support.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := &agentfile.Definition{Name: "support", Description: "Answers order questions", Model: "compat:fake", File: "agents/support.yaml",
		Tools: []string{"builtin:calculate", "webhook:lookup_order", "webhook:refund_order", "mcp:node server.js stdio", "mcp:http://127.0.0.1:9/mcp",
			"workflow:store", "workflow:store", "agent:triage", "uamp:did:web:127.0.0.1%3A9443"}}
	if diff := cmp.Diff(want, d, cmpopts.IgnoreUnexported(agentfile.Definition{})); diff != "" {
		t.Errorf("definition (-want +got):\n%s", diff)
	}
}

func TestLoad_NameDefaultsToTheFile(t *testing.T) {
	d, err := agentfile.Load(strings.NewReader("model: scripted:demo\n"), "dir/echo-bot.yml")
	if err != nil || d.Name != "echo-bot" {
		t.Fatalf("%+v, %v", d, err)
	}
	if _, err := agentfile.Load(strings.NewReader("model: scripted:demo\n"), "dir/Echo Bot.yml"); err == nil || !strings.Contains(err.Error(), "rename the file or set name") {
		t.Errorf("a file name that is no agent name: %v", err)
	}
}

// TestLoad_BadFiles: every class of bad file is refused, with the file
// and the line in the message.
func TestLoad_BadFiles(t *testing.T) {
	for _, c := range []struct{ name, file, want string }{
		{"unknown key", "model: scripted:demo\ntoolz: []\n", `x.yaml:2: /toolz: unknown key`},
		{"wrong type", "model: scripted:demo\nlimits:\n  max_steps: many\n", `x.yaml:3: /limits/max_steps: got string, want integer`},
		{"unknown tool kind", "model: scripted:demo\ntools:\n  - shell: rm\n", `x.yaml:3: /tools/0/shell: unknown tool kind`},
		{"two kinds in one tool", "model: scripted:demo\ntools:\n  - {builtin: a, agent: b}\n", `x.yaml:3: /tools/0: must name exactly one tool kind`},
		{"two tools, one name", "model: scripted:demo\ntools:\n  - builtin: calculate\n  - builtin: calculate\n", `x.yaml:4: /tools/1: two tools are named "calculate"`},
		{"unknown provider", "model: acme:big\n", `x.yaml:1: /model: unknown provider "acme"`},
		{"model without provider", "model: gpt\n", `x.yaml:1: /model: must be provider:model`},
		{"missing model", "name: a\n", `x.yaml:1: missing property 'model'`},
		{"bad name", "name: Big Agent\nmodel: scripted:demo\n", `x.yaml:1: /name: must be a name`},
		{"high risk without rollback", "model: scripted:demo\ntools:\n  - webhook: {name: pay, url: 'http://h/p', risk: write_high_risk}\n", `x.yaml:3: /tools/0/webhook/risk: a write_high_risk tool needs a rollback`},
		{"high-risk glob without rollback", "model: scripted:demo\ntools:\n  - webhook: {name: pay, url: 'http://h/p'}\ngovern:\n  risk: {'pa*': write_high_risk}\n", `x.yaml:5: /govern/risk/pa*: makes tool "pay" (tools[0]) write_high_risk`},
		{"bad tier", "model: scripted:demo\ngovern:\n  risk: {'a': dangerous}\n", `x.yaml:3: /govern/risk/a: value must be one of`},
		{"bad glob", "model: scripted:demo\ngovern:\n  risk: {'[': read_only}\n", `x.yaml:3: /govern/risk/[: bad glob`},
		{"bad timeout", "model: scripted:demo\nlimits: {timeout: soon}\n", `x.yaml:2: /limits/timeout: must be a duration`},
		{"two documents", "model: scripted:demo\n---\nmodel: scripted:demo\n", `x.yaml:3: one agent per file`},
		{"empty", "", `x.yaml: no agent in file`},
		{"syntax", "model: [\n", `x.yaml:1: did not find expected node content`},
		{"duplicate key", "model: scripted:demo\nmodel: scripted:demo\n", `x.yaml:2: duplicate key "model"`},
		{"not an object", "- model\n", `x.yaml:1: got array, want object`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := agentfile.Load(strings.NewReader(c.file), "x.yaml")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v\nwant it to contain %q", err, c.want)
			}
			var le *agentfile.Error
			if !errors.As(err, &le) || le.File != "x.yaml" {
				t.Errorf("not an *agentfile.Error naming the file: %#v", err)
			}
		})
	}
}

func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "boss.yaml", "model: scripted:demo\ntools:\n  - agent: helper\n")
	write(t, dir, "helper.yml", "model: scripted:demo\n")
	write(t, dir, ".hidden.yaml", "bad: [")
	write(t, dir, "notes.txt", "not an agent")
	defs, err := agentfile.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
	}
	if diff := cmp.Diff([]string{"boss", "helper"}, names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
}

// TestLoadDir_Errors: what refers across files, and every file's
// problems at once; nothing is half-loaded.
func TestLoadDir_Errors(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"unknown sub-agent", map[string]string{"a.yaml": "model: scripted:demo\ntools:\n  - agent: nobody\n"},
			[]string{`a.yaml:3: /tools/0/agent: no agent is named "nobody" in this directory`}},
		{"cycle", map[string]string{
			"a.yaml": "model: scripted:demo\ntools:\n  - agent: b\n",
			"b.yaml": "model: scripted:demo\ntools:\n  - agent: c\n",
			"c.yaml": "model: scripted:demo\ntools:\n  - agent: a\n"},
			[]string{`sub-agent cycle: a → b → c → a`}},
		{"self", map[string]string{"a.yaml": "model: scripted:demo\ntools:\n  - agent: a\n"}, []string{`a.yaml:3: /tools/0/agent: sub-agent cycle: a → a`}},
		{"duplicate name", map[string]string{"a.yaml": "model: scripted:demo\n", "b.yaml": "name: a\nmodel: scripted:demo\n"},
			[]string{`b.yaml:1: agent "a" is also defined in`}},
		{"every file's problems", map[string]string{"a.yaml": "model: scripted:demo\nx: 1\n", "b.yaml": "model: nope\n"},
			[]string{`a.yaml:2: /x: unknown key`, `b.yaml:1: /model: must be provider:model`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for n, content := range c.files {
				write(t, dir, n, content)
			}
			defs, err := agentfile.LoadDir(dir)
			if err == nil || defs != nil {
				t.Fatalf("LoadDir = %d definitions, %v", len(defs), err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %v\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

// TestSchemaForEditors: docs/agent.schema.json is the schema Load
// validates against.
func TestSchemaForEditors(t *testing.T) {
	docs, err := os.ReadFile(filepath.Join("..", "docs", "agent.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	own, err := os.ReadFile(filepath.Join("schema", "agent.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(docs) != string(own) {
		t.Error("docs/agent.schema.json differs from agentfile/schema/agent.schema.json: copy it")
	}
}

// Every key of the JSON Schema is in full (so TestLoad_EveryKey loads it)
// and documented in docs/agents.md.
func TestEveryKeyIsTestedAndDocumented(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("schema", "agent.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema any
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if props, ok := v["properties"].(map[string]any); ok {
				for k := range props {
					keys[k] = true
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(schema)
	docs, err := os.ReadFile(filepath.Join("..", "docs", "agents.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) < 30 {
		t.Fatalf("only %d keys found in the schema", len(keys))
	}
	for k := range keys {
		if !regexp.MustCompile(`(?m)(^|[\s{,])` + regexp.QuoteMeta(k) + `:`).MatchString(full) {
			t.Errorf("key %q is not in the test file full", k)
		}
		// In docs/agents.md a key is written `key`, `parent.key`, `key.child`
		// or within a {…} form.
		if !regexp.MustCompile("[`.{ ]" + regexp.QuoteMeta(k) + "[`.:,}]").Match(docs) {
			t.Errorf("key %q is not documented in docs/agents.md", k)
		}
	}
}
