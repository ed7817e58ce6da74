package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/approvalapi"
	"github.com/agentry-dev/agentry/govern/governtest"
	"github.com/agentry-dev/agentry/internal/approverkey"
	"github.com/google/go-cmp/cmp"
)

// approvalServer is the approval API over a real governor that trusts
// the keyring of a key directory holding alice's key (created with
// `agentry keys create`), with one paused run waiting for approval of a
// refund.
type approvalServer struct {
	keys      string // the key directory
	g         *govern.Governor
	url       string
	requestID string
	approval  string // the pending approval request's ID
	calls     atomic.Int32
}

var cliRefund = govern.ToolSpec{Name: "refund", Tier: govern.WriteHighRisk, Rollback: func(_ context.Context, c govern.Call) (*govern.RollbackAction, error) {
	return &govern.RollbackAction{Type: "refund.cancel", Target: "order-17", Payload: map[string]any{"amount": 40}}, nil
}}

var cliCall = govern.Call{ID: "call-1", Args: map[string]any{"order": "order-17", "amount": 40}}

func newApprovalServer(t *testing.T, bearer string) *approvalServer {
	t.Helper()
	ctx := context.Background()
	s := &approvalServer{keys: filepath.Join(t.TempDir(), "keys")}
	if code, _, errs := runCLI(t, "", "keys", "create", "alice", "--dir", s.keys); code != 0 {
		t.Fatalf("keys create: %s", errs)
	}
	kr, err := approverkey.ReadKeyring(filepath.Join(s.keys, "approvers.json"))
	if err != nil {
		t.Fatal(err)
	}
	s.g, err = govern.New(ctx, &govern.Options{Journal: govern.NewMemoryJournal(), Keyring: kr,
		Rollbacks: map[string]govern.RollbackFunc{"refund.cancel": func(context.Context, govern.RollbackAction) error { return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	governtest.AuditJournal(t, s.g.Journal())
	run, err := s.g.Start(ctx, &govern.RunOptions{Identity: govern.Identity{AgentID: "agent:support", OwnerID: "org:acme", ControlClass: govern.HumanSupervised}})
	if err != nil {
		t.Fatal(err)
	}
	s.requestID = run.RequestID()
	_, err = s.invoke(run)
	var ge *govern.Error
	if !errors.As(err, &ge) || !errors.Is(err, govern.ApprovalRequired) {
		t.Fatalf("Invoke: %v, want ApprovalRequired", err)
	}
	s.approval = ge.ApprovalID
	if err := run.Pause(ctx, json.RawMessage(`{"step":3}`)); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(approvalapi.NewHandler(s.g, &approvalapi.Options{BearerToken: bearer,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

func (s *approvalServer) invoke(run *govern.Run) (*govern.Invocation, error) {
	return run.Invoke(context.Background(), cliRefund, cliCall, func(context.Context) (any, error) {
		s.calls.Add(1)
		return map[string]any{"refunded": 40}, nil
	})
}

func (s *approvalServer) status(t *testing.T) govern.ApprovalRequest {
	t.Helper()
	a, err := s.g.Approval(context.Background(), s.approval)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// agentry approvals shows each pending call with its arguments and its
// rollback action, readable, and --json carries them too.
func TestApprovalsList(t *testing.T) {
	s := newApprovalServer(t, "")
	code, out, errs := runCLI(t, "", "approvals", "--server", s.url)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("output:\n%s", out)
	}
	for _, want := range []string{s.approval, "refund", "write_high_risk", "agent:support", "pending"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("row lacks %q: %s", want, lines[1])
		}
	}
	col := strings.Index(lines[0], "TOOL")
	details := []string{strings.TrimRight(lines[2][col:], " "), strings.TrimRight(lines[3][col:], " ")}
	want := []string{`arguments  {"amount":40,"order":"order-17"}`, `rollback   refund.cancel on order-17 {"amount":40}`}
	if diff := cmp.Diff(want, details); diff != "" || strings.TrimSpace(lines[2][:col]) != "" {
		t.Errorf("detail lines (-want +got):\n%s\n%s", diff, out)
	}
	code, out, _ = runCLI(t, "", "approvals", "--server", s.url, "--json")
	var body struct {
		Approvals []struct {
			ID       string         `json:"approval_id"`
			Args     map[string]any `json:"args"`
			Rollback map[string]any `json:"rollback_action"`
		} `json:"approvals"`
	}
	if err := json.Unmarshal([]byte(out), &body); code != 0 || err != nil || len(body.Approvals) != 1 || body.Approvals[0].ID != s.approval {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, out)
	}
	a := body.Approvals[0]
	if diff := cmp.Diff(map[string]any{"amount": 40.0, "order": "order-17"}, a.Args); diff != "" {
		t.Errorf("--json: args (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"type": "refund.cancel", "target": "order-17", "payload": map[string]any{"amount": 40.0}}, a.Rollback); diff != "" {
		t.Errorf("--json: rollback_action (-want +got):\n%s", diff)
	}
}

// The whole human side: list, approve with a key made by `keys create`;
// the governor records the decision and the resumed run's call runs once.
func TestApproveEndToEnd(t *testing.T) {
	s := newApprovalServer(t, "")
	ctx := context.Background()
	code, out, errs := runCLI(t, "", "approve", s.approval, "--as", "alice", "--dir", s.keys, "--server", s.url)
	if code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	for _, want := range []string{s.approval, "refund (write_high_risk)", `{"amount":40,"order":"order-17"}`,
		`refund.cancel on order-17 {"amount":40}`, "agent agent:support, owner org:acme", "approved by alice"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	a := s.status(t)
	if a.Status != govern.StatusApproved || a.Decision.Approver != "alice" || a.Decision.Token == "" {
		t.Fatalf("governor: %+v %+v", a, a.Decision)
	}

	run, err := s.g.Attach(ctx, s.requestID)
	if err != nil {
		t.Fatal(err)
	}
	if snap, err := run.Resume(ctx); err != nil || string(snap) != `{"step":3}` {
		t.Fatalf("Resume: %s, %v", snap, err)
	}
	for range 2 {
		if _, err := s.invoke(run); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.calls.Load(); n != 1 {
		t.Errorf("the approved call ran %d times, want 1", n)
	}

	// Deciding again fails.
	code, _, errs = runCLI(t, "", "approve", s.approval, "--as", "alice", "--dir", s.keys, "--server", s.url)
	if code != 1 || !strings.Contains(errs, "already approved by alice") {
		t.Errorf("second approve: exit %d, %q", code, errs)
	}
}

func TestApproveDeny(t *testing.T) {
	s := newApprovalServer(t, "")
	code, out, errs := runCLI(t, "", "approve", s.approval, "--as", "bob", "--deny", "--reason", "refunds are frozen", "--server", s.url)
	if code != 0 || !strings.Contains(out, "denied by bob") {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	a := s.status(t)
	if a.Status != govern.StatusDenied || a.Decision.Approver != "bob" || a.Decision.Reason != "refunds are frozen" {
		t.Errorf("governor: %+v", a.Decision)
	}
	run, err := s.g.Attach(context.Background(), s.requestID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.Resume(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.invoke(run); !errors.Is(err, govern.ApprovalDenied) || s.calls.Load() != 0 {
		t.Errorf("Invoke after denial: %v, %d calls", err, s.calls.Load())
	}
}

// A key the governor does not trust: the server refuses the token, the
// command fails with the code, nothing is recorded.
func TestApproveWithUntrustedKey(t *testing.T) {
	s := newApprovalServer(t, "")
	other := t.TempDir()
	if code, _, _ := runCLI(t, "", "keys", "create", "mallory", "--dir", other); code != 0 {
		t.Fatal("keys create mallory")
	}
	code, out, errs := runCLI(t, "", "approve", s.approval, "--key", filepath.Join(other, "mallory.key.json"), "--server", s.url)
	if code != 1 || !strings.Contains(errs, "APPROVAL_INVALID") || !strings.Contains(errs, "403") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	if !strings.Contains(out, "refund (write_high_risk)") {
		t.Errorf("the request was not shown:\n%s", out)
	}
	if a := s.status(t); a.Status != govern.StatusPending {
		t.Errorf("status %s after a refused token", a.Status)
	}
	// Same name, different key: alice of another directory.
	if code, _, _ := runCLI(t, "", "keys", "create", "alice", "--dir", other); code != 0 {
		t.Fatal("keys create alice")
	}
	code, _, errs = runCLI(t, "", "approve", s.approval, "--as", "alice", "--dir", other, "--server", s.url)
	if code != 1 || !strings.Contains(errs, "APPROVAL_INVALID") {
		t.Errorf("impostor alice: exit %d, stderr %q", code, errs)
	}
}

func TestApproveBearerAndEnvironment(t *testing.T) {
	s := newApprovalServer(t, "s3cret")
	code, _, errs := runCLI(t, "", "approvals", "--server", s.url)
	if code != 1 || !strings.Contains(errs, "UNAUTHORIZED") {
		t.Errorf("without token: exit %d, %q", code, errs)
	}
	if code, _, errs := runCLI(t, "", "approvals", "--server", s.url, "--bearer", "s3cret"); code != 0 {
		t.Errorf("--bearer: exit %d, %q", code, errs)
	}
	t.Setenv("AGENTRY_SERVER", s.url)
	t.Setenv("AGENTRY_TOKEN", "s3cret")
	t.Setenv("AGENTRY_KEYS_DIR", s.keys)
	code, out, errs := runCLI(t, "", "approve", s.approval, "--as", "alice", "--ttl", "2m")
	if code != 0 || !strings.Contains(out, "approved by alice") {
		t.Errorf("from the environment: exit %d, %q", code, errs)
	}
	claims, err := s.g.Keyring().Verify(s.status(t).Decision.Token, time.Now())
	if err != nil || claims.Expiry-claims.IssuedAt != 120 {
		t.Errorf("token: %+v, %v", claims, err)
	}
}

func TestApproveErrors(t *testing.T) {
	s := newApprovalServer(t, "")
	for name, c := range map[string]struct {
		args []string
		code int
		want string
	}{
		"no ID":            {[]string{"approve", "--as", "alice"}, 2, ""},
		"no key":           {[]string{"approve", s.approval, "--server", s.url}, 2, "--as"},
		"both keys":        {[]string{"approve", s.approval, "--as", "alice", "--key", "x"}, 2, "--as"},
		"reason, approve":  {[]string{"approve", s.approval, "--as", "alice", "--reason", "x"}, 2, "--deny"},
		"ttl, deny":        {[]string{"approve", s.approval, "--as", "alice", "--deny", "--ttl", "1m"}, 2, "--ttl"},
		"ttl too long":     {[]string{"approve", s.approval, "--as", "alice", "--ttl", "25h"}, 2, "--ttl"},
		"bad name":         {[]string{"approve", s.approval, "--as", "../alice"}, 2, ""},
		"missing key":      {[]string{"approve", s.approval, "--as", "zed", "--dir", s.keys, "--server", s.url}, 1, "agentry keys create zed"},
		"unknown approval": {[]string{"approve", "00000000-0000-4000-8000-000000000000", "--as", "alice", "--dir", s.keys, "--server", s.url}, 1, "NOT_FOUND"},
		"no server":        {[]string{"approvals", "--server", "http://127.0.0.1:1"}, 1, ""},
	} {
		code, _, errs := runCLI(t, "", c.args...)
		if code != c.code || !strings.HasPrefix(errs, "agentry: ") || !strings.Contains(errs, c.want) {
			t.Errorf("%s: exit %d, %q; want exit %d mentioning %q", name, code, errs, c.code, c.want)
		}
	}
	if runtime.GOOS != "windows" {
		path := filepath.Join(s.keys, "alice.key.json")
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		code, _, errs := runCLI(t, "", "approve", s.approval, "--key", path, "--server", s.url)
		if code != 1 || !strings.Contains(errs, "chmod 600") {
			t.Errorf("unprotected key: exit %d, %q", code, errs)
		}
	}
	if a := s.status(t); a.Status != govern.StatusPending {
		t.Errorf("a failed command decided the request: %s", a.Status)
	}
	if _, err := approverkey.Dir(s.keys).Keyring(); err != nil {
		t.Error(err)
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"refund":     "refund",
		"a\x1b[2Jb":  `a\u001b[2Jb`,
		"x\u202ey":   `x\u202ey`,
		"tab\there":  `tab\u0009here`,
		"ünïcödé ok": "ünïcödé ok",
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}
