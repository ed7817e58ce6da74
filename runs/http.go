package runs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/httpx"
	"github.com/agentry-dev/agentry/internal/sse"
	"github.com/agentry-dev/agentry/internal/strictjson"
	"github.com/agentry-dev/agentry/internal/unavailable"
)

// maxBody bounds a POST /v1/runs body.
const maxBody = 64 << 10

// maxWait bounds how long POST /v1/runs with "wait": true and GET
// /v1/runs/{id}?wait= wait.
const maxWait = 100 * time.Second

// writeTimeout bounds one write of an event stream to a client.
const writeTimeout = 30 * time.Second

// Handler serves the service over HTTP (mount it at "/v1/runs",
// "/v1/runs/" and "/v1/agents"):
//
//	POST /v1/runs                  start a run: {"agent", "input", "wait"}
//	GET  /v1/runs                  list runs: ?status=&agent=&limit=&after=
//	GET  /v1/runs/{id}             a run; ?wait=DURATION: once it is settled
//	POST /v1/runs/{id}/cancel      cancel a run
//	GET  /v1/runs/{id}/events      its events, as Server-Sent Events
//	GET  /v1/runs/{id}/audit       its journal records and their chain
//	                               check (Audit); ?format=jsonl: the records
//	GET  /v1/agents                the agents it runs: {"agents": [AGENT…]}
//	GET  /v1/agents/{name}         one: {"name", "description", "model",
//	                               "tools": [{"name", "risk"}]}
//
// Errors are {"error": {"code", "message"}} with the Code's status: 400
// bad input, 404 unknown run or agent, 409 cancel of a finished run.
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/runs", s.httpStart)
	mux.HandleFunc("GET /v1/runs", s.httpList)
	mux.HandleFunc("GET /v1/runs/{id}", s.httpGet)
	mux.HandleFunc("POST /v1/runs/{id}/cancel", s.httpCancel)
	mux.HandleFunc("GET /v1/runs/{id}/events", s.httpEvents)
	mux.HandleFunc("GET /v1/runs/{id}/audit", s.httpAudit)
	mux.HandleFunc("GET /v1/agents", func(w http.ResponseWriter, r *http.Request) {
		names := s.Agents()
		out := make([]agentInfo, len(names))
		for i, n := range names {
			out[i] = s.agentInfo(n)
		}
		writeJSON(w, http.StatusOK, map[string]any{"agents": out})
	})
	mux.HandleFunc("GET /v1/agents/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if _, ok := s.agents().agents[name]; !ok {
			s.writeError(w, newError(UnknownAgent, "", fmt.Sprintf("no agent named %q", name), nil))
			return
		}
		writeJSON(w, http.StatusOK, s.agentInfo(name))
	})
	return mux
}

type startRequest struct {
	Agent string `json:"agent"`
	Input string `json:"input"`
	// Wait makes the call return when the run is settled, up to
	// 100 * time.Second.
	Wait bool `json:"wait"`
}

func (s *Service) httpStart(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		s.writeError(w, newError(InvalidParams, "", "could not read the body", err))
		return
	}
	if len(body) > maxBody {
		s.writeError(w, newError(TooLarge, "", fmt.Sprintf("body larger than %d bytes", maxBody), nil))
		return
	}
	// Strictly (DESIGN §2): one closed object and nothing after it, no
	// invalid UTF-8 or lone surrogate to be silently repaired in the
	// input a run is journaled with.
	var req startRequest
	if err := strictjson.Decode(body, &req, &strictjson.Options{MaxSize: maxBody, DisallowUnknownFields: true, DisallowDuplicates: true}); err != nil {
		s.writeError(w, newError(InvalidParams, "", `the body must be {"agent": "...", "input": "...", "wait": bool}: `+err.Error(), err))
		return
	}
	run, err := s.Start(r.Context(), &StartParams{Agent: req.Agent, Input: req.Input})
	if err != nil {
		s.writeError(w, err)
		return
	}
	status := http.StatusAccepted
	if req.Wait {
		ctx, cancel := context.WithTimeout(r.Context(), maxWait)
		defer cancel()
		if got, err := s.Wait(ctx, run.RequestID); got != nil {
			run = got
			if err == nil {
				status = http.StatusOK
			}
		}
	}
	w.Header().Set("Location", "/v1/runs/"+run.RequestID)
	writeJSON(w, status, run)
}

func (s *Service) httpGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var wait time.Duration
	if q := r.URL.Query().Get("wait"); q != "" {
		d, err := time.ParseDuration(q)
		if err != nil || d < 0 {
			s.writeError(w, newError(InvalidParams, "", `wait must be a duration such as "30s"`, err))
			return
		}
		wait = min(d, maxWait)
	}
	var run *Run
	var err error
	if wait > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		defer cancel()
		run, err = s.Wait(ctx, id)
		if run != nil {
			err = nil // not settled in time: the run as it is
		}
	} else {
		run, err = s.Get(r.Context(), id)
	}
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, run)
}

