// Command uaipload is the load generator of bench/uaip.sh: it measures
// UAIP-0.1 POST /execute method calls on an agentry server over loopback —
// throughput and p50/p99 latency at each concurrency — next to a bare
// net/http handler it starts itself that does the same JSON decode and
// encode of an equivalent request and response (the baseline, measured in
// the same run). It can also report a server's RSS after creating many
// sessions.
//
// It is bounded: loopback targets only, at most 60 s per measurement and a
// cap on the requests.
//
//	uaipload -url http://127.0.0.1:8080 -label memory -tasks add_to_cart,view_cart -c 1,16 -baseline
//	uaipload -url http://127.0.0.1:8080 -pid 1234 -rss-sessions 10000
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const (
	maxDuration = 60 * time.Second
	maxRequests = 5_000_000
	maxSessions = 100_000
	maxConc     = 256
)

type config struct {
	url         string
	workflow    string
	label       string
	tasks       []string
	concs       []int
	duration    time.Duration
	warmup      time.Duration
	sessions    int
	maxRequests int
	rounds      int
	baseline    bool
	header      bool
	pid         int
	rssSessions int
	targetRPS   float64
	targetRatio float64
	targetRSS   float64
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "uaipload:", err)
		os.Exit(1)
	}
}

func run(args []string, out io.Writer) error {
	if len(args) == 1 && args[0] == "-bare-serve" {
		return serveBare(os.Stdin, out)
	}
	var c config
	var tasks, concs string
	fs := flag.NewFlagSet("uaipload", flag.ContinueOnError)
	fs.StringVar(&c.url, "url", "http://127.0.0.1:8080", "agentry server base URL (loopback only)")
	fs.StringVar(&c.workflow, "workflow", "store", "workflow (the built-in store)")
	fs.StringVar(&c.label, "label", "agentry", "label of the server's rows")
	fs.StringVar(&tasks, "tasks", "add_to_cart,view_cart", "cart-stage tasks to measure, in order")
	fs.StringVar(&concs, "c", "1,16", "concurrencies (connections) to measure")
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "measurement time per row (≤ 60s)")
	fs.DurationVar(&c.warmup, "warmup", 300*time.Millisecond, "unmeasured warm-up before each row")
	fs.IntVar(&c.sessions, "sessions", 2000, "sessions created and moved to stage cart before measuring")
	fs.IntVar(&c.maxRequests, "max-requests", 1_000_000, "cap on the requests of one measurement")
	fs.IntVar(&c.rounds, "rounds", 3, "measurements per row (the median is reported), at most 10")
	fs.BoolVar(&c.baseline, "baseline", false, "also measure the bare net/http handler")
	fs.BoolVar(&c.header, "header", false, "print the table header first")
	fs.IntVar(&c.pid, "pid", 0, "server process id, for -rss-sessions")
	fs.IntVar(&c.rssSessions, "rss-sessions", 0, "create this many sessions first and report the server's RSS (needs -pid)")
	fs.Float64Var(&c.targetRPS, "target-rps", 0, "report whether each task reaches this many req/s at the highest concurrency")
	fs.Float64Var(&c.targetRatio, "target-ratio", 0, "report whether each task reaches this fraction of the bare handler there")
	fs.Float64Var(&c.targetRSS, "target-rss-mib", 0, "report whether the RSS after -rss-sessions stays within this many MiB")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, t := range strings.Split(tasks, ",") {
		if t = strings.TrimSpace(t); t != "" {
			c.tasks = append(c.tasks, t)
		}
	}
	for _, s := range strings.Split(concs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > maxConc {
			return fmt.Errorf("-c %q: want concurrencies between 1 and %d", concs, maxConc)
		}
		c.concs = append(c.concs, n)
	}
	switch {
	case c.duration <= 0 || c.duration > maxDuration:
		return fmt.Errorf("-duration must be in (0, %v]", maxDuration)
	case c.rounds < 1 || c.rounds > 10:
		return errors.New("-rounds must be in [1, 10]")
	case c.maxRequests < 1 || c.maxRequests > maxRequests:
		return fmt.Errorf("-max-requests must be in [1, %d]", maxRequests)
	case c.sessions < 1 || c.sessions > maxSessions || c.rssSessions < 0 || c.rssSessions > maxSessions:
		return fmt.Errorf("-sessions and -rss-sessions must be at most %d", maxSessions)
	case c.rssSessions > 0 && c.pid <= 0:
		return errors.New("-rss-sessions needs -pid")
	}
	if err := checkLoopback(c.url); err != nil {
		return err
	}
	c.url = strings.TrimRight(c.url, "/")
	return bench(context.Background(), &c, out)
}

// checkLoopback refuses any target that is not a loopback address.
func checkLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("-url %q: want http://<loopback address>:<port>", raw)
	}
	host := u.Hostname()
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("-url %q: refusing a non-loopback target (use 127.0.0.1, ::1 or localhost)", raw)
}

