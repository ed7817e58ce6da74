package envelope

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	"github.com/agentry-dev/agentry/internal/canonical"
)

// The encoder of the wire types. It writes the fixed members directly,
// their strings as RFC 8785 writes them (appendCanonicalString: valid
// JSON that every decoder reads alike), and the open members (Ext, Extra)
// with encoding/json. The output keeps the schema's member order, so it
// is not the canonical form: Canonical writes that (canonical.go).

// appendJSON appends the envelope's JSON to b; sig is written only when
// withSig.
func (e *Envelope) appendJSON(b []byte, withSig bool) ([]byte, error) {
	b = append(b, `{"id":`...)
	b = canonical.AppendString(b, e.ID)
	b = append(b, `,"ts":`...)
	b = canonical.AppendString(b, e.TS)
	b = append(b, `,"from":`...)
	b = canonical.AppendString(b, e.From)
	b = append(b, `,"to":`...)
	if e.To == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, to := range e.To {
			if i > 0 {
				b = append(b, ',')
			}
			b = canonical.AppendString(b, to)
		}
		b = append(b, ']')
	}
	b = append(b, `,"intent":`...)
	b = canonical.AppendString(b, string(e.Intent))
	if e.ReplyTo != "" {
		b = append(b, `,"reply_to":`...)
		b = canonical.AppendString(b, e.ReplyTo)
	}
	if e.Context != nil {
		b = append(b, `,"context":[`...)
		for i, r := range e.Context {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = r.appendJSON(b); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if e.StreamID != "" {
		b = append(b, `,"stream_id":`...)
		b = canonical.AppendString(b, e.StreamID)
	}
	if e.DeltaWindow != 0 {
		if e.DeltaWindow > maxSafeInteger || e.DeltaWindow < 0 {
			return nil, errDeltaWindow(e.DeltaWindow)
		}
		b = append(b, `,"delta_window":`...)
		b = strconv.AppendInt(b, int64(e.DeltaWindow), 10)
	}
	b = append(b, `,"body":`...)
	b, err := e.Body.appendJSON(b)
	if err != nil {
		return nil, err
	}
	if e.CapToken != "" {
		b = append(b, `,"cap_token":`...)
		b = canonical.AppendString(b, e.CapToken)
	}
	if withSig && e.Sig != "" {
		b = append(b, `,"sig":`...)
		b = canonical.AppendString(b, e.Sig)
	}
	if e.Ext != nil {
		b = append(b, `,"ext":`...)
		x, err := marshalOpen(e.Ext)
		if err != nil {
			return nil, fmt.Errorf("envelope: ext: %w", err)
		}
		b = append(b, x...)
	}
	return append(b, '}'), nil
}

func errDeltaWindow(n int) error {
	return fmt.Errorf("envelope: delta_window %d is out of range", n)
}

func (r *ContextRef) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"id":`...)
	b = canonical.AppendString(b, r.ID)
	b = append(b, `,"hash":`...)
	b = canonical.AppendString(b, r.Hash)
	return appendExtra(b, r.Extra, "id", "hash")
}

func (body *Body) appendJSON(b []byte) ([]byte, error) {
	b = append(b, `{"type":`...)
	b = canonical.AppendString(b, body.Type)
	b = append(b, `,"content":`...)
	b = canonical.AppendString(b, body.Content)
	if body.Encoding != "" {
		b = append(b, `,"encoding":`...)
		b = canonical.AppendString(b, body.Encoding)
	}
	if body.Compression != "" {
		b = append(b, `,"compression":`...)
		b = canonical.AppendString(b, body.Compression)
	}
	return appendExtra(b, body.Extra, "type", "content", "encoding", "compression")
}

// appendExtra appends the members of extra (sorted) and the closing
// brace; an extra named like a known member is an error (it would be
// written twice).
func appendExtra(b []byte, extra map[string]any, known ...string) ([]byte, error) {
	if len(extra) > 0 {
		for k := range extra {
			if slices.Contains(known, k) {
				return nil, fmt.Errorf("envelope: Extra member %q is a known member", k)
			}
		}
		x, err := marshalOpen(extra)
		if err != nil {
			return nil, err
		}
		b = append(b, ',')
		b = append(b, x[1:len(x)-1]...)
	}
	return append(b, '}'), nil
}

// marshalOpen encodes the members of an open object (Ext, Extra) with
// encoding/json and refuses what Decode would refuse in them: a number
// beyond ±2^53 (RFC 8785 would round it), a duplicate member or lone
// surrogate a custom MarshalJSON wrote, nesting deeper than MaxDepth.
func marshalOpen(m map[string]any) ([]byte, error) {
	x, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if err := scanStrict(x); err != nil {
		return nil, err
	}
	return x, nil
}
