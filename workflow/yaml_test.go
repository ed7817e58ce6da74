package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/workflow"
	"github.com/google/go-cmp/cmp"
)

// TestLoadDir loads the valid fixtures of testdata/workflows and pins
// their UAIP form in testdata/workflows/golden/ (regenerate with -update).
func TestLoadDir(t *testing.T) {
	t.Setenv("AGENTRY_TEST_SHOP_TOKEN", "tok")
	ws, err := workflow.LoadDir(filepath.Join("testdata", "workflows"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range ws {
		names = append(names, w.Name)
		if err := w.Validate(); err != nil {
			t.Errorf("%s: Validate: %v", w.Name, err)
		}
		b, err := json.MarshalIndent(w, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		goldenFile(t, filepath.Join("testdata", "workflows", "golden", w.Name+".json"), append(b, '\n'))
	}
	// Files in name order, documents in file order.
	if diff := cmp.Diff([]string{"minimal", "echo", "support", "shop"}, names); diff != "" {
		t.Errorf("workflows (-want +got):\n%s", diff)
	}
	shop := ws[3]
	for task, want := range map[string]bool{"search_products": true, "add_to_cart": false} {
		for _, st := range shop.Stages {
			if tk := st.Tasks[task]; tk != nil && tk.Idempotent != want {
				t.Errorf("%s: Idempotent = %v, want %v", task, tk.Idempotent, want)
			}
		}
	}
}

func TestLoadDirDuplicateNames(t *testing.T) {
	dir := t.TempDir()
	doc := "name: w\ninitial_stage: s\nstages: {s: {}}\n"
	for _, name := range []string{"a.yaml", "b.yml", "c.txt", ".hidden.yaml"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := workflow.LoadDir(dir)
	want := filepath.Join(dir, "b.yml") + `: workflow "w" is also defined in ` + filepath.Join(dir, "a.yaml")
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %s", err, want)
	}
	os.Remove(filepath.Join(dir, "b.yml"))
	ws, err := workflow.LoadDir(dir)
	if err != nil || len(ws) != 1 {
		t.Errorf("LoadDir = %v, %v; want one workflow (c.txt and .hidden.yaml skipped)", ws, err)
	}
}

// TestLoadInvalid loads each file of testdata/workflows/invalid, which
// lists the problems it must be rejected for in "# want:" lines.
func TestLoadInvalid(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "workflows", "invalid", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatal("no fixtures", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			var wants []string
			for line := range strings.Lines(string(data)) {
				if w, ok := strings.CutPrefix(line, "# want: "); ok {
					wants = append(wants, strings.TrimSpace(w))
				}
			}
			if len(wants) == 0 {
				t.Fatal("fixture has no # want: line")
			}
			ws, err := workflow.Load(strings.NewReader(string(data)), filepath.Base(path))
			if err == nil {
				t.Fatalf("loaded %d workflows, want an error", len(ws))
			}
			msg := err.Error()
			for _, w := range wants {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q:\n%s", w, msg)
				}
			}
			for _, secret := range []string{"hunter2", "s3cret"} {
				if strings.Contains(msg, secret) {
					t.Errorf("error shows %q:\n%s", secret, msg)
				}
			}
			var le *workflow.LoadError
			if !errors.As(err, &le) || le.File != filepath.Base(path) {
				t.Errorf("errors.As(*LoadError) = %+v", le)
			}
		})
	}
}

func TestLoadLimits(t *testing.T) {
	deep := "name: w\ninitial_stage: s\nstages: {s: {}}\ndescription: " + strings.Repeat("[", 150) + strings.Repeat("]", 150) + "\n"
	big := "name: w\ninitial_stage: s\nstages: {s: {}}\ndescription: " + strings.Repeat("x", workflow.MaxFileSize) + "\n"
	tests := []struct {
		name, doc, want string
	}{
		{"deep", deep, "nested deeper than 100 levels"},
		{"big", big, "file is larger than 4 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := workflow.Load(strings.NewReader(tt.doc), "f.yaml")
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %.200v, want %q", err, tt.want)
			}
		})
	}
}

