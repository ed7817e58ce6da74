package repotest

import (
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// layerRule says which packages a layer of docs/architecture.md must not
// depend on, directly or not. Paths are relative to the module; a path
// stands for the package and everything under it.
type layerRule struct {
	layer string
	// packages are the layer's directories.
	packages []string
	// except are packages under those directories that belong to
	// another layer (the bridges).
	except []string
	// forbidden are the packages the layer must not depend on.
	forbidden []string
}

// bridges are the packages that join a protocol core to the runtime. They
// live under the protocol's directory and are the only packages there
// that may import agent, govern or llm.
var bridges = []string{"workflow/uaipagent", "uicontrol/uiapagent", "messaging/uampagent", "internal/mcptools", "internal/mcpserve"}

var (
	runtimeLayer     = []string{"llm", "agent", "govern", "runs"}
	compositionLayer = []string{"server", "store", "agentfile"}
	binaryLayer      = []string{"cmd", "internal/cli"}
)

// layerRules is the layering of docs/architecture.md: an import points
// only down.
var layerRules = []layerRule{
	{layer: "protocol cores", packages: []string{"workflow", "uicontrol", "messaging", "envelope"}, except: bridges,
		forbidden: slices.Concat(runtimeLayer, bridges, compositionLayer, binaryLayer)},
	{layer: "runtime", packages: runtimeLayer,
		forbidden: slices.Concat([]string{"workflow", "uicontrol", "messaging", "envelope"}, compositionLayer, binaryLayer)},
	{layer: "bridges", packages: bridges, forbidden: slices.Concat(compositionLayer, binaryLayer)},
}

// under reports whether pkg is path or a package under it.
func under(pkg, path string) bool {
	return pkg == path || strings.HasPrefix(pkg, path+"/")
}

func underAny(pkg string, paths []string) bool {
	return slices.ContainsFunc(paths, func(p string) bool { return under(pkg, p) })
}

// layerViolations returns, for every package of the rule's layer in
// graph (module-relative import path → its imports), the shortest import
// chain that leads to a forbidden package, one line per package that has
// one.
func layerViolations(graph map[string][]string, rule layerRule) []string {
	var out []string
	var pkgs []string
	for pkg := range graph {
		if underAny(pkg, rule.packages) && !underAny(pkg, rule.except) {
			pkgs = append(pkgs, pkg)
		}
	}
	slices.Sort(pkgs)
	for _, root := range pkgs {
		// Breadth first: the first forbidden package found has the
		// shortest chain.
		from := map[string]string{root: ""}
		queue := []string{root}
		for len(queue) > 0 {
			pkg := queue[0]
			queue = queue[1:]
			if pkg != root && underAny(pkg, rule.forbidden) {
				chain := []string{pkg}
				for p := from[pkg]; p != ""; p = from[p] {
					chain = append(chain, p)
				}
				slices.Reverse(chain)
				out = append(out, rule.layer+": "+strings.Join(chain, " → "))
				break
			}
			for _, imp := range graph[pkg] {
				if _, seen := from[imp]; !seen {
					from[imp] = pkg
					queue = append(queue, imp)
				}
			}
		}
	}
	return out
}

// goRunner returns a function running the go command in root and
// returning its output; a failure fails the test.
func goRunner(t *testing.T, root string) func(args ...string) []byte {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list the packages: %v", err)
	}
	return func(args ...string) []byte {
		cmd := exec.Command(goCmd, args...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
		}
		return out
	}
}

// moduleGraph returns the module's packages and, for each, its imports
// within the module (module-relative paths; the root package is ".").
func moduleGraph(t *testing.T) map[string][]string {
	t.Helper()
	root := moduleRoot(t)
	run := goRunner(t, root)
	module := strings.TrimSpace(string(run("list", "-m", "-f", "{{.Path}}")))
	rel := func(path string) (string, bool) {
		if path == module {
			return ".", true
		}
		r, ok := strings.CutPrefix(path, module+"/")
		return r, ok
	}
	graph := map[string][]string{}
	// Non-test imports only: the layering is about what a package pulls
	// into a program, and a test may reach above its package.
	out := run("list", "-deps", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}", "./...")
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, imports, _ := strings.Cut(line, "\t")
		pkg, ok := rel(path)
		if !ok {
			continue
		}
		graph[pkg] = nil
		for _, imp := range strings.Fields(imports) {
			if r, ok := rel(imp); ok {
				graph[pkg] = append(graph[pkg], r)
			}
		}
	}
	return graph
}

// TestLayers enforces docs/architecture.md: the protocol cores
// (workflow, uicontrol, messaging, envelope — all but their bridge
// packages) import no runtime (agent, govern, llm), bridge, composition
// or binary package, directly or not; the runtime imports no protocol
// core; the bridges import no composition or binary package.
func TestLayers(t *testing.T) {
	graph := moduleGraph(t)
	for _, b := range bridges {
		if _, ok := graph[b]; !ok {
			t.Errorf("bridge %s is not a package of the module: update the list here and in docs/architecture.md", b)
		}
	}
	for _, rule := range layerRules {
		if v := layerViolations(graph, rule); len(v) > 0 {
			t.Errorf("imports that point up (docs/architecture.md):\n%s", strings.Join(v, "\n"))
		}
	}
}

