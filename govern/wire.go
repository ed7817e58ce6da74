package govern

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"slices"
	"time"

	"github.com/gowebpki/jcs"
)

// Version is the UAICP version envelopes declare.
const Version = "0.3"

// TimeFormat is how the wire objects' date-times are written: RFC 3339 in
// UTC with milliseconds.
const TimeFormat = "2006-01-02T15:04:05.000Z07:00"

// Envelope is the UAICP message envelope (message-envelope.schema.json).
// The schema is closed: decoding rejects unknown members.
type Envelope struct {
	UAICPVersion  string          `json:"uaicp_version"`
	RequestID     string          `json:"request_id"`
	TraceID       string          `json:"trace_id"`
	ParentTraceID string          `json:"parent_trace_id,omitempty"`
	State         Phase           `json:"state"`
	Timestamp     Time            `json:"timestamp"`
	Identity      Identity        `json:"identity"`
	Outcome       Outcome         `json:"outcome"`
	Streaming     *Streaming      `json:"streaming,omitempty"`
	Rollback      *RollbackAction `json:"rollback_action,omitempty"`
	Metadata      map[string]any  `json:"metadata,omitempty"`
}

// Outcome is an envelope's outcome.
type Outcome string

// The outcomes of the envelope schema.
const (
	Success   Outcome = "success"
	Failure   Outcome = "failure"
	Uncertain Outcome = "uncertain"
	Pending   Outcome = "pending"
)

// ControlClass says how much a human controls the agent.
type ControlClass string

// The control classes of the envelope schema.
const (
	Autonomous      ControlClass = "autonomous"
	HumanSupervised ControlClass = "human-supervised"
	HumanDirected   ControlClass = "human-directed"
)

// valid reports whether c is one of the three control classes.
func (c ControlClass) valid() bool {
	return c == Autonomous || c == HumanSupervised || c == HumanDirected
}

// Identity is the envelope's identity block.
type Identity struct {
	AgentID      string       `json:"agent_id"`
	OwnerID      string       `json:"owner_id"`
	UserID       string       `json:"user_id,omitempty"`
	ControlClass ControlClass `json:"control_class"`
	// Extra holds further (namespaced) members; the schema allows them.
	Extra map[string]any `json:"-"`
}

// Validate checks what the schema requires of an identity.
func (id Identity) Validate() error {
	switch {
	case id.AgentID == "":
		return refuse("identity.agent_id is empty", IdentityInvalid)
	case id.OwnerID == "":
		return refuse("identity.owner_id is empty", IdentityInvalid)
	case !id.ControlClass.valid():
		return refuse(fmt.Sprintf("identity.control_class %q is not autonomous, human-supervised or human-directed", id.ControlClass), IdentityInvalid)
	}
	return nil
}

// MarshalJSON writes the known members and Extra.
func (id Identity) MarshalJSON() ([]byte, error) {
	type plain Identity
	return marshalWithExtra(plain(id), id.Extra, identityMembers...)
}

// UnmarshalJSON reads the known members; the others go to Extra.
func (id *Identity) UnmarshalJSON(b []byte) error {
	type plain Identity
	var p plain
	extra, err := unmarshalWithExtra(b, &p, identityMembers...)
	if err != nil {
		return err
	}
	*id = Identity(p)
	id.Extra = extra
	return nil
}

// Streaming is the envelope's streaming block (§4.2).
type Streaming struct {
	ChunkID     string `json:"chunk_id"`
	IsFinal     bool   `json:"is_final"`
	StreamIndex int    `json:"stream_index"`
}

// RollbackAction inverts a write (§5.3): Type names the handler that
// executes it (Options.Rollbacks), Target what it acts on, Payload its
// input (an object or a string).
type RollbackAction struct {
	Type    string `json:"type"`
	Target  string `json:"target,omitempty"`
	Payload any    `json:"payload,omitempty"`
}

// Hash returns "sha256:" + hex of the JCS form of the action.
func (r *RollbackAction) Hash() (string, error) {
	if r == nil {
		return "", nil
	}
	if b, ok := appendRollback(make([]byte, 0, 128), r); ok {
		return PayloadHash(b)
	}
	return hashJSON(r)
}

// EvidenceType is an evidence object's type.
type EvidenceType string

// The evidence types of the evidence schema.
const (
	ToolResult     EvidenceType = "tool_result"
	SourceCitation EvidenceType = "source_citation"
	TestReport     EvidenceType = "test_report"
	ApprovalToken  EvidenceType = "approval_token"
	CustomEvidence EvidenceType = "custom"
)

// valid reports whether t is one of the schema's evidence types.
func (t EvidenceType) Valid() bool {
	switch t {
	case ToolResult, SourceCitation, TestReport, ApprovalToken, CustomEvidence:
		return true
	}
	return false
}

