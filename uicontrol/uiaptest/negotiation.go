package uiaptest

import (
	"errors"

	"github.com/agentry-dev/agentry/internal/uiapwire"
	"github.com/agentry-dev/agentry/uicontrol"
)

func negotiationCases() []testCase {
	return []testCase{
		{"UIAP_8_1_NoCommonVersion", testNoCommonVersion},
		{"UIAP_8_1_SelectsExactlyOneOfferedVersion", testSelectsOneVersion},
		{"UIAP_8_1_InitializePayloadValidated", testInitializePayload},
		{"UIAP_8_1_Profiles", testProfiles},
		{"UIAP_8_1_RequiredExtensionUnsupported", testRequiredExtension},
		{"UIAP_8_1_ExtensionRequiredByApp", testExtensionRequiredByApp},
		{"UIAP_8_1_PolicyExtensionAlias", testPolicyAlias},
		{"UIAP_12_RequiresOnInitialize", testRequiresOnInitialize},
		{"UIAP_8_1_CapabilityDelivery", testCapabilityDelivery},
		{"UIAP_8_1_AgentOffer", testAgentOffer},
		{"UIAP_8_1_AgentChecksInitialized", testAgentChecksInitialized},
	}
}

func testNoCommonVersion(h *h) {
	p := h.rawAgent(h.app(nil))
	init := initialize()
	init["supportedVersions"] = []any{"9.9", "1.0", "0.0"}
	id := p.request(uiapwire.TypeInitialize, init)
	pl := p.error(id, uicontrol.CodeUnsupportedVersion)
	if d := jsonEqual(h, msg{"supportedVersions": []any{"0.1"}}, pl["details"]); d != "" {
		h.Errorf("details (-want +got):\n%s", d)
	}
}

// §8.1, §11: selectedVersion is exactly one of the offered versions the
// receiver supports, and every later message carries it.
func testSelectsOneVersion(h *h) {
	p := h.rawAgent(h.app(nil))
	init := initialize()
	init["supportedVersions"] = []any{"1.0", "0.2", "0.1", "0.0"}
	m := p.msg("request", uiapwire.TypeInitialize, init)
	m["uiap"] = "1.0" // the initiator's highest
	p.send(m)
	got := p.next()
	if got["type"] != uiapwire.TypeInitialized || got["payload"].(msg)["selectedVersion"] != "0.1" || got["uiap"] != "0.1" {
		h.Fatalf("initialized = %v", got)
	}
}

func testInitializePayload(h *h) {
	p := h.rawAgent(h.app(nil))
	for name, mod := range map[string]func(msg){
		"no supportedVersions":     func(m msg) { delete(m, "supportedVersions") },
		"empty supportedVersions":  func(m msg) { m["supportedVersions"] = []any{} },
		"malformed version":        func(m msg) { m["supportedVersions"] = []any{"latest"} },
		"no peer":                  func(m msg) { delete(m, "peer") },
		"peer without role":        func(m msg) { m["peer"] = msg{"name": "x"} },
		"unknown delivery":         func(m msg) { m["capabilityDelivery"] = "later" },
		"extension without id":     func(m msg) { m["supportedExtensions"] = []any{msg{"versions": []any{"0.1"}}} },
		"extension versions empty": func(m msg) { m["supportedExtensions"] = []any{msg{"id": "x.a", "versions": []any{}}} },
		"required not a boolean": func(m msg) {
			m["supportedExtensions"] = []any{msg{"id": "x.a", "versions": []any{"0.1"}, "required": "yes"}}
		},
		"profiles not strings": func(m msg) { m["supportedProfiles"] = []any{1} },
	} {
		init := initialize()
		mod(init)
		id := p.request(uiapwire.TypeInitialize, init)
		if pl := p.next(); pl["type"] != "error" {
			h.Errorf("%s: got %v", name, pl)
		} else {
			checkError(h, pl, id, uicontrol.CodeInvalidMessage)
		}
	}
	init := initialize()
	init["supportedExtensions"] = []any{msg{"id": "x.a", "versions": []any{"0.1"}}, msg{"id": "x.a", "versions": []any{"0.2"}}}
	id := p.request(uiapwire.TypeInitialize, init)
	p.error(id, uicontrol.CodeBadRequest)
}

