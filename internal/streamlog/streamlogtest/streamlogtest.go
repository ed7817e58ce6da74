// Package streamlogtest is the conformance suite of streamlog.Store, the
// store of UAMP 1.0 delta streams (§5, uamp.dev) that replicas share:
// every implementation — in memory, SQLite, PostgreSQL — runs Run.
package streamlogtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/streamlog"
	"github.com/google/go-cmp/cmp"
)

// Open returns a fresh, empty store. The suite closes nothing: register
// cleanups with t.
type Open func(t *testing.T) streamlog.Store

// patience bounds a wait for something that happens at once unless the
// store is broken; never the thing under test.
const patience = 10 * time.Second

// The terms the suite writes with: a producer alive for the test's
// length, or dead at once (a lease of 0 has expired when next read).
var (
	live = streamlog.Terms{Lease: time.Hour, Linger: time.Hour}
	dead = streamlog.Terms{Lease: 0, Linger: time.Hour}
	gone = streamlog.Terms{Lease: 0, Linger: 0}
)

func delta(seq int64) []byte {
	return fmt.Appendf(nil, `{"delta_seq":%d,"stream_id":"s-1","ts":"2026-01-01T00:00:00.000Z","type":"chunk","payload":{"content":"Grüße %d 🙂"}}`, seq, seq)
}

func deltas(from, to int64) [][]byte {
	var out [][]byte
	for s := from; s < to; s++ {
		out = append(out, delta(s))
	}
	return out
}

func strs(bs [][]byte) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}

