// Package workflow implements UAIP-0.1, the Universal Agent Interactive
// Protocol: workflows of stages whose tasks an agent may call only in the
// current stage, with transitions along the workflow's graph and a
// per-session key-value state, served over HTTP.
//
// An Engine holds the registered workflows and drives sessions, which a
// SessionStore persists (store/memstore, store/sqlstore); NewHandler
// serves the protocol's endpoints; Client speaks it; Tools turns a session
// into llm.Tools for an agent.
package workflow
