package messaging

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/agentry-dev/agentry/envelope"
)

func rawFrame(dst []byte, _ int64, delta []byte) []byte { return appendFrame(dst, delta) }

// readAll drains c's available deltas, decoding them.
func readDeltas(t *testing.T, c *cursor) ([]*envelope.Delta, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	buf, final, err := c.read(ctx, nil, 1<<20, nil, rawFrame)
	if err != nil {
		t.Fatal(err)
	}
	var out []*envelope.Delta
	r := frameReader{msg: buf, max: 1 << 20}
	for {
		rec, err := r.next()
		if err != nil {
			t.Fatal(err)
		}
		if rec == nil {
			return out, final
		}
		d, err := decodeDelta(rec)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
}

// TestUAMP_5_WindowBlocksProducer runs in a bubble: synctest.Wait shows
// a Send blocked, not merely slow, and time passes only while it is.
func TestUAMP_5_WindowBlocksProducer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStream(context.Background(), "str-1", "did:web:c", "r", 4, 0)
		ctx := context.Background()
		for i := range 4 {
			if err := s.Send(ctx, envelope.DeltaChunk, []byte(`{"i":1}`)); err != nil {
				t.Fatal(i, err)
			}
		}
		// The fifth blocks until an ACK.
		sent := make(chan error, 1)
		go func() { sent <- s.Send(ctx, envelope.DeltaChunk, nil) }()
		synctest.Wait()
		select {
		case err := <-sent:
			t.Fatalf("fifth Send returned %v with 4 un-ACKed deltas and a window of 4", err)
		default:
		}
		if err := s.ack(0); err != nil {
			t.Fatal(err)
		}
		if err := <-sent; err != nil {
			t.Fatal(err)
		}
		// An ACK beyond what was sent is refused.
		if err := s.ack(5); !errors.Is(err, envelope.CodeMissingDeltaSeq) {
			t.Fatalf("ack(5) = %v", err)
		}
		// A blocked Send returns when its context ends, not before.
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(10*time.Millisecond, cancel)
		start := time.Now()
		if err := s.Send(cctx, envelope.DeltaChunk, nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("Send after cancel = %v", err)
		}
		if d := time.Since(start); d != 10*time.Millisecond {
			t.Errorf("blocked Send returned after %v, want at the cancel (10ms)", d)
		}
	})
}

func TestUAMP_5_ResumeFromLog(t *testing.T) {
	s := newStream(context.Background(), "str-1", "did:web:c", "r", 8, 0)
	ctx := context.Background()
	c, err := s.attach(0)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		s.Send(ctx, envelope.DeltaChunk, nil)
	}
	got, _ := readDeltas(t, c)
	if len(got) != 3 || got[2].Seq != 2 {
		t.Fatalf("read %d deltas", len(got))
	}
	// The consumer saw 0 and 1 only, and reconnects: it gets 2 on.
	c2, err := s.attach(2)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.read(ctx, nil, 1, nil, rawFrame); !errors.Is(err, errDetached) {
		t.Fatalf("old cursor: %v", err)
	}
	s.Send(ctx, envelope.DeltaDone, nil)
	got, final := readDeltas(t, c2)
	if len(got) != 2 || got[0].Seq != 2 || got[1].Type != envelope.DeltaDone || !final {
		t.Fatalf("resumed deltas %v final %v", got, final)
	}
	if err := s.Send(ctx, envelope.DeltaChunk, nil); !errors.Is(err, envelope.ErrTerminal) {
		t.Fatalf("Send after done = %v", err)
	}
	// The log holds the last window: the 4 deltas here, all of them.
	for _, from := range []int64{0, 4} {
		if _, err := s.attach(from); err != nil {
			t.Fatal(from, err)
		}
	}
	for _, from := range []int64{-1, 5} {
		if _, err := s.attach(from); !errors.Is(err, envelope.CodeMissingDeltaSeq) {
			t.Fatalf("attach(%d) = %v", from, err)
		}
	}
}

func TestUAMP_5_CancelEndsStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStream(context.Background(), "str-1", "did:web:c", "r", 2, 0)
		var wg sync.WaitGroup
		wg.Add(1)
		var sendErr error
		go func() {
			defer wg.Done()
			for {
				if sendErr = s.Send(s.ctx, envelope.DeltaChunk, nil); sendErr != nil {
					return
				}
			}
		}()
		synctest.Wait() // the producer fills the window and blocks
		if err := s.requestCancel(); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if !errors.Is(sendErr, errCancelled) {
			t.Fatalf("producer ended with %v", sendErr)
		}
		done := make(chan struct{})
		go func() { s.finish(context.Background(), sendErr, 5*time.Second); close(done) }()
		c, _ := s.attach(0)
		var last *envelope.Delta
		for last == nil || !last.Type.Final() {
			got, _ := readDeltas(t, c)
			last = got[len(got)-1]
			s.ack(last.Seq)
		}
		<-done
		if last.Type != envelope.DeltaCancel {
			t.Fatalf("final delta %s", last.Type)
		}
		if err := s.requestCancel(); !errors.Is(err, envelope.ErrTerminal) {
			t.Fatalf("second cancel: %v", err)
		}
		select {
		case <-s.released:
		default:
			t.Fatal("stream not released after its final delta was ACKed")
		}
	})
}

func TestUAMP_5_Sequencer(t *testing.T) {
	d := func(seq int64, typ envelope.DeltaType) *envelope.Delta {
		return &envelope.Delta{Seq: seq, StreamID: "s", Type: typ}
	}
	q := sequencer{streamID: "s"}
	steps := []struct {
		d       *envelope.Delta
		deliver bool
		code    envelope.Code
	}{
		{d(0, envelope.DeltaChunk), true, ""},
		{d(0, envelope.DeltaChunk), false, ""}, // duplicate dropped
		{d(2, envelope.DeltaChunk), false, envelope.CodeMissingDeltaSeq},
		{d(1, envelope.DeltaChunk), true, ""},
		{d(2, envelope.DeltaDone), true, ""},
		{d(1, envelope.DeltaChunk), false, ""}, // duplicate after done: dropped
		{d(3, envelope.DeltaChunk), false, envelope.CodeMissingDeltaSeq},
		{&envelope.Delta{Seq: 3, StreamID: "t"}, false, envelope.CodeBadRequest},
	}
	for i, st := range steps {
		ok, err := q.accept(st.d)
		if ok != st.deliver || (err == nil) != (st.code == "") || err != nil && envelope.AsError(err).Code != st.code {
			t.Fatalf("step %d: %v, %v", i, ok, err)
		}
	}
}