// TestLoadWebhookTask loads a webhook task and calls it: the method,
// headers (with an environment variable expanded) and body reach the
// server, and the answer becomes the task's response.
func TestLoadWebhookTask(t *testing.T) {
	t.Setenv("AGENTRY_TEST_TOKEN", "t0k3n")
	var got *http.Request
	var body map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"result": {"ok": true}, "state_updates": {"cart": ["SKU-001"]}}`)
	}))
	defer srv.Close()
	doc := `
name: w
initial_stage: s
stages:
  s:
    tasks:
      add:
        description: Adds.
        parameters: {type: object, properties: {id: {type: string}}}
        webhook:
          url: ` + srv.URL + `/add
          method: PATCH
          headers:
            Authorization: Bearer ${AGENTRY_TEST_TOKEN}
          timeout: 3s
`
	ws, err := workflow.Load(strings.NewReader(doc), "w.yaml")
	if err != nil {
		t.Fatal(err)
	}
	task := ws[0].Stages["s"].Tasks["add"]
	resp, err := task.Run(context.Background(), &workflow.TaskRequest{SessionID: "s1", Workflow: "w", Stage: "s", Task: "add",
		Args: map[string]any{"id": "SKU-001"}, State: map[string]any{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Method != "PATCH" || got.URL.Path != "/add" || got.Header.Get("Authorization") != "Bearer t0k3n" ||
		got.Header.Get("Content-Type") != "application/json" {
		t.Errorf("request: %s %s %v", got.Method, got.URL, got.Header)
	}
	wantBody := map[string]any{"session_id": "s1", "workflow": "w", "stage": "s", "task": "add",
		"args": map[string]any{"id": "SKU-001"}, "state": map[string]any{"k": "v"}}
	if diff := cmp.Diff(wantBody, body); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
	want := &workflow.TaskResponse{Result: map[string]any{"ok": true}, StateUpdates: map[string]any{"cart": []any{"SKU-001"}}}
	if diff := cmp.Diff(want, resp); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}

func TestWorkflowSchemaIsEmbedded(t *testing.T) {
	var v map[string]any
	if err := json.Unmarshal(workflow.WorkflowSchema(), &v); err != nil {
		t.Fatal(err)
	}
	if v["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
		t.Errorf("$schema = %v", v["$schema"])
	}
}

// FuzzLoad checks that the loader never panics and that what it accepts
// is a valid workflow. Seeds: the fixtures.
func FuzzLoad(f *testing.F) {
	for _, pattern := range []string{"testdata/workflows/*.yaml", "testdata/workflows/*.json", "testdata/workflows/invalid/*.yaml"} {
		files, _ := filepath.Glob(pattern)
		for _, path := range files {
			data, err := os.ReadFile(path)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte("name: w\ninitial_stage: s\nstages: {s: {tasks: {t: {description: d, webhook: {url: 'http://h/'}}}}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ws, err := workflow.Load(strings.NewReader(string(data)), "fuzz.yaml")
		if err != nil {
			if ws != nil {
				t.Errorf("workflows and an error")
			}
			var le *workflow.LoadError
			if !errors.As(err, &le) {
				t.Errorf("error is not a *LoadError: %v", err)
			}
			return
		}
		if len(ws) == 0 {
			t.Fatal("no workflows and no error")
		}
		for _, w := range ws {
			if err := w.Validate(); err != nil {
				t.Errorf("accepted workflow does not validate: %v", err)
			}
			for _, st := range w.Stages {
				for _, tk := range st.Tasks {
					if tk.Run == nil {
						t.Errorf("task %q has no Run", tk.Name)
					}
				}
			}
			if _, err := json.Marshal(w); err != nil {
				t.Errorf("accepted workflow does not marshal: %v", err)
			}
		}
	})
}
