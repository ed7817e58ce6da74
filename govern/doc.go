// Package govern implements UAICP 0.3 (github.com/UAICP/uaicp), the
// reliability contract for agentic execution: a run either delivers with
// the evidence and verification its task class requires, or fails safe with
// explicit uncertainty.
//
// A Governor owns runs. Each Run walks the phase machine
//
//	intake → plan → execute → verify → deliver | fail_safe
//
// with a bounded, journaled repair loop (verify → plan | execute). Every
// tool call goes through Run.Invoke, which gates it before it runs: the
// call's effective risk tier (the strictest of the tool's declared tier,
// the operator's pinned tier and the task class's floor; unknown tools are
// write_high_risk) decides whether it is auto-allowed (read_only), checked
// by the Policy (write_low_risk), or needs a signed approval token and
// rollback metadata (write_high_risk). Tools yield Evidence whose hash the
// governor computes; Verifiers turn evidence into Reports; Deliver is
// unreachable unless every required invariant holds. A failed run rolls
// back its recorded writes in reverse order.
//
// Start with New. To govern an agent of package agent, add the Governor's
// Middleware to it and mark its tools with Declare; to govern your own
// code, run it with Execute and call each tool through Run.Invoke:
//
//	g, err := govern.New(ctx, &govern.Options{Journal: j, Keyring: keys})
//	mw := g.Middleware(&govern.AgentOptions{Identity: id}) // agent.Options.Middleware
//	d, err := g.Execute(ctx, &govern.RunOptions{TaskClass: "quote", Identity: id},
//		func(ctx context.Context, run *govern.Run, repair *govern.Verdict) (any, error) {
//			inv, err := run.Invoke(ctx, spec, govern.Call{Args: args}, callTheTool)
//			...
//		})
//
// Everything is recorded in a hash-chained, append-only Journal, written
// durably before the effect it records: the intent of a write before the
// write, the commit of a result before the result is returned. Recover
// closes the runs a crash left open as fail_safe and rolls back their
// in-doubt writes.
//
// The wire format is exactly the three UAICP JSON schemas (Envelope,
// Evidence, Report); what they leave open — risk tier, reason codes, policy
// decision, actor kind — travels in their metadata under "uaicp.*" keys
// (docs/governance.md lists them). Middleware governs an agent of package
// agent: its tool calls and its final answer.
package govern
