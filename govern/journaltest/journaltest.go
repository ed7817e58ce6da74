// Package journaltest is the conformance suite of govern.Journal, the
// hash-chained audit journal of UAICP 0.3 (github.com/UAICP/uaicp §5.4):
// every implementation — govern.NewMemoryJournal's, the file journal of
// internal/journal, internal/sqlstore, internal/memstore — passes Run, as every
// slog handler passes testing/slogtest. A durable journal also passes
// RunDurable, which closes and reopens it.
//
//	func TestJournal(t *testing.T) {
//		journaltest.Run(t, func(t *testing.T) govern.Journal { return newMyJournal(t) })
//	}
package journaltest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/journalfixture"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// Opener returns a fresh, empty journal, released through t.Cleanup (Close
// may then be called a second time).
type Opener func(t *testing.T) govern.Journal

// DurableOpener returns a fresh, empty journal and a function that opens
// it again after it was closed (in a new Store, a new process's view).
type DurableOpener func(t *testing.T) (j govern.Journal, reopen Opener)

// Run checks the journals open returns against the contract of
// govern.Journal (and govern.RunReader when they implement it). Each case
// opens a fresh journal. Journals must be safe for concurrent use: run
// the suite with -race.
func Run(t *testing.T, open Opener) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, open(t)) })
	}
}

// RunDurable runs Run's cases and those of a durable journal: records,
// their chain and their unique keys survive Close and reopen, and
// appends continue the chain.
func RunDurable(t *testing.T, open DurableOpener) {
	t.Helper()
	Run(t, func(t *testing.T) govern.Journal { j, _ := open(t); return j })
	for _, c := range durableCases {
		t.Run(c.name, func(t *testing.T) {
			j, reopen := open(t)
			c.run(t, j, reopen)
		})
	}
}

var cases = []struct {
	name string
	run  func(t *testing.T, j govern.Journal)
}{
	{"Empty", testEmpty},
	{"SeqAndChain", testSeqAndChain},
	{"SealsInPlace", testSealsInPlace},
	{"RecordsFrom", testRecordsFrom},
	{"AppendDuringIteration", testAppendDuringIteration},
	{"BreakStopsIteration", testBreak},
	{"DataRoundTrip", testDataRoundTrip},
	{"AllFieldsRoundTrip", testAllFields},
	{"EmptyAppend", testEmptyAppend},
	{"UniqueDuplicate", testUnique},
	{"UniqueWithinBatch", testUniqueWithinBatch},
	{"BatchAtomic", testBatchAtomic},
	{"ConcurrentAppends", testConcurrentAppends},
	{"ConcurrentUnique", testConcurrentUnique},
	{"RecordsCancelled", testRecordsCancelled},
	{"Closed", testClosed},
	{"RunRecords", testRunRecords},
	{"Leases", testLeases},
	{"LeaseExpiry", testLeaseExpiry},
	{"LeaseDecisions", testLeaseDecisions},
	{"LeaseNextExpiry", testLeaseNextExpiry},
	{"LeaseClaimRace", testLeaseClaimRace},
}

var durableCases = []struct {
	name string
	run  func(t *testing.T, j govern.Journal, reopen Opener)
}{
	{"SurvivesReopen", testSurvivesReopen},
	{"UniqueAfterReopen", testUniqueAfterReopen},
	{"ConcurrentThenReopen", testConcurrentThenReopen},
}

// records returns n records of request reqID whose Data numbers them
// from first.
func records(reqID string, first, n int) []*govern.Record {
	out := make([]*govern.Record, n)
	for i := range out {
		out[i] = journalfixture.Record(recordkind.Transition, reqID, fmt.Sprintf(`{"n":%d}`, first+i))
	}
	return out
}

func appendT(t *testing.T, j govern.Journal, sync bool, recs ...*govern.Record) {
	t.Helper()
	if err := j.Append(t.Context(), sync, recs...); err != nil {
		t.Fatalf("Append: %v", err)
	}
}