// Run runs the suite against the stores open returns.
func Run(t *testing.T, open Open) {
	ctx := context.Background()
	k := streamlog.Key{Owner: "did:web:client.example", ID: "s-1"}
	head := streamlog.Head{Key: k, RequestID: "6f1c2a4e-8d3b-4c1a-9e2f-0a1b2c3d4e5f"}
	create := func(t *testing.T, s streamlog.Store, h streamlog.Head, terms streamlog.Terms) {
		t.Helper()
		if err := s.Create(ctx, h, terms); err != nil {
			t.Fatalf("Create %v: %v", h.Key, err)
		}
	}
	appendT := func(t *testing.T, s streamlog.Store, k streamlog.Key, first int64, ds [][]byte, final bool, keep int, terms streamlog.Terms) streamlog.Head {
		t.Helper()
		h, err := s.Append(ctx, k, first, ds, final, keep, terms)
		if err != nil {
			t.Fatalf("Append(%d, %d deltas): %v", first, len(ds), err)
		}
		return h
	}

	t.Run("CreateHeadRequest", func(t *testing.T) {
		s := open(t)
		create(t, s, head, live)
		want := streamlog.Head{Key: k, RequestID: head.RequestID, Acked: -1, Alive: true}
		h, err := s.Head(ctx, k)
		if diff := cmp.Diff(want, h); err != nil || diff != "" {
			t.Fatalf("Head: %v (-want +got)\n%s", err, diff)
		}
		h, err = s.Request(ctx, k.Owner, head.RequestID)
		if diff := cmp.Diff(want, h); err != nil || diff != "" {
			t.Fatalf("Request: %v (-want +got)\n%s", err, diff)
		}
		for _, c := range []struct {
			name string
			err  error
		}{
			{"Head of another stream", func() error { _, err := s.Head(ctx, streamlog.Key{Owner: k.Owner, ID: "s-2"}); return err }()},
			{"Head of another owner", func() error {
				_, err := s.Head(ctx, streamlog.Key{Owner: "did:web:other.example", ID: k.ID})
				return err
			}()},
			{"Request of another owner", func() error { _, err := s.Request(ctx, "did:web:other.example", head.RequestID); return err }()},
			{"Read of another stream", func() error { _, _, err := s.Read(ctx, streamlog.Key{Owner: k.Owner, ID: "s-2"}, 0, 1); return err }()},
			{"Ack of another stream", s.Ack(ctx, streamlog.Key{Owner: k.Owner, ID: "s-2"}, 0)},
			{"Cancel of another stream", s.Cancel(ctx, streamlog.Key{Owner: k.Owner, ID: "s-2"})},
		} {
			if !errors.Is(c.err, streamlog.ErrNotFound) {
				t.Errorf("%s: %v, want ErrNotFound", c.name, c.err)
			}
		}
	})

	t.Run("CreateExists", func(t *testing.T) {
		s := open(t)
		create(t, s, head, live)
		other := head
		other.RequestID = "00000000-0000-4000-8000-000000000000"
		if err := s.Create(ctx, other, live); !errors.Is(err, streamlog.ErrExists) {
			t.Errorf("Create of a taken stream_id: %v, want ErrExists", err)
		}
		sameRequest := head
		sameRequest.ID = "s-2"
		if err := s.Create(ctx, sameRequest, live); !errors.Is(err, streamlog.ErrExists) {
			t.Errorf("Create for a taken request: %v, want ErrExists", err)
		}
		// Another owner's namespace is its own.
		theirs := head
		theirs.Owner = "did:web:other.example"
		create(t, s, theirs, live)
		// A stream whose producer died is still in use until it expires.
		d := streamlog.Head{Key: streamlog.Key{Owner: k.Owner, ID: "s-dead"}, RequestID: "11111111-1111-4111-8111-111111111111"}
		create(t, s, d, dead)
		if err := s.Create(ctx, d, live); !errors.Is(err, streamlog.ErrExists) {
			t.Errorf("Create over a dead producer's stream: %v, want ErrExists", err)
		}
	})

	t.Run("AppendReadTrim", func(t *testing.T) {
		s := open(t)
		create(t, s, head, live)
		h := appendT(t, s, k, 0, deltas(0, 3), false, 4, live)
		if h.Next != 3 || h.Final || !h.Alive || h.Acked != -1 {
			t.Errorf("head after 3 deltas: %+v", h)
		}
		got, h, err := s.Read(ctx, k, 0, 10)
		if diff := cmp.Diff(strs(deltas(0, 3)), strs(got)); err != nil || diff != "" || h.Next != 3 {
			t.Fatalf("Read(0): %v, next %d (-want +got)\n%s", err, h.Next, diff)
		}
		// Keep 4: deltas 0 and 1 are trimmed once 6 are stored.
		appendT(t, s, k, 3, deltas(3, 6), false, 4, live)
		for _, c := range []struct {
			from  int64
			limit int
			want  [][]byte
		}{
			{0, 10, deltas(2, 6)},
			{2, 10, deltas(2, 6)},
			{4, 1, deltas(4, 5)},
			{5, 10, deltas(5, 6)},
			{6, 10, nil},
			{60, 10, nil},
		} {
			got, _, err := s.Read(ctx, k, c.from, c.limit)
			if diff := cmp.Diff(strs(c.want), strs(got)); err != nil || diff != "" {
				t.Errorf("Read(%d, %d): %v (-want +got)\n%s", c.from, c.limit, err, diff)
			}
		}
	})

	t.Run("AppendConflicts", func(t *testing.T) {
		s := open(t)
		if _, err := s.Append(ctx, k, 0, deltas(0, 1), false, 4, live); !errors.Is(err, streamlog.ErrNotFound) {
			t.Errorf("Append to no stream: %v, want ErrNotFound", err)
		}
		create(t, s, head, live)
		for _, first := range []int64{1, -1} {
			if _, err := s.Append(ctx, k, first, deltas(first, first+1), false, 4, live); !errors.Is(err, streamlog.ErrConflict) {
				t.Errorf("Append at %d of an empty stream: %v, want ErrConflict", first, err)
			}
		}
		appendT(t, s, k, 0, deltas(0, 2), false, 4, live)
		if _, err := s.Append(ctx, k, 1, deltas(1, 2), false, 4, live); !errors.Is(err, streamlog.ErrConflict) {
			t.Errorf("Append of a stored delta_seq: %v, want ErrConflict", err)
		}
		h := appendT(t, s, k, 2, deltas(2, 3), true, 4, live)
		if !h.Final || h.Next != 3 {
			t.Errorf("head after the final delta: %+v", h)
		}
		if _, err := s.Append(ctx, k, 3, deltas(3, 4), false, 4, live); !errors.Is(err, streamlog.ErrConflict) {
			t.Errorf("Append after the final delta: %v, want ErrConflict", err)
		}
		got, _, _ := s.Read(ctx, k, 0, 10)
		if diff := cmp.Diff(strs(deltas(0, 3)), strs(got)); diff != "" {
			t.Errorf("refused appends changed the deltas (-want +got)\n%s", diff)
		}
	})

	t.Run("AckAndCancel", func(t *testing.T) {
		s := open(t)
		create(t, s, head, live)
		appendT(t, s, k, 0, deltas(0, 4), false, 8, live)
		for _, seq := range []int64{2, 1} {
			if err := s.Ack(ctx, k, seq); err != nil {
				t.Fatalf("Ack(%d): %v", seq, err)
			}
		}
		if h, _ := s.Head(ctx, k); h.Acked != 2 || h.Cancelled {
			t.Errorf("head after Ack 2 then 1: %+v", h)
		}
		if err := s.Cancel(ctx, k); err != nil {
			t.Fatalf("Cancel: %v", err)
		}
		if h, _ := s.Request(ctx, k.Owner, head.RequestID); !h.Cancelled {
			t.Errorf("head after Cancel: %+v", h)
		}
		if err := s.Cancel(ctx, k); !errors.Is(err, streamlog.ErrEnded) {
			t.Errorf("second Cancel: %v, want ErrEnded", err)
		}
		// A stream that ended refuses a cancel.
		k2 := streamlog.Key{Owner: k.Owner, ID: "s-2"}
		create(t, s, streamlog.Head{Key: k2, RequestID: "22222222-2222-4222-8222-222222222222"}, live)
		appendT(t, s, k2, 0, deltas(0, 1), true, 8, live)
		if err := s.Cancel(ctx, k2); !errors.Is(err, streamlog.ErrEnded) {
			t.Errorf("Cancel after the final delta: %v, want ErrEnded", err)
		}
	})

	t.Run("LeaseRenew", func(t *testing.T) {
		s := open(t)
		create(t, s, head, dead)
		if h, _ := s.Head(ctx, k); h.Alive {
			t.Fatalf("head with a lease of 0: %+v, want not alive", h)
		}
		if h, err := s.Renew(ctx, k, live); err != nil || !h.Alive {
			t.Fatalf("Renew: %+v, %v", h, err)
		}
		if h, _ := s.Head(ctx, k); !h.Alive {
			t.Errorf("head after Renew: %+v, want alive", h)
		}
		if _, err := s.Renew(ctx, streamlog.Key{Owner: k.Owner, ID: "s-2"}, live); !errors.Is(err, streamlog.ErrNotFound) {
			t.Errorf("Renew of no stream: %v, want ErrNotFound", err)
		}
	})

	t.Run("EndDead", func(t *testing.T) {
		s := open(t)
		create(t, s, head, live)
		appendT(t, s, k, 0, deltas(0, 2), false, 8, live)
		end := []byte(`{"delta_seq":2,"stream_id":"s-1","ts":"2026-01-01T00:00:01.000Z","type":"error","payload":{"code":"5.02","message":"producer died","retry":false}}`)
		if err := s.EndDead(ctx, k, 2, end, time.Hour); !errors.Is(err, streamlog.ErrConflict) {
			t.Fatalf("EndDead while the lease runs: %v, want ErrConflict", err)
		}
		// The producer stops renewing: its last append leased it for 0.
		appendT(t, s, k, 2, deltas(2, 3), false, 8, dead)
		if h, _ := s.Head(ctx, k); h.Alive || h.Final || h.Next != 3 {
			t.Fatalf("head of a dead producer: %+v", h)
		}
		for _, seq := range []int64{2, 4} {
			if err := s.EndDead(ctx, k, seq, end, time.Hour); !errors.Is(err, streamlog.ErrConflict) {
				t.Errorf("EndDead at %d, next 3: %v, want ErrConflict", seq, err)
			}
		}
		end = []byte(strings.Replace(string(end), `"delta_seq":2`, `"delta_seq":3`, 1))
		if err := s.EndDead(ctx, k, 3, end, time.Hour); err != nil {
			t.Fatalf("EndDead: %v", err)
		}
		got, h, err := s.Read(ctx, k, 2, 10)
		if diff := cmp.Diff([]string{string(delta(2)), string(end)}, strs(got)); err != nil || diff != "" || !h.Final || h.Next != 4 {
			t.Fatalf("Read after EndDead: %+v, %v (-want +got)\n%s", h, err, diff)
		}
		// The producer, back, cannot append any more; nor can another end it.
		if _, err := s.Append(ctx, k, 3, deltas(3, 4), false, 8, live); !errors.Is(err, streamlog.ErrConflict) {
			t.Errorf("Append after EndDead: %v, want ErrConflict", err)
		}
		if err := s.EndDead(ctx, k, 4, end, time.Hour); !errors.Is(err, streamlog.ErrConflict) {
			t.Errorf("second EndDead: %v, want ErrConflict", err)
		}
		if err := s.EndDead(ctx, streamlog.Key{Owner: k.Owner, ID: "s-2"}, 0, end, time.Hour); !errors.Is(err, streamlog.ErrNotFound) {
			t.Errorf("EndDead of no stream: %v, want ErrNotFound", err)
		}
	})

	t.Run("EndDeadRacesAppend", func(t *testing.T) {
		// A producer back from a pause and a replica that declared it
		// dead race for delta 0: exactly one wins.
		s := open(t)
		for i := range 8 {
			ki := streamlog.Key{Owner: k.Owner, ID: fmt.Sprintf("s-race-%d", i)}
			create(t, s, streamlog.Head{Key: ki, RequestID: fmt.Sprintf("33333333-3333-4333-8333-%012d", i)}, dead)
			var wg sync.WaitGroup
			var appendErr, endErr error
			wg.Go(func() { _, appendErr = s.Append(ctx, ki, 0, deltas(0, 1), false, 8, live) })
			wg.Go(func() { endErr = s.EndDead(ctx, ki, 0, delta(0), time.Hour) })
			wg.Wait()
			if (appendErr == nil) == (endErr == nil) {
				t.Fatalf("race %d: Append %v, EndDead %v: want exactly one to succeed", i, appendErr, endErr)
			}
			if err := errors.Join(appendErr, endErr); !errors.Is(err, streamlog.ErrConflict) {
				t.Fatalf("race %d: the loser got %v, want ErrConflict", i, err)
			}
		}
	})

	t.Run("Expiry", func(t *testing.T) {
		s := open(t)
		// A stream whose producer died and whose linger is 0 is gone.
		create(t, s, head, gone)
		if _, err := s.Head(ctx, k); !errors.Is(err, streamlog.ErrNotFound) {
			t.Fatalf("Head of an expired stream: %v, want ErrNotFound", err)
		}
		if _, err := s.Request(ctx, k.Owner, head.RequestID); !errors.Is(err, streamlog.ErrNotFound) {
			t.Fatalf("Request of an expired stream: %v, want ErrNotFound", err)
		}
		if _, err := s.Append(ctx, k, 0, deltas(0, 1), false, 4, live); !errors.Is(err, streamlog.ErrNotFound) {
			t.Fatalf("Append to an expired stream: %v, want ErrNotFound", err)
		}
		// Its key and request may be taken again, without its deltas.
		create(t, s, head, live)
		appendT(t, s, k, 0, deltas(0, 2), true, 4, streamlog.Terms{Lease: time.Hour, Linger: 0})
		if _, err := s.Head(ctx, k); !errors.Is(err, streamlog.ErrNotFound) {
			t.Fatalf("Head of a stream ended with a linger of 0: %v, want ErrNotFound", err)
		}
		if err := s.Sweep(ctx); err != nil {
			t.Fatalf("Sweep: %v", err)
		}
		create(t, s, head, live)
		if got, h, err := s.Read(ctx, k, 0, 10); err != nil || len(got) != 0 || h.Next != 0 || h.Final {
			t.Fatalf("a new stream under an expired one's key: %d deltas, %+v, %v", len(got), h, err)
		}
		// Sweep leaves the living alone.
		if _, err := s.Head(ctx, k); err != nil {
			t.Fatalf("Head after Sweep: %v", err)
		}
	})

	t.Run("Delete", func(t *testing.T) {
		s := open(t)
		create(t, s, head, live)
		appendT(t, s, k, 0, deltas(0, 2), false, 4, live)
		for range 2 {
			if err := s.Delete(ctx, k); err != nil {
				t.Fatalf("Delete: %v", err)
			}
		}
		if _, err := s.Head(ctx, k); !errors.Is(err, streamlog.ErrNotFound) {
			t.Errorf("Head after Delete: %v", err)
		}
		if _, err := s.Request(ctx, k.Owner, head.RequestID); !errors.Is(err, streamlog.ErrNotFound) {
			t.Errorf("Request after Delete: %v", err)
		}
		create(t, s, head, live)
		if got, h, err := s.Read(ctx, k, 0, 10); err != nil || len(got) != 0 || h.Next != 0 {
			t.Errorf("recreated after Delete: %d deltas, %+v, %v", len(got), h, err)
		}
	})

	t.Run("Watch", func(t *testing.T) {
		s := open(t)
		create(t, s, head, live)
		c, stop := s.Watch(k)
		defer stop()
		for _, change := range []struct {
			name string
			do   func() error
		}{
			{"Append", func() error { _, err := s.Append(ctx, k, 0, deltas(0, 1), false, 4, live); return err }},
			{"Ack", func() error { return s.Ack(ctx, k, 0) }},
			{"Cancel", func() error { return s.Cancel(ctx, k) }},
		} {
			if err := change.do(); err != nil {
				t.Fatalf("%s: %v", change.name, err)
			}
			select {
			case <-c:
			case <-time.After(patience):
				t.Fatalf("%s signalled nothing within %v", change.name, patience)
			}
		}
	})

	t.Run("BytesKept", func(t *testing.T) {
		s := open(t)
		create(t, s, head, live)
		big := []byte(`{"delta_seq":0,"stream_id":"s-1","ts":"2026-01-01T00:00:00.000Z","type":"chunk","payload":{"content":"` +
			strings.Repeat("\\u0000 \\\" ' ; -- é 🙂 ", 4096) + `"}}`)
		appendT(t, s, k, 0, [][]byte{big}, false, 4, live)
		got, _, err := s.Read(ctx, k, 0, 1)
		if err != nil || len(got) != 1 || string(got[0]) != string(big) {
			t.Fatalf("Read of a %d-byte delta: %v, bytes differ: %v", len(big), err, len(got) != 1 || string(got[0]) != string(big))
		}
	})
}
