// Package uiapsessiontest is the conformance suite of uiapsession.Store,
// the persistence of app-side UIAP sessions (UIAP Core 0.1 at uiap.dev,
// §8.2 session.resume): every implementation — internal/memstore,
// internal/sqlstore on SQLite and PostgreSQL — passes Run.
//
//	func TestUIAP_8_2_Store_Mine(t *testing.T) {
//		uiapsessiontest.Run(t, func(t *testing.T) uiapsession.Store { return newMyStore(t) })
//	}
//
// What the suite pins beyond the interface's doc comment: times are kept
// to the millisecond; an expired session is gone for Get and Claim (and
// Touch revives it) until Sweep removes it; of concurrent Claims
// with one token exactly one succeeds; a session ID that is not UTF-8 or
// holds a NUL byte is not found rather than an error.
package uiapsessiontest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/internal/uiapsession"
	"github.com/google/go-cmp/cmp"
)

// Run checks the store that newStore returns against uiapsession.Store.
// Each case calls newStore for a fresh, empty store; newStore releases it
// through t.Cleanup.
func Run(t *testing.T, newStore func(t *testing.T) uiapsession.Store) {
	t.Helper()
	cases := []struct {
		name string
		run  func(t *testing.T, s uiapsession.Store)
	}{
		{"CreateGetRoundTrip", testRoundTrip},
		{"CreateExisting", testCreateExisting},
		{"NotFound", testNotFound},
		{"Expired", testExpired},
		{"ClaimTokenSingleUse", testClaimSingleUse},
		{"ClaimWithoutToken", testClaimWithoutToken},
		{"ClaimRace", testClaimRace},
		{"AppendAndEvents", testAppend},
		{"AppendFenced", testAppendFenced},
		{"AppendKeepsLatest", testAppendKeep},
		{"Touch", testTouch},
		{"Delete", testDelete},
		{"Sweep", testSweep},
		{"GetReturnsCopy", testGetCopy},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newStore(t)) })
	}
}

// now is the suite's clock: a fixed instant, so that expiry is exact.
var now = time.Date(2026, 3, 27, 12, 0, 0, 0, time.UTC)

func hash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

func sample() *uiapsession.Session {
	return &uiapsession.Session{ID: ids.New(), TokenHash: hash("t1"), State: []byte(`{"version":"0.1"}`),
		App: []byte(`{"workflow":"store"}`), ExpiresAt: now.Add(time.Minute)}
}

func create(t *testing.T, s uiapsession.Store, sess *uiapsession.Session) {
	t.Helper()
	if err := s.Create(t.Context(), sess); err != nil {
		t.Fatalf("Create: %v", err)
	}
}

func get(t *testing.T, s uiapsession.Store, id string) *uiapsession.Session {
	t.Helper()
	got, err := s.Get(t.Context(), id, now)
	if err != nil {
		t.Fatalf("Get(%s): %v", id, err)
	}
	return got
}

func events(t *testing.T, s uiapsession.Store, id string, after int64) []uiapsession.Event {
	t.Helper()
	evs, err := s.Events(t.Context(), id, after)
	if err != nil {
		t.Fatalf("Events(%s, %d): %v", id, after, err)
	}
	return evs
}

func event(seq int64) uiapsession.Event {
	return uiapsession.Event{Seq: seq, Data: fmt.Appendf(nil, `{"seq":%d}`, seq)}
}

func testRoundTrip(t *testing.T, s uiapsession.Store) {
	in := sample()
	in.Version = 7 // ignored
	in.ExpiresAt = now.Add(1500*time.Millisecond + 999*time.Microsecond)
	create(t, s, in)
	want := *in
	want.Version, want.ExpiresAt = 1, now.Add(1500*time.Millisecond)
	if diff := cmp.Diff(&want, get(t, s, in.ID)); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}
	bare := &uiapsession.Session{ID: ids.New(), State: []byte(`{}`), ExpiresAt: now.Add(time.Minute)}
	create(t, s, bare)
	got := get(t, s, bare.ID)
	if got.TokenHash != nil || len(got.App) != 0 || got.Seq != 0 || got.Version != 1 {
		t.Errorf("a session without token or app data reads back as %+v", got)
	}
}

