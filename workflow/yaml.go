package workflow

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentry-dev/agentry/internal/schemas"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"go.yaml.in/yaml/v3"
)

// Limits of workflow files.
const (
	// maxFileSize bounds a workflow file.
	maxFileSize = 4 << 20
	// maxValues bounds the values a file decodes to, aliases expanded,
	// so that a small file cannot expand into a large document.
	maxValues = 200_000
	// maxExpandedBytes bounds the text a file decodes to (strings, keys
	// and the paths to them), aliases expanded.
	maxExpandedBytes = 32 << 20
	// maxDepth bounds the nesting of a document.
	maxDepth = 100
	// maxLoadErrors bounds the problems reported for one file.
	maxLoadErrors = 20
)

//go:embed schema/workflow.schema.json
var workflowSchemaJSON []byte

// WorkflowSchema is the JSON Schema (draft 2020-12) of workflow files,
// which Load validates every document against.
func WorkflowSchema() []byte { return bytes.Clone(workflowSchemaJSON) }

var workflowSchema = sync.OnceValue(func() *jsonschema.Schema {
	return schemas.Embedded(schemas.NewCompiler(), "https://agentry.dev/schema/workflow.schema.json", workflowSchemaJSON)
})

// LoadError is a problem found in a workflow file. Load and friends
// return them joined (errors.Join), at most 20 per file.
type LoadError struct {
	File string
	Line int // 1-based; 0 when unknown
	// Path is the JSON Pointer of the offending value in the document
	// ("" for the document itself).
	Path    string
	Message string
}

