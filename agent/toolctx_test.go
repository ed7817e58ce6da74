package agent

import (
	"context"
	"errors"
	"testing"
	"time"
)

type otherKey struct{}

// A step's tool context behaves as context.WithValue(ctx, toolContextKey{},
// tc) would: the ToolContext under its key, the parent's values, deadline,
// cancellation and cause through it, and contexts derived from it
// cancelled with it.
func TestToolCtxIsContextWithValue(t *testing.T) {
	cause := errors.New("stopped")
	deadline := time.Now().Add(time.Hour)
	for _, name := range []string{"WithValue", "toolCtx"} {
		t.Run(name, func(t *testing.T) {
			parent, cancel := context.WithCancelCause(context.WithValue(context.Background(), otherKey{}, "v"))
			parent, stop := context.WithDeadline(parent, deadline)
			defer stop()
			var ctx context.Context
			var tc *ToolContext
			if name == "WithValue" {
				tc = &ToolContext{Step: 3}
				ctx = context.WithValue(parent, toolContextKey{}, tc)
			} else {
				c := &toolCtx{Context: parent}
				c.tc.Step = 3
				ctx, tc = c, &c.tc
			}
			if got, ok := ToolContextFrom(ctx); !ok || got != tc {
				t.Errorf("ToolContextFrom = %p, %v; want %p", got, ok, tc)
			}
			if _, ok := ToolContextFrom(parent); ok {
				t.Error("the parent has a ToolContext")
			}
			if v := ctx.Value(otherKey{}); v != "v" {
				t.Errorf("parent's value = %v", v)
			}
			if d, ok := ctx.Deadline(); !ok || !d.Equal(deadline) {
				t.Errorf("deadline %v %v", d, ok)
			}
			child, stopChild := context.WithCancel(ctx)
			defer stopChild()
			after := make(chan struct{})
			context.AfterFunc(ctx, func() { close(after) })
			if ctx.Err() != nil || child.Err() != nil {
				t.Fatal("cancelled early")
			}
			cancel(cause)
			<-ctx.Done()
			<-child.Done()
			<-after
			if !errors.Is(ctx.Err(), context.Canceled) || context.Cause(ctx) != cause || context.Cause(child) != cause {
				t.Errorf("err %v, cause %v, child's cause %v", ctx.Err(), context.Cause(ctx), context.Cause(child))
			}
		})
	}
}