func testCreateExisting(t *testing.T, s uiapsession.Store) {
	in := sample()
	create(t, s, in)
	if err := s.Create(t.Context(), in); !errors.Is(err, uiapsession.ErrConflict) {
		t.Errorf("Create of an existing ID = %v, want ErrConflict", err)
	}
	old := sample()
	old.ExpiresAt = now.Add(-time.Second)
	create(t, s, old)
	if err := s.Create(t.Context(), old); !errors.Is(err, uiapsession.ErrConflict) {
		t.Errorf("Create of an expired, unswept ID = %v, want ErrConflict", err)
	}
	if got := get(t, s, in.ID); got.Version != 1 || string(got.State) != string(in.State) {
		t.Errorf("a refused Create changed the session: %+v", got)
	}
}

func testNotFound(t *testing.T, s uiapsession.Store) {
	create(t, s, sample())
	for _, id := range []string{"missing", "", "a\x00b", "\xff\xfe"} {
		if _, err := s.Get(t.Context(), id, now); !errors.Is(err, uiapsession.ErrNotFound) {
			t.Errorf("Get(%q) = %v, want ErrNotFound", id, err)
		}
		if _, err := s.Claim(t.Context(), id, hash("t1"), hash("t2"), now.Add(time.Minute), now); !errors.Is(err, uiapsession.ErrNotFound) {
			t.Errorf("Claim(%q) = %v, want ErrNotFound", id, err)
		}
		if evs, err := s.Events(t.Context(), id, 0); err != nil || len(evs) != 0 {
			t.Errorf("Events(%q) = %v, %v; want none", id, evs, err)
		}
		if err := s.Touch(t.Context(), id, 1, now); !errors.Is(err, uiapsession.ErrConflict) {
			t.Errorf("Touch(%q) = %v, want ErrConflict", id, err)
		}
		if err := s.Delete(t.Context(), id, 1); !errors.Is(err, uiapsession.ErrConflict) {
			t.Errorf("Delete(%q) = %v, want ErrConflict", id, err)
		}
		if err := s.Append(t.Context(), id, 1, event(1), 8); !errors.Is(err, uiapsession.ErrConflict) {
			t.Errorf("Append(%q) = %v, want ErrConflict", id, err)
		}
	}
}

func testExpired(t *testing.T, s uiapsession.Store) {
	in := sample()
	in.ExpiresAt = now
	create(t, s, in)
	if _, err := s.Get(t.Context(), in.ID, now); !errors.Is(err, uiapsession.ErrNotFound) {
		t.Errorf("Get at its expiry = %v, want ErrNotFound", err)
	}
	if _, err := s.Get(t.Context(), in.ID, now.Add(-time.Millisecond)); err != nil {
		t.Errorf("Get a millisecond before its expiry: %v", err)
	}
	if _, err := s.Claim(t.Context(), in.ID, hash("t1"), hash("t2"), now.Add(time.Minute), now); !errors.Is(err, uiapsession.ErrNotFound) {
		t.Errorf("Claim at its expiry = %v, want ErrNotFound", err)
	}
}

func testClaimSingleUse(t *testing.T, s uiapsession.Store) {
	in := sample()
	create(t, s, in)
	if _, err := s.Claim(t.Context(), in.ID, hash("wrong"), hash("t2"), now.Add(time.Hour), now); !errors.Is(err, uiapsession.ErrConflict) {
		t.Fatalf("Claim with a wrong token = %v, want ErrConflict", err)
	}
	if got := get(t, s, in.ID); got.Version != 1 || !bytes.Equal(got.TokenHash, hash("t1")) {
		t.Fatalf("a failed Claim changed the session: %+v", got)
	}
	got, err := s.Claim(t.Context(), in.ID, hash("t1"), hash("t2"), now.Add(time.Hour), now)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	want := *in
	want.Version, want.TokenHash, want.ExpiresAt = 2, hash("t2"), now.Add(time.Hour)
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("Claim returned (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&want, get(t, s, in.ID)); diff != "" {
		t.Errorf("Get after Claim (-want +got):\n%s", diff)
	}
	if _, err := s.Claim(t.Context(), in.ID, hash("t1"), hash("t3"), now.Add(time.Hour), now); !errors.Is(err, uiapsession.ErrConflict) {
		t.Errorf("Claim with the used token = %v, want ErrConflict", err)
	}
	got, err = s.Claim(t.Context(), in.ID, hash("t2"), nil, now.Add(time.Hour), now)
	if err != nil || got.Version != 3 || got.TokenHash != nil {
		t.Errorf("Claim with the next token, none after: %+v, %v", got, err)
	}
}

