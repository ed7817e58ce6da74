package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/governtest"
	"github.com/agentry-dev/agentry/internal/journal"
	"github.com/agentry-dev/agentry/internal/recordkind"
)

// writeJournal writes a file journal with two governed runs: one
// delivered after a read-only call, one failed safe.
func writeJournal(t *testing.T) (path string, requestIDs []string) {
	t.Helper()
	ctx := context.Background()
	path = filepath.Join(t.TempDir(), "journal.jsonl")
	j, err := journal.Open(path, &journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := govern.New(ctx, &govern.Options{Journal: j})
	if err != nil {
		t.Fatal(err)
	}
	for i, deliver := range []bool{true, false} {
		r, err := g.Start(ctx, &govern.RunOptions{Identity: govern.Identity{AgentID: "agent:test", OwnerID: "owner", ControlClass: govern.Autonomous}})
		if err != nil {
			t.Fatal(err)
		}
		requestIDs = append(requestIDs, r.RequestID())
		if err := r.Advance(ctx, govern.Plan); err != nil {
			t.Fatal(err)
		}
		if err := r.Advance(ctx, govern.Execute); err != nil {
			t.Fatal(err)
		}
		spec := govern.ToolSpec{Name: "lookup", Tier: govern.ReadOnly}
		if _, err := r.Invoke(ctx, spec, govern.Call{ID: "c1", Args: map[string]any{"n": i}}, func(ctx context.Context) (any, error) {
			return map[string]any{"found": true}, nil
		}); err != nil {
			t.Fatal(err)
		}
		if deliver {
			if _, err := r.Verify(ctx, "done"); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Deliver(ctx, "done"); err != nil {
				t.Fatal(err)
			}
		} else if _, err := r.Fail(ctx, "gave up"); err != nil {
			t.Fatal(err)
		}
	}
	if err := governtest.CheckJournal(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return path, requestIDs
}

func TestAuditVerify(t *testing.T) {
	path, _ := writeJournal(t)
	code, out, errs := runCLI(t, "", "audit", "verify", "--file", path)
	if code != 0 || !strings.HasPrefix(out, "ok: ") || !strings.Contains(out, "chain intact") {
		t.Fatalf("verify of an intact journal: exit %d\n%s%s", code, out, errs)
	}
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(orig, []byte("\n"))
	lines = lines[:len(lines)-1] // the empty piece after the last newline
	edit := func(f func(l [][]byte) [][]byte) []byte {
		c := make([][]byte, len(lines))
		for i := range lines {
			c[i] = bytes.Clone(lines[i])
		}
		return bytes.Join(f(c), nil)
	}
	cases := map[string][]byte{
		"deleted": edit(func(l [][]byte) [][]byte { return append(l[:3], l[4:]...) }),
		"edited": edit(func(l [][]byte) [][]byte {
			l[2] = bytes.Replace(l[2], []byte(`"pending"`), []byte(`"success"`), 1)
			return l
		}),
		"reordered": edit(func(l [][]byte) [][]byte { l[3], l[4] = l[4], l[3]; return l }),
		"truncated": edit(func(l [][]byte) [][]byte { return l[1:] }),
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			if bytes.Equal(content, orig) {
				t.Fatal("the edit changed nothing")
			}
			p := filepath.Join(t.TempDir(), "journal.jsonl")
			if err := os.WriteFile(p, content, 0o600); err != nil {
				t.Fatal(err)
			}
			code, out, errs := runCLI(t, "", "audit", "verify", "--file", p)
			if code != 1 || !strings.HasPrefix(out, "BROKEN at record ") {
				t.Errorf("verify of a %s journal: exit %d\n%s%s", name, code, out, errs)
			}
		})
	}
}

func TestAuditShow(t *testing.T) {
	path, ids := writeJournal(t)
	code, out, errs := runCLI(t, "", "audit", "show", "--file", path, "--run", ids[1], "--format", "jsonl")
	if code != 0 {
		t.Fatalf("show: exit %d: %s", code, errs)
	}
	var kinds []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r govern.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if r.RequestID != ids[1] {
			t.Errorf("record of run %s shown for --run %s", r.RequestID, ids[1])
		}
		kinds = append(kinds, string(r.Kind))
	}
	if len(kinds) == 0 || kinds[0] != string(recordkind.RunStarted) {
		t.Errorf("kinds %v, want the run from its start", kinds)
	}
	if last := kinds[len(kinds)-1]; last != string(recordkind.Transition) {
		t.Errorf("last kind %s, want the transition to fail_safe", last)
	}

	code, out, errs = runCLI(t, "", "audit", "show", "--file", path)
	if code != 0 || !strings.HasPrefix(out, "SEQ") || !strings.Contains(out, "execute→fail_safe") || !strings.Contains(out, "tool=lookup") {
		t.Errorf("show as a table: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs = runCLI(t, "", "audit", "show", "--file", path, "--format", "xml"); code != 2 {
		t.Errorf("--format xml: exit %d (%s), want 2", code, errs)
	}
	if code, _, errs = runCLI(t, "", "audit", "verify", "--data", t.TempDir()); code != 1 || !strings.Contains(errs, "no journal") {
		t.Errorf("verify without a journal: exit %d: %s", code, errs)
	}
}