func testProfiles(h *h) {
	for _, tc := range []struct {
		offer, want []any
	}{
		{[]any{"mobile@0.1", "web@0.1"}, []any{"web@0.1"}},
		{[]any{"mobile@0.1"}, nil},
		{nil, nil},
	} {
		p := h.rawAgent(h.app(nil))
		init := initialize()
		if tc.offer == nil {
			delete(init, "supportedProfiles")
		} else {
			init["supportedProfiles"] = tc.offer
		}
		pl := p.handshake(init)
		if d := jsonEqual(h, tc.want, pl["selectedProfiles"]); d != "" {
			h.Errorf("offer %v: selectedProfiles (-want +got):\n%s", tc.offer, d)
		}
	}
}

// §8.1: a required extension that is not selected fails the handshake.
func testRequiredExtension(h *h) {
	app := h.app(nil)
	for _, tc := range []struct {
		offer []any
		code  uicontrol.Code
		want  []any // selectedExtensions when the handshake succeeds
	}{
		{[]any{msg{"id": "x.vendor.nope", "versions": []any{"0.1"}, "required": true}}, uicontrol.CodeUnsupportedExtension, nil},
		{[]any{msg{"id": extPolicy, "versions": []any{"0.9"}, "required": true}}, uicontrol.CodeUnsupportedExtension, nil},
		{[]any{msg{"id": "x.vendor.nope", "versions": []any{"0.1"}}, msg{"id": extPolicy, "versions": []any{"0.1"}, "required": true}},
			"", []any{msg{"id": extPolicy, "version": "0.1"}}},
		{[]any{msg{"id": extPolicy, "versions": []any{"0.9"}}}, "", nil},
		{[]any{msg{"id": extPolicy, "versions": []any{"0.0", "0.1", "0.9"}}}, "", []any{msg{"id": extPolicy, "version": "0.1"}}},
	} {
		p := h.rawAgent(app)
		init := initialize()
		init["supportedExtensions"] = tc.offer
		if tc.code != "" {
			id := p.request(uiapwire.TypeInitialize, init)
			pl := p.error(id, tc.code)
			if d, _ := pl["details"].(msg); d["extension"] == nil {
				h.Errorf("details do not name the extension: %v", pl)
			}
			continue
		}
		pl := p.handshake(init)
		if d := jsonEqual(h, tc.want, pl["selectedExtensions"]); d != "" {
			h.Errorf("offer %v: selectedExtensions (-want +got):\n%s", tc.offer, d)
		}
	}
}

func testExtensionRequiredByApp(h *h) {
	app := h.app(func(o *uicontrol.AppOptions) {
		o.Extensions = []uicontrol.ExtensionOffer{{ID: extPolicy, Versions: []string{"0.1"}, Required: true}}
	})
	p := h.rawAgent(app)
	init := initialize()
	delete(init, "supportedExtensions")
	id := p.request(uiapwire.TypeInitialize, init)
	p.error(id, uicontrol.CodeUnsupportedExtension)
	p.handshake(initialize())
}

// DESIGN §5: uicp.policy is an alias of uiap.policy; the selection
// echoes the initiator's spelling.
func testPolicyAlias(h *h) {
	p := h.rawAgent(h.app(nil))
	init := initialize()
	init["supportedExtensions"] = []any{msg{"id": "uicp.policy", "versions": []any{"0.1"}, "required": true}}
	pl := p.handshake(init)
	if d := jsonEqual(h, []any{msg{"id": "uicp.policy", "version": "0.1"}}, pl["selectedExtensions"]); d != "" {
		h.Errorf("selectedExtensions (-want +got):\n%s", d)
	}
	m := p.msg("request", uiapwire.TypeCapabilitiesGet, nil)
	m["requires"] = []any{"uiap.policy"}
	p.send(m)
	p.response(m["id"].(string), uiapwire.TypeCapabilitiesList)
}

