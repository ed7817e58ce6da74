package uicontrol

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// The sections of a capability document (§9.1), in the order
// MarshalJSON writes them.
const (
	SectionRoles       = "roles"
	SectionStates      = "states"
	SectionAffordances = "affordances"
	SectionActions     = "actions"
	SectionRisk        = "risk"
	SectionSignals     = "signals"
)

// sections lists the section names of §9.1 in order.
var sections = []string{SectionRoles, SectionStates, SectionAffordances, SectionActions, SectionRisk, SectionSignals}

// includeAll is the capabilities.get include value asking for every
// section.
const includeAll = "all"

// CapabilityDocument is what an app declares it can do (§9): six
// sections whose contents the capability model and profiles define, not
// Core, so each is kept as JSON text (compact), and any other top-level
// member in Extra, preserved across decode and encode. An absent section
// is nil.
type CapabilityDocument struct {
	Roles       json.RawMessage
	States      json.RawMessage
	Affordances json.RawMessage
	Actions     json.RawMessage
	Risk        json.RawMessage
	Signals     json.RawMessage
	// Extra holds the members that are not sections, by name.
	Extra map[string]json.RawMessage
}

// section returns a pointer to the field holding section name, or nil
// for a name that is not a section.
func (d *CapabilityDocument) section(name string) *json.RawMessage {
	switch name {
	case SectionRoles:
		return &d.Roles
	case SectionStates:
		return &d.States
	case SectionAffordances:
		return &d.Affordances
	case SectionActions:
		return &d.Actions
	case SectionRisk:
		return &d.Risk
	case SectionSignals:
		return &d.Signals
	}
	return nil
}

// Get returns the member name of the document — a section or an extra
// member — or nil when it is absent.
func (d *CapabilityDocument) Get(name string) json.RawMessage {
	if p := d.section(name); p != nil {
		return *p
	}
	return d.Extra[name]
}

// MarshalJSON writes the sections in the order of Sections, then the
// extra members sorted by name; absent members are omitted.
func (d *CapabilityDocument) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	write := func(name string, v json.RawMessage) error {
		if isNull(v) {
			return nil
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(name)
		b.Write(k)
		b.WriteByte(':')
		return json.Compact(&b, v)
	}
	for _, s := range sections {
		if err := write(s, *d.section(s)); err != nil {
			return nil, err
		}
	}
	keys := make([]string, 0, len(d.Extra))
	for k := range d.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := write(k, d.Extra[k]); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON decodes a document as DecodeCapabilityDocument does,
// without its size limit.
func (d *CapabilityDocument) UnmarshalJSON(b []byte) error {
	doc, err := decodeCapabilityDocument(b, len(b))
	if err != nil {
		return err
	}
	*d = *doc
	return nil
}

// DecodeCapabilityDocument decodes a capability document from untrusted
// bytes: at most DefaultMaxMessageSize bytes of valid UTF-8 holding one
// JSON object whose member names are distinct. Members whose value is
// null count as absent; every other member is kept, compacted — a
// section whatever its JSON type, since Core does not define section
// contents. Refusals are *Error with code invalid_message.
func DecodeCapabilityDocument(b []byte) (*CapabilityDocument, error) {
	d, err := decodeCapabilityDocument(b, DefaultMaxMessageSize)
	if err != nil {
		return nil, err
	}
	return d, nil
}

func decodeCapabilityDocument(b []byte, maxSize int) (*CapabilityDocument, *Error) {
	if len(b) > maxSize {
		return nil, newErrorf(CodeInvalidMessage, "capability document larger than %d bytes", maxSize)
	}
	if !utf8.Valid(b) {
		return nil, NewError(CodeInvalidMessage, "capability document is not valid UTF-8")
	}
	m, dup, err := parseObject(b)
	if err == errDuplicate {
		return nil, newErrorf(CodeInvalidMessage, "capability document: member %q given twice", dup)
	}
	if err != nil {
		return nil, NewError(CodeInvalidMessage, "capability document is not a JSON object")
	}
	d := &CapabilityDocument{}
	for name, raw := range m {
		if isNull(raw) {
			continue
		}
		var c bytes.Buffer
		if err := json.Compact(&c, raw); err != nil {
			return nil, NewError(CodeInvalidMessage, "capability document is not valid JSON")
		}
		v := json.RawMessage(c.Bytes())
		if p := d.section(name); p != nil {
			*p = v
			continue
		}
		if d.Extra == nil {
			d.Extra = map[string]json.RawMessage{}
		}
		d.Extra[name] = v
	}
	return d, nil
}

// Filter returns the document reduced to the members include names (a
// capabilities.get include list, §9.1): nil or a list holding "all" keeps
// everything; otherwise each name keeps that section, or that extra
// member, if present; names the document lacks are ignored.
func (d *CapabilityDocument) Filter(include []string) *CapabilityDocument {
	out := &CapabilityDocument{}
	if include == nil || slices.Contains(include, includeAll) {
		*out = *d
		if d.Extra != nil {
			out.Extra = make(map[string]json.RawMessage, len(d.Extra))
			for k, v := range d.Extra {
				out.Extra[k] = v
			}
		}
		return out
	}
	for _, name := range include {
		if p := out.section(name); p != nil {
			*p = *d.section(name)
		} else if v, ok := d.Extra[name]; ok {
			if out.Extra == nil {
				out.Extra = map[string]json.RawMessage{}
			}
			out.Extra[name] = v
		}
	}
	return out
}

// revisionOf returns the revision of a document: the first 16 hex digits
// of the SHA-256 of its encoding, so that the same document always has
// the same revision and any change gets a new one.
func revisionOf(d *CapabilityDocument) (string, []byte, error) {
	b, err := d.MarshalJSON()
	if err != nil {
		return "", nil, err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]), b, nil
}
