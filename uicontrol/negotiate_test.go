package uicontrol

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// §8.1, §11 with several versions: the receiver selects exactly one
// version, the highest both speak, numerically.
func TestUIAP_8_1_NegotiateVersions(t *testing.T) {
	for _, tc := range []struct {
		offered, supported []string
		want               string
	}{
		{[]string{"0.1"}, []string{"0.1"}, "0.1"},
		{[]string{"0.1", "0.2"}, []string{"0.2", "0.1"}, "0.2"},
		{[]string{"0.9", "0.10"}, []string{"0.9", "0.10", "1.0"}, "0.10"},
		{[]string{"2.0", "10.0"}, []string{"2.0", "10.0"}, "10.0"},
		{[]string{"1.0", "0.3"}, []string{"0.1", "0.3"}, "0.3"},
		{[]string{"1.0"}, []string{"0.1"}, ""},
	} {
		sel, err := negotiate(&sessionInitialize{SupportedVersions: tc.offered}, nil, tc.supported, nil, nil)
		switch {
		case tc.want == "" && (err == nil || err.Code != CodeUnsupportedVersion):
			t.Errorf("%v/%v: %v, want unsupported_version", tc.offered, tc.supported, err)
		case tc.want != "" && (err != nil || sel.version != tc.want):
			t.Errorf("%v/%v: %+v %v, want %s", tc.offered, tc.supported, sel, err, tc.want)
		}
	}
}

func TestUIAP_8_1_NegotiateExtensions(t *testing.T) {
	ours := []ExtensionOffer{{ID: "uiap.policy", Versions: []string{"0.1", "0.2"}}, {ID: "uiap.workflow", Versions: []string{"0.1"}}}
	sel, err := negotiate(&sessionInitialize{SupportedVersions: []string{"0.1"}, SupportedExtensions: []ExtensionOffer{
		{ID: "uicp.policy", Versions: []string{"0.2", "0.1", "0.3"}, Required: true},
		{ID: "uiap.workflow", Versions: []string{"0.2"}},
		{ID: "x.other", Versions: []string{"0.1"}},
	}}, []string{"uiap.policy@0.2"}, []string{"0.1"}, nil, ours)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]SelectedExtension{{ID: "uicp.policy", Version: "0.2"}}, sel.extensions); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if sel.delivery != DeliveryDeferred {
		t.Errorf("delivery = %q", sel.delivery)
	}
}

// §12: how requires entries are told apart and matched.
func TestUIAP_12_Requires(t *testing.T) {
	sel := &selection{profiles: []string{"web@0.1"}, extensions: []SelectedExtension{{ID: "uicp.policy", Version: "0.1"}}}
	for _, tc := range []struct {
		requires []string
		code     Code
	}{
		{nil, ""},
		{[]string{"web@0.1", "web", "uiap.policy", "uicp.policy", "uiap.policy@0.1"}, ""},
		{[]string{"web@0.2"}, CodeUnsupportedProfile},
		{[]string{"mobile"}, CodeUnsupportedProfile},
		{[]string{"uiap.policy@0.2"}, CodeUnsupportedExtension},
		{[]string{"x.a"}, CodeUnsupportedExtension},
	} {
		err := sel.unmet(tc.requires)
		if (err == nil) != (tc.code == "") || err != nil && err.Code != tc.code {
			t.Errorf("%v: %v, want %q", tc.requires, err, tc.code)
		}
	}
	var none *selection
	if err := none.unmet([]string{"web@0.1"}); err == nil || err.Code != CodeUnsupportedProfile {
		t.Errorf("before the handshake: %v", err)
	}
}

func TestUIAP_3_IDWindow(t *testing.T) {
	var w idWindow
	if !w.add("a") || w.add("a") {
		t.Fatal("a repeated id was accepted")
	}
	for i := range idWindowSize {
		w.add(string(rune('b' + i)))
	}
	if !w.add("a") {
		t.Errorf("the window remembers more than %d ids", idWindowSize)
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{StateNew: "NEW", StateInitializing: "INITIALIZING", StateActive: "ACTIVE",
		StateInterrupted: "INTERRUPTED", StateTerminating: "TERMINATING", StateTerminated: "TERMINATED", State(9): "State(9)"} {
		if s.String() != want {
			t.Errorf("%d: %s", s, s)
		}
	}
}
