package grpcmsg

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/messaging/grpcmsg/internal/uampv1"
)

func TestUAMP_7_GRPC_Echo(t *testing.T) {
	// One stream at a time: the second ask is served only if the final
	// ACK of the first released its stream.
	env := newTestEnv(t, messaging.Echo, &messaging.Options{MaxStreams: 1})
	c := env.client(t, nil)
	content := strings.Repeat("héllo wörld ", 100) // several chunks, cut at character boundaries
	for range 2 {
		reply, got, last := echoReleased(t, c, content)
		if got != content {
			t.Fatalf("echoed %q", got)
		}
		if last == nil || last.Type != envelope.DeltaDone || last.StreamID != reply.StreamID() {
			t.Fatalf("last delta %+v", last)
		}
	}
}

// echoReleased asks the echo agent for content and reads the reply,
// asking again while the server refuses with 5.04 (too many streams)
// before any delta: the client releases a finished stream with its
// final ACK and waits a bounded time for the server to end the call, so
// on a loaded machine the release may land just after the next ask. 5.04
// is retryable (§9); the retries are bounded far beyond the work.
func echoReleased(t *testing.T, c *Client, content string) (*messaging.Reply, string, *envelope.Delta) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		reply, err := c.Ask(context.Background(), ask(content))
		if err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		var last *envelope.Delta
		busy := false
		for d, err := range reply.Deltas() {
			if err != nil {
				if last == nil && errors.Is(err, envelope.CodeBusy) && time.Now().Before(deadline) {
					busy = true
					break
				}
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
		if !busy {
			return reply, got.String(), last
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUAMP_5_GRPC_Window: a consumer that does not ACK gets exactly
// delta_window deltas and the producer blocks; each ACK lets as many
// more through as it frees. The same ring and rule as SSE and WebSocket
// (messaging's TestUAMP_5_WindowSlowConsumer).
func TestUAMP_5_GRPC_Window(t *testing.T) {
	h := newCounter(100)
	env := newTestEnv(t, h, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	call, err := env.raw(t, &clientCert.TLS).Exchange(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req := ask("")
	req.DeltaWindow = 8
	if err := call.Send(envelopeFrame(signed(t, req, clientKey))); err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	// receive reads frames until n deltas arrived; it fails on more.
	receive := func(n int64) {
		t.Helper()
		for next < n {
			f, err := call.Recv()
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range f.GetDeltas().GetDelta() {
				d, err := envelope.DecodeDelta(b)
				if err != nil {
					t.Fatal(err)
				}
				if d.Seq != next {
					t.Fatalf("delta_seq %d, want %d", d.Seq, next)
				}
				next++
			}
		}
		if next != n {
			t.Fatalf("%d deltas, want %d", next, n)
		}
		time.Sleep(50 * time.Millisecond)
		if sent := h.count(); int64(sent) != n {
			t.Fatalf("the producer sent %d deltas with %d un-ACKed allowed", sent, n)
		}
	}
	receive(8)
	if err := call.Send(envelopeFrame(ackOf(t, req.ID, 2))); err != nil {
		t.Fatal(err)
	}
	receive(11) // 3 freed
	if err := call.Send(envelopeFrame(ackOf(t, req.ID, 10))); err != nil {
		t.Fatal(err)
	}
	receive(19)
}

// TestUAMP_5_GRPC_WindowSlowConsumer: the Client ACKs every window/2
// deltas; a slow consumer gets everything in order.
func TestUAMP_5_GRPC_WindowSlowConsumer(t *testing.T) {
	h := newCounter(600)
	env := newTestEnv(t, h, nil)
	req := ask("")
	req.DeltaWindow = 8
	reply, err := env.client(t, nil).Ask(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	idx, last := collect(t, reply, func(d *envelope.Delta) {
		if d.Seq%50 == 0 {
			time.Sleep(2 * time.Millisecond)
		}
	})
	checkSequence(t, idx, 600)
	if last.Type != envelope.DeltaDone {
		t.Fatalf("final %s", last.Type)
	}
	if err := h.waitEnded(t); err != nil {
		t.Fatal(err)
	}
}

// TestUAMP_5_GRPC_ResumeAfterDrop: every connection is cut twice
// mid-stream; the client opens a new call whose first frame is the ACK
// of the last delta it holds, and gets every delta exactly once, in
// order (messaging's TestUAMP_5_ResumeAfterDrop).
func TestUAMP_5_GRPC_ResumeAfterDrop(t *testing.T) {
	h := newCounter(1000)
	env := newTestEnv(t, h, nil)
	reply, err := env.client(t, nil).Ask(context.Background(), ask(""))
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
}

// TestUAMP_5_GRPC_ResumeTakesOver: a second call resuming a stream takes
// it over; the first ends with Aborted, the second goes on from the
// delta after its ACK.
func TestUAMP_5_GRPC_ResumeTakesOver(t *testing.T) {
	h := newCounter(20)
	env := newTestEnv(t, h, nil)
	raw := env.raw(t, &clientCert.TLS)
	ctx := context.Background()
	first, err := raw.Exchange(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req := ask("")
	req.DeltaWindow = 4
	first.Send(envelopeFrame(signed(t, req, clientKey)))
	// The first frame carries one delta or more, as the server batched
	// them: the resume ACKs the last of them, which is all the client
	// knows was sent.
	f, err := first.Recv()
	if err != nil || len(f.GetDeltas().GetDelta()) == 0 {
		t.Fatalf("first frame %v, %v", f, err)
	}
	got := f.GetDeltas().GetDelta()
	last, err := envelope.DecodeDelta(got[len(got)-1])
	if err != nil || last.Type == envelope.DeltaDone {
		t.Fatalf("last delta of the first frame %+v, %v", last, err)
	}
	second, err := raw.Exchange(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second.Send(envelopeFrame(ackOf(t, req.ID, last.Seq)))
	f, err = second.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(f.GetDeltas().GetDelta()) == 0 {
		t.Fatalf("the resuming call's first frame carries no delta: %v", f)
	}
	d, err := envelope.DecodeDelta(f.GetDeltas().GetDelta()[0])
	if err != nil || d.Seq != last.Seq+1 {
		t.Fatalf("resumed at %+v after ACK %d, %v", d, last.Seq, err)
	}
	for {
		if _, err := first.Recv(); err != nil {
			if status.Code(err) != codes.Aborted {
				t.Fatalf("the first call ended with %v", err)
			}
			break
		}
	}
}

// TestUAMP_4_1_GRPC_CancelMidStream: a cancel stops the producer promptly
// and the stream ends with a cancel delta; breaking the loop cancels too.
func TestUAMP_4_1_GRPC_CancelMidStream(t *testing.T) {
	t.Run("Cancel", func(t *testing.T) {
		h := newCounter(-1)
		env := newTestEnv(t, h, nil)
		ctx := context.Background()
		reply, err := env.client(t, nil).Ask(ctx, ask(""))
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
		if err := h.waitEnded(t); err == nil || !strings.Contains(err.Error(), "cancelled by the requester") {
			t.Fatalf("producer ended with %v", err)
		}
		t.Logf("stream ended %v after the cancel", time.Since(cancelledAt))
	})
	t.Run("Break", func(t *testing.T) {
		h := newCounter(-1)
		env := newTestEnv(t, h, nil)
		reply, err := env.client(t, nil).Ask(context.Background(), ask(""))
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
		if err := h.waitEnded(t); err == nil || !strings.Contains(err.Error(), "cancelled by the requester") {
			t.Fatalf("producer ended with %v", err)
		}
	})
	t.Run("CancelFirst", func(t *testing.T) {
		// A call whose first envelope is a cancel cancels and ends.
		h := newCounter(-1)
		env := newTestEnv(t, h, nil)
		ctx := context.Background()
		reply, err := env.client(t, nil).Ask(ctx, ask(""))
		if err != nil {
			t.Fatal(err)
		}
		// Ask returns once the ask is sent, not once the server opened
		// its stream (a refusal comes through Deltas): wait for the
		// producer, or the cancel could overtake the ask (4.09, no
		// stream yet).
		for deadline := time.Now().Add(patience); h.count() == 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the producer never started")
			}
		}
		call, err := env.raw(t, &clientCert.TLS).Exchange(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c := envelope.New(clientDID, []string{serverDID}, envelope.IntentCancel, envelope.Body{Type: "text/plain"})
		c.ReplyTo = reply.Request().ID
		call.Send(envelopeFrame(signed(t, c, clientKey)))
		if fr, err := call.Recv(); err != io.EOF {
			t.Fatalf("call after a cancel: %v (frame %s)", err, fr)
		}
		_, last := collect(t, reply, nil)
		if last.Type != envelope.DeltaCancel {
			t.Fatalf("final %s", last.Type)
		}
	})
}

// TestUAMP_5_GRPC_ServerClose: closing the messaging.Server stops its
// producers and ends the calls it serves; the client's iteration ends
// with an error rather than hanging.
func TestUAMP_5_GRPC_ServerClose(t *testing.T) {
	h := newCounter(-1)
	env := newTestEnv(t, h, nil)
	reply, err := env.client(t, &messaging.ClientOptions{MaxReconnects: 2, ReconnectDelay: time.Millisecond}).Ask(context.Background(), ask(""))
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
}

// fakeAgent serves crafted delta frames: the consumer's checks.
type fakeAgent struct {
	uampv1.UnimplementedAgentServer
	deltas []string // each with %s for the stream id
}

func (f *fakeAgent) Exchange(call uampv1.Agent_ExchangeServer) error {
	fr, err := call.Recv()
	if err != nil {
		return err
	}
	e, err := envelope.Decode(fr.GetEnvelope())
	if err != nil {
		return err
	}
	bare, _ := envelope.ParseID(e.ID)
	for _, d := range f.deltas {
		b := []byte(strings.ReplaceAll(d, "%s", "str-"+bare))
		call.Send(&uampv1.Frame{Kind: &uampv1.Frame_Deltas{Deltas: &uampv1.Deltas{Delta: [][]byte{b}}}})
	}
	// Keep the call open until the client ends it: ending it here could
	// reach the client before its verdict on the frames (it would resume).
	for {
		if _, err := call.Recv(); err != nil {
			return nil
		}
	}
}

// TestUAMP_5_GRPC_ConsumerChecks: a gap is 4.09 and so is a frame after
// the final delta; a duplicate is dropped (messaging's
// TestUAMP_5_ConsumerChecks).
func TestUAMP_5_GRPC_ConsumerChecks(t *testing.T) {
	d := func(seq int, typ string) string {
		return `{"delta_seq":` + string(rune('0'+seq)) + `,"stream_id":"%s","ts":"2025-07-10T10:00:00Z","type":"` + typ + `"}`
	}
	cases := []struct {
		name   string
		deltas []string
		want   envelope.Code
		n      int // deltas yielded before the error
	}{
		{"gap", []string{d(0, "chunk"), d(2, "chunk")}, envelope.CodeMissingDeltaSeq, 1},
		{"missing first", []string{d(1, "chunk")}, envelope.CodeMissingDeltaSeq, 0},
		{"after done", []string{d(0, "done"), d(1, "chunk")}, "", 1},
		{"duplicate", []string{d(0, "chunk"), d(0, "chunk"), d(1, "done")}, "", 2},
		{"malformed", []string{`{"delta_seq":0}`}, envelope.CodeBadRequest, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fixtures()
			ln := newFakeServer(t, &fakeAgent{deltas: tc.deltas})
			c, err := NewClient("https://"+ln, clientOptions(&messaging.ClientOptions{MaxReconnects: 1, ReconnectDelay: time.Millisecond}))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			reply, err := c.Ask(context.Background(), ask("x"))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			var got error
			for _, err := range reply.Deltas() {
				if err != nil {
					got = err
					break
				}
				n++
			}
			if n != tc.n || (tc.want == "") != (got == nil) || got != nil && envelope.AsError(got).Code != tc.want {
				t.Fatalf("%d deltas, then %v; want %d then %q", n, got, tc.n, tc.want)
			}
		})
	}
}
