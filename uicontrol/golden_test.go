package uicontrol_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// goldenIDs is a deterministic ids.Source: UUIDs numbered from 1 and a
// clock advancing a millisecond per call.
type goldenIDs struct {
	mu sync.Mutex
	n  int
	t  time.Time
}

func (s *goldenIDs) NewID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return fmt.Sprintf("00000000-0000-4000-8000-%012d", s.n)
}

func (s *goldenIDs) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.t = s.t.Add(time.Millisecond)
	return s.t
}

// recorder is a Transport that writes what it sends to a shared
// transcript, random values (resume tokens, nonces) redacted.
type recorder struct {
	uicontrol.Transport
	label string
	log   *transcript
}

type transcript struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

var randomValue = regexp.MustCompile(`"(resumeToken|nonce)":"[^"]*"`)

func (r *recorder) Send(ctx context.Context, msg []byte) error {
	var b bytes.Buffer
	if err := json.Indent(&b, randomValue.ReplaceAll(msg, []byte(`"$1":"<random>"`)), "", "  "); err != nil {
		return err
	}
	r.log.mu.Lock()
	fmt.Fprintf(&r.log.buf, "%s\n%s\n\n", r.label, b.Bytes())
	r.log.mu.Unlock()
	return r.Transport.Send(ctx, msg)
}

// TestUIAP_Transcript pins the wire form of a whole session — handshake
// with inline capabilities, capabilities.get with include, an
// application request, an unknown type, capabilities.changed, interrupt
// and resume, ping, terminate — against testdata/golden/transcript.txt.
func TestUIAP_Transcript(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		restore := ids.Set(&goldenIDs{t: time.Date(2026, 3, 26, 13, 0, 0, 0, time.UTC)})
		defer restore()
		ctx := context.Background()
		log := &transcript{}
		appEnd, agentEnd := uicontrol.Pair()
		app := uicontrol.NewApp(&uicontrol.AppOptions{
			Source:     uicontrol.EndpointRef{Role: "app", ID: "shop"},
			Profiles:   []string{"web@0.1"},
			Extensions: []uicontrol.ExtensionOffer{{ID: "uiap.policy", Versions: []string{"0.1"}}},
			Heartbeat:  15 * time.Second,
		})
		defer app.Close()
		doc, _ := uicontrol.DecodeCapabilityDocument([]byte(`{"actions":[{"id":"cart.add"}],"risk":{"cart.add":"low"},"roles":["shopper"]}`))
		if _, err := app.SetCapabilities(ctx, doc, ""); err != nil {
			t.Fatal(err)
		}
		app.Handle("x.shop.add", func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.Envelope) (*uicontrol.Reply, error) {
			return &uicontrol.Reply{Type: "x.shop.added", Payload: map[string]any{"items": 1}}, nil
		})
		go app.Serve(ctx, &recorder{Transport: appEnd, label: "app → agent", log: log})
		a, err := uicontrol.Connect(ctx, &recorder{Transport: agentEnd, label: "agent → app", log: log}, &uicontrol.AgentOptions{
			Source:             uicontrol.EndpointRef{Role: "agent", ID: "shopper-bot"},
			Peer:               uicontrol.PeerInfo{Name: "shopper-bot", Version: "1.0"},
			Profiles:           []string{"web@0.1"},
			Extensions:         []uicontrol.ExtensionOffer{{ID: "uicp.policy", Versions: []string{"0.1"}}},
			CapabilityDelivery: uicontrol.DeliveryInline,
		})
		if err != nil {
			t.Fatal(err)
		}
		step := func(err error) {
			t.Helper()
			if err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		_, err = a.GetCapabilities(ctx, uicontrol.SectionActions, uicontrol.SectionRisk)
		step(err)
		_, err = a.Call(ctx, &uicontrol.Request{Type: "x.shop.add", Payload: map[string]any{"sku": "A-1"},
			Requires: []string{"web@0.1"}, Ext: map[string]any{"uicp.policy": map[string]any{"decision": "allow"}}})
		step(err)
		_, err = a.Call(ctx, &uicontrol.Request{Type: "x.shop.fly"})
		if err == nil {
			t.Fatal("unknown type accepted")
		}
		step(nil)
		step(a.Interrupt(ctx, "user takes over"))
		doc2, _ := uicontrol.DecodeCapabilityDocument([]byte(`{"actions":[]}`))
		_, err = app.SetCapabilities(ctx, doc2, "role_change")
		step(err)
		step(a.Resume(ctx, nil))
		step(a.Ping(ctx))
		step(a.Terminate(ctx, "normal"))

		path := filepath.Join("testdata", "golden", "transcript.txt")
		got := log.buf.Bytes()
		if *update {
			if err := os.WriteFile(path, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(string(want), string(got)); d != "" {
			t.Errorf("transcript (-want +got):\n%s", d)
		}
	})
}