func newClient(conns int) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxConnsPerHost: conns, MaxIdleConnsPerHost: conns, MaxIdleConns: conns,
		DisableCompression: true, IdleConnTimeout: 60 * time.Second}}
}

// post sends a JSON body and returns the status and body.
func post(ctx context.Context, hc *http.Client, u, session string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set("X-Session-Id", session)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}

// parallel runs f(i) for i in [0, n) over conc goroutines and returns the
// first error.
func parallel(n, conc int, f func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}

// createSessions initializes n sessions, moving them to stage when it is
// not empty.
func (c *config) createSessions(ctx context.Context, hc *http.Client, n int, stage string) ([]string, error) {
	ids := make([]string, n)
	initBody, _ := json.Marshal(map[string]string{"workflow_name": c.workflow})
	moveBody, _ := json.Marshal(map[string]string{"workflow_name": c.workflow, "action": "stage_transition", "stage": stage})
	err := parallel(n, 16, func(i int) error {
		status, b, err := post(ctx, hc, c.url+"/initialize", "", initBody)
		if err != nil || status != http.StatusOK {
			return fmt.Errorf("initialize: %d %s %v", status, b, err)
		}
		var r struct {
			SessionID string `json:"session_id"`
		}
		if err := json.Unmarshal(b, &r); err != nil || r.SessionID == "" {
			return fmt.Errorf("initialize: %s", b)
		}
		ids[i] = r.SessionID
		if stage == "" {
			return nil
		}
		if status, b, err := post(ctx, hc, c.url+"/execute", r.SessionID, moveBody); err != nil || status != http.StatusOK {
			return fmt.Errorf("transition to %s: %d %s %v", stage, status, b, err)
		}
		return nil
	})
	return ids, err
}

// rssKiB reads VmRSS (or another /proc/<pid>/status field) in KiB.
func procStatusKiB(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no %s", pid, field)
}

// procCPU returns a process's CPU time (user + system) from
// /proc/<pid>/stat; 0 pid is an error.
func procCPU(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, errors.New("no pid")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (which may hold spaces): state is
	// field 3, utime 14 and stime 15.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	const clockTick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(utime+stime) * clockTick, nil
}

// stock is the built-in store's stock per product: add_to_cart (quantity
// 1) cycles through it so that a session can take 191 adds.
var stock = []struct {
	id string
	n  int
}{{"SKU-005", 100}, {"SKU-001", 40}, {"SKU-002", 25}, {"SKU-006", 15}, {"SKU-003", 8}, {"SKU-004", 3}}

var perSession = func() int {
	n := 0
	for _, s := range stock {
		n += s.n
	}
	return n
}()

// taskBodies returns the request bodies for a task: one per product for
// add_to_cart (indexed by the session's add count), one otherwise.
func (c *config) taskBodies(task string) [][]byte {
	if task != "add_to_cart" {
		b, _ := json.Marshal(map[string]any{"workflow_name": c.workflow, "action": "method_call", "task": task, "args": map[string]any{}})
		return [][]byte{b}
	}
	var out [][]byte
	for _, s := range stock {
		b, _ := json.Marshal(map[string]any{"workflow_name": c.workflow, "action": "method_call", "task": task,
			"args": map[string]any{"product_id": s.id, "quantity": 1}})
		for range s.n {
			out = append(out, b)
		}
	}
	return out
}

// row is one measurement.
type row struct {
	label, task string
	conc        int
	requests    int
	errors      int
	firstErr    string
	elapsed     time.Duration
	p50, p99    time.Duration
	cpu         time.Duration // the server process's CPU time (user+system)
	cpuPerReq   time.Duration
}

// capacity is the rate the server's CPU cost per request allows on all
// the machine's CPUs, were they the server's alone.
func (r *row) capacity() float64 {
	if r.cpuPerReq <= 0 {
		return 0
	}
	return float64(runtime.NumCPU()) / r.cpuPerReq.Seconds()
}

func (r *row) rps() float64 { return float64(r.requests) / r.elapsed.Seconds() }