// readAll returns the records with Seq ≥ from.
func readAll(t *testing.T, j govern.Journal, from uint64) []govern.Record {
	t.Helper()
	var out []govern.Record
	for r, err := range j.Records(t.Context(), from) {
		if err != nil {
			t.Fatalf("Records(%d): %v", from, err)
		}
		out = append(out, r)
	}
	return out
}

func values(recs []*govern.Record) []govern.Record {
	out := make([]govern.Record, len(recs))
	for i, r := range recs {
		out[i] = *r
	}
	return out
}

func testEmpty(t *testing.T, j govern.Journal) {
	if got := readAll(t, j, 1); len(got) != 0 {
		t.Errorf("a new journal yields %d records", len(got))
	}
	if n, err := govern.VerifyChain(t.Context(), j); n != 0 || err != nil {
		t.Errorf("VerifyChain = %d, %v; want 0, nil", n, err)
	}
}

func testSeqAndChain(t *testing.T, j govern.Journal) {
	var want []*govern.Record
	add := func(sync bool, recs ...*govern.Record) {
		appendT(t, j, sync, recs...)
		want = append(want, recs...)
	}
	add(true, records("r1", 0, 1)...)
	add(false, records("r1", 1, 3)...)
	add(true, records("r2", 4, 2)...)
	add(false, records("r2", 6, 1)...)
	got := readAll(t, j, 1)
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i, r := range got {
		if r.Seq != uint64(i+1) {
			t.Errorf("record %d has Seq %d", i, r.Seq)
		}
		wantPrev := ""
		if i > 0 {
			wantPrev = got[i-1].Hash
		}
		if r.Prev != wantPrev {
			t.Errorf("record %d: Prev %q, want %q", r.Seq, r.Prev, wantPrev)
		}
		if h, err := r.ComputeHash(); err != nil || h != r.Hash {
			t.Errorf("record %d: Hash %q, computed %q (%v)", r.Seq, r.Hash, h, err)
		}
	}
	if d := journalfixture.Diff(values(want), got); d != "" {
		t.Errorf("records read differ from those appended (-want +got):\n%s", d)
	}
	if n, err := govern.VerifyChain(t.Context(), j); n != uint64(len(want)) || err != nil {
		t.Errorf("VerifyChain = %d, %v; want %d, nil", n, err, len(want))
	}
}

func testSealsInPlace(t *testing.T, j govern.Journal) {
	a := journalfixture.Record(recordkind.RunStarted, "r", `{}`)
	a.Seq, a.Prev, a.Hash = 99, "bogus", "bogus" // overwritten
	appendT(t, j, true, a)
	if a.Seq != 1 || a.Prev != "" || !strings.HasPrefix(a.Hash, "sha256:") {
		t.Fatalf("first record sealed as seq %d prev %q hash %q", a.Seq, a.Prev, a.Hash)
	}
	b, c := journalfixture.Record(recordkind.Transition, "r", ""), journalfixture.Record(recordkind.Transition, "r", "")
	appendT(t, j, false, b, c)
	appendT(t, j, true) // a journal may seal appends without sync as late as this flush
	if b.Seq != 2 || b.Prev != a.Hash || c.Seq != 3 || c.Prev != b.Hash {
		t.Errorf("batch sealed as %d (prev %q), %d (prev %q)", b.Seq, b.Prev, c.Seq, c.Prev)
	}
	if h, _ := c.ComputeHash(); h != c.Hash {
		t.Errorf("sealed hash %q, computed %q", c.Hash, h)
	}
}

func testRecordsFrom(t *testing.T, j govern.Journal) {
	const n = 40
	for i := 0; i < n; i += 5 {
		appendT(t, j, i%10 == 0, records("r", i, 5)...)
	}
	all := readAll(t, j, 1)
	if len(all) != n {
		t.Fatalf("%d records, want %d", len(all), n)
	}
	for _, from := range []uint64{0, 1, 2, 17, n - 1, n, n + 1, n + 100, 1 << 62} {
		got := readAll(t, j, from)
		first := max(from, 1)
		var want []govern.Record
		if first <= n {
			want = all[first-1:]
		}
		if d := journalfixture.Diff(want, got); d != "" {
			t.Errorf("Records(%d) (-want +got):\n%s", from, d)
		}
	}
}

