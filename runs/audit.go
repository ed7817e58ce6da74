package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/agentry-dev/agentry/govern"
)

// maxAuditRecords bounds the records Audit returns for one run: a run
// that wrote more is refused rather than loaded whole into memory.
const maxAuditRecords = 100_000

// Audit is a run's journal records and what checking them against the
// hash chain found (Service.Audit).
type Audit struct {
	RequestID string          `json:"request_id"`
	Records   []govern.Record `json:"records"`
	Chain     ChainCheck      `json:"chain"`
}

// ChainCheck is the verdict on a run's records: each one's hash is
// recomputed from its content, and its prev compared with the hash of the
// record before it in the journal (of this run or another), so an edited,
// removed or reordered record shows.
type ChainCheck struct {
	// Verified is true when every record checked out.
	Verified bool `json:"verified"`
	// Checked is how many records were checked before the first failure
	// (all of them when Verified).
	Checked int `json:"checked"`
	// BrokenAt is the sequence number of the first record that failed,
	// and Detail why.
	BrokenAt uint64 `json:"broken_at,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// Audit returns the journal records of a top-level run or sub-agent run
// (by request ID), in order, and checks them against the chain. It fails
// with UnknownRun when the journal has none.
func (s *Service) Audit(ctx context.Context, requestID string) (*Audit, error) {
	j := s.g.Journal()
	var recs []govern.Record
	if rr, ok := j.(govern.RunReader); ok {
		got, err := rr.RunRecords(ctx, requestID)
		if err != nil {
			return nil, newError(Internal, requestID, "", err)
		}
		recs = got
	} else {
		for r, err := range j.Records(ctx, 1) {
			if err != nil {
				return nil, newError(Internal, requestID, "", err)
			}
			if r.RequestID == requestID {
				if len(recs) == maxAuditRecords {
					return nil, newError(InvalidParams, requestID, fmt.Sprintf("the run has more than %d journal records", maxAuditRecords), nil)
				}
				recs = append(recs, r)
			}
		}
	}
	if len(recs) == 0 {
		return nil, newError(UnknownRun, requestID, "no such run", nil)
	}
	if len(recs) > maxAuditRecords {
		return nil, newError(InvalidParams, requestID, fmt.Sprintf("the run has more than %d journal records", maxAuditRecords), nil)
	}
	a := &Audit{RequestID: requestID, Records: recs}
	chain, err := checkChain(ctx, j, recs)
	if err != nil {
		return nil, newError(Internal, requestID, "", err)
	}
	a.Chain = chain
	return a, nil
}

// checkChain checks recs (one run's, in order) against j: each record's
// hash, and its link to the record before it — from recs when that is the
// one before, otherwise read from the journal.
func checkChain(ctx context.Context, j govern.Journal, recs []govern.Record) (ChainCheck, error) {
	var c ChainCheck
	broken := func(seq uint64, why string) ChainCheck {
		c.BrokenAt, c.Detail = seq, why
		return c
	}
	for i, r := range recs {
		h, err := r.ComputeHash()
		if err != nil {
			return broken(r.Seq, "its hash cannot be computed: "+err.Error()), nil
		}
		if h != r.Hash {
			return broken(r.Seq, "its hash does not match its content (it was edited)"), nil
		}
		if i > 0 && r.Seq <= recs[i-1].Seq {
			return broken(r.Seq, "it is out of order"), nil
		}
		var prev string
		switch {
		case r.Seq == 1:
			prev = ""
		case i > 0 && recs[i-1].Seq == r.Seq-1:
			prev = recs[i-1].Hash
		default:
			p, ok, err := recordAt(ctx, j, r.Seq-1)
			if err != nil {
				return c, err
			}
			if !ok {
				return broken(r.Seq, fmt.Sprintf("record %d, the one before it, is missing", r.Seq-1)), nil
			}
			prev = p.Hash
		}
		if r.Prev != prev {
			return broken(r.Seq, fmt.Sprintf("its prev is not the hash of record %d (a record before it was removed, edited or replaced)", r.Seq-1)), nil
		}
		c.Checked++
	}
	c.Verified = true
	return c, nil
}

// recordAt reads the record with sequence number seq.
func recordAt(ctx context.Context, j govern.Journal, seq uint64) (govern.Record, bool, error) {
	for r, err := range j.Records(ctx, seq) {
		if err != nil {
			return govern.Record{}, false, err
		}
		return r, r.Seq == seq, nil
	}
	return govern.Record{}, false, nil
}

// httpAudit serves GET /v1/runs/{id}/audit: the Audit as JSON, or with
// ?format=jsonl the records alone, one per line as the journal stores
// them, as a download.
func (s *Service) httpAudit(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	format := r.URL.Query().Get("format")
	if format != "" && format != "json" && format != "jsonl" {
		s.writeError(w, newError(InvalidParams, id, `format must be "json" or "jsonl"`, nil))
		return
	}
	a, err := s.Audit(r.Context(), id)
	if err != nil {
		s.writeError(w, err)
		return
	}
	if format != "jsonl" {
		writeJSON(w, http.StatusOK, a)
		return
	}
	w.Header().Set("Content-Type", "application/jsonl")
	w.Header().Set("Content-Disposition", `attachment; filename="audit-`+safeFileName(id)+`.jsonl"`)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	for i := range a.Records {
		if enc.Encode(&a.Records[i]) != nil {
			return
		}
	}
}

// safeFileName keeps the letters, digits, '-' and '_' of s, so a request
// ID cannot break out of a Content-Disposition file name.
func safeFileName(s string) string {
	b := make([]byte, 0, len(s))
	for _, c := range []byte(s) {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			b = append(b, c)
		}
	}
	if len(b) == 0 {
		return "run"
	}
	return string(b)
}
