// Command replicas measures what running several replicas of agentry
// serve on one PostgreSQL costs (issue 14): for 1 and then 3 replicas it
// drives governed runs (POST /v1/runs of the example support agent, a
// read-only run: a model turn, a tool call, an answer — about ten
// journal records) and UAIP requests (POST /initialize, one session
// write each) round-robin over the replicas at a fixed concurrency, and
// reports the rate and the replicas' CPU time per request (user+system,
// from /proc/<pid>/stat, summed over the replicas), so that the cost of
// a request on 3 replicas is read against 1 measured in the same run.
// It also measures failover: a run executing on a replica that is killed
// (SIGKILL) is recovered by another replica; the time from the kill to
// the run's end is printed at the lease given.
//
// It is bounded: loopback only, each measurement at most 60 s, every
// process it starts killed at the end. PostgreSQL is the caller's: each
// measurement uses a schema of its own, dropped afterwards.
//
//	go build -o /tmp/agentry ./cmd/agentry
//	go run ./bench/replicas -bin /tmp/agentry -store postgres://postgres@127.0.0.1:5432/bench?sslmode=disable
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "replicas:", err)
		os.Exit(1)
	}
}

var listening = regexp.MustCompile(`listening on (http://[^ ]+)`)

type replica struct {
	cmd *exec.Cmd
	url string
}

// cpu returns the process's user+system CPU time.
func (r *replica) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(fields[11], 10, 64)
	st, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100) // USER_HZ is 100 on Linux
}

type bench struct {
	bin, base  string
	dur        time.Duration
	conc       int
	lease      string
	work       string
	cpus       string
	share      bool
	perReplica bool
	hc         *http.Client
}

func run() error {
	var b bench
	bins := flag.String("bin", "", "the agentry binary; several, comma-separated, are measured in the same rounds (the first is the baseline)")
	flag.StringVar(&b.base, "store", os.Getenv("AGENTRY_TEST_POSTGRES"), "PostgreSQL URL (loopback)")
	flag.DurationVar(&b.dur, "duration", 5*time.Second, "each measurement")
	flag.IntVar(&b.conc, "c", 16, "concurrent clients (with -per-replica, per replica)")
	flag.BoolVar(&b.perReplica, "per-replica", false, "scale the clients with the replicas: -c per replica, so each replica serves the same load")
	flag.StringVar(&b.lease, "lease", "30s", "--run-lease of the replicas")
	rounds := flag.Int("rounds", 3, "measurements of each configuration, interleaved")
	failover := flag.Bool("failover", true, "also measure failover (takes about a lease)")
	kinds := flag.String("kinds", "runs,uaip", "what to measure: runs (governed runs), uaip (UAIP /initialize)")
	counts := flag.String("replicas", "1,3", "replica counts to measure; the first is the baseline")
	flag.BoolVar(&b.share, "share", false, "give each of n replicas GOMAXPROCS = CPUs/n, as containers sharing the machine would have")
	flag.StringVar(&b.cpus, "cpus", "", "run the replicas on these CPUs only (taskset -c LIST), apart from the load and the database")
	flag.Parse()
	var ns []int
	for _, f := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 8 {
			return fmt.Errorf("-replicas: %q is not a count from 1 to 8", f)
		}
		ns = append(ns, n)
	}
	ks := strings.Split(*kinds, ",")
	for _, k := range ks {
		if k != "runs" && k != "uaip" {
			return fmt.Errorf("-kinds: unknown %q", k)
		}
	}
	if *bins == "" || b.base == "" {
		return errors.New("-bin and -store are required")
	}
	binList := strings.Split(*bins, ",")
	b.bin = binList[0]
	u, err := url.Parse(b.base)
	if err != nil || !(strings.HasPrefix(u.Host, "127.0.0.1") || strings.HasPrefix(u.Host, "localhost") || strings.HasPrefix(u.Host, "[::1]")) {
		return errors.New("-store must be a PostgreSQL on loopback")
	}
	b.dur = min(b.dur, 60*time.Second)
	if b.work, err = os.MkdirTemp("", "agentry-replicas-"); err != nil {
		return err
	}
	defer os.RemoveAll(b.work)
	b.hc = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: b.conc * 8}, Timeout: 60 * time.Second}

	type result struct{ rate, cpu float64 } // req/s; CPU µs per request
	res := map[string][]result{}
	for round := range *rounds {
		for bi, bin := range binList {
			b.bin = bin
			for _, n := range ns {
				for _, kind := range ks {
					rate, cpu, err := b.measure(n, kind)
					if err != nil {
						return err
					}
					key := fmt.Sprintf("%s %d %d", kind, bi, n)
					res[key] = append(res[key], result{rate, cpu})
					fmt.Fprintf(os.Stderr, "round %d: %s %s %d replicas: %.0f req/s, %.0f µs CPU/req\n", round+1, kind, bin, n, rate, cpu)
				}
			}
		}
	}
	b.bin = binList[0]
	median := func(rs []result, f func(result) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	if *rounds > 0 {
		fmt.Printf("| requests | binary | replicas | req/s | agentry CPU µs/request | ÷ baseline |\n|---|---|---|---|---|---|\n")
	}
	for _, kind := range ks {
		if *rounds == 0 {
			break
		}
		one := median(res[fmt.Sprintf("%s 0 %d", kind, ns[0])], func(r result) float64 { return r.cpu })
		for bi, bin := range binList {
			for _, n := range ns {
				rs := res[fmt.Sprintf("%s %d %d", kind, bi, n)]
				cpu := median(rs, func(r result) float64 { return r.cpu })
				name := map[string]string{"runs": "governed runs (POST /v1/runs)", "uaip": "UAIP POST /initialize"}[kind]
				fmt.Printf("| %s | %s | %d | %.0f | %.0f | %.2f |\n", name, filepath.Base(bin), n, median(rs, func(r result) float64 { return r.rate }), cpu, cpu/one)
			}
		}
	}
	if !*failover {
		return nil
	}
	d, err := b.failover()
	if err != nil {
		return err
	}
	fmt.Printf("\nfailover at --run-lease %s: a run whose replica was killed ended on another replica %.1f s after the kill\n", b.lease, d.Seconds())
	return nil
}