func testRequiresOnInitialize(h *h) {
	p := h.rawAgent(h.app(nil))
	for _, tc := range []struct {
		requires []any
		code     uicontrol.Code
	}{
		{[]any{"mobile@0.1"}, uicontrol.CodeUnsupportedProfile},
		{[]any{"x.vendor.nope"}, uicontrol.CodeUnsupportedExtension},
	} {
		m := p.msg("request", uiapwire.TypeInitialize, initialize())
		m["requires"] = tc.requires
		p.send(m)
		p.error(m["id"].(string), tc.code)
	}
	// Not offered as a profile, so not selected: requires fails.
	init := initialize()
	delete(init, "supportedProfiles")
	m := p.msg("request", uiapwire.TypeInitialize, init)
	m["requires"] = []any{"web@0.1"}
	p.send(m)
	p.error(m["id"].(string), uicontrol.CodeUnsupportedProfile)
	m = p.msg("request", uiapwire.TypeInitialize, initialize())
	m["requires"] = []any{"web@0.1", "uiap.policy"}
	p.send(m)
	p.response(m["id"].(string), uiapwire.TypeInitialized)
}

// §8.1: capabilities are present exactly when capabilityDelivery is
// "inline"; absent, the app chooses (deferred).
func testCapabilityDelivery(h *h) {
	app := h.app(nil)
	for _, d := range []string{"inline", "deferred", "none", ""} {
		p := h.rawAgent(app)
		init := initialize()
		if d == "" {
			delete(init, "capabilityDelivery")
		} else {
			init["capabilityDelivery"] = d
		}
		pl := p.handshake(init)
		want := d
		if d == "" {
			want = "deferred"
		}
		if pl["capabilityDelivery"] != want {
			h.Errorf("%q: capabilityDelivery = %v", d, pl["capabilityDelivery"])
		}
		caps, has := pl["capabilities"]
		if has != (want == "inline") {
			h.Errorf("%q: capabilities present = %v", d, has)
		}
		if has {
			if diff := jsonEqual(h, rawJSON(sampleCapabilities), caps); diff != "" {
				h.Errorf("inline capabilities (-want +got):\n%s", diff)
			}
		}
	}
	// Through the Agent: an inline document is current at once.
	a := h.agent(app, &uicontrol.AgentOptions{CapabilityDelivery: uicontrol.DeliveryInline})
	c := a.Capabilities()
	if c == nil || c.Revision == "" {
		h.Fatalf("inline capabilities: %+v", c)
	}
	if diff := jsonEqual(h, rawJSON(sampleCapabilities), c.Capabilities); diff != "" {
		h.Errorf("agent's inline document (-want +got):\n%s", diff)
	}
}

// The agent's session.initialize: its highest version in uiap (DESIGN
// §5), every supported version listed (§11), no sessionId.
func testAgentOffer(h *h) {
	p, end := h.rawApp()
	go func() {
		_, _ = uicontrol.Connect(h.ctx(), end, &uicontrol.AgentOptions{
			Profiles:   []string{profileWeb},
			Extensions: []uicontrol.ExtensionOffer{{ID: extPolicy, Versions: []string{"0.1"}, Required: true}},
			Peer:       uicontrol.PeerInfo{Name: "uiaptest", Locale: "de-CH"},
		})
	}()
	m := p.next()
	if m["kind"] != "request" || m["type"] != uiapwire.TypeInitialize || m["uiap"] != "0.1" {
		h.Fatalf("initialize = %v", m)
	}
	if _, ok := m["sessionId"]; ok {
		h.Errorf("initialize carries a sessionId")
	}
	want := msg{
		"supportedVersions":   []any{"0.1"},
		"supportedProfiles":   []any{"web@0.1"},
		"supportedExtensions": []any{msg{"id": "uiap.policy", "versions": []any{"0.1"}, "required": true}},
		"peer":                msg{"role": "agent", "name": "uiaptest", "locale": "de-CH"},
	}
	if d := jsonEqual(h, want, m["payload"]); d != "" {
		h.Errorf("payload (-want +got):\n%s", d)
	}
	_ = p.tr.Close()
}

