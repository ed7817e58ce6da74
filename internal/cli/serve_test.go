package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/workflow"
)

// status GETs url with the bearer token (none when empty) and returns the
// status code.
func status(t *testing.T, url, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// With --token, the web demo is off (a browser cannot send the token on
// its WebSocket) and /metrics needs the token; /healthz stays open.
// Without it, both are open.
func TestServeTokenGuardsDemoAndMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := serveInProcess(t, t.TempDir(), "--token", "s3cret", "--tls-addr", "")
	auth := http.Header{"Authorization": {"Bearer s3cret"}}
	for _, h := range []http.Header{nil, auth} {
		if ws, err := uicontrol.DialWS(ctx, srv.plainURL+"/web/demo/ws", &uicontrol.WSDialOptions{Header: h}); err == nil {
			ws.Close()
			t.Errorf("the demo WebSocket opened with --token (header %v)", h)
		}
	}
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/web/demo/", "", http.StatusNotFound},
		{"/web/demo/ws", "s3cret", http.StatusNotFound},
		{"/web/uiap.js", "", http.StatusOK},
		{"/metrics", "", http.StatusUnauthorized},
		{"/metrics", "wrong", http.StatusUnauthorized},
		{"/metrics", "s3cret", http.StatusOK},
		{"/healthz", "", http.StatusOK},
	} {
		if got := status(t, srv.plainURL+tc.path, tc.token); got != tc.want {
			t.Errorf("--token: GET %s (token %q): %d, want %d", tc.path, tc.token, got, tc.want)
		}
	}
	srv.stop()

	srv = serveInProcess(t, t.TempDir(), "--tls-addr", "")
	ws, err := uicontrol.DialWS(ctx, srv.plainURL+"/web/demo/ws", nil)
	if err != nil {
		t.Errorf("without --token the demo WebSocket did not open: %v", err)
	} else {
		ws.Close()
	}
	for _, path := range []string{"/web/demo/", "/metrics", "/healthz"} {
		if got := status(t, srv.plainURL+path, ""); got != http.StatusOK {
			t.Errorf("without --token: GET %s: %d", path, got)
		}
	}
	_, help, _ := runCLI(t, "", "serve", "--help")
	for _, want := range []string{"the web demo is off", "/metrics", "/healthz stays open"} {
		if !strings.Contains(help, want) {
			t.Errorf("serve --help does not say %q", want)
		}
	}
}

// With --log-format json every line agentry serve writes is a JSON
// record: its own lines for people, webhook warnings (slog.Default) and
// the log package's lines, from start to shutdown.
func TestServeLogFormatJSONIsOneStream(t *testing.T) {
	dir := t.TempDir()
	wf := writeFile(t, dir, "hooks.yaml", `name: hooks
initial_stage: only
stages:
  only:
    tasks:
      ping:
        description: Calls a webhook nobody answers.
        parameters: {type: object}
        webhook:
          url: `+closedURL(t)+`/ping
          timeout: 5s
transitions:
  only: []
`)
	out := &lockedBuffer{}
	e := &env{stdin: strings.NewReader(""), stdout: out, stderr: out}
	ctx, cancel := context.WithCancel(context.Background())
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--tls-addr", "127.0.0.1:0", "--data", dir, "--store", "memory:",
			"--log-format", "json", "--workflows", wf}, e)
	}()
	listening := regexp.MustCompile(`"msg":"listening on (http://[^ ]+) `)
	var url string
	for deadline := time.Now().Add(serveLimit); url == "" && time.Now().Before(deadline); {
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			url = m[1]
			break
		}
		select {
		case code := <-exit:
			t.Fatalf("serve exited with %d:\n%s", code, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if url == "" {
		cancel()
		t.Fatalf("serve did not listen:\n%s", out.String())
	}
	c := workflow.NewClient(url, nil)
	init, err := c.Initialize(ctx, "hooks")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Execute(ctx, init.SessionID, &workflow.ExecuteRequest{WorkflowName: "hooks", Action: workflow.ActionMethodCall, Task: "ping", Args: map[string]any{}}); err == nil {
		t.Error("the webhook nobody answers succeeded")
	}
	log.Printf("a line of the log package")
	cancel()
	if code := <-exit; code != 0 {
		t.Errorf("exit %d", code)
	}
	text := out.String()
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("not a JSON record: %q", line)
			continue
		}
		msgs = append(msgs, rec["msg"].(string))
	}
	for _, want := range []string{"listening on http://", "UAMP on https://", "no approver keys trusted", "workflow: webhook call failed", "a line of the log package", "shutting down"} {
		found := false
		for _, m := range msgs {
			found = found || strings.Contains(m, want)
		}
		if !found {
			t.Errorf("no record says %q:\n%s", want, text)
		}
	}
	// Once serve has returned, the process's defaults are back.
	if w := log.Writer(); w != os.Stderr {
		t.Errorf("the log package still writes to %T", w)
	}
}

// A second agentry serve on a busy port fails before it touches any
// state: a clear error, and no store created in a fresh --data.
func TestServeBindsBeforeTouchingState(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		name string
		args []string
		flag string
	}{
		{"--addr", []string{"--addr", busy.Addr().String(), "--tls-addr", ""}, "--addr"},
		{"--tls-addr", []string{"--addr", "127.0.0.1:0", "--tls-addr", busy.Addr().String()}, "--tls-addr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "fresh")
			code, out, errs := runCLI(t, "", append([]string{"serve", "--data", data}, tc.args...)...)
			want := "agentry: " + tc.flag + " " + busy.Addr().String() + ": the address is already in use (another agentry serve?); stop it or pick another " + tc.flag + "\n"
			if code != 1 || errs != want || out != "" {
				t.Errorf("exit %d, stdout %q, stderr\n%q, want\n%q", code, out, errs, want)
			}
			if _, err := os.Stat(data); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the data directory was created (%v): the store was opened before binding", err)
			}
		})
	}
}
