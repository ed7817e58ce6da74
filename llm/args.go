package llm

import (
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// NewToolCall returns the call a model made, from the argument text it
// sent, as a provider decodes it: when the text is a JSON object,
// Arguments holds it decoded and ArgumentsJSON the text itself; blank
// text is an empty object; anything else (including null) is kept as
// RawArguments, with nil Arguments, and the loop answers the call with an
// error result. Arguments is decoded exactly as encoding/json decodes into
// a map[string]any, but without its reflection.
func NewToolCall(id, name string, argumentsJSON []byte) ToolCall {
	c := ToolCall{ToolCallID: id, ToolName: name}
	if isBlank(argumentsJSON) {
		c.Arguments = map[string]any{}
		return c
	}
	if m, ok := decodeObject(argumentsJSON); ok && m != nil {
		c.Arguments, c.ArgumentsJSON = m, argumentsJSON
		return c
	}
	c.RawArguments = string(argumentsJSON)
	return c
}

func isBlank(b []byte) bool {
	for _, c := range b {
		if !isSpace(c) {
			return false
		}
	}
	return true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// rawArguments returns the argument text a tool's Run may decode instead
// of args: the call's ArgumentsJSON, when args is the very map the call
// carries (messages, and so their calls' arguments, are immutable once
// created; a hook that rewrites arguments passes a map of its own).
func rawArguments(ctx context.Context, args map[string]any) json.RawMessage {
	c, ok := ctx.Value(callKey{}).(*callInfo)
	if !ok || len(c.call.ArgumentsJSON) == 0 || args == nil || c.call.Arguments == nil {
		return nil
	}
	if reflect.ValueOf(args).UnsafePointer() != reflect.ValueOf(c.call.Arguments).UnsafePointer() {
		return nil
	}
	return c.call.ArgumentsJSON
}

// maxDepth is encoding/json's limit on nested arrays and objects.
const maxDepth = 10000

// decodeObject decodes JSON text as encoding/json.Unmarshal decodes it into
// a map[string]any: ok is false exactly when Unmarshal fails (invalid JSON,
// a value that is not an object or null, a number out of float64's range,
// nesting beyond 10000); null gives a nil map. Strings are unescaped as
// Unmarshal does, invalid UTF-8 and lone surrogates becoming U+FFFD;
// numbers are float64; a repeated key keeps its last value.
func decodeObject(data []byte) (map[string]any, bool) {
	d := argDecoder{data: data}
	d.skipSpace()
	var m map[string]any
	switch {
	case d.consume("null"):
	case d.peek() == '{':
		v, ok := d.object(1)
		if !ok {
			return nil, false
		}
		m = v
	default:
		return nil, false
	}
	d.skipSpace()
	if d.pos != len(d.data) {
		return nil, false
	}
	return m, true
}

type argDecoder struct {
	data []byte
	pos  int
}

func (d *argDecoder) skipSpace() {
	for d.pos < len(d.data) && isSpace(d.data[d.pos]) {
		d.pos++
	}
}

func (d *argDecoder) peek() byte {
	if d.pos < len(d.data) {
		return d.data[d.pos]
	}
	return 0
}

func (d *argDecoder) consume(lit string) bool {
	if len(d.data)-d.pos >= len(lit) && string(d.data[d.pos:d.pos+len(lit)]) == lit {
		d.pos += len(lit)
		return true
	}
	return false
}

func (d *argDecoder) value(depth int) (any, bool) {
	d.skipSpace()
	switch c := d.peek(); {
	case c == '{':
		m, ok := d.object(depth + 1)
		return m, ok
	case c == '[':
		return d.array(depth + 1)
	case c == '"':
		return d.string()
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	case d.consume("true"):
		return true, true
	case d.consume("false"):
		return false, true
	case d.consume("null"):
		return nil, true
	}
	return nil, false
}

// object decodes an object whose '{' is at d.pos.
func (d *argDecoder) object(depth int) (map[string]any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	d.pos++ // '{'
	m := make(map[string]any)
	d.skipSpace()
	if d.peek() == '}' {
		d.pos++
		return m, true
	}
	for {
		d.skipSpace()
		if d.peek() != '"' {
			return nil, false
		}
		k, ok := d.string()
		if !ok {
			return nil, false
		}
		d.skipSpace()
		if d.peek() != ':' {
			return nil, false
		}
		d.pos++
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		m[k] = v
		d.skipSpace()
		switch d.peek() {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return m, true
		default:
			return nil, false
		}
	}
}

// array decodes an array whose '[' is at d.pos.
func (d *argDecoder) array(depth int) (any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	d.pos++ // '['
	a := make([]any, 0)
	d.skipSpace()
	if d.peek() == ']' {
		d.pos++
		return a, true
	}
	for {
		v, ok := d.value(depth)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		d.skipSpace()
		switch d.peek() {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return a, true
		default:
			return nil, false
		}
	}
}

// number decodes a number as a float64, checking JSON's grammar first
// (strconv.ParseFloat accepts more).
func (d *argDecoder) number() (any, bool) {
	start, b := d.pos, d.data
	i := d.pos
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return nil, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return nil, false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return nil, false
		}
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	}
	d.pos = i
	f, err := strconv.ParseFloat(string(b[start:i]), 64)
	if err != nil {
		return nil, false
	}
	return f, true
}

// string decodes a string whose '"' is at d.pos.
func (d *argDecoder) string() (string, bool) {
	b := d.data
	i := d.pos + 1
	// Fast path: printable ASCII without escapes.
	for i < len(b) {
		c := b[i]
		if c == '"' {
			s := string(b[d.pos+1 : i])
			d.pos = i + 1
			return s, true
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		i++
	}
	var sb strings.Builder
	sb.Write(b[d.pos+1 : i])
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			d.pos = i + 1
			return sb.String(), true
		case c < 0x20:
			return "", false
		case c == '\\':
			if i+1 >= len(b) {
				return "", false
			}
			switch b[i+1] {
			case '"', '\\', '/':
				sb.WriteByte(b[i+1])
			case 'b':
				sb.WriteByte('\b')
			case 'f':
				sb.WriteByte('\f')
			case 'n':
				sb.WriteByte('\n')
			case 'r':
				sb.WriteByte('\r')
			case 't':
				sb.WriteByte('\t')
			case 'u':
				r, ok := hex4(b[i+2:])
				if !ok {
					return "", false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					// A high surrogate followed by a low one is one
					// rune; anything else is U+FFFD, and what follows
					// is read on its own (as encoding/json does).
					if len(b)-i >= 6 && b[i] == '\\' && b[i+1] == 'u' {
						if r2, ok := hex4(b[i+2:]); ok {
							if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
								sb.WriteRune(dec)
								i += 6
								continue
							}
						}
					}
					r = utf8.RuneError
				}
				sb.WriteRune(r)
				continue
			default:
				return "", false
			}
			i += 2
		case c < utf8.RuneSelf:
			sb.WriteByte(c)
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				sb.WriteRune(utf8.RuneError)
			} else {
				sb.Write(b[i : i+size])
			}
			i += size
		}
	}
	return "", false
}

// hex4 reads the four hex digits of a \u escape.
func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r*16 + rune(c)
	}
	return r, true
}