func (s *Service) httpList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := &ListParams{Status: Status(q.Get("status")), Agent: q.Get("agent"), After: q.Get("after")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || !isDigits(v) {
			s.writeError(w, newError(InvalidParams, "", fmt.Sprintf("limit must be a number from 1 to %d", maxListLimit), nil))
			return
		}
		p.Limit = n
		if n == 0 {
			p.Limit = -1 // explicit 0 is out of range, not the default
		}
	}
	list, more, err := s.list(r.Context(), p)
	if err != nil {
		s.writeError(w, err)
		return
	}
	body := struct {
		Runs []*Run `json:"runs"`
		// Next is the cursor of the next page (after=), when there is one.
		Next string `json:"next,omitempty"`
	}{Runs: list}
	if body.Runs == nil {
		body.Runs = []*Run{}
	}
	if more {
		body.Next = list[len(list)-1].RequestID
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Service) httpCancel(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.Cancel(r.Context(), id); err != nil {
		s.writeError(w, err)
		return
	}
	run, err := s.Get(r.Context(), id)
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, run)
}

// httpEvents streams a run's events as Server-Sent Events: "id:" is the
// event's Seq, "event:" its type, "data:" the Event in JSON. A client
// resumes with Last-Event-ID (or ?after=SEQ); comment lines keep a quiet
// stream open. The stream ends after the "ended" event with one more,
// "run.end", whose data is the run as GET /v1/runs/{id} answers it.
func (s *Service) httpEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var after uint64
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("after")
	}
	if v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || !isDigits(v) {
			s.writeError(w, newError(InvalidParams, id, "Last-Event-ID (or after) must be the seq of an event", nil))
			return
		}
		after = n
	}
	sub, err := s.subscribe(r.Context(), id, after)
	if err != nil {
		s.writeError(w, err)
		return
	}
	defer sub.close()
	stream := sse.Start(w, writeTimeout)
	if stream.Flush() != nil {
		return
	}
	beat := time.NewTicker(s.opts.Heartbeat)
	defer beat.Stop()
	for {
		ev, err := sub.next(r.Context(), beat.C)
		switch {
		case err != nil:
			var e *Error
			if errors.As(err, &e) && e.Code == Unavailable {
				_ = sse.Write(w, sse.Event{Type: "error", Data: mustJSON(errorBody(err))})
				_ = stream.Flush()
			}
			return
		case ev == nil:
			if _, err := io.WriteString(w, ": heartbeat\n\n"); err != nil || stream.Flush() != nil {
				return
			}
			continue
		}
		stream.Extend()
		if err := sse.Write(w, sse.Event{ID: strconv.FormatUint(ev.Seq, 10), Type: string(ev.Type), Data: mustJSON(ev)}); err != nil || stream.Flush() != nil {
			return
		}
		if ev.Type == EventEnded {
			// The last event: the run as GET /v1/runs/{id} answers it.
			// It has no id of its own: a client resuming after it resumes
			// after "ended", and gets it again.
			if run, err := s.Get(r.Context(), id); err == nil {
				_ = sse.Write(w, sse.Event{Type: eventRunEnd, Data: mustJSON(run)})
				_ = stream.Flush()
			}
			return
		}
	}
}

// eventRunEnd is the type of the last event of a run's stream, whose data
// is the run.
const eventRunEnd = "run.end"

func isDigits(s string) bool {
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`{"error":{"code":"INTERNAL","message":"internal error"}}`)
	}
	return b
}

func errorBody(err error) map[string]any {
	_, code, msg := wireError(err)
	return map[string]any{"error": map[string]string{"code": string(code), "message": msg}}
}

// writeError answers err with its code's status; what is internal is
// logged, not sent.
func (s *Service) writeError(w http.ResponseWriter, err error) {
	status, _, _ := wireError(err)
	switch status {
	case http.StatusInternalServerError:
		s.log.Error("runs: request failed", "error", err)
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", unavailable.RetryAfter)
	}
	writeJSON(w, status, errorBody(err))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	httpx.WriteJSON(w, status, v, `{"error":{"code":"INTERNAL","message":"internal error"}}`)
}

// agentInfo is an agent as GET /v1/agents describes it: its tools are
// those it always has (not those a toolset gives it step by step), each
// with the governance tier it declares.
type agentInfo struct {
	Name        string     `json:"name"`
	Description string     `json:"description,omitempty"`
	Model       string     `json:"model,omitempty"`
	Tools       []toolInfo `json:"tools"`
}

type toolInfo struct {
	Name string `json:"name"`
	Risk string `json:"risk"`
}

func (s *Service) agentInfo(name string) agentInfo {
	cat := s.agents()
	a, ok := cat.agents[name]
	info := agentInfo{Name: name, Description: cat.descriptions[name], Tools: []toolInfo{}}
	if !ok { // gone since the caller looked
		return info
	}
	o := a.Options()
	if o.Model.Provider != nil {
		info.Model = o.Model.String()
	}
	for _, t := range o.Tools {
		tier := govern.WriteHighRisk // what the governor makes of an undeclared tool
		if d, ok := govern.DeclarationOf(t); ok && d.Tier != 0 {
			tier = d.Tier
		}
		info.Tools = append(info.Tools, toolInfo{Name: t.Name, Risk: tier.String()})
	}
	return info
}
