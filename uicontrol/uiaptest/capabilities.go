package uiaptest

import (
	"testing/synctest"

	"github.com/agentry-dev/agentry/internal/uiapwire"
	"github.com/agentry-dev/agentry/uicontrol"
)

func capabilityCases() []testCase {
	return []testCase{
		{"UIAP_9_1_GetFullDocument", testGetFull},
		{"UIAP_9_1_IncludeFiltering", testIncludeFiltering},
		{"UIAP_9_2_ChangedNewRevisionFullReplacement", testChanged},
		{"UIAP_9_2_ChangedWireForm", testChangedWire},
		{"UIAP_9_2_NoPushWhenDeliveryNone", testNoPushNone},
	}
}

// §9.1: without include, the full document, unknown members included.
func testGetFull(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(initialize())
	id := p.request(uiapwire.TypeCapabilitiesGet, nil)
	pl := p.response(id, uiapwire.TypeCapabilitiesList)
	if d := jsonEqual(h, rawJSON(sampleCapabilities), pl["capabilities"]); d != "" {
		h.Errorf("capabilities (-want +got):\n%s", d)
	}
	if rev, _ := pl["revision"].(string); rev == "" {
		h.Errorf("no revision: %v", pl)
	}
}

func testIncludeFiltering(h *h) {
	p := h.rawAgent(h.app(nil))
	p.handshake(initialize())
	full := rawJSON(sampleCapabilities).(msg)
	pick := func(names ...string) msg {
		out := msg{}
		for _, n := range names {
			out[n] = full[n]
		}
		return out
	}
	var rev any
	for _, tc := range []struct {
		include []any
		want    msg
	}{
		{[]any{"actions"}, pick("actions")},
		{[]any{"roles", "risk", "signals"}, pick("roles", "risk", "signals")},
		{[]any{"states", "affordances"}, pick("states", "affordances")},
		{[]any{"all"}, full},
		{[]any{"actions", "all"}, full},
		{[]any{}, msg{}},
		{[]any{"nope"}, msg{}},
		{[]any{"x.vendor.extra"}, pick("x.vendor.extra")},
	} {
		id := p.request(uiapwire.TypeCapabilitiesGet, msg{"include": tc.include})
		pl := p.response(id, uiapwire.TypeCapabilitiesList)
		if d := jsonEqual(h, tc.want, pl["capabilities"]); d != "" {
			h.Errorf("include %v (-want +got):\n%s", tc.include, d)
		}
		if rev != nil && pl["revision"] != rev {
			h.Errorf("include %v: revision %v, want the document's %v", tc.include, pl["revision"], rev)
		}
		rev = pl["revision"]
	}
	for _, bad := range []any{"actions", []any{1}, []any{""}, msg{}} {
		id := p.request(uiapwire.TypeCapabilitiesGet, msg{"include": bad})
		p.error(id, uicontrol.CodeInvalidMessage)
	}
}

// §9.2 with the Agent: a change brings a new revision and a document that
// replaces the previous one entirely.
func testChanged(h *h) {
	app := h.app(nil)
	a := h.agent(app, nil)
	first, err := a.GetCapabilities(h.ctx())
	if err != nil {
		h.Fatal(err)
	}
	if c := a.Capabilities(); c == nil || c.Revision != first.Revision {
		h.Fatalf("current after GetCapabilities: %+v", c)
	}
	part, err := a.GetCapabilities(h.ctx(), uicontrol.SectionRisk)
	if err != nil || part.Capabilities.Actions != nil || part.Capabilities.Risk == nil {
		h.Fatalf("include risk: %+v, %v", part, err)
	}
	if a.Capabilities().Capabilities.Actions == nil {
		h.Errorf("a filtered answer replaced the current document")
	}
	changes := make(chan *uicontrol.CapabilitiesChanged, 4)
	go func() {
		for c, err := range a.Changes(h.ctx()) {
			if err != nil {
				break
			}
			changes <- c
		}
		close(changes)
	}()
	synctest.Wait()
	next := `{"actions":[{"id":"checkout.pay"}],"signals":[]}`
	rev, err := app.SetCapabilities(h.ctx(), mustDoc(h, next), "role_change")
	if err != nil {
		h.Fatal(err)
	}
	c := <-changes
	if c.Revision != rev || c.Revision == first.Revision || c.Reason != "role_change" {
		h.Errorf("change: revision %q (app %q, before %q), reason %q", c.Revision, rev, first.Revision, c.Reason)
	}
	if d := jsonEqual(h, rawJSON(next), c.Capabilities); d != "" {
		h.Errorf("document after the change (-want +got):\n%s", d)
	}
	if cur := a.Capabilities(); cur.Capabilities.Risk != nil || cur.Capabilities.Extra != nil {
		h.Errorf("the previous document was merged, not replaced: %+v", cur.Capabilities)
	}
	// The same document again is no change.
	if again, _ := app.SetCapabilities(h.ctx(), mustDoc(h, next), "app_update"); again != rev {
		h.Errorf("same document, new revision %q", again)
	}
	synctest.Wait()
	select {
	case c := <-changes:
		h.Errorf("change without a new document: %+v", c)
	default:
	}
	if err := a.Terminate(h.ctx(), "normal"); err != nil {
		h.Fatal(err)
	}
	if _, open := <-changes; open {
		h.Errorf("Changes did not end with the session")
	}
}

// The wire form of capabilities.changed: an event with seq, revision and
// the full document.
func testChangedWire(h *h) {
	app := h.app(nil)
	p := h.rawAgent(app)
	p.handshake(initialize())
	id := p.request(uiapwire.TypeCapabilitiesGet, nil)
	rev0 := p.response(id, uiapwire.TypeCapabilitiesList)["revision"]
	next := `{"roles":[],"x.other":1}`
	if _, err := app.SetCapabilities(h.ctx(), mustDoc(h, next), "configuration"); err != nil {
		h.Fatal(err)
	}
	m := p.next()
	if m["kind"] != "event" || m["type"] != uiapwire.TypeCapabilitiesChanged || m["seq"] != 1.0 {
		h.Fatalf("changed = %v", m)
	}
	if _, has := m["correlationId"]; has {
		h.Errorf("an event with a correlationId")
	}
	pl := m["payload"].(msg)
	if pl["revision"] == rev0 || pl["revision"] == "" || pl["reason"] != "configuration" {
		h.Errorf("payload = %v", pl)
	}
	if d := jsonEqual(h, rawJSON(next), pl["capabilities"]); d != "" {
		h.Errorf("capabilities (-want +got):\n%s", d)
	}
	id = p.request(uiapwire.TypeCapabilitiesGet, nil)
	if got := p.response(id, uiapwire.TypeCapabilitiesList); got["revision"] != pl["revision"] {
		h.Errorf("capabilities.list revision %v, changed said %v", got["revision"], pl["revision"])
	}
}

func testNoPushNone(h *h) {
	app := h.app(nil)
	p := h.rawAgent(app)
	init := initialize()
	init["capabilityDelivery"] = "none"
	p.handshake(init)
	if _, err := app.SetCapabilities(h.ctx(), mustDoc(h, `{"roles":[]}`), ""); err != nil {
		h.Fatal(err)
	}
	p.silence()
	// Asking still works.
	id := p.request(uiapwire.TypeCapabilitiesGet, nil)
	p.response(id, uiapwire.TypeCapabilitiesList)
}
