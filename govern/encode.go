package govern

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"sync"

	"github.com/agentry-dev/agentry/internal/canonical"
)

// The Data of the records a tool call journals, written directly.
//
// A record's Data is json.Marshal's form of its data, and it is hashed
// and kept as it is, so it must not change by a byte. marshalData writes
// the call's intent and outcome (and the evidence in it) directly, as
// encoding/json would, and leaves anything it is not sure to write
// identically — a raw payload that encoding/json would compact or
// escape, an extra member that is not JSON-shaped, an invalid tier — to
// json.Marshal. TestMarshalDataMatchesEncodingJSON and FuzzMarshalData
// compare the two.

// marshalData returns json.Marshal(data).
func marshalData(data any) ([]byte, error) {
	var (
		b  []byte
		ok bool
	)
	switch d := data.(type) {
	case CallOutcome:
		size := 128 + len(d.Error)
		for i := range d.Evidence {
			size += 512 + len(d.Evidence[i].Payload)
		}
		b, ok = appendCallOutcome(make([]byte, 0, size), &d)
	case CallIntent:
		b, ok = appendCallIntent(make([]byte, 0, 256+len(d.Args)), &d)
	}
	if ok {
		return b, nil
	}
	return json.Marshal(data)
}

// jsonBufs recycles the buffers marshalValue writes into.
var jsonBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// marshalValue returns json.Marshal(v), written directly when v is
// JSON-shaped (canonical.AppendJSON).
func marshalValue(v any) ([]byte, error) {
	buf := jsonBufs.Get().(*[]byte)
	defer jsonBufs.Put(buf)
	if b, ok := canonical.AppendJSON((*buf)[:0], v); ok {
		if cap(b) <= 64<<10 {
			*buf = b[:0]
		}
		return bytes.Clone(b), nil
	}
	return json.Marshal(v)
}

// appendKey appends `,"key":` (no comma for the first member, after
// the object's '{').
func appendKey(b []byte, key string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

// appendStringMember appends a string member; with omitEmpty, not when v
// is empty.
func appendStringMember[S ~string](b []byte, key string, v S, omitEmpty bool) []byte {
	if omitEmpty && v == "" {
		return b
	}
	return canonical.AppendJSONString(appendKey(b, key), v, true)
}

// appendRawMember appends a json.RawMessage member (omitempty) when
// encoding/json would write it unchanged.
func appendRawMember(b []byte, key string, raw json.RawMessage) ([]byte, bool) {
	if len(raw) == 0 {
		return b, true
	}
	if !canonical.CompactAsIs(raw, true) {
		return b, false
	}
	return append(appendKey(b, key), raw...), true
}

func appendCallOutcome(b []byte, o *CallOutcome) ([]byte, bool) {
	b = append(b, '{')
	b = appendStringMember(b, "args_hash", o.ArgsHash, true)
	b = appendStringMember(b, "result_hash", o.ResultHash, true)
	b, ok := appendEvidenceMember(b, o.Evidence, appendEvidence)
	if !ok {
		return b, false
	}
	b = appendStringMember(b, "error", o.Error, true)
	b = strconv.AppendInt(appendKey(b, "duration_ms"), o.DurationMS, 10)
	return append(b, '}'), true
}

// appendEvidenceMember appends the member "evidence": evs, each written
// by write (omitted when evs is empty, as omitempty does).
func appendEvidenceMember(b []byte, evs []Evidence, write func([]byte, *Evidence) ([]byte, bool)) ([]byte, bool) {
	if len(evs) == 0 {
		return b, true
	}
	b = append(appendKey(b, "evidence"), '[')
	for i := range evs {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = write(b, &evs[i]); !ok {
			return b, false
		}
	}
	return append(b, ']'), true
}

// appendEvidence appends e as Evidence.MarshalJSON writes it.
func appendEvidence(b []byte, e *Evidence) ([]byte, bool) {
	b = append(b, '{')
	b = appendStringMember(b, "evidence_id", e.EvidenceID, false)
	b = appendStringMember(b, "evidence_type", e.EvidenceType, false)
	b = appendStringMember(b, "source", e.Source, false)
	b = appendStringMember(b, "request_id", e.RequestID, true)
	b = appendStringMember(b, "trace_id", e.TraceID, true)
	b = appendStringMember(b, "parent_trace_id", e.ParentTraceID, true)
	b = appendStringMember(b, "actor", e.Actor, true)
	b = appendStringMember(b, "hash", e.Hash, false)
	b = appendTime(appendKey(b, "collected_at"), e.CollectedAt)
	b, ok := appendRawMember(b, "payload", e.Payload)
	if !ok {
		return b, false
	}
	if len(e.Extra) > 0 {
		var small [8]string
		keys := small[:0]
		for k := range e.Extra {
			if !slices.Contains(evidenceMembers, k) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			b = append(canonical.AppendJSONString(append(b, ','), k, true), ':')
			if b, ok = canonical.AppendJSON(b, e.Extra[k]); !ok {
				return b, false
			}
		}
	}
	return append(b, '}'), true
}

// appendTime appends t as Time.MarshalJSON writes it (its digits and
// separators need no escaping).
func appendTime(b []byte, t Time) []byte {
	b = append(b, '"')
	b = canonical.AppendTimeMillis(b, t.Time)
	return append(b, '"')
}

func appendCallIntent(b []byte, in *CallIntent) ([]byte, bool) {
	if !in.Tier.Valid() {
		return b, false // MarshalText's error is json.Marshal's to give
	}
	b = append(b, '{')
	b = appendStringMember(b, "tier", in.Tier.String(), false)
	b = appendStringMember(b, "declared_tier", in.DeclaredTier, false)
	b, ok := appendRawMember(b, "args", in.Args)
	if !ok {
		return b, false
	}
	b = appendStringMember(b, "args_hash", in.ArgsHash, false)
	if a := in.Rollback; a != nil {
		if b, ok = appendRollback(appendKey(b, "rollback_action"), a); !ok {
			return b, false
		}
	}
	b = appendStringMember(b, "rollback_hash", in.RollbackHash, true)
	b = strconv.AppendInt(appendKey(b, "attempt"), int64(in.Attempt), 10)
	if d := in.Policy; d != nil {
		b = append(appendKey(b, "policy"), '{')
		b = appendStringMember(b, "effect", d.Effect, false)
		b = appendStringMember(b, "rule", d.Rule, true)
		if len(d.Reasons) > 0 {
			b = append(appendKey(b, "reasons"), '[')
			for i, r := range d.Reasons {
				if i > 0 {
					b = append(b, ',')
				}
				b = canonical.AppendJSONString(b, r, true)
			}
			b = append(b, ']')
		}
		b = append(b, '}')
	}
	b = appendStringMember(b, "approval_id", in.ApprovalID, true)
	b = appendStringMember(b, "approver", in.Approver, true)
	b = appendStringMember(b, "jti", in.TokenID, true)
	b = appendStringMember(b, "detail", in.Detail, true)
	return append(b, '}'), true
}

// appendRollback appends a as json.Marshal writes it, or reports !ok.
func appendRollback(b []byte, a *RollbackAction) ([]byte, bool) {
	b = append(b, '{')
	b = appendStringMember(b, "type", a.Type, false)
	b = appendStringMember(b, "target", a.Target, true)
	if a.Payload != nil {
		var ok bool
		if b, ok = canonical.AppendJSON(appendKey(b, "payload"), a.Payload); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}