// Evidence is a UAICP evidence object (evidence-object.schema.json).
type Evidence struct {
	EvidenceID    string          `json:"evidence_id"`
	EvidenceType  EvidenceType    `json:"evidence_type"`
	Source        string          `json:"source"`
	RequestID     string          `json:"request_id,omitempty"`
	TraceID       string          `json:"trace_id,omitempty"`
	ParentTraceID string          `json:"parent_trace_id,omitempty"`
	Actor         string          `json:"actor,omitempty"`
	Hash          string          `json:"hash"`
	CollectedAt   Time            `json:"collected_at"`
	Payload       json.RawMessage `json:"payload,omitempty"`
	// Extra holds further (namespaced) members; the schema allows them.
	Extra map[string]any `json:"-"`
}

// MarshalJSON writes the known members and Extra.
func (e Evidence) MarshalJSON() ([]byte, error) {
	type plain Evidence
	return marshalWithExtra(plain(e), e.Extra, evidenceMembers...)
}

// UnmarshalJSON reads the known members; the others go to Extra.
func (e *Evidence) UnmarshalJSON(b []byte) error {
	type plain Evidence
	var p plain
	extra, err := unmarshalWithExtra(b, &p, evidenceMembers...)
	if err != nil {
		return err
	}
	*e = Evidence(p)
	e.Extra = extra
	return nil
}

// CheckHash reports whether Hash is the hash of Payload.
func (e *Evidence) CheckHash() bool {
	h, err := PayloadHash(e.Payload)
	return err == nil && h == e.Hash
}

// Clone returns a deep copy.
func (e Evidence) Clone() Evidence {
	e.Payload = bytes.Clone(e.Payload)
	e.Extra = cloneJSONMap(e.Extra)
	return e
}

// ReportStatus is a verification report's status.
type ReportStatus string

// The statuses of the verification-report schema.
const (
	ReportPass    ReportStatus = "pass"
	ReportFail    ReportStatus = "fail"
	ReportPartial ReportStatus = "partial"
)

// CheckResult is one check's result.
type CheckResult string

// The check results of the verification-report schema.
const (
	CheckPass CheckResult = "pass"
	CheckFail CheckResult = "fail"
	CheckSkip CheckResult = "skip"
)

// Report is a UAICP verification report (verification-report.schema.json).
type Report struct {
	ReportID    string       `json:"report_id"`
	RequestID   string       `json:"request_id"`
	VerifierID  string       `json:"verifier_id,omitempty"`
	EvidenceIDs []string     `json:"evidence_ids,omitempty"`
	Status      ReportStatus `json:"status"`
	Checks      []Check      `json:"checks"`
	GeneratedAt Time         `json:"generated_at"`
	// Extra holds further (namespaced) members; the schema allows them.
	Extra map[string]any `json:"-"`
}

// Check is one check of a report.
type Check struct {
	CheckID string      `json:"check_id"`
	Result  CheckResult `json:"result"`
	Details string      `json:"details,omitempty"`
}

// Passed reports whether the report counts as a pass: status pass and no
// check failed. A "pass" report with a failing check is a fail; "partial"
// is not a pass.
func (r *Report) Passed() bool {
	if r.Status != ReportPass || len(r.Checks) == 0 {
		return false
	}
	for _, c := range r.Checks {
		if c.Result == CheckFail {
			return false
		}
		if c.Result != CheckPass && c.Result != CheckSkip {
			return false
		}
	}
	return true
}

// MarshalJSON writes the known members and Extra; a nil Checks is written
// as [] (the member is required).
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report
	if r.Checks == nil {
		r.Checks = []Check{}
	}
	return marshalWithExtra(plain(r), r.Extra, reportMembers...)
}

// UnmarshalJSON reads the known members; the others go to Extra.
func (r *Report) UnmarshalJSON(b []byte) error {
	type plain Report
	var p plain
	extra, err := unmarshalWithExtra(b, &p, reportMembers...)
	if err != nil {
		return err
	}
	*r = Report(p)
	r.Extra = extra
	return nil
}

// The member names of the wire objects with an Extra.
var (
	identityMembers = []string{"agent_id", "owner_id", "user_id", "control_class"}
	evidenceMembers = []string{"evidence_id", "evidence_type", "source", "request_id", "trace_id",
		"parent_trace_id", "actor", "hash", "collected_at", "payload"}
	reportMembers = []string{"report_id", "request_id", "verifier_id", "evidence_ids", "status", "checks", "generated_at"}
)

// Time is a wire date-time: written as RFC 3339 UTC with milliseconds,
// read from any RFC 3339 date-time.
type Time struct{ time.Time }

// MarshalJSON writes TimeFormat.
func (t Time) MarshalJSON() ([]byte, error) {
	return json.Marshal(t.UTC().Format(TimeFormat))
}

// UnmarshalJSON reads an RFC 3339 date-time (as parseDateTime: strictly,
// "T" and "Z" in either case), in UTC.
func (t *Time) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New("govern: date-time must be a string")
	}
	v, err := parseDateTime(s)
	if err != nil {
		return fmt.Errorf("govern: %w", err)
	}
	t.Time = v
	return nil
}

