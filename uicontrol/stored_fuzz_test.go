package uicontrol

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// FuzzStoredState checks decodeStoredState, the decoder of what another
// App (another version of this package, perhaps) stored for a session,
// on arbitrary bytes: it never panics; what it accepts names a version
// this package speaks and a valid capability delivery, and encodes to
// bytes it reads back the same.
func FuzzStoredState(f *testing.F) {
	f.Add(encodeStoredState(&selection{version: Version, profiles: []string{"web@0.1"},
		extensions: []SelectedExtension{{ID: "uiap.policy", Version: "0.1"}}, delivery: DeliveryInline, heartbeat: 15 * time.Second},
		PeerInfo{Role: "agent", Name: "n", Locale: "de-CH"}))
	for _, s := range []string{
		`{}`, `null`, `[]`, `{"selectedVersion":"9.9","capabilityDelivery":"none","peer":{"role":"agent"}}`,
		`{"selectedVersion":"0.1","capabilityDelivery":"deferred","peer":{"role":"agent"},"heartbeatMs":9223372036854775807}`,
		`{"selectedVersion":"0.1","capabilityDelivery":"deferred","peer":{"role":""}}`,
		`{"selectedVersion":"0.1","capabilityDelivery":"x","peer":{"role":"agent"},"selectedExtensions":[{"id":"a.b"}]}`,
		`{"selectedVersion":"0.1","capabilityDelivery":"none","peer":{"role":"agent"},"future":{"kept":1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		sel, peer, err := decodeStoredState(b)
		if err != nil {
			if sel != nil {
				t.Fatalf("a refused state gave a selection: %+v", sel)
			}
			return
		}
		if sel.version != Version || !validDelivery(sel.delivery) || sel.heartbeat < 0 || peer.Role == "" {
			t.Fatalf("accepted %q as %+v, %+v", b, sel, peer)
		}
		again, peer2, err := decodeStoredState(encodeStoredState(sel, peer))
		if err != nil {
			t.Fatalf("re-encoded state refused: %v", err)
		}
		opt := cmp.AllowUnexported(selection{})
		if d := cmp.Diff(sel, again, opt); d != "" {
			t.Fatalf("selection changed by a round trip (-first +again):\n%s", d)
		}
		if d := cmp.Diff(peer, peer2); d != "" {
			t.Fatalf("peer changed by a round trip (-first +again):\n%s", d)
		}
	})
}

// TestStoredStateRoundTrip: what a session settled reads back as it was,
// and a version this package does not speak is refused.
func TestStoredStateRoundTrip(t *testing.T) {
	sel := &selection{version: Version, profiles: []string{"web@0.1"}, extensions: []SelectedExtension{{ID: "uicp.policy", Version: "0.1"}},
		delivery: DeliveryNone, heartbeat: 1500 * time.Millisecond}
	peer := PeerInfo{Role: "agent", Name: "n", Version: "1", Locale: "de-CH", Timezone: "Europe/Zurich", TenantID: "t", UserRole: "u"}
	gotSel, gotPeer, err := decodeStoredState(encodeStoredState(sel, peer))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(sel, gotSel, cmp.AllowUnexported(selection{})); d != "" {
		t.Errorf("selection (-want +got):\n%s", d)
	}
	if d := cmp.Diff(peer, gotPeer); d != "" {
		t.Errorf("peer (-want +got):\n%s", d)
	}
	for _, bad := range []string{
		`{"selectedVersion":"0.2","capabilityDelivery":"none","peer":{"role":"agent"}}`,
		`{"selectedVersion":"0.1","capabilityDelivery":"none"}`,
		`{"selectedVersion":"0.1","capabilityDelivery":"none","peer":{"role":"agent"}} x`,
	} {
		if _, _, err := decodeStoredState([]byte(bad)); err == nil {
			t.Errorf("decodeStoredState(%s) accepted", bad)
		}
	}
}