// schema makes a fresh schema and returns the store URL using it and a
// function that drops it.
func (b *bench) schema() (string, func(), error) {
	db, err := sql.Open("pgx", b.base)
	if err != nil {
		return "", nil, err
	}
	var r [8]byte
	rand.Read(r[:])
	name := "agentry_bench_" + hex.EncodeToString(r[:])
	if _, err := db.Exec("CREATE SCHEMA " + name); err != nil {
		db.Close()
		return "", nil, err
	}
	u, _ := url.Parse(b.base)
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return u.String(), func() { db.Exec("DROP SCHEMA " + name + " CASCADE"); db.Close() }, nil
}

// start runs n replicas on store with args.
func (b *bench) start(store string, n int, args ...string) ([]*replica, func(), error) {
	var all []*replica
	var stops []func()
	stopAll := func() {
		for _, s := range stops {
			s()
		}
	}
	var env []string
	if b.share {
		// Each replica as in a container with its share of the machine:
		// the Go runtime sizes GOMAXPROCS to a container's CPU limit.
		env = []string{fmt.Sprintf("GOMAXPROCS=%d", max(1, runtime.NumCPU()/n))}
	}
	for range n {
		r, stop, err := b.startOne(store, env, args...)
		if err != nil {
			stopAll()
			return nil, nil, err
		}
		all, stops = append(all, r), append(stops, stop)
	}
	return all, stopAll, nil
}

