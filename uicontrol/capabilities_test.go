package uicontrol_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/google/go-cmp/cmp"
)

const docJSON = `{
	"x.vendor.b": [1, {"z": null}],
	"signals": [{"id": "toast"}],
	"actions": [ {"id": "cart.add", "args": {"type": "object"}} ],
	"roles": {"shopper": {}},
	"states": [],
	"affordances": ["activatable"],
	"risk": {"cart.add": "low"},
	"x.vendor.a": "kept",
	"ignored": null
}`

// §9: the six sections and any other member survive a round trip;
// encoding is deterministic (sections in spec order, then extras sorted).
func TestUIAP_9_CapabilityDocumentRoundTrip(t *testing.T) {
	d, err := uicontrol.DecodeCapabilityDocument([]byte(docJSON))
	if err != nil {
		t.Fatal(err)
	}
	if string(d.Actions) != `[{"id":"cart.add","args":{"type":"object"}}]` || string(d.Extra["x.vendor.a"]) != `"kept"` {
		t.Errorf("decoded %+v", d)
	}
	if _, ok := d.Extra["ignored"]; ok {
		t.Errorf("null member kept")
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"roles":{"shopper":{}},"states":[],"affordances":["activatable"],"actions":[{"id":"cart.add","args":{"type":"object"}}],` +
		`"risk":{"cart.add":"low"},"signals":[{"id":"toast"}],"x.vendor.a":"kept","x.vendor.b":[1,{"z":null}]}`
	if string(b) != want {
		t.Errorf("encoded:\n%s\nwant:\n%s", b, want)
	}
	var again uicontrol.CapabilityDocument
	if err := json.Unmarshal(b, &again); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(d, &again); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if got := d.Get("x.vendor.b"); string(got) != `[1,{"z":null}]` || d.Get(uicontrol.SectionRisk) == nil || d.Get("nope") != nil {
		t.Errorf("Get: %s", got)
	}
}

func TestUIAP_9_DecodeCapabilityDocumentRefuses(t *testing.T) {
	for _, b := range []string{"", "null", "[]", `"x"`, `{"roles":[]`, `{"roles":[],"roles":{}}`, "{\"a\":\"\xff\"}", `{} {}`} {
		if _, err := uicontrol.DecodeCapabilityDocument([]byte(b)); !errors.Is(err, uicontrol.CodeInvalidMessage) {
			t.Errorf("%q: %v", b, err)
		}
	}
}

// §9.1: include filtering.
func TestUIAP_9_1_Filter(t *testing.T) {
	d, err := uicontrol.DecodeCapabilityDocument([]byte(docJSON))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		include []string
		want    string
	}{
		{nil, `{"roles":{"shopper":{}},"states":[],"affordances":["activatable"],"actions":[{"id":"cart.add","args":{"type":"object"}}],"risk":{"cart.add":"low"},"signals":[{"id":"toast"}],"x.vendor.a":"kept","x.vendor.b":[1,{"z":null}]}`},
		{[]string{"all"}, `{"roles":{"shopper":{}},"states":[],"affordances":["activatable"],"actions":[{"id":"cart.add","args":{"type":"object"}}],"risk":{"cart.add":"low"},"signals":[{"id":"toast"}],"x.vendor.a":"kept","x.vendor.b":[1,{"z":null}]}`},
		{[]string{}, `{}`},
		{[]string{"risk", "actions"}, `{"actions":[{"id":"cart.add","args":{"type":"object"}}],"risk":{"cart.add":"low"}}`},
		{[]string{"x.vendor.a", "nope"}, `{"x.vendor.a":"kept"}`},
	} {
		b, _ := json.Marshal(d.Filter(tc.include))
		if string(b) != tc.want {
			t.Errorf("include %v: %s, want %s", tc.include, b, tc.want)
		}
	}
	// Filter never aliases the document's Extra map.
	f := d.Filter(nil)
	f.Extra["x.new"] = json.RawMessage(`1`)
	if _, ok := d.Extra["x.new"]; ok {
		t.Errorf("Filter(nil) shares Extra")
	}
}
