package govern

import (
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/agentry-dev/agentry/internal/canonical"
)

// The canonical form of the Data the governor writes, written with it.
//
// Sealing a record canonicalizes its Data: appendCanonicalRecord parses
// the JSON text back and writes it in RFC 8785 form, most of the cost of
// sealing a tool call's records. But for the Data the governor writes
// itself — a call's intent and outcome — it knows the values, and
// appendCanonicalData writes their canonical form directly: the members
// sorted, strings and numbers as RFC 8785 writes them, raw JSON (the
// arguments, a payload) through the parser. appendData hands it to the
// journal's Seal through ownCanon, keyed by the address of the Data it
// was written for; anything else (a record read back, another journal's
// record, Data replaced since) is parsed as before.
// TestCanonicalDataMatchesJCS, FuzzMarshalData and TestOwnCanonSealsAsJCS
// pin it to jcs.Transform(marshalData(data)).

// ownCanon holds the canonical forms of the Data appendData is appending
// now, by the address of the Data's first byte: as many as appends are
// under way (a short list, scanned; no allocation).
var ownCanon struct {
	mu   sync.Mutex
	held []ownCanonical
	n    atomic.Int32 // len(held), read without mu: records sealed with none held (Open's) take no lock
}

// ownCanonical is an entry of ownCanon: the canonical form of the n bytes
// of Data at key.
type ownCanonical struct {
	key   *byte
	n     int
	canon []byte
}

// holdOwnCanon writes the canonical form of data, whose Data is raw, and
// records it in ownCanon until released.
func holdOwnCanon(raw []byte, data any) (heldCanon, bool) {
	if len(raw) == 0 {
		return heldCanon{}, false
	}
	buf := canonBufs.Get().(*[]byte)
	canon, ok := appendCanonicalData((*buf)[:0], data)
	*buf = canon[:0]
	if !ok {
		canonBufs.Put(buf)
		return heldCanon{}, false
	}
	key := &raw[0]
	ownCanon.mu.Lock()
	ownCanon.held = append(ownCanon.held, ownCanonical{key: key, n: len(raw), canon: canon})
	ownCanon.n.Store(int32(len(ownCanon.held)))
	ownCanon.mu.Unlock()
	return heldCanon{key: key, buf: buf}, true
}

// heldCanon is an entry of ownCanon, and the buffer holding it.
type heldCanon struct {
	key *byte
	buf *[]byte
}

// release drops the entry and recycles its buffer.
func (h heldCanon) release() {
	ownCanon.mu.Lock()
	held := ownCanon.held
	for i := range held {
		if held[i].key == h.key {
			last := len(held) - 1
			held[i] = held[last]
			held[last] = ownCanonical{}
			ownCanon.held = held[:last]
			ownCanon.n.Store(int32(last))
			break
		}
	}
	ownCanon.mu.Unlock()
	canonBufs.Put(h.buf)
}

// lookupOwnCanon returns the canonical form appendData recorded for data,
// if it is appending it now.
func lookupOwnCanon(data []byte) ([]byte, bool) {
	if len(data) == 0 || ownCanon.n.Load() == 0 {
		return nil, false
	}
	key := &data[0]
	ownCanon.mu.Lock()
	defer ownCanon.mu.Unlock()
	for _, c := range ownCanon.held {
		if c.key == key {
			return c.canon, c.n == len(data)
		}
	}
	return nil, false
}

// appendCanonicalData appends the RFC 8785 form of the JSON marshalData
// writes for data, or reports !ok (data of another type, or a value it
// leaves to the general path).
func appendCanonicalData(b []byte, data any) ([]byte, bool) {
	switch d := data.(type) {
	case CallOutcome:
		return appendCanonicalCallOutcome(b, &d)
	case CallIntent:
		return appendCanonicalCallIntent(b, &d)
	}
	return b, false
}

// canonString appends a string member; with omitEmpty, not when v is
// empty.
func canonString[S ~string](b []byte, key string, v S, omitEmpty bool) []byte {
	if omitEmpty && v == "" {
		return b
	}
	return canonical.AppendString(appendKey(b, key), v)
}

// canonInt appends an integer member, or reports !ok beyond ±2^53 (which
// RFC 8785 writes as a float).
func canonInt(b []byte, key string, n int64) ([]byte, bool) {
	if n > maxExactInteger || n < -maxExactInteger {
		return b, false
	}
	return strconv.AppendInt(appendKey(b, key), n, 10), true
}

// canonRaw appends the canonical form of the JSON text raw as a member
// (omitted when raw is empty, as omitempty does).
func canonRaw(b []byte, key string, raw []byte) ([]byte, bool) {
	if len(raw) == 0 {
		return b, true
	}
	return appendCanonicalJSON(appendKey(b, key), raw)
}

// canonValue appends the canonical form of v, which marshalData wrote
// with canonical.AppendJSON.
func canonValue(b []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case string:
		return canonical.AppendString(b, v), true
	case bool:
		return strconv.AppendBool(b, v), true
	case nil:
		return append(b, "null"...), true
	}
	buf := canonBufs.Get().(*[]byte)
	defer canonBufs.Put(buf)
	raw, ok := canonical.AppendJSON((*buf)[:0], v)
	*buf = raw[:0]
	if !ok {
		return b, false
	}
	return appendCanonicalJSON(b, raw)
}

