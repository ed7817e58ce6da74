// Package server is agentry's composition: the server `agentry serve`
// runs, for a Go program to run with its own workflows and agents.
//
// A Config says what to serve — a store (store.Open), workflows (UAIP 0.1
// and, as apps, UIAP Core 0.1), agents run under governance (UAICP 0.3) at
// /v1/runs, an agent over UAMP 1.0 on a TLS 1.3 listener — and New
// assembles it: it registers the workflows, builds the governor on the
// store's journal and recovers what a crash left open, builds each agent
// under it, starts the run service (package runs) and resumes runs
// decided while no server ran. Serve listens and serves until its context
// ends; Shutdown stops it gracefully and releases the rest.
//
//	st, _ := store.Open(ctx, "sqlite:///var/lib/app/agentry.db")
//	srv, err := server.New(ctx, &server.Config{Store: st, Workflows: wfs, Agents: agents})
//	defer srv.Shutdown(context.Background())
//	err = srv.Serve(ctx) // until ctx ends (SIGTERM)
//
// Every connection has timeouts and header limits; requests beyond
// MaxInFlight get 503 with Retry-After; /metrics serves request metrics
// (Prometheus text format, behind the Token when there is one), /healthz
// the health of the store; access records go to the Logger at Debug.
// Handler and TLSHandler give the handlers for a program that serves
// them itself.
package server
