package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/journal"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// sideEffects is the webhook receiver of the replicas test: it counts
// each tool's calls by the governed run (the body's session_id) and
// takes its time, so that kills land while a call is in flight.
type sideEffects struct {
	srv   *http.Server
	url   string
	mu    sync.Mutex
	calls map[string]int // "request_id tool" → calls
}

func newSideEffects(t *testing.T) *sideEffects {
	s := &sideEffects{calls: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /{tool}", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			SessionID string `json:"session_id"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body.SessionID == "" {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.calls[body.SessionID+" "+r.PathValue("tool")]++
		s.mu.Unlock()
		time.Sleep(400 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"result": {"ok": true}}`)
	})
	srv := &http.Server{Handler: mux}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	s.srv, s.url = srv, "http://"+ln.Addr().String()
	return s
}

func (s *sideEffects) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[key]
}

// replicaSet is N `agentry serve` processes on one PostgreSQL schema.
type replicaSet struct {
	t                   *testing.T
	store, agents, keys string
	lease               string
	uamp                *uampService // the UAMP service all replicas are
	mu                  sync.Mutex
	live                []*server // nil: killed
	uampURLs            []string  // of each live replica
	generation          int
}

func (rs *replicaSet) start(i int, sameNode bool) {
	rs.t.Helper()
	rs.generation++
	node := fmt.Sprintf("n%d", i)
	if !sameNode {
		node = fmt.Sprintf("n%d-g%d", i, rs.generation)
	}
	data := rs.t.TempDir()
	srv := startServer(rs.t, append([]string{"--store", rs.store, "--data", data, "--node", node, "--run-lease", rs.lease,
		"--agents", rs.agents, "--approvers", filepath.Join(rs.keys, "approvers.json")}, rs.uamp.flags()...)...)
	uampURL := rs.uamp.join(rs.t, srv, data)
	rs.mu.Lock()
	rs.live[i], rs.uampURLs[i] = srv, uampURL
	rs.mu.Unlock()
}

// any returns a live replica.
func (rs *replicaSet) any() *server {
	_, s := rs.pick()
	return s
}

// pick returns a live replica and its index.
func (rs *replicaSet) pick() (int, *server) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var up []int
	for i, s := range rs.live {
		if s != nil {
			up = append(up, i)
		}
	}
	i := up[rand.IntN(len(up))]
	return i, rs.live[i]
}

// TestUAICP_4_RunsSurviveReplicaKills: three replicas on one PostgreSQL
// run 36 governed runs — a side-effecting call each, and for a third of
// them a high-risk refund that pauses for a human — while the test kills
// (SIGKILL) a random replica every second or so, restarting it under its
// own name or a new one: while runs execute, are paused, wait between a
// decision and its resume, or have a call in flight. Every run ends;
// no run ends twice or resumes one pause twice; every side-effecting
// call reached the webhook at most once; the journal's chain verifies;
// and every replica answers GET /v1/runs/{id} alike. Then, on the same
// replicas (started as one UAMP service): one DID key set everywhere, a
// UIAP session resumed on another replica after its own was killed, a
// UAMP stream resumed on another replica and, its producer killed, ended
// there with 5.02.
func TestUAICP_4_RunsSurviveReplicaKills(t *testing.T) {
	base, u := postgresURL(t)
	const (
		lease = 5 * time.Second // a killed holder's runs are claimed within 4/3 of it (expiry, a reaper pass): 2/3 are left for their work
		runs  = 36
	)
	model := newFakeChat(t)
	hooks := newSideEffects(t)
	agents := t.TempDir()
	if err := os.WriteFile(filepath.Join(agents, "support.yaml"), []byte(`description: support on webhooks
model: compat:fake
tools:
  - webhook: {name: lookup_order, url: "${HOOKS}/lookup", risk: write_low_risk, rollback: {url: "${HOOKS}/unlookup"}}
  - webhook: {name: refund_order, url: "${HOOKS}/refund", risk: write_high_risk, rollback: {url: "${HOOKS}/unrefund"}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOOKS", hooks.url)
	t.Setenv("COMPAT_BASE_URL", model.srv.URL+"/v1")
	keys := filepath.Join(t.TempDir(), "keys")
	if code, _, errs := runCLI(t, "keys", "create", "alice", "--dir", keys); code != 0 {
		t.Fatalf("keys create: %s", errs)
	}
	rs := &replicaSet{t: t, store: freshSchema(t, base, u.Host), agents: agents, keys: keys, lease: lease.String(),
		uamp: newUAMPService(t), live: make([]*server, 3), uampURLs: make([]string, 3)}
	for i := range rs.live {
		rs.start(i, true)
	}

	// Runs start one every 250 ms on a random replica; every second or
	// so the replica that took the latest run — it executes there — is
	// killed (SIGKILL) and restarted, half the time under a new node name
	// so that only another replica can recover its runs. Meanwhile the
	// test approves what waits for a human.
	var (
		idsMu   sync.Mutex
		ids     []string
		latest  = -1
		started = make(chan struct{})
	)
	ctx, stop := context.WithCancel(context.Background())
	var chaos sync.WaitGroup
	chaos.Go(func() {
		defer close(started)
		for i := range runs {
			input := fmt.Sprintf("status of o-%d", 1000+i)
			if i%3 == 0 {
				input = fmt.Sprintf("refund o-%d", 1000+i)
			}
			for {
				at, srv := rs.pick()
				// Not postJSON: a replica killed under the request fails
				// it (EOF), and the test goes on with another one.
				var code int
				var body []byte
				if resp, err := http.Post(srv.URL+"/v1/runs", "application/json", strings.NewReader(`{"agent":"support","input":"`+input+`"}`)); err == nil {
					body, _ = io.ReadAll(resp.Body)
					resp.Body.Close()
					code = resp.StatusCode
				}
				var r struct {
					RequestID string `json:"request_id"`
				}
				if code == http.StatusAccepted && json.Unmarshal(body, &r) == nil && r.RequestID != "" {
					idsMu.Lock()
					ids, latest = append(ids, r.RequestID), at
					idsMu.Unlock()
					break
				}
				time.Sleep(50 * time.Millisecond) // the replica died under the request: another one
			}
			time.Sleep(250 * time.Millisecond)
		}
	})
	chaos.Go(func() {
		for kills := 0; ; kills++ {
			select {
			case <-started:
				return
			case <-time.After(time.Duration(700+rand.IntN(600)) * time.Millisecond):
			}
			idsMu.Lock()
			i := latest
			idsMu.Unlock()
			if i < 0 {
				continue
			}
			rs.mu.Lock()
			victim := rs.live[i]
			rs.live[i] = nil
			rs.mu.Unlock()
			victim.kill(t)
			rs.start(i, kills%2 == 0)
		}
	})
	lastKill := func() time.Time { chaos.Wait(); return time.Now() }
	_ = ctx
	var approvedMu sync.Mutex
	approvedAt := map[string]time.Time{} // run → when the test approved its last pause
	approve := func() {
		srv := rs.any()
		resp, err := http.Get(srv.URL + "/v1/approvals")
		if err != nil {
			return
		}
		var list struct {
			Approvals []struct {
				ID        string `json:"approval_id"`
				RequestID string `json:"request_id"`
				Status    string `json:"status"`
			} `json:"approvals"`
		}
		json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		for _, a := range list.Approvals {
			if a.Status != "pending" {
				continue
			}
			// A killed server fails it: tried again.
			if code, _, _ := runCLI(t, "approve", a.ID, "--as", "alice", "--dir", keys, "--server", srv.URL); code == 0 {
				approvedMu.Lock()
				approvedAt[a.RequestID] = time.Now()
				approvedMu.Unlock()
			}
		}
	}
	settled := func() (open []string) {
		idsMu.Lock()
		defer idsMu.Unlock()
		for _, id := range ids {
			resp, err := http.Get(rs.any().URL + "/v1/runs/" + id)
			if err != nil {
				return append(open, id)
			}
			var r runView
			json.NewDecoder(resp.Body).Decode(&r)
			resp.Body.Close()
			if r.Status != "delivered" && r.Status != "fail_safe" {
				open = append(open, id)
			}
		}
		return open
	}
	for {
		select {
		case <-started:
		default:
			approve()
			time.Sleep(200 * time.Millisecond)
			continue
		}
		break
	}
	stop()
	killedAt := lastKill()
	// After the last kill, each run still open ends within 2× the lease
	// — counted from the kill, or from its approval for a run that waited
	// for the test's human after it.
	due := func(id string) time.Time {
		approvedMu.Lock()
		defer approvedMu.Unlock()
		from := killedAt
		if at := approvedAt[id]; at.After(from) {
			from = at
		}
		return from.Add(2 * lease)
	}
	for {
		open := settled()
		if len(open) == 0 {
			break
		}
		var late []string
		for _, id := range open {
			if time.Now().After(due(id)) {
				late = append(late, id)
			}
		}
		if len(late) > 0 {
			t.Fatalf("%d runs did not end within 2× the lease after the last kill (or their approval): %v", len(late), late)
		}
		approve()
		time.Sleep(100 * time.Millisecond)
	}

	// The journal: one end per run, one resume per pause, a chain that
	// verifies.
	db, err := sql.Open("pgx", rs.store)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT record FROM governance_journal ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	var v govern.ChainVerifier
	byRun := map[string][]govern.Record{}
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		rec, err := journal.DecodeRecord([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Next(rec); err != nil {
			t.Fatalf("the chain: %v", err)
		}
		byRun[rec.RequestID] = append(byRun[rec.RequestID], rec)
	}
	rows.Close()
	delivered, failed, moved := 0, 0, 0
	for _, id := range ids {
		ends, resumes := 0, 0
		nodes := map[string]bool{}
		for _, rec := range byRun[id] {
			if rec.Epoch > 0 {
				nodes[rec.Node] = true
			}
			switch {
			case rec.Kind == recordkind.Transition && rec.To.Terminal():
				ends++
				if rec.To == govern.Deliver {
					delivered++
				} else {
					failed++
				}
			case rec.Kind == recordkind.Paused:
				resumes = 0
			case rec.Kind == recordkind.Resumed:
				if resumes++; resumes > 1 {
					t.Errorf("run %s resumed one pause twice", id)
				}
			}
		}
		if ends != 1 {
			t.Errorf("run %s: %d terminal transitions, want 1", id, ends)
		}
		if len(nodes) > 1 {
			moved++
		}
		for _, tool := range []string{"lookup", "refund"} {
			if n := hooks.count(id + " " + tool); n > 1 {
				t.Errorf("run %s: %s reached the webhook %d times", id, tool, n)
			}
		}
	}
	if code, out, errs := runCLI(t, "audit", "verify", "--store", rs.store); code != 0 {
		t.Errorf("agentry audit verify: exit %d\n%s%s", code, out, errs)
	}

	// One answer everywhere.
	for _, id := range ids {
		var first string
		rs.mu.Lock()
		live := slicesOf(rs.live)
		rs.mu.Unlock()
		for _, srv := range live {
			got := getRun(t, srv.URL, id)
			got.RequestID = id
			b, _ := json.Marshal(got)
			if first == "" {
				first = string(b)
			} else if string(b) != first {
				t.Errorf("run %s: replicas disagree:\n%s\n%s", id, first, b)
			}
		}
	}
	t.Logf("%d runs: %d delivered, %d failed safe, %d moved between replicas; %d journal records", len(ids), delivered, failed, moved, v.Count())
	if moved == 0 {
		t.Error("no run moved between replicas: the kills tested nothing")
	}
	if delivered == 0 {
		t.Error("no run delivered: the chaos left nothing to check")
	}

	// Sessions and streams move as runs do, on the same replicas: every
	// replica publishes one DID key set; a UIAP session resumes on
	// another replica after its own was killed; a UAMP stream resumes on
	// another replica, and says so when its producer was killed.
	rs.mu.Lock()
	live, urls := slices.Clone(rs.live), slices.Clone(rs.uampURLs)
	rs.mu.Unlock()
	t.Run("OneDIDKeySet", func(t *testing.T) { rs.uamp.checkOneKeySet(t, urls...) })
	t.Run("UIAPResumeAfterKill", func(t *testing.T) { checkUIAPResume(t, live[0], live[1]) })     // kills 0
	t.Run("UAMPStreamResume", func(t *testing.T) { rs.uamp.check(t, live[1], urls[1], urls[2]) }) // kills 1
}

func slicesOf(ss []*server) []*server {
	var out []*server
	for _, s := range ss {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// TestReplicas_OneNodeNameOneProcess: a second live replica under a
// node name in use is refused at startup, naming the holder; once the
// first stops (SIGTERM releases the name) the name is free again.
func TestReplicas_OneNodeNameOneProcess(t *testing.T) {
	base, u := postgresURL(t)
	store := freshSchema(t, base, u.Host)
	a := startServer(t, "--store", store, "--data", t.TempDir(), "--node", "same", "--tls-addr", "")
	code, _, errs := runCLI(t, "serve", "--addr", "127.0.0.1:0", "--store", store, "--data", t.TempDir(), "--node", "same", "--tls-addr", "")
	if code == 0 || !strings.Contains(errs, `node name "same" is in use by a live process`) {
		t.Fatalf("a second replica named same: exit %d\n%s", code, errs)
	}
	a.stop(t)
	b := startServer(t, "--store", store, "--data", t.TempDir(), "--node", "same", "--tls-addr", "")
	b.stop(t)
}

// TestReplicas_OneAuditExportForAll: two replicas given the same export
// (one --audit-log path, as on a shared volume) share its cursor; one
// replica at a time holds the export, so every journal record is in the
// file once — not once from each replica.
func TestReplicas_OneAuditExportForAll(t *testing.T) {
	base, u := postgresURL(t)
	store := freshSchema(t, base, u.Host)
	shared := filepath.Join(t.TempDir(), "audit.jsonl")
	logs := []string{shared, shared}
	var replicas []*server
	for i, log := range logs {
		replicas = append(replicas, startServer(t, "--store", store, "--data", t.TempDir(), "--node", fmt.Sprintf("r%d", i), "--audit-log", log, "--tls-addr", ""))
	}
	// Runs in rounds, apart by more than an exporter's poll interval, so
	// that every exporter that runs sees each round.
	for i := range 8 {
		code, body := postJSON(t, replicas[i%2].URL+"/v1/runs", fmt.Sprintf(`{"agent":"support","input":"where is o-%d","wait":true}`, 1001+i))
		if code != http.StatusOK {
			t.Fatalf("run %d: %d %s", i, code, body)
		}
		if i%2 == 1 {
			time.Sleep(1500 * time.Millisecond)
		}
	}
	for _, r := range replicas {
		r.stop(t)
	}
	db, err := sql.Open("pgx", store)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var records int
	if err := db.QueryRow(`SELECT COUNT(*) FROM governance_journal`).Scan(&records); err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]int{}
	for _, log := range logs[:1] {
		b, err := os.ReadFile(log)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line == "" {
				continue
			}
			rec, err := journal.DecodeRecord([]byte(line))
			if err != nil {
				t.Fatalf("%s: %v", log, err)
			}
			seen[rec.Seq]++
		}
	}
	if records == 0 || len(seen) != records {
		t.Errorf("%d of %d journal records exported", len(seen), records)
	}
	for seq, n := range seen {
		if n > 1 {
			t.Errorf("record %d exported %d times", seq, n)
		}
	}
}

// TestReplicas_DecisionWakesAnotherReplica: UAICP-0.3 §4 with leases —
// an approval decided on a replica that does not resume the run (it runs
// no such agent; as well, it could have died right after the decision)
// reaches the other replicas at once (PostgreSQL LISTEN/NOTIFY), and one
// of them resumes and delivers the run: with an hour's lease their
// reapers would not pass for 20 minutes. The refund happened once.
func TestReplicas_DecisionWakesAnotherReplica(t *testing.T) {
	base, u := postgresURL(t)
	model := newFakeChat(t)
	hooks := newSideEffects(t)
	agents, others := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(agents, "support.yaml"), []byte(`description: support on webhooks
model: compat:fake
tools:
  - webhook: {name: refund_order, url: "${HOOKS}/refund", risk: write_high_risk, rollback: {url: "${HOOKS}/unrefund"}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(others, "other.yaml"), []byte("description: another agent\nmodel: compat:fake\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOOKS", hooks.url)
	t.Setenv("COMPAT_BASE_URL", model.srv.URL+"/v1")
	keys := filepath.Join(t.TempDir(), "keys")
	if code, _, errs := runCLI(t, "keys", "create", "alice", "--dir", keys); code != 0 {
		t.Fatalf("keys create: %s", errs)
	}
	store := freshSchema(t, base, u.Host)
	replica := func(node, agents string) *server {
		return startServer(t, "--store", store, "--data", t.TempDir(), "--node", node, "--run-lease", "1h",
			"--agents", agents, "--approvers", filepath.Join(keys, "approvers.json"), "--tls-addr", "")
	}
	runner, decider := replica("runner", agents), replica("decider", others)

	code, body := postJSON(t, runner.URL+"/v1/runs", `{"agent":"support","input":"refund o-1001","wait":true}`)
	var run runView
	if err := json.Unmarshal(body, &run); err != nil || code != http.StatusOK || run.Status != "paused" || len(run.PendingApprovals) != 1 {
		t.Fatalf("the run: %d %s", code, body)
	}
	if code, out, errs := runCLI(t, "approve", run.PendingApprovals[0], "--as", "alice", "--dir", keys, "--server", decider.URL); code != 0 {
		t.Fatalf("approve on the other replica: exit %d\n%s%s", code, out, errs)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(runner.URL + "/v1/runs/" + run.RequestID)
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&run)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET the run: %d %v", resp.StatusCode, err)
		}
		if run.Status != "paused" && run.Status != "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run is still %s a minute after the decision on another replica", run.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if run.Status != "delivered" {
		t.Errorf("the run ended %s, want delivered", run.Status)
	}
	if n := hooks.count(run.RequestID + " refund"); n != 1 {
		t.Errorf("the refund webhook was called %d times, want 1", n)
	}
}