// appendCanonicalCallOutcome appends the canonical form of appendCallOutcome's.
func appendCanonicalCallOutcome(b []byte, o *CallOutcome) ([]byte, bool) {
	b = append(b, '{')
	b = canonString(b, "args_hash", o.ArgsHash, true)
	b, ok := canonInt(b, "duration_ms", o.DurationMS)
	if !ok {
		return b, false
	}
	b = canonString(b, "error", o.Error, true)
	if b, ok = appendEvidenceMember(b, o.Evidence, appendCanonicalEvidence); !ok {
		return b, false
	}
	b = canonString(b, "result_hash", o.ResultHash, true)
	return append(b, '}'), true
}

// evidenceCanonOrder is evidenceMembers in RFC 8785 order (bytewise, for
// these ASCII names); TestCanonicalDataMatchesJCS checks it.
var evidenceCanonOrder = [...]string{"actor", "collected_at", "evidence_id", "evidence_type", "hash",
	"parent_trace_id", "payload", "request_id", "source", "trace_id"}

// appendCanonicalEvidence appends the canonical form of appendEvidence's:
// its members and Extra's others, merged in order.
func appendCanonicalEvidence(b []byte, e *Evidence) ([]byte, bool) {
	var small [8]string
	extra := small[:0]
	for k := range e.Extra {
		if slices.Contains(evidenceMembers, k) {
			continue
		}
		for i := 0; i < len(k); i++ {
			if k[i] >= 0x80 {
				return b, false // UTF-16 order is not byte order
			}
		}
		extra = append(extra, k)
	}
	slices.Sort(extra)
	b = append(b, '{')
	var ok bool
	for _, name := range evidenceCanonOrder {
		for len(extra) > 0 && extra[0] < name {
			if b, ok = appendCanonicalExtra(b, extra[0], e.Extra[extra[0]]); !ok {
				return b, false
			}
			extra = extra[1:]
		}
		switch name {
		case "actor":
			b = canonString(b, name, e.Actor, true)
		case "collected_at":
			b = appendTime(appendKey(b, name), e.CollectedAt)
		case "evidence_id":
			b = canonString(b, name, e.EvidenceID, false)
		case "evidence_type":
			b = canonString(b, name, e.EvidenceType, false)
		case "hash":
			b = canonString(b, name, e.Hash, false)
		case "parent_trace_id":
			b = canonString(b, name, e.ParentTraceID, true)
		case "payload":
			if b, ok = canonRaw(b, name, e.Payload); !ok {
				return b, false
			}
		case "request_id":
			b = canonString(b, name, e.RequestID, true)
		case "source":
			b = canonString(b, name, e.Source, false)
		case "trace_id":
			b = canonString(b, name, e.TraceID, true)
		}
	}
	for _, k := range extra {
		if b, ok = appendCanonicalExtra(b, k, e.Extra[k]); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// appendCanonicalExtra appends the extra member k: v.
func appendCanonicalExtra(b []byte, k string, v any) ([]byte, bool) {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(canonical.AppendString(b, k), ':')
	return canonValue(b, v)
}

// appendCanonicalCallIntent appends the canonical form of appendCallIntent's.
func appendCanonicalCallIntent(b []byte, in *CallIntent) ([]byte, bool) {
	if !in.Tier.Valid() {
		return b, false
	}
	b = append(b, '{')
	b = canonString(b, "approval_id", in.ApprovalID, true)
	b = canonString(b, "approver", in.Approver, true)
	b, ok := canonRaw(b, "args", in.Args)
	if !ok {
		return b, false
	}
	b = canonString(b, "args_hash", in.ArgsHash, false)
	if b, ok = canonInt(b, "attempt", int64(in.Attempt)); !ok {
		return b, false
	}
	b = canonString(b, "declared_tier", in.DeclaredTier, false)
	b = canonString(b, "detail", in.Detail, true)
	b = canonString(b, "jti", in.TokenID, true)
	if d := in.Policy; d != nil {
		b = append(appendKey(b, "policy"), '{')
		b = canonString(b, "effect", d.Effect, false)
		if len(d.Reasons) > 0 {
			b = append(appendKey(b, "reasons"), '[')
			for i, r := range d.Reasons {
				if i > 0 {
					b = append(b, ',')
				}
				b = canonical.AppendString(b, r)
			}
			b = append(b, ']')
		}
		b = canonString(b, "rule", d.Rule, true)
		b = append(b, '}')
	}
	if a := in.Rollback; a != nil {
		b = append(appendKey(b, "rollback_action"), '{')
		if a.Payload != nil {
			if b, ok = canonValue(appendKey(b, "payload"), a.Payload); !ok {
				return b, false
			}
		}
		b = canonString(b, "target", a.Target, true)
		b = canonString(b, "type", a.Type, false)
		b = append(b, '}')
	}
	b = canonString(b, "rollback_hash", in.RollbackHash, true)
	b = canonString(b, "tier", in.Tier.String(), false)
	return append(b, '}'), true
}