// §8.1 from the initiator's side: a session.initialized that breaks the
// rules fails Connect, and the agent terminates the session the app
// thinks is active.
func testAgentChecksInitialized(h *h) {
	good := func() msg {
		return msg{"sessionId": "s-1", "selectedVersion": "0.1", "selectedProfiles": []any{"web@0.1"},
			"selectedExtensions": []any{msg{"id": "uiap.policy", "version": "0.1"}}, "capabilityDelivery": "deferred"}
	}
	for _, tc := range []struct {
		name string
		mod  func(msg)
		code uicontrol.Code
	}{
		{"accepted", func(msg) {}, ""},
		{"capabilities while deferred", func(m msg) { m["capabilities"] = rawJSON(sampleCapabilities) }, uicontrol.CodeInvalidMessage},
		{"capabilities while none", func(m msg) { m["capabilityDelivery"] = "none"; m["capabilities"] = msg{} }, uicontrol.CodeInvalidMessage},
		{"inline without capabilities", func(m msg) { m["capabilityDelivery"] = "inline" }, uicontrol.CodeInvalidMessage},
		{"version not offered", func(m msg) { m["selectedVersion"] = "0.2" }, uicontrol.CodeUnsupportedVersion},
		{"profile not offered", func(m msg) { m["selectedProfiles"] = []any{"mobile@0.1"} }, uicontrol.CodeUnsupportedProfile},
		{"required extension not selected", func(m msg) { delete(m, "selectedExtensions") }, uicontrol.CodeUnsupportedExtension},
		{"extension version not offered", func(m msg) { m["selectedExtensions"] = []any{msg{"id": "uiap.policy", "version": "0.2"}} }, uicontrol.CodeUnsupportedExtension},
		{"no sessionId", func(m msg) { delete(m, "sessionId") }, uicontrol.CodeInvalidMessage},
		{"no capabilityDelivery", func(m msg) { delete(m, "capabilityDelivery") }, uicontrol.CodeInvalidMessage},
	} {
		p, end := h.rawApp()
		type result struct {
			a   *uicontrol.Agent
			err error
		}
		done := make(chan result, 1)
		go func() {
			a, err := uicontrol.Connect(h.ctx(), end, &uicontrol.AgentOptions{
				Profiles:   []string{profileWeb},
				Extensions: []uicontrol.ExtensionOffer{{ID: extPolicy, Versions: []string{"0.1"}, Required: true}},
			})
			done <- result{a, err}
		}()
		init := p.next()
		pl := good()
		tc.mod(pl)
		r := p.msg("response", uiapwire.TypeInitialized, pl)
		r["correlationId"] = init["id"]
		r["sessionId"] = "s-1"
		p.send(r)
		res := <-done
		if tc.code == "" {
			if res.err != nil {
				h.Errorf("%s: Connect: %v", tc.name, res.err)
			} else {
				_ = res.a.Close()
			}
			continue
		}
		var e *uicontrol.Error
		if !errors.As(res.err, &e) || e.Code != tc.code {
			h.Errorf("%s: Connect error = %v, want %s", tc.name, res.err, tc.code)
		}
		got := p.closed()
		if len(got) != 1 || got[0]["type"] != uiapwire.TypeTerminate || got[0]["payload"].(msg)["reason"] != "error" {
			h.Errorf("%s: after a bad handshake the agent sent %v, want session.terminate (error)", tc.name, got)
		}
	}
	// An error answer is returned as it is.
	p, end := h.rawApp()
	done := make(chan error, 1)
	go func() {
		_, err := uicontrol.Connect(h.ctx(), end, nil)
		done <- err
	}()
	init := p.next()
	e := p.msg("error", "error", msg{"code": "unsupported_version", "message": "no", "details": msg{"supportedVersions": []any{"2.0"}}})
	e["correlationId"] = init["id"]
	p.send(e)
	if err := <-done; !errors.Is(err, uicontrol.CodeUnsupportedVersion) {
		h.Errorf("Connect after an error answer: %v", err)
	}
}