func testAppendDuringIteration(t *testing.T, j govern.Journal) {
	appendT(t, j, false, records("r", 0, 3)...)
	var seen []uint64
	for r, err := range j.Records(t.Context(), 1) {
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, r.Seq)
		if r.Seq == 2 {
			appendT(t, j, true, records("r", 3, 2)...)
		}
		if r.Seq == 5 {
			appendT(t, j, false, records("r", 5, 1)...)
		}
	}
	if want := []uint64{1, 2, 3, 4, 5, 6}; !slices.Equal(seen, want) {
		t.Errorf("iteration saw %v, want %v (records appended during it included)", seen, want)
	}
}

func testBreak(t *testing.T, j govern.Journal) {
	appendT(t, j, false, records("r", 0, 10)...)
	n := 0
	for _, err := range j.Records(t.Context(), 1) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 3 {
			break
		}
	}
	// Breaking must release whatever the iteration held: appending and
	// reading again work.
	appendT(t, j, true, records("r", 10, 1)...)
	if got := readAll(t, j, 1); len(got) != 11 {
		t.Errorf("%d records after a broken-off iteration, want 11", len(got))
	}
}

func testDataRoundTrip(t *testing.T, j govern.Journal) {
	var want []*govern.Record
	for i, d := range journalfixture.DataSamples {
		r := journalfixture.Record(recordkind.Evidence, fmt.Sprintf("r%d", i), d)
		appendT(t, j, i%2 == 0, r)
		want = append(want, r)
	}
	got := readAll(t, j, 1)
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i, r := range got {
		var wc, gc bytes.Buffer
		if err := json.Compact(&wc, want[i].Data); err != nil {
			t.Fatal(err)
		}
		if err := json.Compact(&gc, r.Data); err != nil {
			t.Errorf("sample %d: Data read back is not JSON: %v: %q", i, err, r.Data)
			continue
		}
		if !bytes.Equal(wc.Bytes(), gc.Bytes()) {
			t.Errorf("sample %d: Data\n got %.200q\nwant %.200q", i, gc.Bytes(), wc.Bytes())
		}
	}
	if _, err := govern.VerifyChain(t.Context(), j); err != nil {
		t.Error(err)
	}
}