func testClaimWithoutToken(t *testing.T, s uiapsession.Store) {
	in := sample()
	in.TokenHash = nil
	create(t, s, in)
	for _, tok := range [][]byte{nil, {}, hash("")} {
		if _, err := s.Claim(t.Context(), in.ID, tok, hash("t2"), now.Add(time.Hour), now); !errors.Is(err, uiapsession.ErrConflict) {
			t.Errorf("Claim(%x) of a session without a token = %v, want ErrConflict", tok, err)
		}
	}
}

// testClaimRace: resumes racing with one token — on two replicas, say —
// and exactly one wins.
func testClaimRace(t *testing.T, s uiapsession.Store) {
	in := sample()
	create(t, s, in)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = s.Claim(context.Background(), in.ID, hash("t1"), hash(fmt.Sprint("next", i)), now.Add(time.Hour), now)
		})
	}
	close(start)
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Errorf("claims %d and %d both succeeded", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, uiapsession.ErrConflict):
			t.Errorf("claim %d: %v, want ErrConflict", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no claim succeeded")
	}
	if got := get(t, s, in.ID); got.Version != 2 || !bytes.Equal(got.TokenHash, hash(fmt.Sprint("next", won))) {
		t.Errorf("after the race: %+v, want version 2 with the winner's token", got)
	}
}

func testAppend(t *testing.T, s uiapsession.Store) {
	in := sample()
	create(t, s, in)
	if evs := events(t, s, in.ID, 0); len(evs) != 0 {
		t.Errorf("a new session has events %v", evs)
	}
	for seq := int64(1); seq <= 3; seq++ {
		if err := s.Append(t.Context(), in.ID, 1, event(seq), 10); err != nil {
			t.Fatalf("Append %d: %v", seq, err)
		}
	}
	if got := get(t, s, in.ID); got.Seq != 3 || got.Version != 1 {
		t.Errorf("after three appends: %+v", got)
	}
	if diff := cmp.Diff([]uiapsession.Event{event(2), event(3)}, events(t, s, in.ID, 1)); diff != "" {
		t.Errorf("Events after 1 (-want +got):\n%s", diff)
	}
	if evs := events(t, s, in.ID, 3); len(evs) != 0 {
		t.Errorf("Events after the last: %v", evs)
	}
	for _, seq := range []int64{3, 5, 0} {
		if err := s.Append(t.Context(), in.ID, 1, event(seq), 10); !errors.Is(err, uiapsession.ErrConflict) {
			t.Errorf("Append of seq %d after 3 = %v, want ErrConflict", seq, err)
		}
	}
	if got := get(t, s, in.ID); got.Seq != 3 {
		t.Errorf("refused appends changed seq to %d", got.Seq)
	}
}

// testAppendFenced: once another App claimed the session, the former
// owner's writes fail.
func testAppendFenced(t *testing.T, s uiapsession.Store) {
	in := sample()
	create(t, s, in)
	if err := s.Append(t.Context(), in.ID, 1, event(1), 10); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(t.Context(), in.ID, hash("t1"), hash("t2"), now.Add(time.Hour), now); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(t.Context(), in.ID, 1, event(2), 10); !errors.Is(err, uiapsession.ErrConflict) {
		t.Errorf("Append at the old version = %v, want ErrConflict", err)
	}
	if err := s.Touch(t.Context(), in.ID, 1, now.Add(time.Hour)); !errors.Is(err, uiapsession.ErrConflict) {
		t.Errorf("Touch at the old version = %v, want ErrConflict", err)
	}
	if err := s.Delete(t.Context(), in.ID, 1); !errors.Is(err, uiapsession.ErrConflict) {
		t.Errorf("Delete at the old version = %v, want ErrConflict", err)
	}
	if err := s.Append(t.Context(), in.ID, 2, event(2), 10); err != nil {
		t.Errorf("Append at the new version: %v", err)
	}
	if diff := cmp.Diff([]uiapsession.Event{event(1), event(2)}, events(t, s, in.ID, 0)); diff != "" {
		t.Errorf("Events (-want +got):\n%s", diff)
	}
}

func testAppendKeep(t *testing.T, s uiapsession.Store) {
	in := sample()
	create(t, s, in)
	const keep = 3
	for seq := int64(1); seq <= 100; seq++ {
		if err := s.Append(t.Context(), in.ID, 1, event(seq), keep); err != nil {
			t.Fatalf("Append %d: %v", seq, err)
		}
	}
	evs := events(t, s, in.ID, 0)
	if len(evs) < keep || len(evs) >= 100 {
		t.Fatalf("%d events kept of 100 with keep %d", len(evs), keep)
	}
	first := evs[0].Seq
	for i, ev := range evs {
		if diff := cmp.Diff(event(first+int64(i)), ev); diff != "" {
			t.Fatalf("kept events are not the latest, in order (-want +got):\n%s", diff)
		}
	}
	if last := evs[len(evs)-1].Seq; last != 100 {
		t.Errorf("last kept event is %d, want 100", last)
	}
}

