// Package yamldoc reads the YAML (and JSON) files agentry is configured
// with — workflow files, agent files — strictly and with lines: each
// document becomes JSON values (nil, bool, float64, string, []any,
// map[string]any) and the line of every value by its JSON Pointer, so that
// a JSON Schema failure or a semantic check can name the file and line
// of the fault.
//
// What a configuration file may not do is refused, never repaired:
// duplicate keys, merge keys (<<), non-string keys, tags other than the
// core schema's, NaN and infinities, a file over 4 MiB, a document that
// expands (aliases included) to more than 200,000 values or 32 MiB of
// text, nesting deeper than 100 levels, an alias to itself.
package yamldoc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"go.yaml.in/yaml/v3"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Limits of a file.
const (
	// MaxFileSize bounds a file.
	MaxFileSize = 4 << 20
	// maxValues bounds the values a document decodes to, aliases
	// expanded, so that a small file cannot expand into a large document.
	maxValues = 200_000
	// maxExpandedBytes bounds the text a document decodes to (strings,
	// keys and the paths to them), aliases expanded.
	maxExpandedBytes = 32 << 20
	// maxDepth bounds the nesting of a document.
	maxDepth = 100
	// maxErrors bounds the problems reported for one file.
	maxErrors = 20
)

// Error is a problem found in a file.
type Error struct {
	File string
	Line int // 1-based; 0 when unknown
	// Path is the JSON Pointer of the offending value in the document
	// ("" for the document itself).
	Path    string
	Message string
}

// Error returns "FILE[:LINE]: [PATH: ]MESSAGE", the line and path only
// when known.
func (e *Error) Error() string {
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

// Doc is one document of a file.
type Doc struct {
	File string
	// Value is the document as JSON values; nil for an empty document.
	Value any
	// Line is the line the document starts at.
	Line int

	lines     map[string]int
	count     int                 // values decoded
	bytes     int                 // text decoded
	expanding map[*yaml.Node]bool // anchors being expanded (cycle guard)
}

// Files lists the configuration files of dir: its *.yaml, *.yml and
// *.json regular files (not those of subdirectories, nor hidden ones),
// in name order.
func Files(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
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
		out = append(out, path)
	}
	return out, nil
}

// Parse reads r, named file in errors, and decodes its documents
// (separated by "---"). On a syntax error it returns the documents
// before it and the error; a document that breaks a rule of the package
// is an *Error for that document, and its Value is nil.
func Parse(r io.Reader, file string) ([]*Doc, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, &Error{File: file, Message: fmt.Sprintf("file is larger than %d MiB", MaxFileSize>>20)}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*Doc
	var errs []error
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			errs = append(errs, syntaxError(file, err))
			break
		}
		d := &Doc{File: file, Line: n.Line, lines: map[string]int{}, expanding: map[*yaml.Node]bool{}}
		if len(n.Content) == 1 {
			d.Line = n.Content[0].Line
		}
		v, err := d.value(&n, "", 0)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d.Value = v
		docs = append(docs, d)
	}
	return docs, errors.Join(errs...)
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func syntaxError(file string, err error) error {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: file, Line: line, Message: m[2]}
	}
	return &Error{File: file, Message: strings.TrimPrefix(msg, "yaml: ")}
}

func (d *Doc) fail(n *yaml.Node, ptr, format string, args ...any) error {
	return &Error{File: d.File, Line: n.Line, Path: ptr, Message: fmt.Sprintf(format, args...)}
}

func (d *Doc) value(n *yaml.Node, ptr string, depth int) (any, error) {
	d.count++
	d.bytes += len(ptr) + len(n.Value)
	if d.count > maxValues || d.bytes > maxExpandedBytes {
		return nil, d.fail(n, ptr, "document expands to more than %d values or %d MiB (aliases included)", maxValues, maxExpandedBytes>>20)
	}
	if depth > maxDepth {
		return nil, d.fail(n, ptr, "nested deeper than %d levels", maxDepth)
	}
	if _, ok := d.lines[ptr]; !ok {
		d.lines[ptr] = n.Line
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return d.value(n.Content[0], ptr, depth)
	case yaml.AliasNode:
		if n.Alias == nil || d.expanding[n.Alias] {
			return nil, d.fail(n, ptr, "alias %q refers to itself", n.Value)
		}
		d.expanding[n.Alias] = true
		defer delete(d.expanding, n.Alias)
		return d.value(n.Alias, ptr, depth+1)
	case yaml.MappingNode:
		if tag := n.ShortTag(); tag != "!!map" {
			return nil, d.fail(n, ptr, "unsupported tag %s", tag)
		}
		m := make(map[string]any, len(n.Content)/2)
		keyLines := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
				if k.ShortTag() == "!!merge" {
					return nil, d.fail(k, ptr, "merge keys (<<) are not supported")
				}
				return nil, d.fail(k, ptr, "mapping keys must be strings")
			}
			if prev, dup := keyLines[k.Value]; dup {
				return nil, d.fail(k, ptr, "duplicate key %q (first at line %d)", k.Value, prev)
			}
			keyLines[k.Value] = k.Line
			child := ptr + "/" + EscapePointer(k.Value)
			d.lines[child] = k.Line
			x, err := d.value(v, child, depth+1)
			if err != nil {
				return nil, err
			}
			m[k.Value] = x
		}
		return m, nil
	case yaml.SequenceNode:
		if tag := n.ShortTag(); tag != "!!seq" {
			return nil, d.fail(n, ptr, "unsupported tag %s", tag)
		}
		s := make([]any, 0, len(n.Content))
		for i, item := range n.Content {
			x, err := d.value(item, ptr+"/"+strconv.Itoa(i), depth+1)
			if err != nil {
				return nil, err
			}
			s = append(s, x)
		}
		return s, nil
	case yaml.ScalarNode:
		return d.scalar(n, ptr)
	}
	return nil, d.fail(n, ptr, "unsupported YAML node")
}