func testAllFields(t *testing.T, j govern.Journal) {
	r := &govern.Record{
		Timestamp: govern.Time{Time: time.Date(2025, 3, 1, 12, 30, 45, 123_000_000, time.UTC)},
		Kind:      recordkind.ApprovalDecided, RequestID: "6f1c1a3e-3f0e-4d8a-9a57-0b6f0c1d2e3f",
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", ParentTraceID: "00f067aa0ba902b700f067aa0ba902b7",
		Node: "node-1", Actor: govern.Actor{ID: "alice", Kind: govern.ActorHuman},
		From: govern.Verify, To: govern.FailSafe, Tool: "refund", CallID: "call_1",
		Outcome: govern.Uncertain, Reasons: []govern.Reason{govern.VerificationFailed, govern.RollbackFailed},
		Unique: "approval:x", Data: json.RawMessage(`{"approved":true}`),
	}
	appendT(t, j, true, r)
	got := readAll(t, j, 1)
	if d := journalfixture.Diff([]govern.Record{*r}, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

func testEmptyAppend(t *testing.T, j govern.Journal) {
	appendT(t, j, true)
	appendT(t, j, false)
	appendT(t, j, false, records("r", 0, 1)...)
	appendT(t, j, true)
	if got := readAll(t, j, 1); len(got) != 1 || got[0].Seq != 1 {
		t.Errorf("after empty appends: %d records", len(got))
	}
}

func withUnique(r *govern.Record, key string) *govern.Record {
	r.Unique = key
	return r
}

// wantDuplicate checks that appending recs fails with ErrDuplicate and
// appends nothing.
func wantDuplicate(t *testing.T, j govern.Journal, recs ...*govern.Record) {
	t.Helper()
	before := readAll(t, j, 1)
	err := j.Append(t.Context(), true, recs...)
	if !errors.Is(err, govern.ErrDuplicate) {
		t.Fatalf("Append with a taken unique key = %v, want ErrDuplicate", err)
	}
	if after := readAll(t, j, 1); len(after) != len(before) {
		t.Fatalf("a refused Append appended %d records", len(after)-len(before))
	}
}

func testUnique(t *testing.T, j govern.Journal) {
	appendT(t, j, true, withUnique(journalfixture.Record(recordkind.Intent, "r", `{}`), "jti:1"))
	// Records without a key never collide.
	appendT(t, j, false, records("r", 0, 3)...)
	wantDuplicate(t, j, withUnique(journalfixture.Record(recordkind.Intent, "r", `{}`), "jti:1"))
	wantDuplicate(t, j, journalfixture.Record(recordkind.Transition, "r", ""), withUnique(journalfixture.Record(recordkind.Intent, "r", `{}`), "jti:1"))
	appendT(t, j, true, withUnique(journalfixture.Record(recordkind.Intent, "r", `{}`), "jti:2"))
	got := readAll(t, j, 1)
	if len(got) != 5 || got[4].Unique != "jti:2" || got[4].Seq != 5 {
		t.Fatalf("after refused duplicates: %d records", len(got))
	}
	if _, err := govern.VerifyChain(t.Context(), j); err != nil {
		t.Error(err)
	}
}

func testUniqueWithinBatch(t *testing.T, j govern.Journal) {
	appendT(t, j, false, records("r", 0, 1)...)
	wantDuplicate(t, j, withUnique(journalfixture.Record(recordkind.Intent, "r", `{}`), "k"), journalfixture.Record(recordkind.Transition, "r", ""),
		withUnique(journalfixture.Record(recordkind.Intent, "r", `{}`), "k"))
	// The key was not taken by the refused batch.
	appendT(t, j, true, withUnique(journalfixture.Record(recordkind.Intent, "r", `{}`), "k"))
}

func testBatchAtomic(t *testing.T, j govern.Journal) {
	appendT(t, j, true, withUnique(journalfixture.Record(recordkind.Intent, "r", `{}`), "taken"))
	batch := records("r", 0, 5)
	batch[3].Unique = "taken"
	wantDuplicate(t, j, batch...)
	// Whatever the refused batch did to the records, appending a good
	// batch continues the chain from the last appended record.
	good := records("r", 10, 3)
	appendT(t, j, false, good...)
	got := readAll(t, j, 1)
	if len(got) != 4 || got[1].Seq != 2 || got[1].Prev != got[0].Hash {
		t.Fatalf("after a refused batch and a good one: %d records", len(got))
	}
	// A batch is seen whole by readers: a reader never sees part of one.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			var n int
			for _, err := range j.Records(context.Background(), 1) {
				if err != nil {
					t.Error(err)
					return
				}
				n++
			}
			if (n-4)%7 != 0 {
				t.Errorf("a reader saw %d records: part of a batch of 7", n)
				return
			}
		}
	})
	for range 20 {
		appendT(t, j, false, records("r", 0, 7)...)
	}
	close(stop)
	wg.Wait()
}