// TestLayerViolationsFindsChains: the check reports a core that reaches
// a runtime package directly or through other packages, with the chain,
// and lets the bridges and the other layers be.
func TestLayerViolationsFindsChains(t *testing.T) {
	graph := map[string][]string{
		"workflow":                 {"internal/ids"},
		"workflow/uaipconformance": {"workflow", "internal/helper"},
		"internal/helper":          {"internal/deeper"},
		"internal/deeper":          {"govern"},
		"workflow/uaipagent":       {"workflow", "agent", "govern"},
		"messaging":                {"envelope", "llm"},
		"envelope":                 {"internal/ids"},
		"uicontrol/uiapagent":      {"uicontrol", "server"},
		"uicontrol":                {},
		"govern":                   {"internal/ids"},
		"agent":                    {"llm"},
		"llm":                      {},
		"server":                   {},
		"internal/ids":             {},
		"messaging/uampagent":      {"messaging", "agent"},
		"uicontrol/uiapworkflow":   {"uicontrol", "workflow"},
	}
	var got []string
	for _, rule := range layerRules {
		got = append(got, layerViolations(graph, rule)...)
	}
	want := []string{
		"protocol cores: messaging → llm",
		"protocol cores: workflow/uaipconformance → internal/helper → internal/deeper → govern",
		"bridges: uicontrol/uiapagent → server",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
}

// otelBinary are the packages that may install the OpenTelemetry SDK and
// its exporters: the binary's. Every other package of the module — the
// libraries an embedder imports — uses the OpenTelemetry API only
// (docs/observability.md), so that a program that installs no SDK pays
// for none.
var otelBinary = []string{"cmd", "internal/cli", "internal/otelsetup"}

// otelForbidden are the OpenTelemetry modules a library must not depend
// on: the SDK, the exporters and the OTLP wire types.
var otelForbidden = []string{"go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "go.opentelemetry.io/proto/otlp"}

// otelViolations returns, for every library package of graph (import
// path → imports; names: import path → package name), the shortest chain
// to a forbidden OpenTelemetry package.
func otelViolations(module string, graph map[string][]string, names map[string]string) []string {
	var roots []string
	for pkg := range graph {
		rel, ok := strings.CutPrefix(pkg, module+"/")
		if pkg == module {
			rel, ok = ".", true
		}
		if !ok || names[pkg] == "main" || underAny(rel, otelBinary) {
			continue
		}
		roots = append(roots, pkg)
	}
	slices.Sort(roots)
	var out []string
	for _, root := range roots {
		from := map[string]string{root: ""}
		queue := []string{root}
		for len(queue) > 0 {
			pkg := queue[0]
			queue = queue[1:]
			if underAny(pkg, otelForbidden) {
				chain := []string{pkg}
				for p := from[pkg]; p != ""; p = from[p] {
					chain = append(chain, p)
				}
				slices.Reverse(chain)
				out = append(out, strings.Join(chain, " → "))
				break
			}
			for _, imp := range graph[pkg] {
				if _, seen := from[imp]; !seen {
					from[imp] = pkg
					queue = append(queue, imp)
				}
			}
		}
	}
	return out
}

// TestLibrariesUseOnlyTheOpenTelemetryAPI: no package of the module but
// the binary's (and programs: package main) depends, directly or not, on
// the OpenTelemetry SDK, an exporter or the OTLP wire types.
func TestLibrariesUseOnlyTheOpenTelemetryAPI(t *testing.T) {
	root := moduleRoot(t)
	run := goRunner(t, root)
	module := strings.TrimSpace(string(run("list", "-m", "-f", "{{.Path}}")))
	graph, names := map[string][]string{}, map[string]string{}
	out := run("list", "-deps", "-f", "{{.ImportPath}}\t{{.Name}}\t{{join .Imports \" \"}}", "./...")
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) < 3 {
			continue
		}
		names[f[0]] = f[1]
		graph[f[0]] = strings.Fields(f[2])
	}
	if _, ok := graph[module+"/internal/otelsetup"]; !ok {
		t.Errorf("internal/otelsetup is not a package of the module: update otelBinary")
	}
	if v := otelViolations(module, graph, names); len(v) > 0 {
		t.Errorf("library packages that depend on the OpenTelemetry SDK or an exporter (only %v may):\n%s", otelBinary, strings.Join(v, "\n"))
	}
}

// TestOTelViolationsFindsChains: the check reports a library that
// reaches the SDK through another package, and lets the binary and
// programs be.
func TestOTelViolationsFindsChains(t *testing.T) {
	const m = "example.com/m"
	graph := map[string][]string{
		m + "/llm":                {m + "/internal/telemetry"},
		m + "/internal/telemetry": {"go.opentelemetry.io/otel/trace"},
		m + "/server":             {m + "/internal/helper"},
		m + "/internal/helper":    {"go.opentelemetry.io/otel/sdk/trace"},
		m + "/internal/otelsetup": {"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"},
		m + "/bench/tool":         {"go.opentelemetry.io/otel/sdk/metric"},
		m + "/e2e":                {"go.opentelemetry.io/proto/otlp/trace/v1"},
	}
	names := map[string]string{m + "/bench/tool": "main"}
	want := []string{
		m + "/e2e → go.opentelemetry.io/proto/otlp/trace/v1",
		m + "/internal/helper → go.opentelemetry.io/otel/sdk/trace",
		m + "/server → " + m + "/internal/helper → go.opentelemetry.io/otel/sdk/trace",
	}
	if diff := cmp.Diff(want, otelViolations(m, graph, names)); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
}