func (d *Doc) scalar(n *yaml.Node, ptr string) (any, error) {
	switch tag := n.ShortTag(); tag {
	case "!!str", "!!timestamp": // a date stays the text it is
		return n.Value, nil
	case "!!null":
		return nil, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, d.fail(n, ptr, "invalid boolean %q", n.Value)
		}
		return b, nil
	case "!!int", "!!float":
		var x any
		if err := n.Decode(&x); err != nil {
			return nil, d.fail(n, ptr, "invalid number %q", n.Value)
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
			return nil, d.fail(n, ptr, "invalid number %q", n.Value)
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, d.fail(n, ptr, "%s is not a JSON number", n.Value)
		}
		return f, nil
	default:
		return nil, d.fail(n, ptr, "unsupported tag %s", tag)
	}
}

// EscapePointer escapes s as one JSON Pointer token (RFC 6901).
func EscapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// Pointer joins the tokens of a location into a JSON Pointer.
func Pointer(loc []string) string {
	var b strings.Builder
	for _, p := range loc {
		b.WriteByte('/')
		b.WriteString(EscapePointer(p))
	}
	return b.String()
}

// LineOf returns the line of the value at ptr or of its closest ancestor.
func (d *Doc) LineOf(ptr string) int {
	for {
		if l, ok := d.lines[ptr]; ok {
			return l
		}
		i := strings.LastIndexByte(ptr, '/')
		if i < 0 {
			return 0
		}
		ptr = ptr[:i]
	}
}

// ErrorAt returns an *Error for the value at ptr, at its line.
func (d *Doc) ErrorAt(ptr, message string) *Error {
	return &Error{File: d.File, Line: d.LineOf(ptr), Path: ptr, Message: message}
}

// Messages tailors SchemaErrors' messages where a schema's own would be
// cryptic, or would echo a value that may hold a secret (a URL, a header).
type Messages struct {
	// At replaces the message of a failure at an instance path the
	// regexp matches; the last match wins.
	At []PathMessage
	// Unknown returns the message for a member the schema does not allow
	// in the object at ptr; "" (or a nil func) means "unknown field".
	Unknown func(ptr string) string
}

// PathMessage is a message for the failures at the paths Path matches.
type PathMessage struct {
	Path    *regexp.Regexp
	Message string
}

var printer = message.NewPrinter(language.English)

// SchemaErrors turns the failure of validating d.Value against a JSON
// Schema into *Errors, one per failed check, in line order (joined, at
// most 20).
func (d *Doc) SchemaErrors(err error, m *Messages) error {
	if m == nil {
		m = &Messages{}
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &Error{File: d.File, Message: err.Error()}
	}
	var out []*Error
	var walk func(v *jsonschema.ValidationError)
	walk = func(v *jsonschema.ValidationError) {
		ptr := Pointer(v.InstanceLocation)
		causes := v.Causes
		switch k := v.ErrorKind.(type) {
		case *kind.AdditionalProperties:
			msg := ""
			if m.Unknown != nil {
				msg = m.Unknown(ptr)
			}
			if msg == "" {
				msg = "unknown field"
			}
			for _, p := range k.Properties {
				out = append(out, d.ErrorAt(ptr+"/"+EscapePointer(p), msg))
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
			for _, pm := range m.At {
				if pm.Path.MatchString(ptr) {
					msg = pm.Message
				}
			}
			out = append(out, d.ErrorAt(ptr, msg))
			return
		}
		for _, cause := range causes {
			walk(cause)
		}
	}
	walk(ve)
	return Join(d.File, out)
}

// Join joins list in line order, without duplicates, at most 20 of
// them; nil for an empty list.
func Join(file string, list []*Error) error {
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
	if len(errs) > maxErrors {
		more := len(errs) - maxErrors
		errs = append(errs[:maxErrors], &Error{File: file, Message: fmt.Sprintf("and %d more problems", more)})
	}
	return errors.Join(errs...)
}

var (
	envRef  = regexp.MustCompile(`\$\{([^}]*)\}`)
	envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// ExpandEnv replaces ${NAME} with the environment variable NAME, looked
// up with lookup (os.LookupEnv when nil); an unset variable is an error
// naming it, not an empty string, and so is a malformed reference.
// ${NAME:-DEFAULT} is DEFAULT when NAME is unset or empty (as in the
// POSIX shell); DEFAULT is taken as written, up to the closing brace.
func ExpandEnv(s string, lookup func(string) (string, bool)) (string, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if strings.Contains(envRef.ReplaceAllString(s, ""), "${") {
		return "", errors.New("unterminated ${")
	}
	var err error
	out := envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name, def, hasDefault := strings.Cut(ref[2:len(ref)-1], ":-")
		var v string
		var ok bool
		switch {
		case err != nil:
		case !envName.MatchString(name):
			err = fmt.Errorf("invalid environment variable reference %q", ref)
		default:
			v, ok = lookup(name)
			switch {
			case hasDefault && v == "":
				v = def
			case !ok:
				err = fmt.Errorf("environment variable %s is not set", name)
			}
		}
		return v
	})
	return out, err
}
