package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"
)

// The baseline is a bare net/http handler doing what /execute does minus
// the protocol — decode a request of the same shape, encode a response of
// the same shape and size — served, like agentry, by a process of its own
// on loopback (this program re-executed with -bare-serve), so that its
// CPU time per request can be measured the same way.

type bareRequest struct {
	WorkflowName string         `json:"workflow_name"`
	Action       string         `json:"action"`
	Task         string         `json:"task,omitempty"`
	Args         map[string]any `json:"args,omitempty"`
	Stage        string         `json:"stage,omitempty"`
	StateUpdates map[string]any `json:"state_updates,omitempty"`
}

type bareResponse struct {
	SessionID    string          `json:"session_id"`
	Workflow     string          `json:"workflow"`
	Action       string          `json:"action"`
	CurrentStage string          `json:"current_stage"`
	Result       any             `json:"result"`
	State        map[string]any  `json:"state"`
	Next         json.RawMessage `json:"next"`
}

// bareHandler answers every request with the content of t.
func bareHandler(t *bareResponse) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		var req bareRequest
		if err == nil {
			err = json.Unmarshal(body, &req)
		}
		if err != nil {
			http.Error(w, `{"detail":"bad request"}`, http.StatusBadRequest)
			return
		}
		id := r.Header.Get("X-Session-Id")
		b, _ := json.Marshal(bareResponse{SessionID: id, Workflow: req.WorkflowName, Action: req.Action,
			CurrentStage: t.CurrentStage, Result: t.Result, State: t.State, Next: t.Next})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Session-Id", id)
		w.Write(append(b, '\n'))
	})
}

// serveBare is the child: it reads the template (one line) from stdin,
// serves on a loopback port it prints to stdout, and exits when stdin
// closes.
func serveBare(stdin io.Reader, stdout io.Writer) error {
	in := bufio.NewReader(stdin)
	line, err := in.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("reading the template: %w", err)
	}
	var t bareResponse
	if err := json.Unmarshal(line, &t); err != nil {
		return fmt.Errorf("template: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: bareHandler(&t)}
	go srv.Serve(ln)
	fmt.Fprintf(stdout, "listening %s\n", ln.Addr())
	io.Copy(io.Discard, in) // until the parent closes stdin
	return srv.Close()
}

// bareServer is the baseline child process.
type bareServer struct {
	url   string
	pid   int
	cmd   *exec.Cmd
	stdin io.WriteCloser
}

// startBare starts the baseline process answering with tmpl (a real
// /execute response body).
func startBare(tmpl []byte) (*bareServer, error) {
	var line bytes.Buffer
	if err := json.Compact(&line, tmpl); err != nil {
		return nil, fmt.Errorf("template: %w", err)
	}
	line.WriteByte('\n')
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-bare-serve")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &bareServer{pid: cmd.Process.Pid, cmd: cmd, stdin: stdin}
	if _, err := stdin.Write(line.Bytes()); err != nil {
		s.close()
		return nil, err
	}
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(addr), "listening ")
	if err != nil || !ok {
		s.close()
		return nil, errors.New("the baseline process did not start")
	}
	s.url = "http://" + addr
	return s, nil
}

// close stops the baseline process: it exits when its stdin closes.
func (s *bareServer) close() {
	s.stdin.Close()
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}