// Error returns "FILE[:LINE]: [PATH: ]MESSAGE", the line and path only
// when known.
func (e *LoadError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path + ": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// LoadDir loads the workflow files of dir: its *.yaml, *.yml and *.json
// files (not those of subdirectories, nor hidden ones), in name order.
// Workflow names must be unique across the files. A directory without
// workflow files yields none and no error.
func LoadDir(dir string) ([]*Workflow, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var all []*Workflow
	var errs []error
	from := map[string]string{} // workflow name → file
	for _, e := range entries {
		name := e.Name()
		switch strings.ToLower(filepath.Ext(name)) {
		case ".yaml", ".yml", ".json":
		default:
			continue
		}
		if strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(dir, name)
		if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
			continue // a directory named x.yaml, a dangling link
		}
		ws, err := loadFile(path)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, w := range ws {
			if prev, dup := from[w.Name]; dup {
				errs = append(errs, &LoadError{File: path, Message: fmt.Sprintf("workflow %q is also defined in %s", w.Name, prev)})
				continue
			}
			from[w.Name] = path
			all = append(all, w)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return all, nil
}

// loadFile loads the workflows of a YAML or JSON file (see Load).
func loadFile(path string) ([]*Workflow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Load(f, path)
}

// Load reads workflows whose tasks are webhooks from YAML (JSON being
// YAML too); name labels errors. Each document of the stream (documents
// are separated by "---") is one workflow:
//
//	name: store
//	description: A small shop
//	initial_stage: browse
//	stages:
//	  browse:
//	    description: Find products
//	    tasks:
//	      search:
//	        description: Searches the catalog
//	        parameters: {type: object, properties: {q: {type: string}}, required: [q]}
//	        returns: {type: array}
//	        webhook:
//	          url: https://shop.example/uaip/search
//	          method: POST
//	          headers: {Authorization: "Bearer ${SHOP_TOKEN}"}
//	          timeout: 10s
//	          idempotent: true
//	          retries: 3
//	  checkout:
//	    prerequisites: [cart]
//	    tasks: {…}
//	transitions:
//	  browse: [checkout]
//
// The schema is WorkflowSchema. Names (of the workflow, stages and tasks)
// are 1 to 64 letters, digits, _ or -. Every task is a webhook (see
// Webhook): method is POST, PUT or PATCH (default POST); timeout bounds
// each attempt, as a Go duration or a number of seconds (default 30s);
// retries (default 2, at most 10) applies only when idempotent is true.
// Header values may name environment variables as ${NAME}, replaced when
// the file is loaded; an unset variable is an error.
//
// Decoding is strict: unknown fields, duplicate keys, keys that are not
// strings, custom tags, merge keys (<<) and values JSON cannot represent
// (.nan, .inf) are errors. Aliases are expanded, but a file larger than
// 4 << 20, expanding to more than 200,000 values or 32 MiB of text, or
// nested deeper than 100 levels is rejected. Each workflow is then checked with
// Workflow.Validate. Errors are *LoadError, joined.
func Load(r io.Reader, name string) ([]*Workflow, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, &LoadError{File: name, Message: fmt.Sprintf("file is larger than %d MiB", maxFileSize>>20)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []*Workflow
	var errs []error
	seen := map[string]int{}
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, yamlError(name, err))
			break
		}
		w, line, err := loadDocument(&doc, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := seen[w.Name]; dup {
			errs = append(errs, &LoadError{File: name, Line: line, Message: fmt.Sprintf("workflow %q is already defined at line %d", w.Name, prev)})
			continue
		}
		seen[w.Name] = line
		out = append(out, w)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(out) == 0 {
		return nil, &LoadError{File: name, Message: "no workflow in file"}
	}
	return out, nil
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func yamlError(file string, err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &LoadError{File: file, Line: line, Message: m[2]}
	}
	return &LoadError{File: file, Message: strings.TrimPrefix(msg, "yaml: ")}
}

// loadDocument turns one YAML document into a validated workflow. It
// returns the document's line.
func loadDocument(doc *yaml.Node, file string) (*Workflow, int, error) {
	line := doc.Line
	if len(doc.Content) == 1 {
		line = doc.Content[0].Line
	}
	c := &yamlConverter{file: file, lines: map[string]int{}, expanding: map[*yaml.Node]bool{}}
	v, err := c.value(doc, "", 0)
	if err != nil {
		return nil, line, err
	}
	if v == nil {
		return nil, line, &LoadError{File: file, Line: line, Message: "empty document"}
	}
	if err := workflowSchema().Validate(v); err != nil {
		return nil, line, c.schemaErrors(err)
	}
	b, err := json.Marshal(v)
	if err != nil { // cannot happen: v holds JSON values only
		return nil, line, &LoadError{File: file, Line: line, Message: err.Error()}
	}
	var fw fileWorkflow
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&fw); err != nil { // the schema should have caught it
		return nil, line, &LoadError{File: file, Line: line, Message: err.Error()}
	}
	if errs := c.references(&fw); len(errs) > 0 {
		return nil, line, joinLoadErrors(file, errs)
	}
	w, errs := c.workflow(&fw)
	if len(errs) > 0 {
		return nil, line, joinLoadErrors(file, errs)
	}
	if err := w.Validate(); err != nil {
		// The checks above leave little for Validate to find; report
		// each of its problems at the document.
		problems := []error{err}
		var joined interface{ Unwrap() []error }
		if errors.As(err, &joined) {
			problems = joined.Unwrap()
		}
		var errs []*LoadError
		for _, p := range problems {
			errs = append(errs, &LoadError{File: file, Line: line, Message: fmt.Sprintf("workflow %q: %v", w.Name, p)})
		}
		return nil, line, joinLoadErrors(file, errs)
	}
	return w, line, nil
}

// yamlConverter turns YAML nodes into JSON values (nil, bool, float64,
// string, []any, map[string]any), remembering the line of every value by
// its JSON Pointer.
type yamlConverter struct {
	file      string
	lines     map[string]int
	count     int                 // values decoded
	bytes     int                 // text decoded
	expanding map[*yaml.Node]bool // anchors being expanded (cycle guard)
}

func (c *yamlConverter) fail(n *yaml.Node, ptr, format string, args ...any) error {
	return &LoadError{File: c.file, Line: n.Line, Path: ptr, Message: fmt.Sprintf(format, args...)}
}

func (c *yamlConverter) value(n *yaml.Node, ptr string, depth int) (any, error) {
	c.count++
	c.bytes += len(ptr) + len(n.Value)
	if c.count > maxValues || c.bytes > maxExpandedBytes {
		return nil, c.fail(n, ptr, "document expands to more than %d values or %d MiB (aliases included)", maxValues, maxExpandedBytes>>20)
	}
	if depth > maxDepth {
		return nil, c.fail(n, ptr, "nested deeper than %d levels", maxDepth)
	}
	if _, ok := c.lines[ptr]; !ok {
		c.lines[ptr] = n.Line
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return c.value(n.Content[0], ptr, depth)
	case yaml.AliasNode:
		if n.Alias == nil || c.expanding[n.Alias] {
			return nil, c.fail(n, ptr, "alias %q refers to itself", n.Value)
		}
		c.expanding[n.Alias] = true
		defer delete(c.expanding, n.Alias)
		return c.value(n.Alias, ptr, depth+1)
	case yaml.MappingNode:
		if tag := n.ShortTag(); tag != "!!map" {
			return nil, c.fail(n, ptr, "unsupported tag %s", tag)
		}
		m := make(map[string]any, len(n.Content)/2)
		keyLines := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
				if k.ShortTag() == "!!merge" {
					return nil, c.fail(k, ptr, "merge keys (<<) are not supported")
				}
				return nil, c.fail(k, ptr, "mapping keys must be strings")
			}
			if prev, dup := keyLines[k.Value]; dup {
				return nil, c.fail(k, ptr, "duplicate key %q (first at line %d)", k.Value, prev)
			}
			keyLines[k.Value] = k.Line
			child := ptr + "/" + escapePointer(k.Value)
			c.lines[child] = k.Line
			x, err := c.value(v, child, depth+1)
			if err != nil {
				return nil, err
			}
			m[k.Value] = x
		}
		return m, nil
	case yaml.SequenceNode:
		if tag := n.ShortTag(); tag != "!!seq" {
			return nil, c.fail(n, ptr, "unsupported tag %s", tag)
		}
		s := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			x, err := c.value(item, ptr+"/"+strconv.Itoa(i), depth+1)
			if err != nil {
				return nil, err
			}
			s = append(s, x)
		}
		return s, nil
	case yaml.ScalarNode:
		return c.scalar(n, ptr)
	}
	return nil, c.fail(n, ptr, "unsupported YAML node")
}

