package envelope

import (
	"strconv"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
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
		b = appendCanonicalString(b, e.Body.Compression)
		b = append(b, ',')
	}
	b = append(b, `"content":`...)
	b = appendCanonicalString(b, e.Body.Content)
	if e.Body.Encoding != "" {
		b = append(b, `,"encoding":`...)
		b = appendCanonicalString(b, e.Body.Encoding)
	}
	b = append(b, `,"type":`...)
	b = appendCanonicalString(b, e.Body.Type)
	b = append(b, '}')
	if e.CapToken != "" {
		b = append(b, `,"cap_token":`...)
		b = appendCanonicalString(b, e.CapToken)
	}
	if e.Context != nil {
		b = append(b, `,"context":[`...)
		for i, r := range e.Context {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"hash":`...)
			b = appendCanonicalString(b, r.Hash)
			b = append(b, `,"id":`...)
			b = appendCanonicalString(b, r.ID)
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
	b = appendCanonicalString(b, e.From)
	b = append(b, `,"id":`...)
	b = appendCanonicalString(b, e.ID)
	b = append(b, `,"intent":`...)
	b = appendCanonicalString(b, string(e.Intent))
	if e.ReplyTo != "" {
		b = append(b, `,"reply_to":`...)
		b = appendCanonicalString(b, e.ReplyTo)
	}
	if e.StreamID != "" {
		b = append(b, `,"stream_id":`...)
		b = appendCanonicalString(b, e.StreamID)
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
			b = appendCanonicalString(b, to)
		}
		b = append(b, ']')
	}
	b = append(b, `,"ts":`...)
	b = appendCanonicalString(b, e.TS)
	return append(b, '}'), true, nil
}

// appendCanonicalString appends s as RFC 8785 §3.2.2.2 writes a string:
// " and \ escaped, the control characters as \b \t \n \f \r or \u00xx
// (lowercase hex), everything else literal UTF-8. Invalid UTF-8 becomes
// U+FFFD, as the general path (encoding/json, then jcs) makes it.
func appendCanonicalString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\t':
				b = append(b, '\\', 't')
			case '\n':
				b = append(b, '\\', 'n')
			case '\f':
				b = append(b, '\\', 'f')
			case '\r':
				b = append(b, '\\', 'r')
			default:
				const hex = "0123456789abcdef"
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, "\uFFFD"...)
			i++
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
