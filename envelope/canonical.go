package envelope

import (
	"strconv"

	"github.com/gowebpki/jcs"

	"github.com/agentry-dev/agentry/internal/canonical"
)

// The direct canonical encoder. RFC 8785 orders members by their names'
// UTF-16 code units and writes strings with the minimal escapes of
// §3.2.2.2; for the envelope's fixed members both are known in advance,
// so appendCanonical writes the canonical form in one pass and leaves
// only the open parts to jcs: Ext, canonicalized on its own and spliced
// in. An envelope with Extra members in its body or context refs (rare:
// the schema allows them, nobody sends them) takes the general path,
// encoding then jcs.Transform. TestCanonicalDirectMatchesJCS and
// FuzzDecodeEnvelope pin the two paths to the same bytes.

// canonicalDirect returns e's canonical form, or ok false when e has
// Extra members and the general path must be taken.
func (e *Envelope) canonicalDirect() (c []byte, ok bool, err error) {
	if len(e.Body.Extra) > 0 {
		return nil, false, nil
	}
	for _, r := range e.Context {
		if len(r.Extra) > 0 {
			return nil, false, nil
		}
	}
	var ext []byte
	if e.Ext != nil {
		x, err := marshalOpen(e.Ext)
		if err != nil {
			return nil, true, err
		}
		if ext, err = jcs.Transform(x); err != nil {
			return nil, true, err
		}
	}
	if e.DeltaWindow > maxSafeInteger || e.DeltaWindow < 0 {
		return nil, true, errDeltaWindow(e.DeltaWindow)
	}
	b := make([]byte, 0, 256+len(e.Body.Content)+len(ext)+len(e.CapToken))
	// Member order: body, cap_token, context, delta_window, ext, from,
	// id, intent, reply_to, stream_id, to, ts (sig is left out).
	b = append(b, `{"body":{`...)
	if e.Body.Compression != "" {
		b = append(b, `"compression":`...)
		b = canonical.AppendString(b, e.Body.Compression)
		b = append(b, ',')
	}
	b = append(b, `"content":`...)
	b = canonical.AppendString(b, e.Body.Content)
	if e.Body.Encoding != "" {
		b = append(b, `,"encoding":`...)
		b = canonical.AppendString(b, e.Body.Encoding)
	}
	b = append(b, `,"type":`...)
	b = canonical.AppendString(b, e.Body.Type)
	b = append(b, '}')
	if e.CapToken != "" {
		b = append(b, `,"cap_token":`...)
		b = canonical.AppendString(b, e.CapToken)
	}
	if e.Context != nil {
		b = append(b, `,"context":[`...)
		for i, r := range e.Context {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"hash":`...)
			b = canonical.AppendString(b, r.Hash)
			b = append(b, `,"id":`...)
			b = canonical.AppendString(b, r.ID)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if e.DeltaWindow != 0 {
		b = append(b, `,"delta_window":`...)
		b = strconv.AppendInt(b, int64(e.DeltaWindow), 10)
	}
	if ext != nil {
		b = append(b, `,"ext":`...)
		b = append(b, ext...)
	}
	b = append(b, `,"from":`...)
	b = canonical.AppendString(b, e.From)
	b = append(b, `,"id":`...)
	b = canonical.AppendString(b, e.ID)
	b = append(b, `,"intent":`...)
	b = canonical.AppendString(b, string(e.Intent))
	if e.ReplyTo != "" {
		b = append(b, `,"reply_to":`...)
		b = canonical.AppendString(b, e.ReplyTo)
	}
	if e.StreamID != "" {
		b = append(b, `,"stream_id":`...)
		b = canonical.AppendString(b, e.StreamID)
	}
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
	b = append(b, `,"ts":`...)
	b = canonical.AppendString(b, e.TS)
	return append(b, '}'), true, nil
}