func (c *yamlConverter) scalar(n *yaml.Node, ptr string) (any, error) {
	switch tag := n.ShortTag(); tag {
	case "!!str", "!!timestamp": // a date stays the text it is
		return n.Value, nil
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, c.fail(n, ptr, "invalid boolean %q", n.Value)
		}
		return b, nil
	case "!!int", "!!float":
		var x any
		if err := n.Decode(&x); err != nil {
			return nil, c.fail(n, ptr, "invalid number %q", n.Value)
		}
		var f float64
		switch x := x.(type) {
		case int:
			f = float64(x)
		case int64:
			f = float64(x)
		case uint64:
			f = float64(x)
		case float64:
			f = x
		default:
			return nil, c.fail(n, ptr, "invalid number %q", n.Value)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, c.fail(n, ptr, "%s is not a JSON number", n.Value)
		}
		return f, nil
	default:
		return nil, c.fail(n, ptr, "unsupported tag %s", tag)
	}
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// line returns the line of the value at ptr or of its closest ancestor.
func (c *yamlConverter) line(ptr string) int {
	for {
		if l, ok := c.lines[ptr]; ok {
			return l
		}
		i := strings.LastIndexByte(ptr, '/')
		if i < 0 {
			return 0
		}
		ptr = ptr[:i]
	}
}

func (c *yamlConverter) errorAt(ptr, message string) *LoadError {
	return &LoadError{File: c.file, Line: c.line(ptr), Path: ptr, Message: message}
}

const nameMessage = "must be a name of 1 to 64 letters, digits, _ or -"

// Messages replacing the schema's where its own would be cryptic or would
// echo a URL (it may hold credentials) or a header value.
var schemaMessages = []struct {
	path    *regexp.Regexp
	message string
}{
	{regexp.MustCompile(`^(/name|/initial_stage|/stages/[^/]+/name|/stages/[^/]+/tasks/[^/]+/name|/transitions/[^/]+/[0-9]+)$`), nameMessage},
	{regexp.MustCompile(`/webhook/url$`), "must be an absolute http or https URL of at most 2048 bytes"},
	{regexp.MustCompile(`/webhook/headers/[^/]+$`), "must be a string of at most 8192 bytes without control characters"},
	{regexp.MustCompile(`/webhook/timeout$`), `must be a duration such as "10s" or "1m30s", or a number of seconds`},
}

var (
	nameMapPath   = regexp.MustCompile(`^(/stages|/stages/[^/]+/tasks|/transitions)$`)
	headerMapPath = regexp.MustCompile(`/webhook/headers$`)
)

