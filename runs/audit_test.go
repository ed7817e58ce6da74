package runs_test

import (
	"bufio"
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/runs"
)

// tamperJournal is a journal whose reads can be falsified once a test
// says so: a record's outcome edited, or a record left out.
type tamperJournal struct {
	govern.Journal
	edit, drop atomic.Uint64 // seq to falsify; 0: none
}

func (j *tamperJournal) Records(ctx context.Context, from uint64) iter.Seq2[govern.Record, error] {
	return func(yield func(govern.Record, error) bool) {
		for r, err := range j.Journal.Records(ctx, from) {
			if err == nil && r.Seq == j.drop.Load() {
				continue
			}
			if err == nil && r.Seq == j.edit.Load() {
				r.Outcome = "tampered"
			}
			if !yield(r, err) {
				return
			}
		}
	}
}

// TestAudit: GET /v1/runs/{id}/audit answers a run's journal records
// with the chain check — verified for an intact journal; broken, at the
// record and with why, when a record of the run was edited or a record
// before one of its records is missing; ?format=jsonl downloads the
// records one per line. An unknown run is a 404, a bad format a 400.
func TestAudit(t *testing.T) {
	ctx := ctxT(t)
	j := &tamperJournal{Journal: govern.NewMemoryJournal()}
	f := newFixtureWith(t, j, llm.ModelReference{})
	var ids []string
	for _, in := range []string{"status of o-1002?", "status of o-1003?"} {
		run, err := f.svc.Start(ctx, &runs.StartParams{Agent: "support", Input: in})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.svc.Wait(ctx, run.RequestID); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, run.RequestID)
	}
	var a runs.Audit
	getJSON(t, f.srv.URL+"/v1/runs/"+ids[1]+"/audit", &a)
	if !a.Chain.Verified || a.Chain.Checked != len(a.Records) || len(a.Records) < 3 || a.RequestID != ids[1] {
		t.Fatalf("intact journal: %+v (%d records)", a.Chain, len(a.Records))
	}
	for _, r := range a.Records {
		if r.RequestID != ids[1] {
			t.Errorf("record %d is of run %s", r.Seq, r.RequestID)
		}
	}
	first := a.Records[0].Seq
	if first < 2 {
		t.Fatalf("the second run's first record is %d: want one after the first run's", first)
	}

	resp, err := http.Get(f.srv.URL + "/v1/runs/" + ids[1] + "/audit?format=jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if ct, cd := resp.Header.Get("Content-Type"), resp.Header.Get("Content-Disposition"); resp.StatusCode != 200 || ct != "application/jsonl" || !strings.Contains(cd, "attachment") {
		t.Errorf("jsonl: %d %q %q", resp.StatusCode, ct, cd)
	}
	var lines int
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r govern.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.Hash != a.Records[lines].Hash {
			t.Errorf("jsonl line %d: %v %s", lines, err, sc.Text())
		}
		lines++
	}
	resp.Body.Close()
	if lines != len(a.Records) {
		t.Errorf("jsonl has %d lines, want %d", lines, len(a.Records))
	}

	edited := a.Records[1].Seq
	j.edit.Store(edited)
	getJSON(t, f.srv.URL+"/v1/runs/"+ids[1]+"/audit", &a)
	if a.Chain.Verified || a.Chain.BrokenAt != edited || a.Chain.Checked != 1 || !strings.Contains(a.Chain.Detail, "edited") {
		t.Errorf("edited record %d: %+v", edited, a.Chain)
	}
	j.edit.Store(0)

	j.drop.Store(first - 1) // the first run's last record
	getJSON(t, f.srv.URL+"/v1/runs/"+ids[1]+"/audit", &a)
	if a.Chain.Verified || a.Chain.BrokenAt != first || a.Chain.Checked != 0 || !strings.Contains(a.Chain.Detail, "missing") {
		t.Errorf("record %d removed: %+v", first-1, a.Chain)
	}
	j.drop.Store(0)

	for url, want := range map[string]int{
		"/v1/runs/f47ac10b-58cc-4372-a567-0e02b2c3d479/audit": http.StatusNotFound,
		"/v1/runs/" + ids[0] + "/audit?format=xml":            http.StatusBadRequest,
	} {
		resp, err := http.Get(f.srv.URL + url)
		if err != nil {
			t.Fatal(err)
		}
		code, _ := readError(t, resp)
		if code != want {
			t.Errorf("GET %s: %d, want %d", url, code, want)
		}
	}
}
