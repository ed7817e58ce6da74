// Package sessiontest is the conformance suite of workflow.SessionStore,
// the persistence of UAIP-0.1 sessions (github.com/concierge-hq/uaip, "Session" and
// "State"): every implementation — internal/memstore, internal/sqlstore on
// SQLite and PostgreSQL — passes Run, as every slog handler passes
// testing/slogtest.
//
//	func TestUAIP_Session_MyStore(t *testing.T) {
//		sessiontest.Run(t, func(t *testing.T) workflow.SessionStore { return newMyStore(t) })
//	}
//
// What the suite pins beyond the interface's doc comment, so that every
// store behaves alike:
//   - a state is kept as its JSON form: Get returns the values as
//     encoding/json decodes them (float64, string, bool, nil, []any,
//     map[string]any), and a state that does not encode is refused;
//   - times are kept to the millisecond;
//   - an expired session is gone: Get and Update report
//     ErrSessionNotFound and Create may reuse its ID, before DeleteExpired
//     removes it;
//   - any string is a session ID that Get, Update and Delete accept (an
//     X-Session-Id header reaches Get as it came); one that is empty, not
//     UTF-8 or holds a NUL byte is never stored, nor is a workflow or
//     stage name that is not UTF-8 or holds a NUL byte (PostgreSQL's TEXT
//     refuses them).
package sessiontest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/agentry-dev/agentry/workflow"
	"github.com/google/go-cmp/cmp"
)

// Run checks the store that newStore returns against workflow.SessionStore
// and UAIP-0.1. Each case calls newStore for a fresh, empty store; newStore
// releases it through t.Cleanup. The store must be safe for concurrent
// use: run the suite with -race.
func Run(t *testing.T, newStore func(t *testing.T) workflow.SessionStore) {
	t.Helper()
	cases := []struct {
		name string
		run  func(t *testing.T, s workflow.SessionStore)
	}{
		{"CreateGetRoundTrip", testRoundTrip},
		{"StateIsJSON", testStateIsJSON},
		{"UnencodableState", testUnencodable},
		{"GetReturnsCopy", testGetReturnsCopy},
		{"CreateKeepsNoAlias", testCreateNoAlias},
		{"CreateExisting", testCreateExisting},
		{"UpdateCompareAndSwap", testUpdateCAS},
		{"UpdateMissing", testUpdateMissing},
		{"NotFound", testNotFound},
		{"SessionIDs", testSessionIDs},
		{"Expiry", testExpiry},
		{"ExpiryByClock", testExpiryByClock},
		{"DeleteExpired", testDeleteExpired},
		{"Delete", testDelete},
		{"ContextCancelled", testCancelled},
		{"ConcurrentSessions", testConcurrentSessions},
		{"ConcurrentUpdates", testConcurrentUpdates},
		{"LargeState", testLargeState},
		{"List", testList},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newStore(t)) })
	}
}

// sampleState returns a state exercising what UAIP-0.1 state holds: nested
// objects and arrays, every JSON type, dotted keys that are one literal
// key (next to a nested object of the same path), unicode keys and values,
// and characters that JSON and SQL escape. It is in the form Get returns
// (numbers are float64).
func sampleState() map[string]any {
	return map[string]any{
		"user.email": "user@example.com",
		"user":       map[string]any{"email": "other@example.com", "name": "Zoë"},
		"a.b.c":      1.0,
		"cart": map[string]any{
			"items": []any{
				map[string]any{"product_id": "SKU-001", "quantity": 2.0, "price": 19.99},
				map[string]any{"product_id": "SKU-002", "quantity": 1.0, "tags": []any{"gift", nil, true}},
			},
			"total":    59.97,
			"currency": "EUR",
		},
		"flags":        []any{true, false, nil, 0.0, "", []any{}, map[string]any{}},
		"empty_object": map[string]any{},
		"empty_list":   []any{},
		"nothing":      nil,
		"zero":         0.0,
		"negative":     -1.5e300,
		"max_safe_int": 9007199254740991.0,
		"tiny":         5e-324,
		"ünïcödé 会话 🚀": "värde ✓ — مرحبا — 𝄞 — e\u0301",
		"escapes":      "quote \" backslash \\ slash / tab \t newline \n nul \x00 sep \u2028 <script>&amp;'",
		"sql":          "'; DROP TABLE workflow_sessions; --",
		"":             "the empty key",
	}
}

// ms is the precision stores keep times at.
const ms = time.Millisecond

