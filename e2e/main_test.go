package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/workflow"
)

// binary is the agentry executable TestMain builds.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("e2e: skipped in -short mode (builds and runs the agentry binary)")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "agentry-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "agentry")
	build := exec.Command("go", "build", "-race", "-o", binary, "./cmd/agentry")
	build.Dir = ".." // the module root
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building agentry:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// childEnv is the environment without AGENTRY_* variables, so that the
// flags a test passes are the whole configuration. Unless GORACE says
// otherwise, the race runtime does not sleep a second at exit.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTRY_") {
			env = append(env, kv)
		}
	}
	if _, ok := os.LookupEnv("GORACE"); !ok {
		env = append(env, "GORACE=atexit_sleep_ms=0")
	}
	return env
}

// syncBuffer collects a child's output and spots the listening line.
type syncBuffer struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	addr  string
	ready chan string
}

// listening matches the line agentry serve (and examples/embed) writes
// once it listens.
var listening = regexp.MustCompile(`(?:agentry|embed): listening on http://(\S+)`)

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if b.addr == "" {
		if m := listening.FindSubmatch(b.buf.Bytes()); m != nil {
			b.addr = string(m[1])
			b.ready <- b.addr
		}
	}
	return len(p), nil
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// server is a running `agentry serve`.
type server struct {
	URL    string
	cmd    *exec.Cmd
	output *syncBuffer
	exited chan struct{}
	err    error // from Wait, once exited is closed
}

// startServer runs `agentry serve --addr 127.0.0.1:0 ARGS` and waits until
// it listens. The server is killed at the end of the test if it is still
// running.
func startServer(t *testing.T, args ...string) *server {
	t.Helper()
	if !slices.Contains(args, "--tls-addr") { // never the well-known port
		args = append(args, "--tls-addr", "127.0.0.1:0")
	}
	return startProgram(t, binary, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
}

// startProgram runs the server program path with args and waits until it
// says it listens. It is killed at the end of the test if it is still
// running.
func startProgram(t *testing.T, path string, args ...string) *server {
	t.Helper()
	out := &syncBuffer{ready: make(chan string, 1)}
	cmd := exec.Command(path, args...)
	cmd.Env = childEnv()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, output: out, exited: make(chan struct{})}
	go func() { s.err = cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		select {
		case <-s.exited:
		default:
			cmd.Process.Kill()
			<-s.exited
		}
		if strings.Contains(out.String(), "DATA RACE") {
			t.Errorf("the server reported a data race:\n%s", out.String())
		}
	})
	select {
	case addr := <-out.ready:
		s.URL = "http://" + addr
	case <-s.exited:
		t.Fatalf("%s %v exited before listening (%v):\n%s", filepath.Base(path), args, s.err, out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("%s %v did not listen within 60 s:\n%s", filepath.Base(path), args, out.String())
	}
	return s
}

// stop sends SIGTERM and checks the server shuts down gracefully: exit
// status 0 within the shutdown timeout, having said so.
func (s *server) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	select {
	case <-s.exited:
	case <-time.After(40 * time.Second):
		t.Fatalf("the server did not exit within 40 s of SIGTERM:\n%s", s.output.String())
	}
	if s.err != nil {
		t.Errorf("after SIGTERM the server exited with %v:\n%s", s.err, s.output.String())
	}
	if !strings.Contains(s.output.String(), "shutting down") {
		t.Errorf("no graceful shutdown logged:\n%s", s.output.String())
	}
}

// kill sends SIGKILL and waits for the process to die.
func (s *server) kill(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
		t.Fatal("the server survived SIGKILL")
	}
}

// httpClient is a client for a test's requests, limited to conns
// connections.
func httpClient(conns int) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxConnsPerHost: conns, MaxIdleConnsPerHost: conns, MaxIdleConns: conns, IdleConnTimeout: 30 * time.Second}}
}

func (s *server) client(hc *http.Client) *workflow.Client {
	return workflow.NewClient(s.URL, &workflow.ClientOptions{HTTPClient: hc})
}

// runCLI runs the agentry binary with args and returns its exit code and
// output.
func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = childEnv()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("agentry %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}
