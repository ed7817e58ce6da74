package workflow

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/agentry-dev/agentry/internal/schemas"
	"github.com/agentry-dev/agentry/internal/yamldoc"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// workflowSchemaJSON is the JSON Schema (draft 2020-12) of workflow files,
// which Load validates every document against.
//
//go:embed schema/workflow.schema.json
var workflowSchemaJSON []byte

var workflowSchema = sync.OnceValue(func() *jsonschema.Schema {
	return schemas.Embedded(schemas.NewCompiler(), "https://agentry.dev/schema/workflow.schema.json", workflowSchemaJSON)
})

// LoadError is a problem found in a workflow file: its File, Line
// (1-based; 0 when unknown), Path (the JSON Pointer of the offending
// value, "" for the document) and Message; its Error is
// "FILE[:LINE]: [PATH: ]MESSAGE". Load and friends return them joined
// (errors.Join), at most 20 per file.
type LoadError = yamldoc.Error

// LoadDir loads the workflow files of dir: its *.yaml, *.yml and *.json
// files (not those of subdirectories, nor hidden ones), in name order.
// Workflow names must be unique across the files. A directory without
// workflow files yields none and no error.
func LoadDir(dir string) ([]*Workflow, error) {
	files, err := yamldoc.Files(dir)
	if err != nil {
		return nil, err
	}
	var all []*Workflow
	var errs []error
	from := map[string]string{} // workflow name → file
	for _, path := range files {
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
// The schema is workflow/schema/workflow.schema.json. Names (of the workflow, stages and tasks)
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
	docs, parseErr := yamldoc.Parse(r, name)
	var out []*Workflow
	var errs []error
	seen := map[string]int{}
	for _, doc := range docs {
		w, err := loadDocument(doc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := seen[w.Name]; dup {
			errs = append(errs, &LoadError{File: name, Line: doc.Line, Message: fmt.Sprintf("workflow %q is already defined at line %d", w.Name, prev)})
			continue
		}
		seen[w.Name] = doc.Line
		out = append(out, w)
	}
	if parseErr != nil {
		errs = append(errs, parseErr)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(out) == 0 {
		return nil, &LoadError{File: name, Message: "no workflow in file"}
	}
	return out, nil
}

// loadDocument turns one YAML document into a validated workflow.
func loadDocument(d *yamldoc.Doc) (*Workflow, error) {
	file, line := d.File, d.Line
	if d.Value == nil {
		return nil, &LoadError{File: file, Line: line, Message: "empty document"}
	}
	if err := workflowSchema().Validate(d.Value); err != nil {
		return nil, d.SchemaErrors(err, schemaMessages)
	}
	b, err := json.Marshal(d.Value)
	if err != nil { // cannot happen: Value holds JSON values only
		return nil, &LoadError{File: file, Line: line, Message: err.Error()}
	}
	var fw fileWorkflow
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fw); err != nil { // the schema should have caught it
		return nil, &LoadError{File: file, Line: line, Message: err.Error()}
	}
	if errs := references(d, &fw); len(errs) > 0 {
		return nil, yamldoc.Join(file, errs)
	}
	w, errs := fileToWorkflow(d, &fw)
	if len(errs) > 0 {
		return nil, yamldoc.Join(file, errs)
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
		return nil, yamldoc.Join(file, errs)
	}
	return w, nil
}

const nameMessage = "must be a name of 1 to 64 letters, digits, _ or -"

var (
	nameMapPath   = regexp.MustCompile(`^(/stages|/stages/[^/]+/tasks|/transitions)$`)
	headerMapPath = regexp.MustCompile(`/webhook/headers$`)
)

// schemaMessages replace the schema's where its own would be cryptic or
// would echo a URL (it may hold credentials) or a header value.
var schemaMessages = &yamldoc.Messages{
	At: []yamldoc.PathMessage{
		{Path: regexp.MustCompile(`^(/name|/initial_stage|/stages/[^/]+/name|/stages/[^/]+/tasks/[^/]+/name|/transitions/[^/]+/[0-9]+)$`), Message: nameMessage},
		{Path: regexp.MustCompile(`/webhook/url$`), Message: "must be an absolute http or https URL of at most 2048 bytes"},
		{Path: regexp.MustCompile(`/webhook/headers/[^/]+$`), Message: "must be a string of at most 8192 bytes without control characters"},
		{Path: regexp.MustCompile(`/webhook/timeout$`), Message: `must be a duration such as "10s" or "1m30s", or a number of seconds`},
	},
	Unknown: func(ptr string) string {
		switch {
		case nameMapPath.MatchString(ptr):
			return nameMessage
		case headerMapPath.MatchString(ptr):
			return "invalid header name"
		}
		return ""
	},
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
func references(c *yamldoc.Doc, fw *fileWorkflow) []*LoadError {
	var errs []*LoadError
	if _, ok := fw.Stages[fw.InitialStage]; !ok {
		errs = append(errs, c.ErrorAt("/initial_stage", fmt.Sprintf("no stage is named %q", fw.InitialStage)))
	}
	for _, from := range sortedKeys(fw.Transitions) {
		ptr := "/transitions/" + yamldoc.EscapePointer(from)
		if _, ok := fw.Stages[from]; !ok {
			errs = append(errs, c.ErrorAt(ptr, fmt.Sprintf("no stage is named %q", from)))
		}
		for i, to := range fw.Transitions[from] {
			if _, ok := fw.Stages[to]; !ok {
				errs = append(errs, c.ErrorAt(ptr+"/"+strconv.Itoa(i), fmt.Sprintf("no stage is named %q", to)))
			}
		}
	}
	for _, sn := range sortedKeys(fw.Stages) {
		ptr := "/stages/" + yamldoc.EscapePointer(sn)
		if n := fw.Stages[sn].Name; n != "" && n != sn {
			errs = append(errs, c.ErrorAt(ptr+"/name", fmt.Sprintf("must be the stage's key %q", sn)))
		}
		for _, tn := range sortedKeys(fw.Stages[sn].Tasks) {
			if n := fw.Stages[sn].Tasks[tn].Name; n != "" && n != tn {
				errs = append(errs, c.ErrorAt(ptr+"/tasks/"+yamldoc.EscapePointer(tn)+"/name", fmt.Sprintf("must be the task's key %q", tn)))
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
			errs = append(errs, c.ErrorAt("/stages/"+yamldoc.EscapePointer(sn), fmt.Sprintf("stage is unreachable from %q (see transitions)", fw.InitialStage)))
		}
	}
	return errs
}

func fileToWorkflow(c *yamldoc.Doc, fw *fileWorkflow) (*Workflow, []*LoadError) {
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
			ptr := "/stages/" + yamldoc.EscapePointer(sn) + "/tasks/" + yamldoc.EscapePointer(tn) + "/webhook"
			hook, hookErrs := fileToWebhook(c, ft.Webhook, ptr)
			errs = append(errs, hookErrs...)
			run, err := NewWebhookFunc(hook)
			if err != nil && len(hookErrs) == 0 {
				errs = append(errs, c.ErrorAt(ptr, err.Error()))
			}
			t := &Task{Name: ft.Name, Description: ft.Description, Parameters: ft.Parameters,
				Returns: ft.Returns, Run: run, Idempotent: hook.Idempotent, Rollback: ft.Rollback, Risk: ft.Risk}
			if err := checkRisk(ft.Risk); err != nil {
				errs = append(errs, c.ErrorAt("/stages/"+yamldoc.EscapePointer(sn)+"/tasks/"+yamldoc.EscapePointer(tn)+"/risk", err.Error()))
			}
			st.Tasks[tn] = t
		}
		w.Stages[sn] = st
	}
	return w, errs
}

func fileToWebhook(c *yamldoc.Doc, fh *fileWebhook, ptr string) (*Webhook, []*LoadError) {
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
			errs = append(errs, c.ErrorAt(ptr+"/timeout", "must be a positive duration"))
		}
		h.Timeout = d
	case float64:
		if t > 24*3600 {
			errs = append(errs, c.ErrorAt(ptr+"/timeout", "must be at most 24h"))
		} else {
			h.Timeout = time.Duration(t * float64(time.Second))
		}
	}
	if len(fh.Headers) > 0 {
		h.Header = http.Header{}
		for _, k := range sortedKeys(fh.Headers) {
			v, err := expandEnv(fh.Headers[k])
			if err != nil {
				errs = append(errs, c.ErrorAt(ptr+"/headers/"+yamldoc.EscapePointer(k), err.Error()))
				continue
			}
			h.Header.Add(k, v)
		}
	}
	return h, errs
}

// expandEnv replaces ${NAME} in a header value with the environment
// variable NAME; an unset variable is an error, not an empty string.
func expandEnv(s string) (string, error) {
	v, err := yamldoc.ExpandEnv(s, nil)
	if err != nil {
		return "", err
	}
	if !validHeaderValue(v) {
		return "", errors.New("an environment variable holds characters a header value cannot")
	}
	return v, nil
}
