package uicontrol

import (
	"encoding/json"
)

// Delivery is how capability information reaches the initiator (§7.2
// rule 4, §8.1).
type Delivery string

// The capability delivery modes of §8.1.
const (
	// DeliveryInline: session.initialized carries the capability
	// document.
	DeliveryInline Delivery = "inline"
	// DeliveryDeferred: the initiator asks with capabilities.get.
	DeliveryDeferred Delivery = "deferred"
	// DeliveryNone: no capability information is pushed; the app sends no
	// capabilities.changed (capabilities.get is still answered).
	DeliveryNone Delivery = "none"
)

func validDelivery(d Delivery) bool {
	return d == DeliveryInline || d == DeliveryDeferred || d == DeliveryNone
}

// PeerInfo describes the initiator (§8.1).
type PeerInfo struct {
	Role     string `json:"role"`
	Name     string `json:"name,omitempty"`
	Version  string `json:"version,omitempty"`
	Locale   string `json:"locale,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	TenantID string `json:"tenantId,omitempty"`
	UserRole string `json:"userRole,omitempty"`
}

// ExtensionOffer offers an extension in session.initialize (§8.1); an
// App's options use it for the extensions it supports, Required meaning
// the app refuses a session that does not select it.
type ExtensionOffer struct {
	ID       string   `json:"id"`
	Versions []string `json:"versions"`
	Required bool     `json:"required,omitempty"`
}

// SelectedExtension is an extension confirmed in session.initialized
// (§8.1).
type SelectedExtension struct {
	ID      string `json:"id"`
	Version string `json:"version"`
}

// sessionInitialize is the payload of session.initialize (§8.1).
type sessionInitialize struct {
	SupportedVersions   []string         `json:"supportedVersions"`
	SupportedProfiles   []string         `json:"supportedProfiles,omitempty"`
	SupportedExtensions []ExtensionOffer `json:"supportedExtensions,omitempty"`
	CapabilityDelivery  Delivery         `json:"capabilityDelivery,omitempty"`
	Peer                PeerInfo         `json:"peer"`
	Metadata            map[string]any   `json:"metadata,omitempty"`
}

// sessionInitialized is the payload of session.initialized (§8.1), plus
// CapabilitiesRevision (ours): the revision of an inline document.
type sessionInitialized struct {
	SessionID            string              `json:"sessionId"`
	SelectedVersion      string              `json:"selectedVersion"`
	SelectedProfiles     []string            `json:"selectedProfiles,omitempty"`
	SelectedExtensions   []SelectedExtension `json:"selectedExtensions,omitempty"`
	CapabilityDelivery   Delivery            `json:"capabilityDelivery"`
	HeartbeatMs          int64               `json:"heartbeatMs,omitempty"`
	ResumeToken          string              `json:"resumeToken,omitempty"`
	Capabilities         *CapabilityDocument `json:"capabilities,omitempty"`
	CapabilitiesRevision string              `json:"capabilitiesRevision,omitempty"`
	Metadata             map[string]any      `json:"metadata,omitempty"`
}

// sessionResume is the payload of session.resume (§8.2), plus LastSeq
// (ours): the highest event seq the initiator processed; events after it
// are replayed.
type sessionResume struct {
	SessionID   string         `json:"sessionId"`
	ResumeToken string         `json:"resumeToken"`
	LastSeq     int64          `json:"lastSeq,omitempty"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

// sessionResumed is the payload of session.resumed (§8.2), plus
// ResumeToken (ours): resume tokens are single-use, so each resume
// issues the next one.
type sessionResumed struct {
	SessionID          string              `json:"sessionId"`
	SelectedVersion    string              `json:"selectedVersion"`
	SelectedProfiles   []string            `json:"selectedProfiles,omitempty"`
	SelectedExtensions []SelectedExtension `json:"selectedExtensions,omitempty"`
	HeartbeatMs        int64               `json:"heartbeatMs,omitempty"`
	ResumeToken        string              `json:"resumeToken,omitempty"`
	Metadata           map[string]any      `json:"metadata,omitempty"`
}

// sessionInterrupt is the payload of session.interrupt (§8.3).
type sessionInterrupt struct {
	Reason   string         `json:"reason,omitempty"`
	By       string         `json:"by,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// sessionInterrupted is the payload of session.interrupted (§8.3).
type sessionInterrupted struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// sessionPing is the payload of session.ping and session.pong (§8.4).
type sessionPing struct {
	Nonce string `json:"nonce,omitempty"`
}

// sessionTerminate is the payload of session.terminate (§8.5).
type sessionTerminate struct {
	Reason   string         `json:"reason,omitempty"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// sessionTerminated is the payload of session.terminated (§8.5).
type sessionTerminated struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// capabilitiesGet is the payload of capabilities.get (§9.1).
type capabilitiesGet struct {
	Include []string `json:"include,omitempty"`
}

// CapabilitiesList is the payload of capabilities.list (§9.1).
type CapabilitiesList struct {
	Revision     string              `json:"revision,omitempty"`
	Capabilities *CapabilityDocument `json:"capabilities"`
}

// CapabilitiesChanged is the payload of capabilities.changed (§9.2): a
// new revision and a full replacement document.
type CapabilitiesChanged struct {
	Revision     string              `json:"revision"`
	Reason       string              `json:"reason,omitempty"`
	Capabilities *CapabilityDocument `json:"capabilities"`
}

// The payload decoders below read a payload object strictly by its
// members' exact names; unknown members are ignored (§4.1 rule 6). Each
// refusal is an invalid_message *Error naming the member.

func versions(f *fields, name string, required bool) []string {
	vs := f.strs(name, required)
	if f.err == nil && required && len(vs) == 0 {
		f.fail(name, "must contain at least one version")
	}
	for _, v := range vs {
		if !validVersion(v) {
			f.fail(name, "must hold versions of the form major.minor")
			break
		}
	}
	return vs
}

func extensionOffers(f *fields) []ExtensionOffer {
	var out []ExtensionOffer
	for _, raw := range f.array("supportedExtensions", false) {
		g := payloadFields(raw, f.path+".supportedExtensions[]")
		o := ExtensionOffer{ID: g.str("id", true)}
		o.Versions = versions(g, "versions", true)
		o.Required = g.boolean("required")
		if g.err != nil {
			f.err = g.err
			return nil
		}
		out = append(out, o)
	}
	return out
}

func selectedExtensions(f *fields) []SelectedExtension {
	var out []SelectedExtension
	for _, raw := range f.array("selectedExtensions", false) {
		g := payloadFields(raw, f.path+".selectedExtensions[]")
		s := SelectedExtension{ID: g.str("id", true), Version: g.str("version", true)}
		if g.err == nil && !validVersion(s.Version) {
			g.fail("version", "must be a version of the form major.minor")
		}
		if g.err != nil {
			f.err = g.err
			return nil
		}
		out = append(out, s)
	}
	return out
}

func delivery(f *fields, required bool) Delivery {
	d := Delivery(f.str("capabilityDelivery", required))
	if d != "" && !validDelivery(d) {
		f.fail("capabilityDelivery", `must be "inline", "deferred" or "none"`)
	}
	return d
}

func heartbeatMs(f *fields) int64 { return f.integer("heartbeatMs") }

func decodeInitialize(raw json.RawMessage) (*sessionInitialize, *Error) {
	f := payloadFields(raw, "payload")
	p := &sessionInitialize{SupportedVersions: versions(f, "supportedVersions", true)}
	p.SupportedProfiles = f.strs("supportedProfiles", false)
	p.SupportedExtensions = extensionOffers(f)
	p.CapabilityDelivery = delivery(f, false)
	if g := f.sub("peer", true); g != nil {
		p.Peer = PeerInfo{Role: g.str("role", true), Name: g.str("name", false), Version: g.str("version", false),
			Locale: g.str("locale", false), Timezone: g.str("timezone", false), TenantID: g.str("tenantId", false),
			UserRole: g.str("userRole", false)}
		if g.err != nil {
			f.err = g.err
		}
	}
	p.Metadata = f.object("metadata")
	if f.err != nil {
		return nil, f.err
	}
	return p, nil
}

func decodeInitialized(raw json.RawMessage) (*sessionInitialized, *Error) {
	f := payloadFields(raw, "payload")
	p := &sessionInitialized{SessionID: f.str("sessionId", true), SelectedVersion: f.str("selectedVersion", true)}
	if f.err == nil && (!runeLen(p.SessionID, maxIDLength) || !validVersion(p.SelectedVersion)) {
		f.fail("sessionId", "must be 1..128 characters, selectedVersion of the form major.minor")
	}
	p.SelectedProfiles = f.strs("selectedProfiles", false)
	p.SelectedExtensions = selectedExtensions(f)
	p.CapabilityDelivery = delivery(f, true)
	p.HeartbeatMs = heartbeatMs(f)
	p.ResumeToken = f.str("resumeToken", false)
	if raw, ok := f.get("capabilities", false); ok {
		doc, err := decodeCapabilityDocument(raw, len(raw))
		if err != nil {
			f.fail("capabilities", "must be a capability document")
		}
		p.Capabilities = doc
	}
	p.CapabilitiesRevision = f.str("capabilitiesRevision", false)
	p.Metadata = f.object("metadata")
	if f.err != nil {
		return nil, f.err
	}
	return p, nil
}

func decodeResume(raw json.RawMessage) (*sessionResume, *Error) {
	f := payloadFields(raw, "payload")
	p := &sessionResume{SessionID: f.str("sessionId", true), ResumeToken: f.str("resumeToken", true),
		LastSeq: f.integer("lastSeq"), Metadata: f.object("metadata")}
	if f.err != nil {
		return nil, f.err
	}
	return p, nil
}

func decodeResumed(raw json.RawMessage) (*sessionResumed, *Error) {
	f := payloadFields(raw, "payload")
	p := &sessionResumed{SessionID: f.str("sessionId", true), SelectedVersion: f.str("selectedVersion", true)}
	p.SelectedProfiles = f.strs("selectedProfiles", false)
	p.SelectedExtensions = selectedExtensions(f)
	p.HeartbeatMs = heartbeatMs(f)
	p.ResumeToken = f.str("resumeToken", false)
	p.Metadata = f.object("metadata")
	if f.err != nil {
		return nil, f.err
	}
	return p, nil
}

func decodeInterrupt(raw json.RawMessage) (*sessionInterrupt, *Error) {
	f := payloadFields(raw, "payload")
	p := &sessionInterrupt{Reason: f.str("reason", false), By: f.str("by", false), Metadata: f.object("metadata")}
	if f.err != nil {
		return nil, f.err
	}
	return p, nil
}

func decodePing(raw json.RawMessage) (*sessionPing, *Error) {
	f := payloadFields(raw, "payload")
	p := &sessionPing{Nonce: f.str("nonce", false)}
	if f.err != nil {
		return nil, f.err
	}
	return p, nil
}

func decodeTerminate(raw json.RawMessage) (*sessionTerminate, *Error) {
	f := payloadFields(raw, "payload")
	p := &sessionTerminate{Reason: f.str("reason", false), Metadata: f.object("metadata")}
	if f.err != nil {
		return nil, f.err
	}
	return p, nil
}

// decodeStatus reads the payload of session.interrupted or
// session.terminated, whose status must be want.
func decodeStatus(raw json.RawMessage, want string) (status, reason string, err *Error) {
	f := payloadFields(raw, "payload")
	status, reason = f.str("status", true), f.str("reason", false)
	if f.err == nil && status != want {
		f.fail("status", "must be \""+want+"\"")
	}
	if f.err != nil {
		return "", "", f.err
	}
	return status, reason, nil
}

func decodeCapabilitiesGet(raw json.RawMessage) (*capabilitiesGet, *Error) {
	f := payloadFields(raw, "payload")
	p := &capabilitiesGet{}
	if raw, ok := f.get("include", false); ok {
		// An explicit empty list asks for no section (unlike an absent one).
		p.Include = f.strs("include", false)
		if p.Include == nil && f.err == nil && raw[0] == '[' {
			p.Include = []string{}
		}
	}
	if f.err != nil {
		return nil, f.err
	}
	return p, nil
}

func decodeCapabilitiesPayload(raw json.RawMessage, revisionRequired bool) (rev, reason string, doc *CapabilityDocument, err *Error) {
	f := payloadFields(raw, "payload")
	rev, reason = f.str("revision", revisionRequired), f.str("reason", false)
	if raw, ok := f.get("capabilities", true); ok {
		var derr *Error
		if doc, derr = decodeCapabilityDocument(raw, len(raw)); derr != nil {
			f.fail("capabilities", "must be a capability document")
		}
	}
	if f.err != nil {
		return "", "", nil, f.err
	}
	return rev, reason, doc, nil
}

// decodeErrorPayload reads a UIAPErrorPayload (§10).
func decodeErrorPayload(raw json.RawMessage) (*Error, *Error) {
	f := payloadFields(raw, "payload")
	e := &Error{Code: Code(f.str("code", true))}
	if r, ok := f.get("message", true); ok {
		if s, ok := readString(r); ok {
			e.Message = s
		} else {
			f.fail("message", "must be a string")
		}
	}
	e.Retryable = f.boolean("retryable")
	e.FailedType = f.str("failedType", false)
	e.Details = f.object("details")
	if f.err != nil {
		return nil, f.err
	}
	return e, nil
}
