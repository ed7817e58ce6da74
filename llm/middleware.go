package llm

import (
	"context"
	"sync"
	"time"
)

// Middleware intercepts an LLMInstance's calls (UPP-1.3 §10). Every hook is
// optional. OnStart and OnRequest run in slice order; OnResponse, OnEnd and
// OnStreamEnd in reverse order; OnError on every middleware that has it.
// An error returned by a hook fails the call.
//
// OnToolCall and OnToolResult run concurrently for the calls of one round.
type Middleware struct {
	Name string
	// OnStart is called once when Generate or Stream starts.
	OnStart func(ctx context.Context, mc *MiddlewareContext) error
	// OnRequest is called before each provider call; mc.Request may be
	// modified.
	OnRequest func(ctx context.Context, mc *MiddlewareContext) error
	// OnResponse is called after each provider call with mc.Response set.
	OnResponse func(ctx context.Context, mc *MiddlewareContext) error
	// OnEnd is called once on success with mc.Turn set.
	OnEnd func(ctx context.Context, mc *MiddlewareContext) error
	// OnError is called once when the call fails.
	OnError func(ctx context.Context, mc *MiddlewareContext, err error)
	// OnStreamEvent may replace, expand or drop (nil or empty result) each
	// stream event; the events it returns pass to the next middleware.
	OnStreamEvent func(ctx context.Context, mc *MiddlewareContext, ev StreamEvent) []StreamEvent
	// OnStreamEnd is called when a stream completes, before OnEnd.
	OnStreamEnd func(ctx context.Context, mc *MiddlewareContext) error
	// OnToolCall is called before a known tool's call is considered.
	OnToolCall func(ctx context.Context, mc *MiddlewareContext, tool *Tool, args map[string]any)
	// OnToolResult is called with each result of a known tool.
	OnToolResult func(ctx context.Context, mc *MiddlewareContext, tool *Tool, result ToolResult)
}

// MiddlewareContext is shared by the hooks of one Generate or Stream call
// (UPP-1.3 §10.3).
type MiddlewareContext struct {
	Modality  Modality
	ModelID   string
	Provider  string
	Streaming bool
	// Request is the provider call about to be made (OnRequest) or just
	// made (OnResponse).
	Request *Request
	// Response is the provider's response (OnResponse).
	Response *Response
	// Turn is the result (OnEnd).
	Turn *Turn
	// State is shared by all middleware of the call; use namespaced keys
	// ("myMiddleware:count").
	State     *sync.Map
	StartTime time.Time
	EndTime   time.Time
}

type middlewareRun struct {
	mws []Middleware
	mc  *MiddlewareContext
}

func newMiddlewareRun(l *LLMInstance, streaming bool) *middlewareRun {
	if len(l.opts.Middleware) == 0 {
		return nil
	}
	return &middlewareRun{mws: l.opts.Middleware, mc: &MiddlewareContext{
		Modality: ModalityLLM, ModelID: l.opts.Model.ModelID, Provider: l.provider,
		Streaming: streaming, State: &sync.Map{}, StartTime: time.Now(),
	}}
}

func (r *middlewareRun) forward(ctx context.Context, pick func(Middleware) func(context.Context, *MiddlewareContext) error) error {
	if r == nil {
		return nil
	}
	for _, m := range r.mws {
		if f := pick(m); f != nil {
			if err := f(ctx, r.mc); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *middlewareRun) reverse(ctx context.Context, pick func(Middleware) func(context.Context, *MiddlewareContext) error) error {
	if r == nil {
		return nil
	}
	for i := len(r.mws) - 1; i >= 0; i-- {
		if f := pick(r.mws[i]); f != nil {
			if err := f(ctx, r.mc); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *middlewareRun) start(ctx context.Context) error {
	return r.forward(ctx, func(m Middleware) func(context.Context, *MiddlewareContext) error { return m.OnStart })
}

func (r *middlewareRun) request(ctx context.Context, req *Request) error {
	if r == nil {
		return nil
	}
	r.mc.Request, r.mc.Response = req, nil
	return r.forward(ctx, func(m Middleware) func(context.Context, *MiddlewareContext) error { return m.OnRequest })
}

func (r *middlewareRun) response(ctx context.Context, resp *Response) error {
	if r == nil {
		return nil
	}
	r.mc.Response = resp
	return r.reverse(ctx, func(m Middleware) func(context.Context, *MiddlewareContext) error { return m.OnResponse })
}

func (r *middlewareRun) end(ctx context.Context, t *Turn) error {
	if r == nil {
		return nil
	}
	r.mc.Turn, r.mc.EndTime = t, time.Now()
	if r.mc.Streaming {
		if err := r.reverse(ctx, func(m Middleware) func(context.Context, *MiddlewareContext) error { return m.OnStreamEnd }); err != nil {
			return err
		}
	}
	return r.reverse(ctx, func(m Middleware) func(context.Context, *MiddlewareContext) error { return m.OnEnd })
}

func (r *middlewareRun) onError(ctx context.Context, err error) {
	if r == nil {
		return
	}
	r.mc.EndTime = time.Now()
	for _, m := range r.mws {
		if m.OnError != nil {
			m.OnError(ctx, r.mc, err)
		}
	}
}

func (r *middlewareRun) toolCall(ctx context.Context, t *Tool, args map[string]any) {
	if r == nil {
		return
	}
	for _, m := range r.mws {
		if m.OnToolCall != nil {
			m.OnToolCall(ctx, r.mc, t, args)
		}
	}
}

func (r *middlewareRun) toolResult(ctx context.Context, t *Tool, res ToolResult) {
	if r == nil {
		return
	}
	for _, m := range r.mws {
		if m.OnToolResult != nil {
			m.OnToolResult(ctx, r.mc, t, res)
		}
	}
}

// wrapEmit passes events through every OnStreamEvent hook in order.
func (r *middlewareRun) wrapEmit(ctx context.Context, emit func(StreamEvent)) func(StreamEvent) {
	if r == nil {
		return emit
	}
	var hooks []func(context.Context, *MiddlewareContext, StreamEvent) []StreamEvent
	for _, m := range r.mws {
		if m.OnStreamEvent != nil {
			hooks = append(hooks, m.OnStreamEvent)
		}
	}
	if len(hooks) == 0 {
		return emit
	}
	var mu sync.Mutex // hooks see events one at a time, in emission order
	return func(ev StreamEvent) {
		mu.Lock()
		evs := []StreamEvent{ev}
		for _, h := range hooks {
			var next []StreamEvent
			for _, e := range evs {
				next = append(next, h(ctx, r.mc, e)...)
			}
			evs = next
		}
		mu.Unlock()
		for _, e := range evs {
			emit(e)
		}
	}
}