// newSession returns a version-1 session with the sample state, created
// now and expiring in an hour.
func newSession() *workflow.Session {
	now := time.Now().UTC().Truncate(ms)
	return &workflow.Session{ID: ids.New(), Workflow: "store", Stage: "browse", State: sampleState(),
		Version: 1, CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Hour)}
}

func create(t *testing.T, s workflow.SessionStore, sess *workflow.Session) {
	t.Helper()
	if err := s.Create(t.Context(), sess); err != nil {
		t.Fatalf("Create(%q): %v", sess.ID, err)
	}
}

func get(t *testing.T, s workflow.SessionStore, id string) *workflow.Session {
	t.Helper()
	got, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get(%q): %v", id, err)
	}
	if got == nil {
		t.Fatalf("Get(%q) = nil, nil", id)
	}
	return got
}

func update(t *testing.T, s workflow.SessionStore, sess *workflow.Session) {
	t.Helper()
	if err := s.Update(t.Context(), sess); err != nil {
		t.Fatalf("Update(%q, version %d): %v", sess.ID, sess.Version, err)
	}
}

// next returns the session as the engine's next action writes it: a
// clone with the version incremented and a later update time.
func next(s *workflow.Session, stage string, set map[string]any) *workflow.Session {
	n := s.Clone()
	n.Version++
	n.Stage = stage
	n.UpdatedAt = n.UpdatedAt.Add(ms)
	for k, v := range set {
		n.State[k] = v
	}
	return n
}

// deepClone returns a copy of s sharing nothing with it.
func deepClone(s *workflow.Session) *workflow.Session {
	c := *s
	c.State = deepCopy(s.State).(map[string]any)
	return &c
}

func deepCopy(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = deepCopy(x)
		}
		return m
	case []any:
		l := make([]any, len(v))
		for i, x := range v {
			l[i] = deepCopy(x)
		}
		return l
	}
	return v
}

// diff compares sessions; times must be equal instants.
func diff(want, got *workflow.Session) string {
	return cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) }))
}

func wantNotFound(t *testing.T, s workflow.SessionStore, id, when string) {
	t.Helper()
	if got, err := s.Get(t.Context(), id); !errors.Is(err, workflow.ErrSessionNotFound) || got != nil {
		t.Errorf("Get(%q) %s = %v, %v; want nil, ErrSessionNotFound", id, when, got, err)
	}
}

// testRoundTrip: Get returns what Create stored, field by field; a nil
// state comes back as an empty map; times keep their millisecond.
func testRoundTrip(t *testing.T, s workflow.SessionStore) {
	want := newSession()
	create(t, s, want)
	got := get(t, s, want.ID)
	if d := diff(want, got); d != "" {
		t.Errorf("Get after Create (-want +got):\n%s", d)
	}
	// Dotted keys are literal: "user.email" and user → email are two values.
	if got.State["user.email"] != "user@example.com" || got.State["user"].(map[string]any)["email"] != "other@example.com" {
		t.Errorf("dotted key and nested object mixed up: %v / %v", got.State["user.email"], got.State["user"])
	}

	// A nil state, no expiry, times below the millisecond.
	created := time.Date(2024, 2, 29, 23, 59, 59, 123_456_789, time.FixedZone("CEST", 2*3600))
	bare := &workflow.Session{ID: "session with spaces.and.dots", Workflow: "wf-ünï", Stage: "stage 1", Version: 1,
		CreatedAt: created, UpdatedAt: created.Add(time.Second)}
	create(t, s, bare)
	got = get(t, s, bare.ID)
	if got.State == nil || len(got.State) != 0 {
		t.Errorf("nil state came back as %#v, want an empty map", got.State)
	}
	if got.ID != bare.ID || got.Workflow != bare.Workflow || got.Stage != bare.Stage || got.Version != 1 {
		t.Errorf("Get = %q %q %q v%d, want %q %q %q v1", got.ID, got.Workflow, got.Stage, got.Version, bare.ID, bare.Workflow, bare.Stage)
	}
	if !got.ExpiresAt.IsZero() {
		t.Errorf("zero ExpiresAt came back as %v", got.ExpiresAt)
	}
	for name, pair := range map[string][2]time.Time{"CreatedAt": {bare.CreatedAt, got.CreatedAt}, "UpdatedAt": {bare.UpdatedAt, got.UpdatedAt}} {
		if d := pair[1].Sub(pair[0]); d < -ms || d > ms {
			t.Errorf("%s = %v, want %v to the millisecond", name, pair[1], pair[0])
		}
	}
}

type point struct {
	X int    `json:"x"`
	Y string `json:"y,omitempty"`
}

