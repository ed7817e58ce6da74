package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/agentry-dev/agentry/envelope"
)

// fakeChat is an OpenAI-compatible model server (Chat Completions, as
// the compat provider speaks it, streamed or not) playing the support
// agent: for "refund o-N" it looks the order up, refunds it and
// confirms; otherwise it looks the order up and reports it. It reads
// the conversation, so it picks up a run where it paused.
type fakeChat struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls int
}

var orderID = regexp.MustCompile(`o-\d+`)

func newFakeChat(t *testing.T) *fakeChat {
	f := &fakeChat{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
			return
		}
		var req struct {
			Model    string `json:"model"`
			Stream   bool   `json:"stream"`
			Messages []struct {
				Role       string `json:"role"`
				Content    any    `json:"content"`
				ToolCallID string `json:"tool_call_id"`
				ToolCalls  []struct {
					ID       string                `json:"id"`
					Function struct{ Name string } `json:"function"`
				} `json:"tool_calls"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error"}}`, http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.calls++
		f.mu.Unlock()
		var task string
		names, done := map[string]string{}, map[string]bool{}
		for _, m := range req.Messages {
			switch m.Role {
			case "user":
				if s, ok := m.Content.(string); ok {
					task = s
				} else if b, err := json.Marshal(m.Content); err == nil {
					task = string(b)
				}
			case "assistant":
				for _, c := range m.ToolCalls {
					names[c.ID] = c.Function.Name
				}
			case "tool":
				done[names[m.ToolCallID]] = true
			}
		}
		order := orderID.FindString(task)
		var call, text string
		switch {
		case !done["lookup_order"]:
			call = "lookup_order"
		case strings.Contains(task, "refund") && !done["refund_order"]:
			call = "refund_order"
		case strings.Contains(task, "refund"):
			text = "Refunded order " + order + "."
		default:
			text = "Order " + order + " is on its way."
		}
		msg := map[string]any{"role": "assistant", "content": nil}
		finish := "tool_calls"
		var calls []any
		if call != "" {
			args, _ := json.Marshal(map[string]string{"order_id": order})
			calls = []any{map[string]any{"index": 0, "id": "call_" + call, "type": "function",
				"function": map[string]any{"name": call, "arguments": string(args)}}}
			msg["tool_calls"] = calls
		} else {
			msg["content"], finish = text, "stop"
		}
		usage := map[string]int{"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 1764300000, "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta map[string]any, finish any, usage any) {
			choices := []any{}
			if delta != nil {
				choices = append(choices, map[string]any{"index": 0, "delta": delta, "finish_reason": finish})
			}
			b, _ := json.Marshal(map[string]any{"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1764300000, "model": req.Model, "choices": choices, "usage": usage})
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		if call != "" {
			chunk(map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}, nil, nil)
		} else {
			chunk(map[string]any{"role": "assistant", "content": ""}, nil, nil)
			for _, word := range strings.SplitAfter(text, " ") {
				chunk(map[string]any{"content": word}, nil, nil)
			}
		}
		chunk(map[string]any{}, finish, nil)
		chunk(nil, nil, usage)
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeChat) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// sseEvent is one event of GET /v1/runs/{id}/events.
type sseEvent struct{ id, event, data string }

// readEvents reads a run's event stream to its end (after lastID, when
// given).
func readEvents(t *testing.T, base, id, lastID string) []sseEvent {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/runs/"+id+"/events", nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("GET events: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	var evs []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.event != "" {
				evs = append(evs, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			cur.event = line[7:]
		case strings.HasPrefix(line, "data: "):
			cur.data += line[6:]
		}
	}
	return evs
}

// TestAgentFiles_ExamplesOnAnOpenAICompatibleModel: `agentry serve
// --agents examples/agents`, the support agent on a fake OpenAI-compatible
// model server (SUPPORT_MODEL=compat:fake, COMPAT_BASE_URL): GET
// /v1/agents describes the examples; a status question delivers; a refund
// pauses until `agentry approve`, then delivers; its SSE events resume
// after Last-Event-ID and end with run.end; a UAMP ask to the support
// agent at <DID>:agents:support is a governed run answered in its done
// delta.
func TestAgentFiles_ExamplesOnAnOpenAICompatibleModel(t *testing.T) {
	model := newFakeChat(t)
	t.Setenv("SUPPORT_MODEL", "compat:fake")
	t.Setenv("COMPAT_BASE_URL", model.srv.URL+"/v1")
	dir, data := t.TempDir(), t.TempDir()
	keys := filepath.Join(data, "keys")
	if code, _, errs := runCLI(t, "keys", "create", "alice", "--dir", keys); code != 0 {
		t.Fatalf("keys create: exit %d: %s", code, errs)
	}
	clientKey := filepath.Join(dir, "client.jwk")
	code, pub, errs := runCLI(t, "uamp", "keygen", "--out", clientKey)
	if code != 0 {
		t.Fatalf("uamp keygen: exit %d: %s", code, errs)
	}
	trust := filepath.Join(dir, "client.pub.jwk")
	os.WriteFile(trust, []byte(pub), 0o600)
	srv := startServer(t, "--data", data, "--agents", "../examples/agents", "--uamp-trust", trust)

	// The agents.
	resp, err := http.Get(srv.URL + "/v1/agents")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Agents []struct {
			Name, Model string
			Tools       []struct{ Name, Risk string }
		}
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	models := map[string]string{}
	for _, a := range list.Agents {
		models[a.Name] = a.Model
		if a.Name == "support" && (len(a.Tools) != 2 || a.Tools[1].Name != "refund_order" || a.Tools[1].Risk != "write_high_risk") {
			t.Errorf("support's tools: %+v", a.Tools)
		}
	}
	if models["support"] != "compat:fake" || models["echo"] != "scripted:echo" || models["calculator"] != "scripted:demo" {
		t.Errorf("GET /v1/agents: models %v", models)
	}

	// A read-only question delivers, asking the model.
	code, body := postJSON(t, srv.URL+"/v1/runs", `{"agent":"support","input":"status of o-1002?","wait":true}`)
	if run := decodeRun(t, body); code != http.StatusOK || run.Status != "delivered" || run.Output != "Order o-1002 is on its way." || model.count() != 2 {
		t.Fatalf("status run: %d %s (model asked %d times)", code, body, model.count())
	}

	// A refund pauses for a human, who approves it; the run delivers.
	code, body = postJSON(t, srv.URL+"/v1/runs", `{"agent":"support","input":"refund o-1001","wait":true}`)
	run := decodeRun(t, body)
	if code != http.StatusOK || run.Status != "paused" || len(run.PendingApprovals) != 1 {
		t.Fatalf("refund run: %d %s", code, body)
	}
	if code, out, errs := runCLI(t, "approve", run.PendingApprovals[0], "--as", "alice", "--dir", keys, "--server", srv.URL); code != 0 {
		t.Fatalf("agentry approve: exit %d\n%s%s", code, out, errs)
	}
	if done := waitRun(t, srv.URL, run.RequestID); done.Status != "delivered" || done.Output != "Refunded order o-1001." {
		t.Fatalf("after the approval: %+v", done)
	}

	// Its events, live from the store: ids strictly increasing, the
	// approval and the pause among them, run.end last; resumed after
	// Last-Event-ID, exactly the rest.
	evs := readEvents(t, srv.URL, run.RequestID, "")
	kinds := map[string]int{}
	for i, ev := range evs {
		kinds[ev.event]++
		if i > 0 && i < len(evs)-1 && !(len(ev.id) > len(evs[i-1].id) || len(ev.id) == len(evs[i-1].id) && ev.id > evs[i-1].id) {
			t.Errorf("event %d id %q after %q", i, ev.id, evs[i-1].id)
		}
	}
	if len(evs) < 6 || evs[len(evs)-1].event != "run.end" || kinds["approval_requested"] != 1 || kinds["paused"] != 1 || kinds["resumed"] != 1 {
		t.Fatalf("events %v", kinds)
	}
	mid := len(evs) / 2
	rest := readEvents(t, srv.URL, run.RequestID, evs[mid].id)
	var want, got []string
	for _, ev := range evs[mid+1:] {
		if ev.id != "" && !strings.HasPrefix(ev.event, "model_") { // transient events are not kept
			want = append(want, ev.id+" "+ev.event)
		}
	}
	for _, ev := range rest {
		if ev.id != "" && !strings.HasPrefix(ev.event, "model_") {
			got = append(got, ev.id+" "+ev.event)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || rest[len(rest)-1].event != "run.end" {
		t.Errorf("after Last-Event-ID %s:\n%s\nwant\n%s", evs[mid].id, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Over UAMP: the support agent at <DID>:agents:support.
	url, did := srv.uampURL(t)
	ask := filepath.Join(dir, "ask.json")
	b, _ := json.Marshal(map[string]any{"from": "did:web:e2e.example", "to": []string{did + ":agents:support"}, "body": map[string]string{"type": "text/plain", "content": "status of o-1003?"}})
	os.WriteFile(ask, b, 0o600)
	code, out, errs := runCLI(t, "uamp", "send", url, ask, "--key", clientKey, "--ca", filepath.Join(data, "tls", "cert.pem"), "--timeout", "60s")
	if code != 0 {
		t.Fatalf("uamp send: exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last, err := envelope.DecodeDelta([]byte(lines[len(lines)-1]))
	if err != nil || last.Type != envelope.DeltaDone {
		t.Fatalf("uamp send: last delta %q: %v", lines[len(lines)-1], err)
	}
	var answer struct {
		Content   string
		RequestID string `json:"request_id"`
	}
	json.Unmarshal(last.Payload, &answer)
	if answer.Content != "Order o-1003 is on its way." {
		t.Errorf("UAMP answer %+v", answer)
	}
	if r := getRun(t, srv.URL, answer.RequestID); r.Status != "delivered" {
		t.Errorf("the UAMP ask's run: %+v", r)
	}
}