// measure drives target for c.duration at conc connections: each request
// goes to the next session round-robin with that session's next body.
func (c *config) measure(ctx context.Context, label, target, task string, pid, conc int, sessions []string, bodies [][]byte, adds []atomic.Int32) *row {
	var next atomic.Int64
	var stop, recording atomic.Bool
	var count atomic.Int64
	lats := make([][]time.Duration, conc)
	errs := make([]int, conc)
	firstErr := make([]string, conc)
	var wg sync.WaitGroup
	for w := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := make([]time.Duration, 0, 1<<16)
			rc, path, err := newRawConn(target)
			if err != nil {
				errs[w]++
				firstErr[w] = err.Error()
				return
			}
			defer rc.close()
			for !stop.Load() {
				s := int(next.Add(1)) % len(sessions)
				body := bodies[0]
				if len(bodies) > 1 {
					k := int(adds[s].Add(1)) - 1
					if k >= len(bodies) {
						errs[w]++
						firstErr[w] = "a session's stock is exhausted: raise -sessions"
						stop.Store(true) // the measurement is over: no busy loop skewing it
						break
					}
					body = bodies[k]
				}
				t0 := time.Now()
				status, b, err := rc.post(path, sessions[s], body)
				d := time.Since(t0)
				if !recording.Load() {
					continue
				}
				if err != nil || status != http.StatusOK {
					errs[w]++
					if firstErr[w] == "" {
						firstErr[w] = fmt.Sprintf("%d %s %v", status, bytes.TrimSpace(b), err)
					}
					continue
				}
				l = append(l, d)
				if count.Add(1) >= int64(c.maxRequests) {
					stop.Store(true)
				}
			}
			lats[w] = l
		}()
	}
	time.Sleep(c.warmup)
	cpu0, cpuErr := procCPU(pid)
	recording.Store(true)
	start := time.Now()
	timer := time.AfterFunc(c.duration, func() { stop.Store(true) })
	wg.Wait()
	timer.Stop()
	r := &row{label: label, task: task, conc: conc, elapsed: time.Since(start)}
	if cpu1, err := procCPU(pid); err == nil && cpuErr == nil {
		r.cpu = cpu1 - cpu0
	}
	var all []time.Duration
	for w := range conc {
		all = append(all, lats[w]...)
		r.errors += errs[w]
		if r.firstErr == "" {
			r.firstErr = firstErr[w]
		}
	}
	r.requests = len(all)
	if r.requests > 0 && r.cpu > 0 {
		r.cpuPerReq = r.cpu / time.Duration(r.requests)
	}
	if len(all) > 0 {
		slices.Sort(all)
		r.p50, r.p99 = all[len(all)*50/100], all[len(all)*99/100]
	}
	return r
}

func bench(ctx context.Context, c *config, out io.Writer) error {
	if c.header {
		fmt.Fprintln(out, "| server | task | c | req/s | p50 | p99 | errors | req/s vs bare | server CPU/req | CPU-bound capacity | capacity vs bare |")
		fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|---|")
	}
	setup := newClient(16)
	var rssMiB float64
	if c.rssSessions > 0 {
		before, err := procStatusKiB(c.pid, "VmRSS")
		if err != nil {
			return err
		}
		t0 := time.Now()
		if _, err := c.createSessions(ctx, setup, c.rssSessions, ""); err != nil {
			return err
		}
		created := time.Since(t0)
		after, err := procStatusKiB(c.pid, "VmRSS")
		if err != nil {
			return err
		}
		hwm, _ := procStatusKiB(c.pid, "VmHWM")
		rssMiB = float64(after) / 1024
		fmt.Fprintf(out, "- %s: server RSS %.1f MiB idle → %.1f MiB after creating %d sessions (VmHWM %.1f MiB; created in %v, %.0f/s)\n",
			c.label, float64(before)/1024, rssMiB, c.rssSessions, float64(hwm)/1024, created.Round(time.Millisecond), float64(c.rssSessions)/created.Seconds())
	}

	// Sessions for the measurements, in stage cart.
	sessions, err := c.createSessions(ctx, setup, c.sessions, "cart")
	if err != nil {
		return err
	}
	adds := make([]atomic.Int32, len(sessions))

	// The baseline answers like /execute does, from a real response.
	var bare *bareServer
	if c.baseline {
		// The template: an add_to_cart response with two products in the
		// cart, from a session of its own.
		extra, err := c.createSessions(ctx, setup, 1, "cart")
		if err != nil {
			return err
		}
		bodies := c.taskBodies("add_to_cart")
		var tmpl []byte
		for _, k := range []int{0, perSession - 1} {
			var status int
			if status, tmpl, err = post(ctx, setup, c.url+"/execute", extra[0], bodies[k]); err != nil || status != http.StatusOK {
				return fmt.Errorf("template add_to_cart: %d %s %v", status, tmpl, err)
			}
		}
		if bare, err = startBare(tmpl); err != nil {
			return err
		}
		defer bare.close()
	}
	setup.CloseIdleConnections()

	// Rounds interleave the baseline and the server, so that both see the
	// same background load; each row is the round with the median rate.
	type key struct {
		label, task string
		conc        int
	}
	runs := map[key][]*row{}
	var order []key
	record := func(r *row) {
		k := key{r.label, r.task, r.conc}
		if runs[k] == nil {
			order = append(order, k)
		}
		runs[k] = append(runs[k], r)
	}
	bareAdds := make([]atomic.Int32, len(sessions))
	for round := 1; round <= c.rounds; round++ {
		for _, conc := range c.concs {
			if bare != nil {
				fmt.Fprintf(os.Stderr, "round %d: the bare handler at c=%d…\n", round, conc)
				for i := range bareAdds {
					bareAdds[i].Store(0)
				}
				record(c.measure(ctx, "bare net/http (baseline)", bare.url+"/execute", "same JSON decode/encode", bare.pid, conc, sessions, c.taskBodies("add_to_cart"), bareAdds))
			}
			for _, task := range c.tasks {
				fmt.Fprintf(os.Stderr, "round %d: %s %s at c=%d…\n", round, c.label, task, conc)
				record(c.measure(ctx, c.label, c.url+"/execute", task, c.pid, conc, sessions, c.taskBodies(task), adds))
			}
		}
	}
	bareRows := map[int]*row{}
	var rows []*row
	for _, k := range order {
		rs := runs[k]
		slices.SortFunc(rs, func(a, b *row) int { return cmp.Compare(a.rps(), b.rps()) })
		r := rs[len(rs)/2]
		nerr := 0
		for _, x := range rs {
			nerr += x.errors
			if r.firstErr == "" {
				r.firstErr = x.firstErr
			}
		}
		r.errors = nerr
		if k.label != c.label {
			bareRows[k.conc] = r
		}
		rows = append(rows, r)
	}
	for _, r := range rows {
		var bare *row
		if r.label == c.label {
			bare = bareRows[r.conc]
		}
		printRow(out, r, bare)
		if r.errors > 0 {
			fmt.Fprintf(out, "- %s %s c=%d: %d errors, first: %s\n", r.label, r.task, r.conc, r.errors, r.firstErr)
		}
	}
	c.verdicts(out, rows, bareRows, rssMiB)
	return nil
}