func testConcurrentAppends(t *testing.T, j govern.Journal) {
	const writers, appends = 16, 25
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range appends {
				n := 1 + i%3 // batches of 1 to 3
				recs := make([]*govern.Record, n)
				for k := range recs {
					recs[k] = journalfixture.Record(recordkind.Transition, fmt.Sprintf("w%d", w), fmt.Sprintf(`{"w":%d,"i":%d,"k":%d}`, w, i, k))
				}
				if err := j.Append(context.Background(), i%2 == 0, recs...); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	// Readers run meanwhile and always see a valid chain prefix.
	stop := make(chan struct{})
	var rg sync.WaitGroup
	for range 2 {
		rg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				var v govern.ChainVerifier
				for r, err := range j.Records(context.Background(), 1) {
					if err == nil {
						err = v.Next(r)
					}
					if err != nil {
						t.Errorf("a reader during concurrent appends: %v", err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	rg.Wait()
	checkConcurrent(t, j, writers, appends)
}

// checkConcurrent checks what testConcurrentAppends appended: a valid
// chain holding every record once, each writer's in its order.
func checkConcurrent(t *testing.T, j govern.Journal, writers, appends int) {
	t.Helper()
	n, err := govern.VerifyChain(t.Context(), j)
	if err != nil {
		t.Fatal(err)
	}
	perWriter := 0
	for i := range appends {
		perWriter += 1 + i%3
	}
	if n != uint64(writers*perWriter) {
		t.Fatalf("%d records, want %d", n, writers*perWriter)
	}
	type pos struct{ i, k int }
	last := map[int]pos{}
	for r, err := range j.Records(t.Context(), 1) {
		if err != nil {
			t.Fatal(err)
		}
		var d struct{ W, I, K int }
		if err := json.Unmarshal(r.Data, &d); err != nil {
			t.Fatal(err)
		}
		p, seen := last[d.W]
		want := pos{0, 0}
		if seen {
			want = pos{p.i, p.k + 1}
			if p.k+1 == 1+p.i%3 {
				want = pos{p.i + 1, 0}
			}
		}
		if (pos{d.I, d.K}) != want {
			t.Fatalf("record %d: writer %d's append %d.%d follows %d.%d", r.Seq, d.W, d.I, d.K, p.i, p.k)
		}
		last[d.W] = pos{d.I, d.K}
	}
}

func testConcurrentUnique(t *testing.T, j govern.Journal) {
	const racers = 8
	for round := range 5 {
		key := fmt.Sprintf("approval:%d", round)
		var wg sync.WaitGroup
		errs := make([]error, racers)
		start := make(chan struct{})
		for i := range racers {
			wg.Go(func() {
				<-start
				errs[i] = j.Append(context.Background(), true, journalfixture.Record(recordkind.Transition, "r", ""),
					withUnique(journalfixture.Record(recordkind.ApprovalDecided, "r", `{}`), key))
			})
		}
		close(start)
		wg.Wait()
		wins := 0
		for _, err := range errs {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, govern.ErrDuplicate):
				t.Errorf("round %d: %v", round, err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d appends of unique key %q succeeded, want 1", round, wins, key)
		}
	}
	if n, err := govern.VerifyChain(t.Context(), j); err != nil || n != 10 {
		t.Errorf("VerifyChain = %d, %v; want 10 records (a pair per round)", n, err)
	}
}

func testRecordsCancelled(t *testing.T, j govern.Journal) {
	appendT(t, j, true, records("r", 0, 10)...)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	n := 0
	var last error
	for _, err := range j.Records(ctx, 1) {
		n++
		last = err
	}
	if !errors.Is(last, context.Canceled) {
		t.Errorf("Records with a cancelled context: %d items, last error %v; want context.Canceled", n, last)
	}
	ctx, cancel = context.WithCancel(t.Context())
	n, last = 0, nil
	for _, err := range j.Records(ctx, 1) {
		if err != nil {
			last = err
			continue
		}
		if n++; n == 3 {
			cancel()
		}
	}
	cancel()
	if !errors.Is(last, context.Canceled) || n >= 10 {
		t.Errorf("Records cancelled after 3 records: %d records, error %v; want the iteration to end with context.Canceled", n, last)
	}
}

func testClosed(t *testing.T, j govern.Journal) {
	appendT(t, j, true, records("r", 0, 2)...)
	if err := j.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := j.Append(t.Context(), true, records("r", 2, 1)...); err == nil {
		t.Error("Append on a closed journal succeeded")
	}
	if err := j.Append(t.Context(), false, records("r", 2, 1)...); err == nil {
		t.Error("Append (without sync) on a closed journal succeeded")
	}
	var last error
	for _, err := range j.Records(t.Context(), 1) {
		last = err
	}
	if last == nil {
		t.Error("Records on a closed journal ended without an error")
	}
}

func testRunRecords(t *testing.T, j govern.Journal) {
	rr, ok := j.(govern.RunReader)
	if !ok {
		t.Skip("not a govern.RunReader")
	}
	for i := range 30 {
		appendT(t, j, i%5 == 0, journalfixture.Record(recordkind.Transition, fmt.Sprintf("run-%d", i%3), fmt.Sprintf(`{"i":%d}`, i)))
	}
	all := readAll(t, j, 1)
	for _, id := range []string{"run-0", "run-1", "run-2", "nobody"} {
		var want []govern.Record
		for _, r := range all {
			if r.RequestID == id {
				want = append(want, r)
			}
		}
		got, err := rr.RunRecords(t.Context(), id)
		if err != nil {
			t.Fatalf("RunRecords(%s): %v", id, err)
		}
		if d := journalfixture.Diff(want, got); d != "" {
			t.Errorf("RunRecords(%s) (-want +got):\n%s", id, d)
		}
	}
	// Records appended later are found too.
	appendT(t, j, false, journalfixture.Record(recordkind.Transition, "run-1", `{"late":true}`))
	got, err := rr.RunRecords(t.Context(), "run-1")
	if err != nil || len(got) != 11 || got[10].Seq != 31 {
		t.Errorf("RunRecords after a later append: %d records, %v", len(got), err)
	}
}

func testSurvivesReopen(t *testing.T, j govern.Journal, reopen Opener) {
	var want []*govern.Record
	for i, d := range journalfixture.DataSamples {
		r := journalfixture.Record(recordkind.Evidence, fmt.Sprintf("r%d", i%3), d)
		r.Reasons = []govern.Reason{govern.EvidenceMissing}
		appendT(t, j, false, r) // none synced: Close makes them durable
		want = append(want, r)
	}
	batch := records("r0", 0, 4)
	appendT(t, j, false, batch...)
	want = append(want, batch...)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j2 := reopen(t)
	got := readAll(t, j2, 1)
	if d := journalfixture.Diff(values(want), got); d != "" {
		t.Fatalf("after reopen (-want +got):\n%s", d)
	}
	if n, err := govern.VerifyChain(t.Context(), j2); err != nil || n != uint64(len(want)) {
		t.Fatalf("VerifyChain after reopen = %d, %v", n, err)
	}
	// Appends continue the chain.
	next := journalfixture.Record(recordkind.Transition, "r0", "")
	appendT(t, j2, true, next)
	if next.Seq != uint64(len(want))+1 || next.Prev != want[len(want)-1].Hash {
		t.Errorf("first append after reopen sealed as seq %d prev %q", next.Seq, next.Prev)
	}
	if rr, ok := j2.(govern.RunReader); ok {
		recs, err := rr.RunRecords(t.Context(), "r0")
		if err != nil || len(recs) == 0 || recs[len(recs)-1].Seq != next.Seq {
			t.Errorf("RunRecords after reopen: %d records, %v", len(recs), err)
		}
	}
}

func testUniqueAfterReopen(t *testing.T, j govern.Journal, reopen Opener) {
	appendT(t, j, false, withUnique(journalfixture.Record(recordkind.Intent, "r", `{}`), "jti:a"), journalfixture.Record(recordkind.Transition, "r", ""))
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j2 := reopen(t)
	wantDuplicate(t, j2, journalfixture.Record(recordkind.Transition, "r", ""), withUnique(journalfixture.Record(recordkind.Intent, "r", `{}`), "jti:a"))
	appendT(t, j2, true, withUnique(journalfixture.Record(recordkind.Intent, "r", `{}`), "jti:b"))
	if n, err := govern.VerifyChain(t.Context(), j2); err != nil || n != 3 {
		t.Errorf("VerifyChain = %d, %v; want 3", n, err)
	}
}

func testConcurrentThenReopen(t *testing.T, j govern.Journal, reopen Opener) {
	const writers, appends = 8, 20
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range appends {
				recs := make([]*govern.Record, 1+i%3)
				for k := range recs {
					recs[k] = journalfixture.Record(recordkind.Transition, fmt.Sprintf("w%d", w), fmt.Sprintf(`{"w":%d,"i":%d,"k":%d}`, w, i, k))
				}
				if err := j.Append(context.Background(), i%4 == 0, recs...); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	checkConcurrent(t, reopen(t), writers, appends)
}
