package cli

import (
	"log/slog"
	"net/http"

	"github.com/agentry-dev/agentry/server"
	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/uicontrol/uiapworkflow"
	"github.com/agentry-dev/agentry/workflow"
)

// mountUIAP serves every workflow of engine as a UIAP app (DESIGN §6):
// the ws@0.1 binding at /uiap/ws and the http@0.1 binding under
// /uiap/sessions. A WebSocket picks its workflow with ?workflow=NAME
// (404 for one not served); either binding may name it in the
// session.initialize's ext["agentry.workflow"].name; otherwise the
// session drives the first workflow by name. --token is required as for
// UAIP; --cors origins may open WebSockets from a browser. The returned
// close ends every UIAP session.
func mountUIAP(srv *server.Server, engine *workflow.Engine, f *serveFlags, logger *slog.Logger) (closeAll func(), err error) {
	mux, err := uiapworkflow.NewMux(engine, &uiapworkflow.Options{App: uicontrol.AppOptions{Logger: logger}})
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
	return func() {
		_ = hb.Close()
		_ = mux.Close()
	}, nil
}