// PayloadHash returns the evidence hash of a JSON payload (DESIGN §5):
// "sha256:" + lowercase hex of the SHA-256 of its RFC 8785 (JCS) form. An
// empty payload hashes as null.
func PayloadHash(payload json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(payload)) == 0 {
		payload = json.RawMessage("null")
	}
	if err := checkExactIntegers(payload); err != nil {
		return "", fmt.Errorf("govern: payload is not canonicalizable JSON: %w", err)
	}
	if h, ok := canonicalPayloadHash(payload); ok {
		return h, nil
	}
	return payloadHashJCS(payload)
}

// payloadHashJCS is PayloadHash's general path, after its checks: the
// reference for canonicalPayloadHash (FuzzPayloadHash), and the one that
// reports what is not canonicalizable.
func payloadHashJCS(payload []byte) (string, error) {
	c, err := jcs.Transform(payload)
	if err != nil {
		return "", fmt.Errorf("govern: payload is not canonicalizable JSON: %w", err)
	}
	return hashString(sha256.Sum256(c)), nil
}

// hashJSON returns PayloadHash of v's JSON encoding.
func hashJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("govern: %w", err)
	}
	return PayloadHash(b)
}

// marshalWithExtra writes v (a struct whose JSON member names are known)
// with extra's members appended in sorted order; an extra named like a
// known member is dropped (the struct's member wins).
func marshalWithExtra(v any, extra map[string]any, known ...string) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || len(extra) == 0 {
		return b, err
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		if !slices.Contains(known, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	out := b[:len(b)-1] // drop the closing brace
	for _, k := range keys {
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		xb, err := json.Marshal(extra[k])
		if err != nil {
			return nil, err
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(append(append(out, kb...), ':'), xb...)
	}
	return append(out, '}'), nil
}

// unmarshalWithExtra decodes b into v (a pointer to a struct) and returns
// the members not named in known.
func unmarshalWithExtra(b []byte, v any, known ...string) (map[string]any, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	// Decode v from its own members only: encoding/json matches names
	// case-insensitively, so "HASH" would otherwise set Hash and stay in
	// the extras as well.
	own := make(map[string]json.RawMessage, len(known))
	for _, k := range known {
		if raw, ok := m[k]; ok {
			own[k] = raw
			delete(m, k)
		}
	}
	ob, err := json.Marshal(own)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(ob, v); err != nil {
		return nil, err
	}
	if len(m) == 0 {
		return nil, nil
	}
	extra := make(map[string]any, len(m))
	for k, raw := range m {
		var x any
		if err := json.Unmarshal(raw, &x); err != nil {
			return nil, err
		}
		extra[k] = x
	}
	return extra, nil
}

func cloneJSONMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneJSONValue(v)
	}
	return out
}

// cloneJSONValue deep-copies the maps and slices of a JSON-shaped value;
// other values are copied through their JSON form, or kept as they are
// when they have none.
func cloneJSONValue(v any) any {
	switch x := v.(type) {
	case nil, string, bool, float64, int, int64, json.Number:
		return x
	case map[string]any:
		return cloneJSONMap(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneJSONValue(e)
		}
		return out
	case []string:
		return slices.Clone(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}

// checkExactIntegers refuses integer literals (no fraction, no exponent)
// that an IEEE-754 double cannot hold exactly: RFC 8785 reads every number
// as a double, so 9007199254740993 and 9007199254740992 would hash alike
// and a payload's hash would no longer pin its content. Numbers written
// with a fraction or an exponent are taken as the doubles they denote.
// The scan is linear and allocation-free for ordinary payloads.
func checkExactIntegers(b []byte) error {
	inString, escaped := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		if c == '"' {
			inString = true
			continue
		}
		if c != '-' && (c < '0' || c > '9') {
			continue
		}
		j := i
		if b[j] == '-' {
			j++
		}
		start := j
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		integer := j == len(b) || (b[j] != '.' && b[j] != 'e' && b[j] != 'E')
		for j < len(b) && (b[j] == '.' || b[j] == 'e' || b[j] == 'E' || b[j] == '+' || b[j] == '-' || (b[j] >= '0' && b[j] <= '9')) {
			j++
		}
		if integer && j-start > 15 {
			lit := string(b[i:j])
			if !exactInteger(lit) {
				return fmt.Errorf("integer %s cannot be represented exactly as an IEEE-754 double (RFC 8785 would round it); send it as a string", lit)
			}
		}
		i = j - 1
	}
	return nil
}

// exactInteger reports whether the decimal integer lit survives a round
// trip through float64.
func exactInteger(lit string) bool {
	n, ok := new(big.Int).SetString(lit, 10)
	if !ok {
		return true // not a number; the JSON parser reports it
	}
	f, acc := new(big.Float).SetInt(n).Float64()
	return acc == big.Exact && !math.IsInf(f, 0)
}
