package uicontrol

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/internal/uiapwire"
)

// State is a session's lifecycle state (§7).
type State int

// The session states of §7, in lifecycle order.
const (
	StateNew State = iota
	StateInitializing
	StateActive
	StateInterrupted
	StateTerminating
	StateTerminated
)

var stateNames = [...]string{"NEW", "INITIALIZING", "ACTIVE", "INTERRUPTED", "TERMINATING", "TERMINATED"}

// String returns the state's name as the spec writes it ("ACTIVE").
func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return "State(" + strconv.Itoa(int(s)) + ")"
	}
	return stateNames[s]
}

// SessionInfo is what a handshake settled (§8.1).
type SessionInfo struct {
	ID                 string
	Version            string
	Profiles           []string
	Extensions         []SelectedExtension
	CapabilityDelivery Delivery
	// Heartbeat is the negotiated heartbeatMs; 0 means none.
	Heartbeat time.Duration
	// Peer describes the initiator (on the app side; zero on the agent
	// side, since session.initialized does not describe the app).
	Peer PeerInfo
}

// Extension IDs with a second spelling: DESIGN §5 accepts uicp.policy
// (the Policy Extension page's spelling) for uiap.policy.
var extensionAliases = map[string]string{"uicp.policy": "uiap.policy"}

// canonicalExtension returns the ID an extension is known by.
func canonicalExtension(id string) string {
	if c, ok := extensionAliases[id]; ok {
		return c
	}
	return id
}

// selection is what a handshake selected.
type selection struct {
	version    string
	profiles   []string
	extensions []SelectedExtension // as the initiator spelled the IDs
	delivery   Delivery
	heartbeat  time.Duration
}

// extension returns the selected version of extension id (alias-aware).
func (s *selection) extension(id string) (string, bool) {
	if e := s.find(id); e != nil {
		return e.Version, true
	}
	return "", false
}

// extensionID returns how the session spells a selected extension (the
// initiator's spelling: "uicp.policy" for uiap.policy, say).
func (s *selection) extensionID(id string) (string, bool) {
	if e := s.find(id); e != nil {
		return e.ID, true
	}
	return "", false
}

// find returns the selected extension id (alias-aware), or nil.
func (s *selection) find(id string) *SelectedExtension {
	if s == nil {
		return nil
	}
	c := canonicalExtension(id)
	for i := range s.extensions {
		if canonicalExtension(s.extensions[i].ID) == c {
			return &s.extensions[i]
		}
	}
	return nil
}

// unmet checks a message's requires list (§12 rules 3–4) and returns the
// error answering the first entry the session does not fulfil. An entry
// is "name" or "name@version"; a dotted name is an extension ID ("uiap.
// policy"), any other a profile ("web@0.1"): an extension entry is
// fulfilled when the extension is selected (at that version, if given),
// a profile entry when the profile is selected (with any version if none
// is given).
func (s *selection) unmet(requires []string) *Error {
	for _, r := range requires {
		name, ver, _ := strings.Cut(r, "@")
		if strings.Contains(name, ".") {
			if v, ok := s.extension(name); ok && (ver == "" || ver == v) {
				continue
			}
			return newErrorf(CodeUnsupportedExtension, "required extension %q is not selected in this session", r).with("requires", r)
		}
		if s != nil && slices.ContainsFunc(s.profiles, func(p string) bool {
			return p == r || (ver == "" && strings.HasPrefix(p, name+"@"))
		}) {
			continue
		}
		return newErrorf(CodeUnsupportedProfile, "required profile %q is not selected in this session", r).with("requires", r)
	}
	return nil
}

// supportedVersions are the UIAP versions this package speaks.
var supportedVersions = []string{Version}

// compareVersions orders major.minor versions numerically.
func compareVersions(a, b string) int {
	am, an, _ := strings.Cut(a, ".")
	bm, bn, _ := strings.Cut(b, ".")
	ai, _ := strconv.Atoi(am)
	bi, _ := strconv.Atoi(bm)
	if ai != bi {
		return ai - bi
	}
	ai, _ = strconv.Atoi(an)
	bi, _ = strconv.Atoi(bn)
	return ai - bi
}

// highestCommon returns the highest version in both lists.
func highestCommon(offered, supported []string) (string, bool) {
	best := ""
	for _, v := range offered {
		if slices.Contains(supported, v) && (best == "" || compareVersions(v, best) > 0) {
			best = v
		}
	}
	return best, best != ""
}

// negotiate is the receiver's half of §8.1 and §11: it selects exactly
// one version the initiator offered and the receiver supports (the
// highest), the offered profiles the receiver supports, and for each
// offered extension the receiver supports the highest common version;
// it fails when an extension either side requires is not selected, or
// when the message's requires list is not fulfilled.
func negotiate(offer *sessionInitialize, requires, versions, profiles []string, exts []ExtensionOffer) (*selection, *Error) {
	v, ok := highestCommon(offer.SupportedVersions, versions)
	if !ok {
		return nil, newErrorf(CodeUnsupportedVersion, "no common version; supported: %s", strings.Join(versions, ", ")).
			with("supportedVersions", versions)
	}
	sel := &selection{version: v, delivery: offer.CapabilityDelivery}
	if sel.delivery == "" {
		sel.delivery = DeliveryDeferred
	}
	for _, p := range offer.SupportedProfiles {
		if slices.Contains(profiles, p) && !slices.Contains(sel.profiles, p) {
			sel.profiles = append(sel.profiles, p)
		}
	}
	seen := map[string]bool{}
	for _, o := range offer.SupportedExtensions {
		c := canonicalExtension(o.ID)
		if seen[c] {
			return nil, newErrorf(CodeBadRequest, "extension %q offered twice", o.ID).with("extension", o.ID)
		}
		seen[c] = true
		i := slices.IndexFunc(exts, func(e ExtensionOffer) bool { return canonicalExtension(e.ID) == c })
		if i >= 0 {
			if ver, ok := highestCommon(o.Versions, exts[i].Versions); ok {
				sel.extensions = append(sel.extensions, SelectedExtension{ID: o.ID, Version: ver})
				continue
			}
		}
		if o.Required {
			return nil, newErrorf(CodeUnsupportedExtension, "required extension %q is not supported in any offered version", o.ID).
				with("extension", o.ID)
		}
	}
	for _, e := range exts {
		if _, ok := sel.extension(e.ID); e.Required && !ok {
			return nil, newErrorf(CodeUnsupportedExtension, "extension %q is required by the receiver", e.ID).with("extension", e.ID)
		}
	}
	if err := sel.unmet(requires); err != nil {
		return nil, err
	}
	return sel, nil
}

