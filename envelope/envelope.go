package envelope

import (
	"encoding/json"
	"slices"
	"time"
)

// Intent is an envelope's intent (§4.1).
type Intent string

// The canonical intent vocabulary of §4.1.
const (
	IntentAsk       Intent = "ask"
	IntentInform    Intent = "inform"
	IntentPropose   Intent = "propose"
	IntentConfirm   Intent = "confirm"
	IntentDeny      Intent = "deny"
	IntentProgress  Intent = "progress"
	IntentCancel    Intent = "cancel"
	IntentSubscribe Intent = "subscribe"
	IntentNotify    Intent = "notify"
	IntentError     Intent = "error"
)

// allIntents lists the intents of §4.1 in the spec's order.
var allIntents = []Intent{IntentAsk, IntentInform, IntentPropose, IntentConfirm, IntentDeny, IntentProgress, IntentCancel,
	IntentSubscribe, IntentNotify, IntentError}

// Valid reports whether i is one of the intents of §4.1.
func (i Intent) Valid() bool { return slices.Contains(allIntents, i) }

// defaultDeltaWindow is the delta_window of an envelope that has none
// (§4, A.1 "default": 64).
const defaultDeltaWindow = 64

// Envelope is a UAMP envelope (§4, schema A.1), with the spec's member
// names. The schema is closed: decoding refuses other top-level members.
//
// An optional member is absent when its field is the zero value; Context
// and Ext distinguish absent (nil) from empty, so that every decoded
// envelope encodes back to the same canonical form (Decode refuses the
// one ambiguity left, an optional string member that is present but
// empty).
type Envelope struct {
	// ID is a UUID, bare or as "urn:uuid:…"; NewID writes the URN form.
	ID string `json:"id"`
	// TS is the RFC 3339 date-time the envelope was written, as sent;
	// Time parses it.
	TS     string   `json:"ts"`
	From   string   `json:"from"`
	To     []string `json:"to"`
	Intent Intent   `json:"intent"`
	// ReplyTo is the id of the envelope this one answers.
	ReplyTo  string       `json:"reply_to,omitempty"`
	Context  []ContextRef `json:"context,omitempty"`
	StreamID string       `json:"stream_id,omitempty"`
	// DeltaWindow is the maximum of un-ACKed deltas (§5); 0 means absent,
	// that is 64 (Window).
	DeltaWindow int  `json:"delta_window,omitempty"`
	Body        Body `json:"body"`
	// CapToken is a capability token, a JWT (§6.2, CapTokenPolicy).
	CapToken string `json:"cap_token,omitempty"`
	// Sig is the detached JWS over the canonical form (§6.3, Sign).
	Sig string         `json:"sig,omitempty"`
	Ext map[string]any `json:"ext,omitempty"`
}

// ContextRef is one element of an envelope's context: the id and hash of
// an earlier message. The schema leaves the object open; Extra holds the
// other members.
type ContextRef struct {
	ID    string         `json:"id"`
	Hash  string         `json:"hash"`
	Extra map[string]any `json:"-"`
}

// Body is an envelope's body. The schema leaves it open; Extra holds the
// other members.
type Body struct {
	Type    string `json:"type"`
	Content string `json:"content"`
	// Encoding is absent or, by default, "utf-8".
	Encoding string `json:"encoding,omitempty"`
	// Compression is absent or, by default, "none".
	Compression string         `json:"compression,omitempty"`
	Extra       map[string]any `json:"-"`
}

// New returns an unsigned envelope with a new id (NewID) and the current
// time (Now).
func New(from string, to []string, intent Intent, body Body) *Envelope {
	return &Envelope{ID: newID(), TS: now(), From: from, To: to, Intent: intent, Body: body}
}

// Window returns DeltaWindow, or 64 (the schema's default) when it is absent.
func (e *Envelope) Window() int {
	if e.DeltaWindow <= 0 {
		return defaultDeltaWindow
	}
	return e.DeltaWindow
}

// Time parses TS (ParseTime).
func (e *Envelope) Time() (time.Time, error) { return parseTime(e.TS) }

// Clone returns a deep copy of e.
func (e *Envelope) Clone() *Envelope {
	c := *e
	c.To = slices.Clone(e.To)
	if e.Context != nil {
		c.Context = make([]ContextRef, len(e.Context))
		for i, r := range e.Context {
			r.Extra = cloneMap(r.Extra)
			c.Context[i] = r
		}
	}
	c.Body.Extra = cloneMap(e.Body.Extra)
	c.Ext = cloneMap(e.Ext)
	return &c
}

// MarshalJSON writes the envelope with the spec's member names, in the
// order of §4. Context and Ext are written when non-nil, even empty.
func (e Envelope) MarshalJSON() ([]byte, error) { return e.appendJSON(nil, true) }

// MarshalJSON writes id, hash and Extra.
func (r ContextRef) MarshalJSON() ([]byte, error) { return r.appendJSON(nil) }

// MarshalJSON writes the known members and Extra.
func (b Body) MarshalJSON() ([]byte, error) { return b.appendJSON(nil) }

func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return cloneMap(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneValue(e)
		}
		return out
	}
	return v
}

// Validate checks e as Decode would check its encoding, except that an
// unsigned envelope (Sig empty) passes: it reports the *Error (4.00) a
// peer would answer e with.
func (e *Envelope) Validate() error {
	c := *e
	if c.Sig == "" {
		c.Sig = "unsigned"
	}
	b, err := json.Marshal(c)
	if err != nil {
		return NewError(CodeBadRequest, "envelope cannot be encoded", err)
	}
	_, err = Decode(b)
	return err
}