// schemaErrors turns a validation failure into LoadErrors, one per failed
// check, in line order.
func (c *yamlConverter) schemaErrors(err error) error {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &LoadError{File: c.file, Message: err.Error()}
	}
	var out []*LoadError
	var walk func(v *jsonschema.ValidationError)
	walk = func(v *jsonschema.ValidationError) {
		ptr := pointer(v.InstanceLocation)
		causes := v.Causes
		switch k := v.ErrorKind.(type) {
		case *kind.AdditionalProperties:
			msg := "unknown field"
			switch {
			case nameMapPath.MatchString(ptr):
				msg = nameMessage
			case headerMapPath.MatchString(ptr):
				msg = "invalid header name"
			}
			for _, p := range k.Properties {
				out = append(out, c.errorAt(ptr+"/"+escapePointer(p), msg))
			}
			return
		case *kind.OneOf, *kind.AnyOf:
			// Skip the alternatives of another type: "got string, want
			// number" says nothing when a string was allowed too.
			var typed []*jsonschema.ValidationError
			for _, cause := range causes {
				if _, wrongType := cause.ErrorKind.(*kind.Type); !wrongType || len(cause.Causes) > 0 {
					typed = append(typed, cause)
				}
			}
			if len(typed) > 0 {
				causes = typed
			}
		}
		if len(causes) == 0 {
			msg := v.ErrorKind.LocalizedString(printer)
			for _, m := range schemaMessages {
				if m.path.MatchString(ptr) {
					msg = m.message
				}
			}
			out = append(out, c.errorAt(ptr, msg))
			return
		}
		for _, cause := range causes {
			walk(cause)
		}
	}
	walk(ve)
	return joinLoadErrors(c.file, out)
}

// joinLoadErrors joins list in line order, without duplicates, at most
// maxLoadErrors of them.
func joinLoadErrors(file string, list []*LoadError) error {
	sort.SliceStable(list, func(i, j int) bool {
		if list[i].Line != list[j].Line {
			return list[i].Line < list[j].Line
		}
		return list[i].Path < list[j].Path
	})
	var errs []error
	seen := map[string]bool{}
	for _, e := range list {
		if s := e.Error(); !seen[s] {
			seen[s] = true
			errs = append(errs, e)
		}
	}
	if len(errs) > maxLoadErrors {
		more := len(errs) - maxLoadErrors
		errs = append(errs[:maxLoadErrors], &LoadError{File: file, Message: fmt.Sprintf("and %d more problems", more)})
	}
	return errors.Join(errs...)
}

// The file form of a workflow (see Load).
type (
	fileWorkflow struct {
		Name         string                `json:"name"`
		Description  string                `json:"description"`
		InitialStage string                `json:"initial_stage"`
		Stages       map[string]*fileStage `json:"stages"`
		Transitions  map[string][]string   `json:"transitions"`
	}
	fileStage struct {
		Name          string               `json:"name"`
		Description   string               `json:"description"`
		Prerequisites []string             `json:"prerequisites"`
		Tasks         map[string]*fileTask `json:"tasks"`
	}
	fileTask struct {
		Name        string        `json:"name"`
		Description string        `json:"description"`
		Parameters  Schema        `json:"parameters"`
		Returns     Schema        `json:"returns"`
		Webhook     *fileWebhook  `json:"webhook"`
		Risk        string        `json:"risk"`
		Rollback    *TaskRollback `json:"rollback"`
	}
	fileWebhook struct {
		URL        string            `json:"url"`
		Method     string            `json:"method"`
		Headers    map[string]string `json:"headers"`
		Timeout    any               `json:"timeout"` // "10s" or seconds
		Retries    *int              `json:"retries"`
		Idempotent bool              `json:"idempotent"`
	}
)

