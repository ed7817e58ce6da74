package journal_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/journal"
	"github.com/agentry-dev/agentry/internal/journalfixture"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// seedLines returns record lines of a small sealed chain.
func seedLines(f *testing.F) [][]byte {
	j := govern.NewMemoryJournal()
	var lines [][]byte
	for i, d := range journalfixture.DataSamples[:10] {
		r := journalfixture.Record(recordkind.Evidence, "r", d)
		if i%3 == 0 {
			r.Unique, r.Reasons, r.From, r.To = "k"+string(rune('a'+i)), []govern.Reason{govern.EvidenceMissing}, govern.Plan, govern.Execute
		}
		if err := j.Append(f.Context(), false, r); err != nil {
			f.Fatal(err)
		}
		b, err := journal.AppendRecord(nil, r)
		if err != nil {
			f.Fatal(err)
		}
		lines = append(lines, b)
	}
	return lines
}

// FuzzDecodeRecord: arbitrary bytes never panic the decoder; an accepted
// record encodes to a line that decodes to the same record, whose own
// encoding is stable.
func FuzzDecodeRecord(f *testing.F) {
	for _, l := range seedLines(f) {
		f.Add(l)
	}
	for _, s := range []string{``, `{}`, `null`, `[]`, `{"seq":1}`, `{"seq":1,"seq":2}`, `{"Seq":1}`,
		`{"seq":1,"prev":"","hash":"","timestamp":"2025-01-01T00:00:00Z","kind":"x","request_id":"r","trace_id":"t","actor":{"id":"a","kind":"agent"},"outcome":"pending"} x`,
		`{"seq":1,"prev":"","hash":"","timestamp":"2025-01-01T00:00:00Z","kind":"x","request_id":"r","trace_id":"t","actor":{"id":"a","kind":"agent","id":"b"},"outcome":"pending"}`,
		`{"seq":-1}`, `{"seq":1.5}`, "{\"data\":\"\xff\"}", `{"timestamp":"yesterday"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := journal.DecodeRecord(line)
		if err != nil {
			return
		}
		enc, err := journal.AppendRecord(nil, &r)
		if err != nil {
			// Accepted but not encodable: only Data that is not valid
			// JSON for the encoder (the decoder keeps it raw) may do so.
			if json.Valid(r.Data) {
				t.Fatalf("decoded record does not encode: %v\n%q", err, line)
			}
			return
		}
		if bytes.Count(enc, []byte("\n")) != 1 || enc[len(enc)-1] != '\n' {
			t.Fatalf("encoding is not one line: %q", enc)
		}
		r2, err := journal.DecodeRecord(enc)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v\n%q", err, enc)
		}
		if d := journalfixture.Diff([]govern.Record{r}, []govern.Record{r2}); d != "" {
			t.Fatalf("round trip (-first +second):\n%s", d)
		}
		enc2, err := journal.AppendRecord(nil, &r2)
		if err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable:\n%q\n%q (%v)", enc, enc2, err)
		}
		h1, err1 := r.ComputeHash()
		h2, err2 := r2.ComputeHash()
		if (err1 == nil) != (err2 == nil) || h1 != h2 {
			t.Fatalf("hash changed across the round trip: %q %v / %q %v", h1, err1, h2, err2)
		}
	})
}

// FuzzOpen: Open on arbitrary file contents never panics; it either
// opens a journal whose chain verifies, or fails. A read-only Open of the
// same bytes never fails on content.
func FuzzOpen(f *testing.F) {
	lines := seedLines(f)
	all := bytes.Join(lines, nil)
	f.Add(all)
	f.Add(all[:len(all)-7])
	f.Add(append(bytes.Clone(all), 0, 0, 0))
	f.Add(bytes.Join(lines[1:], nil))
	f.Add([]byte("\n"))
	f.Add([]byte{0})
	f.Add([]byte{})
	f.Add([]byte("garbage\n"))
	f.Fuzz(func(t *testing.T, content []byte) {
		path := filepath.Join(t.TempDir(), "j.jsonl")
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		ro, err := journal.Open(path, &journal.Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("read-only Open: %v", err)
		}
		roCount, roErr := govern.VerifyChain(t.Context(), ro)
		ro.Close()
		j, err := journal.Open(path, &journal.Options{FlushInterval: -1})
		if err != nil {
			if !errors.Is(err, govern.ErrChainBroken) {
				t.Fatalf("Open failed without a chain error: %v", err)
			}
			if roErr == nil {
				t.Fatalf("Open failed (%v) but the read-only chain verifies", err)
			}
			return
		}
		defer j.Close()
		n, err := govern.VerifyChain(t.Context(), j)
		if err != nil {
			t.Fatalf("Open succeeded on a broken chain: %v", err)
		}
		if roErr != nil || roCount != n || j.Len() != n {
			t.Fatalf("read-only saw %d records (%v), writable %d (Len %d)", roCount, roErr, n, j.Len())
		}
		// It takes appends.
		r := journalfixture.Record(recordkind.Transition, "r", "")
		if err := j.Append(t.Context(), true, r); err != nil || r.Seq != n+1 {
			t.Fatalf("append after Open: seq %d, %v", r.Seq, err)
		}
	})
}
