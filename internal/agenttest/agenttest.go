// Package agenttest holds helpers the module's tests share for agents.
package agenttest

import (
	"context"

	"github.com/agentry-dev/agentry/agent"
)

// MiddlewareFuncs adapts functions to agent.Middleware; nil fields do
// nothing.
type MiddlewareFuncs struct {
	MiddlewareName string
	BeforeFunc     func(ctx context.Context, mc *agent.MiddlewareContext) (*agent.MiddlewareContext, error)
	AfterFunc      func(ctx context.Context, mc *agent.MiddlewareContext, result *agent.Result) (*agent.Result, error)
	OnErrorFunc    func(ctx context.Context, mc *agent.MiddlewareContext, err error) (*agent.Result, error)
}

// Name returns MiddlewareName.
func (m MiddlewareFuncs) Name() string { return m.MiddlewareName }

// Before calls BeforeFunc.
func (m MiddlewareFuncs) Before(ctx context.Context, mc *agent.MiddlewareContext) (*agent.MiddlewareContext, error) {
	if m.BeforeFunc == nil {
		return nil, nil
	}
	return m.BeforeFunc(ctx, mc)
}

// After calls AfterFunc.
func (m MiddlewareFuncs) After(ctx context.Context, mc *agent.MiddlewareContext, r *agent.Result) (*agent.Result, error) {
	if m.AfterFunc == nil {
		return r, nil
	}
	return m.AfterFunc(ctx, mc, r)
}

// OnError calls OnErrorFunc.
func (m MiddlewareFuncs) OnError(ctx context.Context, mc *agent.MiddlewareContext, err error) (*agent.Result, error) {
	if m.OnErrorFunc == nil {
		return nil, nil
	}
	return m.OnErrorFunc(ctx, mc, err)
}