// measure drives kind requests over n fresh replicas for b.dur.
func (b *bench) measure(n int, kind string) (rate, cpuPerReq float64, err error) {
	store, drop, err := b.schema()
	if err != nil {
		return 0, 0, err
	}
	defer drop()
	rs, stop, err := b.start(store, n)
	if err != nil {
		return 0, 0, err
	}
	defer stop()
	request := func(ctx context.Context, r *replica, i int) error {
		var req *http.Request
		switch kind {
		case "runs":
			req, _ = http.NewRequestWithContext(ctx, http.MethodPost, r.url+"/v1/runs",
				strings.NewReader(fmt.Sprintf(`{"agent":"support","input":"where is o-%d","wait":true}`, 1001+i%4)))
		default:
			req, _ = http.NewRequestWithContext(ctx, http.MethodPost, r.url+"/initialize", strings.NewReader(`{"workflow_name":"store"}`))
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := b.hc.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", req.URL.Path, resp.Status)
		}
		return nil
	}
	// Warm up: a few requests on each replica.
	for i, r := range rs {
		for j := range 5 {
			if err := request(context.Background(), r, i+j); err != nil {
				return 0, 0, err
			}
		}
	}
	var before time.Duration
	for _, r := range rs {
		before += r.cpu()
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.dur)
	defer cancel()
	var done atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	conc := b.conc
	if b.perReplica {
		conc *= n
	}
	for w := range conc {
		wg.Go(func() {
			for i := w; ctx.Err() == nil; i += conc {
				if err := request(ctx, rs[i%len(rs)], i); err != nil {
					if ctx.Err() == nil {
						once.Do(func() { first = err })
					}
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if first != nil {
		return 0, 0, first
	}
	var after time.Duration
	for _, r := range rs {
		after += r.cpu()
	}
	count := float64(done.Load())
	return count / elapsed.Seconds(), float64((after - before).Microseconds()) / count, nil
}

// failover starts 2 replicas, starts a run on the first whose tool call
// hangs (a webhook that does not answer), kills the first, and times the
// run's end on the second: the lease expires, the second's reaper claims
// the run, rolls the call in doubt back (its rollback webhook answers at
// once) and closes it.
func (b *bench) failover() (time.Duration, error) {
	store, drop, err := b.schema()
	if err != nil {
		return 0, err
	}
	defer drop()
	hang := make(chan struct{})
	defer close(hang)
	called := make(chan struct{}, 16)
	hook := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/hang" { // the rollback answers at once
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"result": {"ok": true}}`)
			return
		}
		called <- struct{}{}
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	})}
	ln, err := listenLoopback()
	if err != nil {
		return 0, err
	}
	go hook.Serve(ln)
	defer hook.Close()
	agents := filepath.Join(b.work, "agents")
	os.MkdirAll(agents, 0o755)
	os.WriteFile(filepath.Join(agents, "slow.yaml"), []byte(`description: calls a webhook that hangs
model: scripted:`+filepath.Join(b.work, "script.yaml")+`
tools:
  - webhook: {name: hang, url: "http://`+ln.Addr().String()+`/hang", risk: write_low_risk, rollback: {url: "http://`+ln.Addr().String()+`/undo"}}
`), 0o644)
	os.WriteFile(filepath.Join(b.work, "script.yaml"), []byte("steps:\n  - tool_calls: [{id: c1, name: hang, arguments: {}}]\n  - text: done\n"), 0o644)
	rs, stop, err := b.start(store, 2, "--agents", agents)
	if err != nil {
		return 0, err
	}
	defer stop()
	resp, err := b.hc.Post(rs[0].url+"/v1/runs", "application/json", strings.NewReader(`{"agent":"slow","input":"go"}`))
	if err != nil {
		return 0, err
	}
	var started struct {
		RequestID string `json:"request_id"`
	}
	json.NewDecoder(resp.Body).Decode(&started)
	resp.Body.Close()
	select {
	case <-called:
	case <-time.After(30 * time.Second):
		return 0, errors.New("the run's call never reached the webhook")
	}
	killed := time.Now()
	rs[0].cmd.Process.Signal(syscall.SIGKILL)
	rs[0].cmd.Wait()
	deadline := killed.Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		resp, err := b.hc.Get(rs[1].url + "/v1/runs/" + started.RequestID)
		if err == nil {
			var r struct{ Status string }
			json.NewDecoder(resp.Body).Decode(&r)
			resp.Body.Close()
			if r.Status == "fail_safe" || r.Status == "delivered" {
				return time.Since(killed), nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0, errors.New("the run did not end within 5 minutes of the kill")
}

var nodes atomic.Int64

// startOne runs one replica on store with args, under a node name of
// its own.
func (b *bench) startOne(store string, env []string, args ...string) (*replica, func(), error) {
	data := filepath.Join(b.work, fmt.Sprintf("data-f-%d", nodes.Add(1)))
	argv := append([]string{b.bin, "serve", "--addr", "127.0.0.1:0", "--tls-addr", "", "--store", store, "--data", data,
		"--node", fmt.Sprintf("f%d", nodes.Load()), "--run-lease", b.lease, "--log-level", "warn"}, args...)
	if b.cpus != "" {
		argv = append([]string{"taskset", "-c", b.cpus}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	r := &replica{cmd: cmd}
	stop := func() { cmd.Process.Kill(); cmd.Wait() }
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case r.url = <-found:
	case <-time.After(60 * time.Second):
		stop()
		return nil, nil, errors.New("a replica did not start within 60 s")
	}
	return r, stop, nil
}

func listenLoopback() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }
