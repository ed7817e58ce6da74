// Package execution provides the UAP-1.1 execution strategies (§5): Loop,
// ReAct and Plan. Each is an agent.ExecutionStrategy built on the
// agent.ExecutionContext primitives, so each streams, calls the strategy
// hooks, checkpoints after every step and evaluates the stop condition the
// same way on the Generate and the Stream path. Their defaults impose no
// limits (§2.4).
package execution