// references checks what refers to stages and names, as Validate does,
// but reporting the lines.
func (c *yamlConverter) references(fw *fileWorkflow) []*LoadError {
	var errs []*LoadError
	if _, ok := fw.Stages[fw.InitialStage]; !ok {
		errs = append(errs, c.errorAt("/initial_stage", fmt.Sprintf("no stage is named %q", fw.InitialStage)))
	}
	for _, from := range sortedKeys(fw.Transitions) {
		ptr := "/transitions/" + escapePointer(from)
		if _, ok := fw.Stages[from]; !ok {
			errs = append(errs, c.errorAt(ptr, fmt.Sprintf("no stage is named %q", from)))
		}
		for i, to := range fw.Transitions[from] {
			if _, ok := fw.Stages[to]; !ok {
				errs = append(errs, c.errorAt(ptr+"/"+strconv.Itoa(i), fmt.Sprintf("no stage is named %q", to)))
			}
		}
	}
	for _, sn := range sortedKeys(fw.Stages) {
		ptr := "/stages/" + escapePointer(sn)
		if n := fw.Stages[sn].Name; n != "" && n != sn {
			errs = append(errs, c.errorAt(ptr+"/name", fmt.Sprintf("must be the stage's key %q", sn)))
		}
		for _, tn := range sortedKeys(fw.Stages[sn].Tasks) {
			if n := fw.Stages[sn].Tasks[tn].Name; n != "" && n != tn {
				errs = append(errs, c.errorAt(ptr+"/tasks/"+escapePointer(tn)+"/name", fmt.Sprintf("must be the task's key %q", tn)))
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	reached := map[string]bool{fw.InitialStage: true}
	for queue := []string{fw.InitialStage}; len(queue) > 0; queue = queue[1:] {
		for _, to := range fw.Transitions[queue[0]] {
			if !reached[to] {
				reached[to] = true
				queue = append(queue, to)
			}
		}
	}
	for _, sn := range sortedKeys(fw.Stages) {
		if !reached[sn] {
			errs = append(errs, c.errorAt("/stages/"+escapePointer(sn), fmt.Sprintf("stage is unreachable from %q (see transitions)", fw.InitialStage)))
		}
	}
	return errs
}

func (c *yamlConverter) workflow(fw *fileWorkflow) (*Workflow, []*LoadError) {
	var errs []*LoadError
	w := &Workflow{Name: fw.Name, Description: fw.Description, InitialStage: fw.InitialStage,
		Stages: map[string]*Stage{}, Transitions: fw.Transitions}
	if w.Transitions == nil {
		w.Transitions = map[string][]string{}
	}
	for _, sn := range sortedKeys(fw.Stages) {
		fs := fw.Stages[sn]
		st := &Stage{Name: fs.Name, Description: fs.Description, Prerequisites: fs.Prerequisites, Tasks: map[string]*Task{}}
		for _, tn := range sortedKeys(fs.Tasks) {
			ft := fs.Tasks[tn]
			ptr := "/stages/" + escapePointer(sn) + "/tasks/" + escapePointer(tn) + "/webhook"
			hook, hookErrs := c.webhook(ft.Webhook, ptr)
			errs = append(errs, hookErrs...)
			run, err := NewWebhookFunc(hook)
			if err != nil && len(hookErrs) == 0 {
				errs = append(errs, c.errorAt(ptr, err.Error()))
			}
			t := &Task{Name: ft.Name, Description: ft.Description, Parameters: ft.Parameters,
				Returns: ft.Returns, Run: run, Idempotent: hook.Idempotent, Rollback: ft.Rollback, Risk: ft.Risk}
			if err := checkRisk(ft.Risk); err != nil {
				errs = append(errs, c.errorAt("/stages/"+escapePointer(sn)+"/tasks/"+escapePointer(tn)+"/risk", err.Error()))
			}
			st.Tasks[tn] = t
		}
		w.Stages[sn] = st
	}
	return w, errs
}

func (c *yamlConverter) webhook(fh *fileWebhook, ptr string) (*Webhook, []*LoadError) {
	var errs []*LoadError
	h := &Webhook{URL: fh.URL, Method: fh.Method, Idempotent: fh.Idempotent}
	switch {
	case fh.Retries == nil:
	case *fh.Retries == 0:
		h.Retries = -1
	default:
		h.Retries = *fh.Retries
	}
	switch t := fh.Timeout.(type) {
	case string:
		d, err := time.ParseDuration(t)
		if err != nil || d <= 0 {
			errs = append(errs, c.errorAt(ptr+"/timeout", "must be a positive duration"))
		}
		h.Timeout = d
	case float64:
		if t > 24*3600 {
			errs = append(errs, c.errorAt(ptr+"/timeout", "must be at most 24h"))
		} else {
			h.Timeout = time.Duration(t * float64(time.Second))
		}
	}
	if len(fh.Headers) > 0 {
		h.Header = http.Header{}
		for _, k := range sortedKeys(fh.Headers) {
			v, err := expandEnv(fh.Headers[k])
			if err != nil {
				errs = append(errs, c.errorAt(ptr+"/headers/"+escapePointer(k), err.Error()))
				continue
			}
			h.Header.Add(k, v)
		}
	}
	return h, errs
}

var (
	envRef  = regexp.MustCompile(`\$\{([^}]*)\}`)
	envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// expandEnv replaces ${NAME} with the environment variable NAME; an unset
// variable is an error, not an empty string.
func expandEnv(s string) (string, error) {
	if strings.Contains(envRef.ReplaceAllString(s, ""), "${") {
		return "", errors.New("unterminated ${ in header value")
	}
	var err error
	out := envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		var v string
		var ok bool
		switch {
		case err != nil:
		case !envName.MatchString(name):
			err = fmt.Errorf("invalid environment variable reference %q", ref)
		default:
			if v, ok = os.LookupEnv(name); !ok {
				err = fmt.Errorf("environment variable %s is not set", name)
			} else if !validHeaderValue(v) {
				err = fmt.Errorf("environment variable %s holds characters a header value cannot", name)
			}
		}
		return v
	})
	return out, err
}
