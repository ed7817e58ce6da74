package messaging

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/envelope"
)

func TestUAMP_7_Echo(t *testing.T) {
	env := newTestEnv(t, Echo, nil)
	content := strings.Repeat("héllo wörld ", 100) // 1,400 bytes: several chunks, cut at character boundaries
	for _, bc := range bindings() {
		t.Run(bc.name, func(t *testing.T) {
			ctx := context.Background()
			reply, err := env.client(t, bc.b, nil).Ask(ctx, ask(content))
			if err != nil {
				t.Fatal(err)
			}
			var got strings.Builder
			var last *envelope.Delta
			for d, err := range reply.Deltas() {
				if err != nil {
					t.Fatal(err)
				}
				last = d
				if d.Type == envelope.DeltaChunk {
					var p struct{ Content string }
					if err := json.Unmarshal(d.Payload, &p); err != nil {
						t.Fatal(err)
					}
					got.WriteString(p.Content)
				}
			}
			if got.String() != content {
				t.Fatalf("echoed %q", got.String())
			}
			if last == nil || last.Type != envelope.DeltaDone || last.StreamID != reply.StreamID() {
				t.Fatalf("last delta %+v", last)
			}
			// The final ACK released the stream on the server.
			waitFor(t, func() bool { return env.srv.streams() == 0 })
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", patience)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// collect ranges over a reply, calling each (which may be nil) on every
// delta, and returns the chunk indexes and the final delta.
func collect(t *testing.T, reply *Reply, each func(*envelope.Delta)) ([]int, *envelope.Delta) {
	t.Helper()
	var idx []int
	var last *envelope.Delta
	for d, err := range reply.Deltas() {
		if err != nil {
			t.Fatal(err)
		}
		last = d
		if d.Type == envelope.DeltaChunk {
			var p struct{ I int }
			if err := json.Unmarshal(d.Payload, &p); err != nil {
				t.Fatal(err)
			}
			idx = append(idx, p.I)
		}
		if each != nil {
			each(d)
		}
	}
	return idx, last
}

func checkSequence(t *testing.T, idx []int, n int) {
	t.Helper()
	if len(idx) != n {
		t.Fatalf("%d chunks, want %d", len(idx), n)
	}
	for i, v := range idx {
		if v != i {
			t.Fatalf("chunk %d carries %d", i, v)
		}
	}
}

// TestUAMP_5_WindowSlowConsumer: with a slow consumer the producer never
// has more than delta_window deltas un-ACKed, blocks instead, and the
// stream's log holds at most the window.
func TestUAMP_5_WindowSlowConsumer(t *testing.T) {
	for _, bc := range bindings() {
		t.Run(bc.name, func(t *testing.T) {
			h := newCounter(600)
			env := newTestEnv(t, h, nil)
			req := ask("")
			req.DeltaWindow = 8
			reply, err := env.client(t, bc.b, nil).Ask(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			var maxLog int
			idx, last := collect(t, reply, func(d *envelope.Delta) {
				if d.Seq%50 == 0 {
					time.Sleep(2 * time.Millisecond) // slow consumer
				}
				env.srv.mu.Lock()
				for _, st := range env.srv.byStream {
					st.mu.Lock()
					n := 0
					for _, b := range st.ring {
						if b != nil {
							n++
						}
					}
					maxLog = max(maxLog, n, len(st.ring))
					st.mu.Unlock()
				}
				env.srv.mu.Unlock()
			})
			checkSequence(t, idx, 600)
			if last.Type != envelope.DeltaDone {
				t.Fatalf("final %s", last.Type)
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.window != 8 || h.maxAhead > 8 || h.maxAhead < 1 {
				t.Fatalf("window %d, most un-ACKed %d", h.window, h.maxAhead)
			}
			if maxLog > 8 {
				t.Fatalf("the log held %d deltas with a window of 8", maxLog)
			}
			t.Logf("most un-ACKed deltas: %d of 8", h.maxAhead)
		})
	}
}

// TestUAMP_5_ResumeAfterDrop: every connection is cut twice mid-stream;
// the client reconnects (Last-Event-ID over SSE, an ACK over WebSocket)
// and gets every delta exactly once, in order.
func TestUAMP_5_ResumeAfterDrop(t *testing.T) {
	for _, bc := range bindings() {
		t.Run(bc.name, func(t *testing.T) {
			h := newCounter(1000)
			env := newTestEnv(t, h, nil)
			reply, err := env.client(t, bc.b, nil).Ask(context.Background(), ask(""))
			if err != nil {
				t.Fatal(err)
			}
			idx, last := collect(t, reply, func(d *envelope.Delta) {
				if d.Seq == 100 || d.Seq == 517 {
					env.conns.dropAll()
				}
			})
			checkSequence(t, idx, 1000)
			if last.Type != envelope.DeltaDone || last.Seq != 1000 {
				t.Fatalf("final %+v", last)
			}
			if err := h.waitEnded(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestUAMP_4_1_CancelMidStream: a cancel stops the producer promptly and
// the stream ends with a cancel delta; breaking the loop cancels too.
func TestUAMP_4_1_CancelMidStream(t *testing.T) {
	for _, bc := range bindings() {
		t.Run(bc.name+"/Cancel", func(t *testing.T) {
			h := newCounter(-1) // endless
			env := newTestEnv(t, h, nil)
			ctx := context.Background()
			reply, err := env.client(t, bc.b, nil).Ask(ctx, ask(""))
			if err != nil {
				t.Fatal(err)
			}
			var cancelledAt time.Time
			_, last := collect(t, reply, func(d *envelope.Delta) {
				if d.Seq == 10 {
					cancelledAt = time.Now()
					if err := reply.Cancel(ctx); err != nil {
						t.Error(err)
					}
				}
			})
			if last.Type != envelope.DeltaCancel {
				t.Fatalf("final %s", last.Type)
			}
			if err := h.waitEnded(t); !errors.Is(err, errCancelled) {
				t.Fatalf("producer ended with %v", err)
			}
			t.Logf("stream ended %v after the cancel", time.Since(cancelledAt))
		})
		t.Run(bc.name+"/Break", func(t *testing.T) {
			h := newCounter(-1)
			env := newTestEnv(t, h, nil)
			reply, err := env.client(t, bc.b, nil).Ask(context.Background(), ask(""))
			if err != nil {
				t.Fatal(err)
			}
			for d, err := range reply.Deltas() {
				if err != nil {
					t.Fatal(err)
				}
				if d.Seq == 5 {
					break
				}
			}
			if err := h.waitEnded(t); !errors.Is(err, errCancelled) {
				t.Fatalf("producer ended with %v", err)
			}
		})
	}
}

// TestUAMP_6_3_SameBytesOverBindings: the bytes of a signed envelope
// reach the handler over both bindings, come back inside a delta, and
// verify; so do the server's signed error envelopes.
func TestUAMP_6_3_SameBytesOverBindings(t *testing.T) {
	ck, sk := testKeys(t)
	keys, _ := envelope.NewKeySet(ck.Public())
	var received [][]byte
	var mu = make(chan struct{}, 1)
	h := HandlerFunc(func(ctx context.Context, req *envelope.Envelope, s *Stream) error {
		b, err := json.Marshal(req)
		if err != nil {
			return err
		}
		mu <- struct{}{}
		received = append(received, b)
		<-mu
		p, _ := json.Marshal(map[string]json.RawMessage{"envelope": b})
		return s.Send(ctx, envelope.DeltaDone, p)
	})
	env := newTestEnv(t, h, nil)
	serverKeys, _ := envelope.NewKeySet(sk.Public())
	for _, bc := range bindings() {
		t.Run(bc.name, func(t *testing.T) {
			e := ask("the same bytes ✓ \u2028")
			e.Ext = map[string]any{"x-trace": "b3:1", "nested": map[string]any{"n": 1.5}}
			if err := envelope.Sign(e, ck); err != nil {
				t.Fatal(err)
			}
			wire, _ := json.Marshal(e)
			reply, err := env.client(t, bc.b, &ClientOptions{ServerKeys: serverKeys}).Ask(context.Background(), e)
			if err != nil {
				t.Fatal(err)
			}
			_, last := collect(t, reply, nil)
			var p struct{ Envelope json.RawMessage }
			if err := json.Unmarshal(last.Payload, &p); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(p.Envelope, wire) {
				t.Fatalf("bytes changed:\n%s\n%s", wire, p.Envelope)
			}
			if _, err := envelope.Open(context.Background(), p.Envelope, keys); err != nil {
				t.Fatalf("the envelope does not verify after the round trip: %v", err)
			}
			mu <- struct{}{}
			got := received[len(received)-1]
			<-mu
			if !bytes.Equal(got, wire) {
				t.Fatalf("the handler got other bytes:\n%s\n%s", wire, got)
			}
			// The server's error envelope verifies with the server's key
			// after the same trip (ServerKeys is set): a replay is 4.01.
			again, err := env.client(t, bc.b, &ClientOptions{ServerKeys: serverKeys}).Ask(context.Background(), e)
			if err == nil { // over WebSocket the refusal comes as the stream
				for _, err = range again.Deltas() {
					break
				}
			}
			if !errors.Is(err, envelope.CodeUnauthenticated) || !strings.Contains(err.Error(), "replayed") {
				t.Fatalf("replayed ask: %v", err)
			}
		})
	}
}

// TestUAMP_5_ServerClose: closing the Server stops its producers and
// ends the streams it serves; the client's iteration ends with an error
// rather than hanging.
func TestUAMP_5_ServerClose(t *testing.T) {
	for _, bc := range bindings() {
		t.Run(bc.name, func(t *testing.T) {
			h := newCounter(-1)
			env := newTestEnv(t, h, nil)
			reply, err := env.client(t, bc.b, &ClientOptions{MaxReconnects: 2, ReconnectDelay: time.Millisecond}).Ask(context.Background(), ask(""))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				for d, err := range reply.Deltas() {
					if err != nil {
						done <- err
						return
					}
					if d.Seq == 3 {
						go env.srv.Close()
					}
				}
				done <- nil
			}()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("stream ended without an error")
				}
			case <-time.After(patience):
				t.Fatalf("client still iterating %v after Server.Close", patience)
			}
			if err := h.waitEnded(t); !errors.Is(err, context.Canceled) {
				t.Fatalf("producer ended with %v", err)
			}
		})
	}
}