// printRow writes a table row; bare is the baseline row at the same
// concurrency (nil for the baseline itself).
func printRow(out io.Writer, r, bare *row) {
	ratio, capRatio, cpu, capacity := "—", "—", "—", "—"
	if bare != nil {
		ratio = fmt.Sprintf("%.0f%%", 100*r.rps()/bare.rps())
		if r.capacity() > 0 && bare.capacity() > 0 {
			capRatio = fmt.Sprintf("%.0f%%", 100*r.capacity()/bare.capacity())
		}
	}
	if r.cpuPerReq > 0 {
		cpu = fmt.Sprintf("%.0f µs", float64(r.cpuPerReq)/float64(time.Microsecond))
		capacity = thousands(r.capacity()) + " req/s"
	}
	fmt.Fprintf(out, "| %s | %s | %d | %s | %s | %s | %d | %s | %s | %s | %s |\n", r.label, r.task, r.conc, thousands(r.rps()),
		fmtDur(r.p50), fmtDur(r.p99), r.errors, ratio, cpu, capacity, capRatio)
}

// verdicts reports on the targets given on the command line.
func (c *config) verdicts(out io.Writer, rows []*row, bare map[int]*row, rssMiB float64) {
	top := slices.Max(c.concs)
	for _, r := range rows {
		if r.label != c.label || r.conc != top {
			continue
		}
		if c.targetRPS > 0 {
			line := fmt.Sprintf("- target %s %s c=%d ≥ %s req/s: %s (%s measured", c.label, r.task, top, thousands(c.targetRPS),
				verdict(r.rps() >= c.targetRPS), thousands(r.rps()))
			if r.capacity() > 0 {
				line += fmt.Sprintf("; CPU-bound capacity %s req/s: %s", thousands(r.capacity()), verdict(r.capacity() >= c.targetRPS))
			}
			fmt.Fprintln(out, line+")")
		}
		if b := bare[top]; c.targetRatio > 0 && b != nil {
			ratio := r.rps() / b.rps()
			line := fmt.Sprintf("- target %s %s c=%d ≥ %.0f%% of bare: %s (%.0f%% measured", c.label, r.task, top, 100*c.targetRatio,
				verdict(ratio >= c.targetRatio), 100*ratio)
			if r.capacity() > 0 && b.capacity() > 0 {
				cr := r.capacity() / b.capacity()
				line += fmt.Sprintf("; %.0f%% by CPU cost per request: %s", 100*cr, verdict(cr >= c.targetRatio))
			}
			fmt.Fprintln(out, line+")")
		}
	}
	if c.targetRSS > 0 && c.rssSessions > 0 {
		fmt.Fprintf(out, "- target %s RSS after %d sessions ≤ %.0f MiB: %s (%.1f MiB)\n", c.label, c.rssSessions, c.targetRSS, verdict(rssMiB <= c.targetRSS), rssMiB)
	}
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func thousands(f float64) string {
	s := strconv.FormatInt(int64(f+0.5), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	}
}
