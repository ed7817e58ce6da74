package cli

import (
	"log/slog"
	"math"
	"net/http"
	"sync"

	"github.com/agentry-dev/agentry/server"
	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/uicontrol/uiapworkflow"
	"github.com/agentry-dev/agentry/workflow"
)

// UIAP rate limiting in agentry serve (§16: implementations SHOULD
// support rate limiting for incoming messages; docs/spec-notes/uiap.md,
// "Rate limiting"): a token bucket per session, on by default. A UI agent
// sends a few requests a second (an LLM step, a tool call, a capability
// read); 50 a second with bursts of 100 leaves a scripted client
// (agentry uiap connect) ample room and stops a flood after the burst.
const (
	defaultUIAPRate  = 50.0
	uiapRateUsage    = "UIAP requests a second each session may send, sustained (a token bucket; beyond it requests are answered rate_limited, retryable, with retryAfterMs); 0: no limit"
	uiapBurstUsage   = "UIAP requests each session may send at once (the bucket's size); 0: twice --uiap-rate"
	uiapBurstPerRate = 2
)

// uiapRateLimit is the per-session rate limit of --uiap-rate and
// --uiap-burst.
func uiapRateLimit(f *serveFlags) (uicontrol.RateLimit, error) {
	switch {
	case math.IsNaN(f.uiapRate) || math.IsInf(f.uiapRate, 0) || f.uiapRate < 0:
		return uicontrol.RateLimit{}, usageError("--uiap-rate %v: want a number of requests a second, 0 or more", f.uiapRate)
	case f.uiapBurst < 0:
		return uicontrol.RateLimit{}, usageError("--uiap-burst %d: want 0 or more", f.uiapBurst)
	case f.uiapRate == 0:
		return uicontrol.RateLimit{}, nil
	}
	burst := f.uiapBurst
	if burst == 0 {
		burst = int(min(math.Ceil(f.uiapRate*uiapBurstPerRate), math.MaxInt32))
	}
	return uicontrol.RateLimit{Rate: f.uiapRate, Burst: burst}, nil
}

// mountUIAP serves every workflow of engine as a UIAP app (DESIGN §6):
// the ws@0.1 binding at /uiap/ws and the http@0.1 binding under
// /uiap/sessions. A WebSocket picks its workflow with ?workflow=NAME
// (404 for one not served); either binding may name it in the
// session.initialize's ext["agentry.workflow"].name; otherwise the
// session drives the first workflow by name. --token is required as for
// UAIP; --cors origins may open WebSockets from a browser; every session
// is rate limited by --uiap-rate and --uiap-burst. The returned close
// ends every UIAP session.
func mountUIAP(srv *server.Server, engine *workflow.Engine, f *serveFlags, logger *slog.Logger) (closeAll func(), err error) {
	limit, err := uiapRateLimit(f)
	if err != nil {
		return nil, err
	}
	mux, err := uiapworkflow.NewMux(engine, &uiapworkflow.Options{App: uicontrol.AppOptions{Logger: logger, RateLimit: limit}})
	if err != nil {
		return nil, err
	}
	ws := uicontrol.NewWSHandler(mux.Serve, &uicontrol.WSOptions{OriginPatterns: f.cors, Logger: logger})
	byName := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.URL.Query().Get("workflow")
		if name != "" {
			if !mux.Has(name) {
				http.Error(w, "workflow not found", http.StatusNotFound)
				return
			}
			r = r.WithContext(uiapworkflow.WithWorkflow(r.Context(), name))
		}
		ws.ServeHTTP(w, r)
	})
	hb := uicontrol.NewHTTPHandler(mux.Serve, &uicontrol.HTTPOptions{MaxBodySize: f.maxBody, Logger: logger})
	srv.Handle("/uiap/ws", bearer(f.token, byName))
	srv.Handle("/uiap/sessions", bearer(f.token, hb))
	srv.Handle("/uiap/sessions/", bearer(f.token, hb))
	var once sync.Once
	return func() {
		once.Do(func() {
			_ = hb.Close()
			_ = mux.Close()
		})
	}, nil
}
