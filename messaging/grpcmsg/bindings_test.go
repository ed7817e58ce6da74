package grpcmsg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
)

// testBinding is one way to ask a testEnv's server.
type testBinding struct {
	name string
	ask  func(t testing.TB, ctx context.Context, e *envelope.Envelope, opts *messaging.ClientOptions) (*messaging.Reply, error)
}

// everyBinding lists the bindings a testEnv serves: SSE, WebSocket,
// gRPC, HTTP/3.
func (env *testEnv) everyBinding() []testBinding {
	http := func(b bool) func(testing.TB, context.Context, *envelope.Envelope, *messaging.ClientOptions) (*messaging.Reply, error) {
		return func(t testing.TB, ctx context.Context, e *envelope.Envelope, opts *messaging.ClientOptions) (*messaging.Reply, error) {
			return env.httpClient(t, b, opts).Ask(ctx, e)
		}
	}
	return []testBinding{
		{"SSE", http(false)},
		{"WebSocket", http(true)},
		{"gRPC", func(t testing.TB, ctx context.Context, e *envelope.Envelope, opts *messaging.ClientOptions) (*messaging.Reply, error) {
			return env.client(t, opts).Ask(ctx, e)
		}},
		{"HTTP3", func(t testing.TB, ctx context.Context, e *envelope.Envelope, opts *messaging.ClientOptions) (*messaging.Reply, error) {
			return env.h3Client(t, opts).Ask(ctx, e)
		}},
	}
}

// allowAll is a replay guard that accepts every envelope, so that the
// same bytes can be sent once per binding.
type allowAll struct{}

func (allowAll) Check(context.Context, string, string, time.Time) error { return nil }

// TestUAMP_7_SameBytesEveryBinding: one signed envelope, the same bytes,
// sent over every binding of one Server: the handler receives those
// bytes and they verify; they come back inside a delta unchanged and
// verify again at the client. Then, with the replay window on, bytes
// accepted over one binding are refused over every other (4.01,
// replayed) with an error envelope that verifies with the server's key:
// the window is the Server's, not a binding's.
func TestUAMP_7_SameBytesEveryBinding(t *testing.T) {
	fixtures()
	keys, _ := envelope.NewKeySet(clientKey.Public())
	serverKeys, _ := envelope.NewKeySet(serverKey.Public())
	var mu sync.Mutex
	var received [][]byte
	h := messaging.HandlerFunc(func(ctx context.Context, req *envelope.Envelope, s *messaging.Stream) error {
		b, err := json.Marshal(req)
		if err != nil {
			return err
		}
		mu.Lock()
		received = append(received, b)
		mu.Unlock()
		if err := envelope.Verify(ctx, req, keys); err != nil {
			return err
		}
		p, _ := json.Marshal(map[string]json.RawMessage{"envelope": b})
		return s.Send(ctx, envelope.DeltaDone, p)
	})
	e := ask("the same bytes ✓ \u2028 <&>")
	e.Ext = map[string]any{"x-trace": "b3:1", "nested": map[string]any{"n": 1.5, "list": []any{"a", true, nil}}}
	wire := signed(t, e, clientKey)

	env := newTestEnv(t, h, &messaging.Options{Replay: allowAll{}})
	bindings := env.everyBinding()
	for _, bc := range bindings {
		t.Run(bc.name, func(t *testing.T) {
			sent, err := envelope.Decode(wire)
			if err != nil {
				t.Fatal(err)
			}
			reply, err := bc.ask(t, context.Background(), sent, &messaging.ClientOptions{ServerKeys: serverKeys})
			if err != nil {
				t.Fatal(err)
			}
			var last *envelope.Delta
			for d, err := range reply.Deltas() {
				if err != nil {
					t.Fatal(err)
				}
				last = d
			}
			mu.Lock()
			got := received[len(received)-1]
			mu.Unlock()
			if !bytes.Equal(got, wire) {
				t.Fatalf("the handler got other bytes:\n%s\n%s", wire, got)
			}
			var p struct{ Envelope json.RawMessage }
			if err := json.Unmarshal(last.Payload, &p); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(p.Envelope, wire) {
				t.Fatalf("bytes changed on the way back:\n%s\n%s", wire, p.Envelope)
			}
			if _, err := envelope.Open(context.Background(), p.Envelope, keys); err != nil {
				t.Fatalf("the envelope does not verify after the round trip: %v", err)
			}
		})
	}
	if len(received) != len(bindings) {
		t.Fatalf("the handler ran %d times for %d bindings", len(received), len(bindings))
	}

	// One replay window across the bindings: bytes accepted over the
	// first binding are refused over every other.
	for i := range bindings {
		t.Run("Replay/"+bindings[i].name+"First", func(t *testing.T) {
			env := newTestEnv(t, h, nil)
			all := env.everyBinding()
			order := append([]testBinding{all[i]}, append(all[:i:i], all[i+1:]...)...)
			once := signed(t, ask("once"), clientKey)
			for j, bc := range order {
				sent, _ := envelope.Decode(once)
				reply, err := bc.ask(t, context.Background(), sent, &messaging.ClientOptions{ServerKeys: serverKeys})
				if err == nil { // over WebSocket and gRPC the refusal comes as the stream
					for _, err = range reply.Deltas() {
						if err != nil {
							break
						}
					}
				}
				switch {
				case j == 0 && err != nil:
					t.Fatalf("%s: %v", bc.name, err)
				case j > 0 && (!errors.Is(err, envelope.CodeUnauthenticated) || !strings.Contains(err.Error(), "replayed")):
					t.Fatalf("%s after %s: %v", bc.name, order[0].name, err)
				}
			}
		})
	}
}