func testTouch(t *testing.T, s uiapsession.Store) {
	in := sample()
	in.ExpiresAt = now.Add(-time.Second)
	create(t, s, in)
	if err := s.Touch(t.Context(), in.ID, 2, now.Add(time.Hour)); !errors.Is(err, uiapsession.ErrConflict) {
		t.Errorf("Touch at another version = %v, want ErrConflict", err)
	}
	if err := s.Touch(t.Context(), in.ID, 1, now.Add(time.Hour)); err != nil {
		t.Fatalf("Touch of an expired, unswept session: %v", err)
	}
	if got := get(t, s, in.ID); !got.ExpiresAt.Equal(now.Add(time.Hour)) || got.Version != 1 {
		t.Errorf("after Touch: %+v", got)
	}
}

func testDelete(t *testing.T, s uiapsession.Store) {
	in := sample()
	create(t, s, in)
	if err := s.Append(t.Context(), in.ID, 1, event(1), 10); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(t.Context(), in.ID, 2); !errors.Is(err, uiapsession.ErrConflict) {
		t.Errorf("Delete at another version = %v, want ErrConflict", err)
	}
	if err := s.Delete(t.Context(), in.ID, 1); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Get(t.Context(), in.ID, now); !errors.Is(err, uiapsession.ErrNotFound) {
		t.Errorf("Get after Delete = %v, want ErrNotFound", err)
	}
	if evs := events(t, s, in.ID, 0); len(evs) != 0 {
		t.Errorf("events outlived their session: %v", evs)
	}
	if err := s.Delete(t.Context(), in.ID, 1); !errors.Is(err, uiapsession.ErrConflict) {
		t.Errorf("second Delete = %v, want ErrConflict", err)
	}
}

func testSweep(t *testing.T, s uiapsession.Store) {
	live, dead := sample(), sample()
	dead.ExpiresAt = now
	create(t, s, live)
	create(t, s, dead)
	for _, id := range []string{live.ID, dead.ID} {
		if err := s.Append(t.Context(), id, 1, event(1), 10); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.Sweep(t.Context(), now)
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1", n, err)
	}
	if err := s.Touch(t.Context(), dead.ID, 1, now.Add(time.Hour)); !errors.Is(err, uiapsession.ErrConflict) {
		t.Errorf("a swept session can be touched: %v", err)
	}
	if evs := events(t, s, dead.ID, 0); len(evs) != 0 {
		t.Errorf("a swept session's events remain: %v", evs)
	}
	if evs := events(t, s, live.ID, 0); len(evs) != 1 {
		t.Errorf("the live session's events: %v", evs)
	}
	get(t, s, live.ID)
	if n, err := s.Sweep(t.Context(), now); err != nil || n != 0 {
		t.Errorf("second Sweep = %d, %v; want 0", n, err)
	}
}

func testGetCopy(t *testing.T, s uiapsession.Store) {
	in := sample()
	create(t, s, in)
	in.State[0], in.App[0], in.TokenHash[0] = 'x', 'x', in.TokenHash[0]^1 // the caller's slices, changed after Create
	got := get(t, s, in.ID)
	if string(got.State) != `{"version":"0.1"}` || string(got.App) != `{"workflow":"store"}` || !bytes.Equal(got.TokenHash, hash("t1")) {
		t.Fatalf("the store kept the caller's slices: %+v", got)
	}
	got.State[0], got.App[0], got.TokenHash[0] = 'x', 'x', 0
	if again := get(t, s, in.ID); string(again.State) != `{"version":"0.1"}` || !bytes.Equal(again.TokenHash, hash("t1")) {
		t.Errorf("Get returned the store's own slices: %+v", again)
	}
	if err := s.Append(t.Context(), in.ID, 1, event(1), 10); err != nil {
		t.Fatal(err)
	}
	evs := events(t, s, in.ID, 0)
	evs[0].Data[0] = 'x'
	if again := events(t, s, in.ID, 0); string(again[0].Data) != `{"seq":1}` {
		t.Errorf("Events returned the store's own bytes: %s", again[0].Data)
	}
}