// testStateIsJSON: values of any Go type are stored as their JSON form,
// so a state reads the same from every store (and after a restart).
func testStateIsJSON(t *testing.T, s workflow.SessionStore) {
	sess := newSession()
	sess.State = map[string]any{
		"int": 3, "int64": int64(-7), "uint8": uint8(200), "float32": float32(0.5),
		"struct": point{X: 1}, "ptr": &point{X: 2, Y: "b"}, "strings": []string{"a", "b"},
		"ints": map[string]int{"k": 1}, "bytes": []byte("hi"), "raw": []any{1, "x"},
		"time": time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	create(t, s, sess)
	want := map[string]any{
		"int": 3.0, "int64": -7.0, "uint8": 200.0, "float32": 0.5,
		"struct": map[string]any{"x": 1.0}, "ptr": map[string]any{"x": 2.0, "y": "b"}, "strings": []any{"a", "b"},
		"ints": map[string]any{"k": 1.0}, "bytes": "aGk=", "raw": []any{1.0, "x"},
		"time": "2025-01-02T03:04:05Z",
	}
	if d := cmp.Diff(want, get(t, s, sess.ID).State); d != "" {
		t.Errorf("state after Create (-want +got):\n%s", d)
	}
	up := next(sess, "cart", map[string]any{"int": 4})
	update(t, s, up)
	want["int"] = 4.0
	if d := cmp.Diff(want, get(t, s, sess.ID).State); d != "" {
		t.Errorf("state after Update (-want +got):\n%s", d)
	}
}

// testUnencodable: a state that has no JSON form is refused by Create and
// Update, and the store keeps what it had.
func testUnencodable(t *testing.T, s workflow.SessionStore) {
	for name, v := range map[string]any{
		"NaN": math.NaN(), "+Inf": math.Inf(1), "func": func() {}, "chan": make(chan int),
		"nested NaN": map[string]any{"x": []any{1.0, math.NaN()}}, "complex": complex(1, 2),
	} {
		sess := newSession()
		sess.State["bad"] = v
		if err := s.Create(t.Context(), sess); err == nil || errors.Is(err, workflow.ErrConflict) {
			t.Errorf("Create with %s in the state = %v, want an encoding error", name, err)
		}
		wantNotFound(t, s, sess.ID, "after a refused Create")

		good := newSession()
		create(t, s, good)
		bad := next(good, "cart", map[string]any{"bad": v})
		if err := s.Update(t.Context(), bad); err == nil || errors.Is(err, workflow.ErrConflict) {
			t.Errorf("Update with %s in the state = %v, want an encoding error", name, err)
		}
		if d := diff(good, get(t, s, good.ID)); d != "" {
			t.Errorf("session changed by a refused Update (-want +got):\n%s", d)
		}
		update(t, s, next(good, "cart", nil)) // still at version 1: the next Update works
	}
}

// testGetReturnsCopy: changing a session that Get returned — its fields,
// its state, values nested in the state — changes nothing in the store
// nor in another Get's result.
func testGetReturnsCopy(t *testing.T, s workflow.SessionStore) {
	want := newSession()
	create(t, s, want)
	a, b := get(t, s, want.ID), get(t, s, want.ID)
	a.Stage, a.Version, a.Workflow = "changed", 99, "other"
	a.State["new"] = "x"
	delete(a.State, "user.email")
	a.State["cart"].(map[string]any)["total"] = 0.0
	items := a.State["cart"].(map[string]any)["items"].([]any)
	items[0].(map[string]any)["quantity"] = 1000.0
	items[1] = "replaced"
	a.State["flags"].([]any)[0] = "mutated"
	if d := diff(want, b); d != "" {
		t.Errorf("another Get's result changed with the first (-want +got):\n%s", d)
	}
	if d := diff(want, get(t, s, want.ID)); d != "" {
		t.Errorf("stored session changed through Get's result (-want +got):\n%s", d)
	}
}

// testCreateNoAlias: the store keeps no reference to the session given to
// Create or Update: changing it afterwards, deep down, changes nothing.
func testCreateNoAlias(t *testing.T, s workflow.SessionStore) {
	sess := newSession()
	create(t, s, sess)
	want := newSession()
	want.ID, want.CreatedAt, want.UpdatedAt, want.ExpiresAt = sess.ID, sess.CreatedAt, sess.UpdatedAt, sess.ExpiresAt
	sess.Stage = "changed"
	sess.State["cart"].(map[string]any)["total"] = 1.0
	sess.State["flags"].([]any)[0] = "mutated"
	sess.State["added"] = true
	if d := diff(want, get(t, s, sess.ID)); d != "" {
		t.Errorf("stored session changed with Create's argument (-want +got):\n%s", d)
	}

	up := next(want, "cart", map[string]any{"step": "two"})
	update(t, s, up)
	wantUp := deepClone(up)
	up.State["step"] = "three"
	up.State["cart"].(map[string]any)["currency"] = "USD"
	if d := diff(wantUp, get(t, s, sess.ID)); d != "" {
		t.Errorf("stored session changed with Update's argument (-want +got):\n%s", d)
	}
}

// testCreateExisting: a second Create of an ID fails with ErrConflict and
// leaves the first session as it was; so does a Create after updates.
func testCreateExisting(t *testing.T, s workflow.SessionStore) {
	first := newSession()
	create(t, s, first)
	dup := newSession()
	dup.ID, dup.Stage, dup.State = first.ID, "other", map[string]any{"x": 1.0}
	if err := s.Create(t.Context(), dup); !errors.Is(err, workflow.ErrConflict) {
		t.Errorf("Create of an existing ID = %v, want ErrConflict", err)
	}
	if d := diff(first, get(t, s, first.ID)); d != "" {
		t.Errorf("session changed by a refused Create (-want +got):\n%s", d)
	}
	up := next(first, "cart", map[string]any{"k": "v"})
	update(t, s, up)
	if err := s.Create(t.Context(), dup); !errors.Is(err, workflow.ErrConflict) {
		t.Errorf("Create of an updated session's ID = %v, want ErrConflict", err)
	}
	if d := diff(up, get(t, s, first.ID)); d != "" {
		t.Errorf("session changed by a refused Create (-want +got):\n%s", d)
	}
}

// testUpdateCAS: Update succeeds only from the stored version; a stale,
// repeated or skipping version fails with ErrConflict and changes nothing.
func testUpdateCAS(t *testing.T, s workflow.SessionStore) {
	v1 := newSession()
	create(t, s, v1)
	v2 := next(v1, "cart", map[string]any{"user.email": "new@example.com", "added": []any{1.0}})
	v2.ExpiresAt = v2.ExpiresAt.Add(time.Hour)
	update(t, s, v2)
	if d := diff(v2, get(t, s, v1.ID)); d != "" {
		t.Fatalf("Get after Update (-want +got):\n%s", d)
	}
	for _, c := range []struct {
		name    string
		version int64
	}{{"the same version again", 2}, {"a stale version", 1}, {"version 0", 0}, {"a skipped version", 4}, {"a negative version", -1}} {
		bad := next(v1, "checkout", map[string]any{"lost": true})
		bad.Version = c.version
		if err := s.Update(t.Context(), bad); !errors.Is(err, workflow.ErrConflict) {
			t.Errorf("Update with %s (%d, stored 2) = %v, want ErrConflict", c.name, c.version, err)
		}
	}
	if d := diff(v2, get(t, s, v1.ID)); d != "" {
		t.Errorf("session changed by refused Updates (-want +got):\n%s", d)
	}
	// A key removed from the state is gone after the Update; no expiry
	// any more is stored as such.
	v3 := next(v2, "checkout", nil)
	delete(v3.State, "cart")
	v3.ExpiresAt = time.Time{}
	update(t, s, v3)
	got := get(t, s, v1.ID)
	if d := diff(v3, got); d != "" {
		t.Errorf("Get after the second Update (-want +got):\n%s", d)
	}
	if _, ok := got.State["cart"]; ok {
		t.Error("a key deleted from the state is still there")
	}
}

// testUpdateMissing: Update of a session that was never created or was
// deleted fails with ErrSessionNotFound, and does not create it.
func testUpdateMissing(t *testing.T, s workflow.SessionStore) {
	never := next(newSession(), "cart", nil)
	if err := s.Update(t.Context(), never); !errors.Is(err, workflow.ErrSessionNotFound) {
		t.Errorf("Update of a session never created = %v, want ErrSessionNotFound", err)
	}
	wantNotFound(t, s, never.ID, "after an Update of a missing session")

	gone := newSession()
	create(t, s, gone)
	if err := s.Delete(t.Context(), gone.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(t.Context(), next(gone, "cart", nil)); !errors.Is(err, workflow.ErrSessionNotFound) {
		t.Errorf("Update of a deleted session = %v, want ErrSessionNotFound", err)
	}
	wantNotFound(t, s, gone.ID, "after an Update of a deleted session")
}

// testNotFound: Get of an unknown ID, or one near an existing ID, is
// ErrSessionNotFound with a nil session.
func testNotFound(t *testing.T, s workflow.SessionStore) {
	sess := newSession()
	create(t, s, sess)
	for _, id := range []string{ids.New(), sess.ID[:35], sess.ID + " ", strings.ToUpper(sess.ID), "%", "_", "*"} {
		wantNotFound(t, s, id, "of an unknown ID")
	}
}

// testSessionIDs: unusual IDs are kept exactly; IDs that cannot be stored
// are refused by Create and simply not found by the other methods.
func testSessionIDs(t *testing.T, s workflow.SessionStore) {
	for _, id := range []string{"a", "x.y.z", "with spaces", "ünïcödé-会话-🚀", "a/b\\c", "'quoted'", "100%_like", strings.Repeat("s", 1000)} {
		sess := newSession()
		sess.ID = id
		create(t, s, sess)
		if got := get(t, s, id); got.ID != id {
			t.Errorf("Get(%q).ID = %q", id, got.ID)
		}
		update(t, s, next(sess, "cart", nil))
		if err := s.Delete(t.Context(), id); err != nil {
			t.Errorf("Delete(%q): %v", id, err)
		}
		wantNotFound(t, s, id, "after Delete")
	}
	for _, id := range []string{"", "nul\x00byte", "bad\xffutf8", "\xc3"} {
		sess := newSession()
		sess.ID = id
		if err := s.Create(t.Context(), sess); err == nil || errors.Is(err, workflow.ErrConflict) {
			t.Errorf("Create(%q) = %v, want an invalid-ID error", id, err)
		}
		wantNotFound(t, s, id, "of an ID that cannot be stored")
		if err := s.Update(t.Context(), next(sess, "cart", nil)); !errors.Is(err, workflow.ErrSessionNotFound) {
			t.Errorf("Update(%q) = %v, want ErrSessionNotFound", id, err)
		}
		if err := s.Delete(t.Context(), id); err != nil {
			t.Errorf("Delete(%q) = %v, want nil", id, err)
		}
	}
	// Workflow and stage names are text too.
	for _, bad := range []string{"nul\x00", "bad\xff"} {
		sess := newSession()
		sess.Stage = bad
		if err := s.Create(t.Context(), sess); err == nil {
			t.Errorf("Create with stage %q succeeded", bad)
		}
		sess = newSession()
		create(t, s, sess)
		n := next(sess, "cart", nil)
		n.Workflow = bad
		if err := s.Update(t.Context(), n); err == nil || errors.Is(err, workflow.ErrConflict) {
			t.Errorf("Update with workflow %q = %v, want an error", bad, err)
		}
	}
}

// testExpiry: an expired session is gone for Get and Update before it is
// swept, and its ID may be created again; a zero ExpiresAt never expires.
func testExpiry(t *testing.T, s workflow.SessionStore) {
	now := time.Now().UTC().Truncate(ms)
	expired := newSession()
	expired.ExpiresAt = now.Add(-time.Second)
	create(t, s, expired)
	wantNotFound(t, s, expired.ID, "of an expired session")
	if err := s.Update(t.Context(), next(expired, "cart", nil)); !errors.Is(err, workflow.ErrSessionNotFound) {
		t.Errorf("Update of an expired session = %v, want ErrSessionNotFound", err)
	}
	// Extending an expired session is not allowed either.
	ext := next(expired, "cart", nil)
	ext.ExpiresAt = now.Add(time.Hour)
	if err := s.Update(t.Context(), ext); !errors.Is(err, workflow.ErrSessionNotFound) {
		t.Errorf("Update extending an expired session = %v, want ErrSessionNotFound", err)
	}
	wantNotFound(t, s, expired.ID, "after refused Updates")

	again := newSession()
	again.ID = expired.ID
	if err := s.Create(t.Context(), again); err != nil {
		t.Errorf("Create over an expired session = %v, want nil", err)
	} else if d := diff(again, get(t, s, again.ID)); d != "" {
		t.Errorf("Get of a session created over an expired one (-want +got):\n%s", d)
	}

	forever := newSession()
	forever.ExpiresAt = time.Time{}
	create(t, s, forever)
	if got := get(t, s, forever.ID); !got.ExpiresAt.IsZero() {
		t.Errorf("ExpiresAt = %v, want zero", got.ExpiresAt)
	}
	if _, err := s.DeleteExpired(t.Context(), now.AddDate(500, 0, 0)); err != nil {
		t.Fatal(err)
	}
	get(t, s, forever.ID)
	up := next(forever, "cart", nil)
	update(t, s, up)
	if got := get(t, s, forever.ID); !got.ExpiresAt.IsZero() || got.Version != 2 {
		t.Errorf("after Update: version %d, ExpiresAt %v; want 2, zero", got.Version, got.ExpiresAt)
	}
}

// testExpiryByClock: a session expires when the clock reaches ExpiresAt,
// with no sweep.
func testExpiryByClock(t *testing.T, s workflow.SessionStore) {
	sess := newSession()
	sess.ExpiresAt = time.Now().Add(300 * ms).Truncate(ms)
	create(t, s, sess)
	got, err := s.Get(t.Context(), sess.ID)
	if time.Now().Before(sess.ExpiresAt) && err != nil {
		t.Errorf("Get before ExpiresAt: %v", err)
	} else if err == nil && !got.ExpiresAt.Equal(sess.ExpiresAt) {
		t.Errorf("ExpiresAt = %v, want %v", got.ExpiresAt, sess.ExpiresAt)
	}
	time.Sleep(time.Until(sess.ExpiresAt) + 5*ms)
	wantNotFound(t, s, sess.ID, "once ExpiresAt has passed")
}

// testDeleteExpired: DeleteExpired(now) removes exactly the sessions with
// ExpiresAt ≤ now and counts them; it is measured against its argument,
// not the clock.
func testDeleteExpired(t *testing.T, s workflow.SessionStore) {
	t0 := time.Now().UTC().Truncate(ms)
	at := func(d time.Duration, label string) *workflow.Session {
		sess := newSession()
		sess.ExpiresAt = t0.Add(d)
		sess.State["label"] = label
		create(t, s, sess)
		return sess
	}
	gone := []*workflow.Session{at(-2*time.Hour, "-2h"), at(-time.Hour, "-1h"), at(0, "exactly now"), at(-ms, "-1ms")}
	later, muchLater := at(ms, "+1ms"), at(2*time.Hour, "+2h")
	forever := newSession()
	forever.ExpiresAt = time.Time{}
	create(t, s, forever)

	n, err := s.DeleteExpired(t.Context(), t0)
	if err != nil || n != len(gone) {
		t.Fatalf("DeleteExpired(t0) = %d, %v; want %d", n, err, len(gone))
	}
	// Re-created over the swept IDs, they would be new sessions: check the
	// rows are gone by creating them again.
	for _, g := range gone {
		again := newSession()
		again.ID, again.ExpiresAt = g.ID, t0.Add(3*time.Hour)
		if err := s.Create(t.Context(), again); err != nil {
			t.Errorf("Create over a swept session (%s): %v", g.State["label"], err)
		}
	}
	if n, err := s.DeleteExpired(t.Context(), t0); err != nil || n != 0 {
		t.Errorf("DeleteExpired(t0) again = %d, %v; want 0", n, err)
	}
	get(t, s, muchLater.ID)
	get(t, s, forever.ID)
	if n, err := s.DeleteExpired(t.Context(), t0.Add(time.Hour)); err != nil || n != 1 {
		t.Errorf("DeleteExpired(t0+1h) = %d, %v; want 1 (the session expiring at +1ms)", n, err)
	}
	wantNotFound(t, s, later.ID, "after DeleteExpired")
	get(t, s, muchLater.ID)
	get(t, s, forever.ID)
	if n, err := s.DeleteExpired(t.Context(), t0.AddDate(100, 0, 0)); err != nil || n != 1+len(gone) {
		t.Errorf("DeleteExpired(t0+100y) = %d, %v; want %d", n, err, 1+len(gone))
	}
	get(t, s, forever.ID)
	if n, err := s.DeleteExpired(t.Context(), t0.AddDate(100, 0, 0)); err != nil || n != 0 {
		t.Errorf("DeleteExpired of an empty sweep = %d, %v; want 0", n, err)
	}
}

// testDelete: a deleted session is gone, others stay; deleting a missing
// session is fine; the ID can be created again, at version 1.
func testDelete(t *testing.T, s workflow.SessionStore) {
	a, b := newSession(), newSession()
	create(t, s, a)
	create(t, s, b)
	update(t, s, next(a, "cart", nil))
	if err := s.Delete(t.Context(), a.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	wantNotFound(t, s, a.ID, "after Delete")
	if d := diff(b, get(t, s, b.ID)); d != "" {
		t.Errorf("another session changed by Delete (-want +got):\n%s", d)
	}
	for _, id := range []string{a.ID, ids.New()} {
		if err := s.Delete(t.Context(), id); err != nil {
			t.Errorf("Delete(%q) of a missing session: %v", id, err)
		}
	}
	again := newSession()
	again.ID = a.ID
	create(t, s, again)
	if d := diff(again, get(t, s, a.ID)); d != "" {
		t.Errorf("Create after Delete (-want +got):\n%s", d)
	}
	if n, err := s.DeleteExpired(t.Context(), time.Now()); err != nil || n != 0 {
		t.Errorf("DeleteExpired = %d, %v; want 0", n, err)
	}
}

// testCancelled: every method honours a cancelled context or a passed
// deadline, and a cancelled write changes nothing.
func testCancelled(t *testing.T, s workflow.SessionStore) {
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel2()
	for ctx, want := range map[context.Context]error{cancelled: context.Canceled, expired: context.DeadlineExceeded} {
		sess := newSession()
		if err := s.Create(ctx, sess); !errors.Is(err, want) {
			t.Errorf("Create = %v, want %v", err, want)
		}
		wantNotFound(t, s, sess.ID, "after a cancelled Create")
		create(t, s, sess)
		if got, err := s.Get(ctx, sess.ID); !errors.Is(err, want) || got != nil {
			t.Errorf("Get = %v, %v; want nil, %v", got, err, want)
		}
		if err := s.Update(ctx, next(sess, "cart", map[string]any{"lost": true})); !errors.Is(err, want) {
			t.Errorf("Update = %v, want %v", err, want)
		}
		if err := s.Delete(ctx, sess.ID); !errors.Is(err, want) {
			t.Errorf("Delete = %v, want %v", err, want)
		}
		if _, err := s.DeleteExpired(ctx, time.Now().AddDate(1, 0, 0)); !errors.Is(err, want) {
			t.Errorf("DeleteExpired = %v, want %v", err, want)
		}
		if d := diff(sess, get(t, s, sess.ID)); d != "" {
			t.Errorf("session changed by cancelled calls (-want +got):\n%s", d)
		}
	}
}

// testConcurrentSessions: many sessions created, updated and read in
// parallel each end with their own latest state.
func testConcurrentSessions(t *testing.T, s workflow.SessionStore) {
	const sessions, updates = 32, 8
	final := make([]*workflow.Session, sessions)
	var wg sync.WaitGroup
	for i := range sessions {
		wg.Go(func() {
			ctx := t.Context()
			sess := newSession()
			sess.State["owner"] = float64(i)
			if err := s.Create(ctx, sess); err != nil {
				t.Errorf("Create: %v", err)
				return
			}
			for j := range updates {
				n := next(sess, fmt.Sprintf("stage-%d", j), map[string]any{"step": float64(j)})
				if err := s.Update(ctx, n); err != nil {
					t.Errorf("Update(%s, version %d): %v", n.ID, n.Version, err)
					return
				}
				got, err := s.Get(ctx, n.ID)
				if err != nil {
					t.Errorf("Get: %v", err)
					return
				}
				if d := diff(n, got); d != "" {
					t.Errorf("session %d after update %d (-want +got):\n%s", i, j, d)
					return
				}
				sess = n
			}
			final[i] = sess
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, want := range final {
		got := get(t, s, want.ID)
		if d := diff(want, got); d != "" {
			t.Errorf("session %d at the end (-want +got):\n%s", i, d)
		}
		if got.Version != updates+1 || got.State["owner"] != float64(i) {
			t.Errorf("session %d: version %d, owner %v", i, got.Version, got.State["owner"])
		}
	}
}

// testConcurrentUpdates: of N Updates racing from the same version,
// exactly one wins; the others fail with ErrConflict, and the store holds
// the winner's session. Round after round, from each round's result.
func testConcurrentUpdates(t *testing.T, s workflow.SessionStore) {
	const racers, rounds = 8, 5
	cur := newSession()
	create(t, s, cur)
	for round := range rounds {
		var (
			wg       sync.WaitGroup
			start    = make(chan struct{})
			errs     = make([]error, racers)
			attempts = make([]*workflow.Session, racers)
		)
		for r := range racers {
			attempts[r] = next(cur, fmt.Sprintf("round-%d", round), map[string]any{"winner": float64(r)})
			wg.Go(func() {
				<-start
				errs[r] = s.Update(t.Context(), attempts[r])
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for r, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: racers %d and %d both won from version %d", round, winner, r, cur.Version)
			case err == nil:
				winner = r
			case !errors.Is(err, workflow.ErrConflict):
				t.Errorf("round %d: racer %d: %v, want nil or ErrConflict", round, r, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no Update won from version %d", round, cur.Version)
		}
		got := get(t, s, cur.ID)
		if d := diff(attempts[winner], got); d != "" {
			t.Fatalf("round %d: stored session is not the winner's (-want +got):\n%s", round, d)
		}
		cur = got
	}
	if cur.Version != rounds+1 {
		t.Errorf("final version %d, want %d", cur.Version, rounds+1)
	}
}

// testLargeState: a state of megabytes — many keys, long strings, a long
// array, deep nesting — round-trips through Create and Update.
func testLargeState(t *testing.T, s workflow.SessionStore) {
	sess := newSession()
	for i := range 2000 {
		sess.State[fmt.Sprintf("key.%04d", i)] = strings.Repeat(fmt.Sprintf("%d-ü-", i), 100)
	}
	list := make([]any, 5000)
	for i := range list {
		list[i] = map[string]any{"i": float64(i), "even": i%2 == 0}
	}
	sess.State["list"] = list
	deep := map[string]any{"leaf": "bottom"}
	for range 200 {
		deep = map[string]any{"d": deep, "a": []any{1.0}}
	}
	sess.State["deep"] = deep
	create(t, s, sess)
	if d := diff(sess, get(t, s, sess.ID)); d != "" {
		t.Fatalf("large state after Create differs (first lines):\n%.2000s", d)
	}
	up := next(sess, "cart", map[string]any{"blob": strings.Repeat("x", 1<<20)})
	update(t, s, up)
	if d := diff(up, get(t, s, sess.ID)); d != "" {
		t.Fatalf("large state after Update differs (first lines):\n%.2000s", d)
	}
}

// testList: a SessionLister pages through one workflow's live sessions,
// newest created first (ties by ID, descending), leaving out other
// workflows' and expired ones; every session appears once across pages;
// a malformed cursor is an error. A store that cannot list is skipped.
func testList(t *testing.T, s workflow.SessionStore) {
	l, ok := s.(workflow.SessionLister)
	if !ok {
		t.Skip("the store is not a workflow.SessionLister")
	}
	base := time.Now().UTC().Truncate(ms)
	for i := range 7 {
		sess := newSession()
		// Two sessions share each creation time but the last: the
		// cursor must order them by ID.
		sess.CreatedAt = base.Add(time.Duration(i/2) * time.Second)
		sess.UpdatedAt = sess.CreatedAt
		create(t, s, sess)
	}
	other := newSession()
	other.Workflow = "other"
	create(t, s, other)
	gone := newSession()
	gone.ExpiresAt = base.Add(-time.Second)
	gone.CreatedAt, gone.UpdatedAt = base.Add(-2*time.Second), base.Add(-2*time.Second)
	create(t, s, gone)

	var all []*workflow.Session
	cursor, pages := "", 0
	for {
		page, next, err := l.ListSessions(t.Context(), "store", cursor, 3)
		if err != nil {
			t.Fatalf("ListSessions(cursor %q): %v", cursor, err)
		}
		pages++
		all = append(all, page...)
		if next == "" {
			break
		}
		if pages > 5 {
			t.Fatal("ListSessions does not end")
		}
		cursor = next
	}
	if len(all) != 7 || pages != 3 {
		t.Fatalf("listed %d sessions in %d pages, want 7 in 3", len(all), pages)
	}
	seen := map[string]bool{}
	for i, sess := range all {
		if seen[sess.ID] || sess.Workflow != "store" || sess.ID == other.ID || sess.ID == gone.ID {
			t.Errorf("session %d: %s (%s) listed wrongly", i, sess.ID, sess.Workflow)
		}
		seen[sess.ID] = true
		if i > 0 {
			p := all[i-1]
			if p.CreatedAt.Before(sess.CreatedAt) || p.CreatedAt.Equal(sess.CreatedAt) && p.ID < sess.ID {
				t.Errorf("sessions %d and %d are out of order: %v %s, %v %s", i-1, i, p.CreatedAt, p.ID, sess.CreatedAt, sess.ID)
			}
		}
		if diff := cmp.Diff(sampleState(), sess.State); diff != "" {
			t.Errorf("session %s state (-want +got):\n%s", sess.ID, diff)
		}
	}
	for _, bad := range []string{"x", "12", ":id", "x:id"} {
		if _, _, err := l.ListSessions(t.Context(), "store", bad, 3); err == nil {
			t.Errorf("cursor %q: no error", bad)
		}
	}
}
