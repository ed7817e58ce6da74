package server

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/agentry-dev/agentry/internal/uiapsession"
	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/uicontrol/uiapworkflow"
)

// defaultUIAPRateLimit is the rate limit of each UIAP session when
// Config.UIAPRateLimit is nil (UIAP Core 0.1 §16: implementations SHOULD
// rate limit incoming messages). A UI agent sends a few requests a
// second (an LLM step, a tool call, a capability read); 50 a second in
// bursts of 100 leaves a scripted client ample room and stops a flood
// after the burst.
var defaultUIAPRateLimit = uicontrol.RateLimit{Rate: 50, Burst: 100}

// mountUIAP serves every workflow as a UIAP app (UIAP Core 0.1 at
// uiap.dev): the ws@0.1 binding at /uiap/ws and the http@0.1 binding
// under /uiap/sessions. A WebSocket picks its workflow with
// ?workflow=NAME (404 for one not served); either binding may name it in
// the session.initialize's ext["agentry.workflow"].name; otherwise the
// session drives the first workflow by name. Shutdown — and the start of
// a graceful stop, which open sessions must not hold — ends every
// session here; on a shared store (PostgreSQL) the sessions are stored,
// and stay resumable on another replica.
func (s *Server) mountUIAP() error {
	limit := defaultUIAPRateLimit
	if s.cfg.UIAPRateLimit != nil {
		limit = *s.cfg.UIAPRateLimit
	}
	app := uicontrol.AppOptions{Logger: s.log, RateLimit: limit, TracerProvider: s.cfg.TracerProvider}
	if s.st.Shared() {
		// Replicas share the database: a session started on one is
		// resumed on any (docs/operations.md, "Several replicas"). A
		// single process keeps its sessions in memory, as before.
		app.Sessions = s.st.UIAPSessions()
		s.bgWG.Go(func() { sweepUIAP(s.bg, app.Sessions, s.log, time.Minute) })
	}
	mux, err := uiapworkflow.NewMux(s.engine, &uiapworkflow.Options{App: app})
	if err != nil {
		return err
	}
	ws := uicontrol.NewWSHandler(mux.Serve, &uicontrol.WSOptions{OriginPatterns: s.cfg.CORSOrigins, Logger: s.log})
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
	hb := uicontrol.NewHTTPHandler(mux.Serve, &uicontrol.HTTPOptions{MaxBodySize: s.cfg.MaxBodyBytes, Logger: s.log})
	s.core.handle("/uiap/ws", bearer(s.cfg.Token, byName))
	s.core.handle("/uiap/sessions", bearer(s.cfg.Token, hb))
	s.core.handle("/uiap/sessions/", bearer(s.cfg.Token, hb))
	var once sync.Once
	closeAll := func() {
		once.Do(func() {
			_ = hb.Close()
			_ = mux.Close()
		})
	}
	s.core.onShutdownFunc(closeAll)
	s.closers = append(s.closers, closeAll)
	return nil
}

// sweepUIAP removes, every interval, the stored UIAP sessions whose
// resume window ended (their replica died or let them expire).
func sweepUIAP(ctx context.Context, st uiapsession.Store, logger *slog.Logger, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n, err := st.Sweep(ctx, time.Now())
			if err != nil && ctx.Err() == nil {
				logger.Warn("sweeping expired UIAP sessions failed", "error", err)
			} else if n > 0 {
				logger.Info("expired UIAP sessions removed", "count", n)
			}
		}
	}
}
