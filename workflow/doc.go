// Package workflow implements UAIP-0.1, the Universal Agent Interactive
// Protocol: workflows of stages whose tasks an agent may call only in the
// current stage, with transitions along the workflow's graph and a
// per-session key-value state, served over HTTP.
//
// An Engine holds the registered workflows and drives sessions, which a
// SessionStore persists (internal/memstore, internal/sqlstore); NewHandler
// serves the protocol's endpoints; Client speaks it. The package is a
// protocol core: it imports no agent runtime. workflow/uaipagent turns a
// session into the tools of an agent, resolved at every step.
//
//	e := workflow.NewEngine(st.Sessions(), nil) // st from store.Open
//	err := e.Register(w)                        // w: a *Workflow built in Go or from LoadDir
//	http.Handle("/", workflow.NewHandler(e, nil))
//
// Tasks are Go functions (NewTask infers the parameter schema from a Go
// struct) or, for workflows declared in YAML or JSON (LoadDir, Load),
// webhooks to an existing service (Webhook). workflow/sessiontest is the
// suite every SessionStore passes; workflow/uaipconformance is a black-box
// suite for any UAIP server.
package workflow
