package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/ids"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for the test's own schema
)

// cutProxy forwards TCP connections to a backend until cut: then it
// closes every connection and refuses new ones, as a database that went
// down does, until restored.
type cutProxy struct {
	ln      net.Listener
	backend string
	mu      sync.Mutex
	down    bool
	conns   map[net.Conn]struct{}
}

func newCutProxy(t *testing.T, backend string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, backend: backend, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go p.serve()
	return p
}

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		if !down {
			p.conns[c] = struct{}{}
		}
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		go p.forward(c)
	}
}

func (p *cutProxy) forward(c net.Conn) {
	b, err := net.Dial("tcp", p.backend)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		c.Close()
		b.Close()
		return
	}
	p.conns[b] = struct{}{}
	p.mu.Unlock()
	go func() { io.Copy(b, c); b.Close(); c.Close() }()
	io.Copy(c, b)
	c.Close()
	b.Close()
}

// cut closes every connection and refuses new ones.
func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *cutProxy) restore() {
	p.mu.Lock()
	p.down = false
	p.mu.Unlock()
}

// postgresURL returns AGENTRY_TEST_POSTGRES, parsed too, and skips the
// test when it is not set.
func postgresURL(t *testing.T) (string, *url.URL) {
	t.Helper()
	base := os.Getenv("AGENTRY_TEST_POSTGRES")
	if base == "" {
		t.Skip("AGENTRY_TEST_POSTGRES is not set; set it to a PostgreSQL URL to run this test")
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	return base, u
}

// freshSchema returns the URL of a new schema of the AGENTRY_TEST_POSTGRES
// database, dropped at cleanup, reached through host (host:port).
func freshSchema(t *testing.T, base, host string) string {
	t.Helper()
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	schema := "agentry_outage_" + strings.ReplaceAll(ids.New(), "-", "")
	if _, err := admin.ExecContext(context.Background(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() { admin.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery, u.Host = q.Encode(), host
	return u.String()
}

// outcome is what one request of the load got.
type outcome struct {
	what       string
	status     int
	retryAfter bool
	id         string // the session or run it created, if any
}

// TestOutage_PostgreSQLDown: `agentry serve` on PostgreSQL, under load
// (UAIP sessions and governed runs), while the database goes away for a
// while and comes back (a proxy that drops every connection and refuses
// new ones). Every answer is 2xx or 503 with Retry-After — never 500 —
// every session and run ID the server answered exists afterwards, and
// the server serves again within 5 s of the database's return.
func TestOutage_PostgreSQLDown(t *testing.T) {
	base, u := postgresURL(t)
	proxy := newCutProxy(t, u.Host)
	store := freshSchema(t, base, proxy.ln.Addr().String())
	srv := startServer(t, "--store", store, "--data", t.TempDir(), "--tls-addr", "", "--run-lease", "2s")
	hc := httpClient(8)

	var mu sync.Mutex
	var got []outcome
	record := func(o outcome) {
		mu.Lock()
		got = append(got, o)
		mu.Unlock()
	}
	post := func(what, path, body string, id func([]byte) string) {
		resp, err := hc.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			record(outcome{what: what + ": " + err.Error()})
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		o := outcome{what: what, status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After") != ""}
		if resp.StatusCode/100 == 2 && id != nil {
			o.id = id(b)
		}
		if resp.StatusCode >= 500 && resp.StatusCode != http.StatusServiceUnavailable {
			o.what += " " + string(b)
		}
		record(o)
	}
	field := func(name string) func([]byte) string {
		return func(b []byte) string {
			var m map[string]any
			json.Unmarshal(b, &m)
			s, _ := m[name].(string)
			return s
		}
	}
	var stop atomic.Bool
	var ok atomic.Int64 // successful requests so far
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				switch (w + i) % 3 {
				case 0:
					post("initialize", "/initialize", `{"workflow_name":"store"}`, field("session_id"))
				case 1:
					post("run", "/v1/runs", `{"agent":"echo","input":"ping `+fmt.Sprint(i)+`"}`, field("request_id"))
				case 2:
					resp, err := hc.Get(srv.URL + "/v1/runs?limit=5")
					if err != nil {
						record(outcome{what: "list: " + err.Error()})
						continue
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					record(outcome{what: "list", status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After") != ""})
				}
				mu.Lock()
				if o := got[len(got)-1]; o.status/100 == 2 {
					ok.Add(1)
				}
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	waitOK := func(n int64, within time.Duration) time.Duration {
		start := time.Now()
		for ok.Load() < n {
			if time.Since(start) > within {
				t.Fatalf("only %d successful requests after %s:\n%s", ok.Load(), within, srv.output.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		return time.Since(start)
	}
	waitOK(30, 60*time.Second)
	proxy.cut()
	mu.Lock()
	before := len(got)
	mu.Unlock()
	time.Sleep(2 * time.Second) // the load goes on against a database that is gone
	mu.Lock()
	during := got[before:]
	mu.Unlock()
	unavailable := 0
	for _, o := range during {
		if o.status == http.StatusServiceUnavailable {
			unavailable++
		}
	}
	restored := ok.Load()
	proxy.restore()
	back := waitOK(restored+1, 60*time.Second) // the first success: service is back
	waitOK(restored+30, 60*time.Second)        // and stays
	stop.Store(true)
	wg.Wait()

	if unavailable == 0 {
		t.Errorf("no 503 while the database was down (%d requests)", len(during))
	}
	if back > 5*time.Second {
		t.Errorf("full service came back %s after the database, want within 5 s", back)
	}
	statuses := map[string]int{}
	for _, o := range got {
		statuses[fmt.Sprintf("%s %d", o.what, o.status)]++
		switch {
		case o.status == 0:
			t.Errorf("a request failed without an answer: %s", o.what)
		case o.status == http.StatusServiceUnavailable && !o.retryAfter:
			t.Errorf("%s: 503 without Retry-After", o.what)
		case o.status >= 500 && o.status != http.StatusServiceUnavailable, o.status/100 == 4:
			t.Errorf("%s: %d", o.what, o.status)
		}
	}
	t.Logf("%d requests, %d answered 503 while the database was down; service back %s after it; %v", len(got), unavailable, back.Round(time.Millisecond), statuses)
	// Every ID the server gave out exists.
	for _, o := range got {
		if o.id == "" {
			continue
		}
		path := "/api/sessions/" + o.id
		if o.what == "run" {
			path = "/v1/runs/" + o.id
		}
		resp, err := hc.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s %s: answered 2xx, now GET %s is %d", o.what, o.id, path, resp.StatusCode)
		}
	}
	// Every run ends: one the outage kept from journaling its end is
	// given up by its replica and recovered once its lease (2 s) expired.
	deadline := time.Now().Add(60 * time.Second)
	for _, o := range got {
		if o.what != "run" || o.id == "" {
			continue
		}
		for {
			r := getRun(t, srv.URL, o.id)
			if r.Status == "delivered" || r.Status == "fail_safe" {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("run %s is still %s a minute after the outage", o.id, r.Status)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