// checkInitialized is the initiator's half of §8.1: the reply must select
// exactly one offered version, only offered profiles, offered extensions
// at offered versions, every extension the initiator requires, and carry
// capabilities exactly when delivery is inline.
func checkInitialized(offer *sessionInitialize, p *sessionInitialized) (*selection, *Error) {
	if !slices.Contains(offer.SupportedVersions, p.SelectedVersion) {
		return nil, newErrorf(CodeUnsupportedVersion, "selected version %q was not offered", p.SelectedVersion)
	}
	for _, pr := range p.SelectedProfiles {
		if !slices.Contains(offer.SupportedProfiles, pr) {
			return nil, newErrorf(CodeUnsupportedProfile, "selected profile %q was not offered", pr)
		}
	}
	sel := &selection{version: p.SelectedVersion, profiles: p.SelectedProfiles, delivery: p.CapabilityDelivery,
		heartbeat: time.Duration(p.HeartbeatMs) * time.Millisecond}
	for _, e := range p.SelectedExtensions {
		i := slices.IndexFunc(offer.SupportedExtensions, func(o ExtensionOffer) bool {
			return canonicalExtension(o.ID) == canonicalExtension(e.ID)
		})
		if i < 0 || !slices.Contains(offer.SupportedExtensions[i].Versions, e.Version) {
			return nil, newErrorf(CodeUnsupportedExtension, "selected extension %s@%s was not offered", e.ID, e.Version)
		}
		if _, dup := sel.extension(e.ID); dup {
			return nil, newErrorf(CodeInvalidMessage, "extension %q selected twice", e.ID)
		}
		sel.extensions = append(sel.extensions, e)
	}
	for _, o := range offer.SupportedExtensions {
		if _, ok := sel.extension(o.ID); o.Required && !ok {
			return nil, newErrorf(CodeUnsupportedExtension, "required extension %q was not selected", o.ID).with("extension", o.ID)
		}
	}
	inline := p.CapabilityDelivery == DeliveryInline
	if !inline && p.Capabilities != nil {
		return nil, newErrorf(CodeInvalidMessage, "capabilities present although capabilityDelivery is %q", p.CapabilityDelivery)
	}
	if inline && p.Capabilities == nil {
		return nil, NewError(CodeInvalidMessage, `capabilityDelivery is "inline" but capabilities are missing`)
	}
	return sel, nil
}

// info returns the SessionInfo of a selection.
func (s *selection) info(id string, peer PeerInfo) SessionInfo {
	return SessionInfo{ID: id, Version: s.version, Profiles: slices.Clone(s.profiles),
		Extensions: slices.Clone(s.extensions), CapabilityDelivery: s.delivery, Heartbeat: s.heartbeat, Peer: peer}
}

// view is what the checks of a received message depend on.
type view struct {
	maxSize int
	// version, sessionID and sel are empty before the handshake.
	version   string
	sessionID string
	sel       *selection
	// fresh records a message ID and reports whether it is new.
	fresh func(id string) bool
}

// admit decodes a received message and applies the checks every message
// passes before it is processed: the envelope rules (§4.1), a fresh ID
// (§3), after the handshake the selected version (§11) and the session's
// ID, and the requires list (§12). It returns the message, or the error
// to answer with what could be read of it. Ext entries of extensions the
// session did not select are dropped (§12 rule 2).
func admit(raw []byte, v view) (*Envelope, *Error) {
	e, err := decodeEnvelope(raw, v.maxSize)
	if e.ID != "" && !v.fresh(e.ID) && err == nil {
		err = newErrorf(CodeInvalidMessage, "message id %q was already used in this session", e.ID).with("field", "id")
	}
	if err != nil {
		return e, err
	}
	if v.version != "" && e.UIAP != v.version {
		return e, newErrorf(CodeUnsupportedVersion, "uiap is %q but the session's selected version is %q", e.UIAP, v.version).
			with("selectedVersion", v.version)
	}
	if v.sessionID != "" && e.SessionID != "" && e.SessionID != v.sessionID {
		return e, newErrorf(CodeUnknownSession, "message names session %q on another session's connection", e.SessionID)
	}
	// Before the handshake nothing is selected: only session.initialize
	// (checked against what it negotiates) and session.resume (against the
	// resumed session) may carry requires.
	if v.sel != nil || (e.Type != uiapwire.TypeInitialize && e.Type != uiapwire.TypeResume) {
		if err := v.sel.unmet(e.Requires); err != nil {
			return e, err
		}
	}
	for id := range e.Ext {
		if _, ok := v.sel.extension(id); !ok {
			delete(e.Ext, id)
		}
	}
	if len(e.Ext) == 0 {
		e.Ext = nil
	}
	return e, nil
}
