package llm

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
)

// LoggingOptions configures Logging.
type LoggingOptions struct {
	// Logger receives the records; nil uses slog.Default().
	Logger *slog.Logger
	// Level is the level of every record but failures, which are logged
	// at Error. The zero value is Info.
	Level slog.Level
	// Content adds tool arguments and results to the records. Off by
	// default: they may hold personal data.
	Content bool
}

// Logging returns middleware that logs the lifecycle of every call with
// log/slog (UPP-1.3 §10.7 loggingMiddleware): start, each provider
// response (stop reason, usage), tool calls and results, the end (usage,
// cycles, duration) and failures. Configuration, including API keys, is
// never logged.
func Logging(options *LoggingOptions) Middleware {
	var opts LoggingOptions
	if options != nil {
		opts = *options
	}
	logger := func() *slog.Logger {
		if opts.Logger != nil {
			return opts.Logger
		}
		return slog.Default()
	}
	base := func(mc *MiddlewareContext) []any {
		return []any{"provider", mc.Provider, "model", mc.ModelID, "streaming", mc.Streaming}
	}
	return Middleware{
		Name: "logging",
		OnStart: func(ctx context.Context, mc *MiddlewareContext) error {
			logger().Log(ctx, opts.Level, "llm start", base(mc)...)
			return nil
		},
		OnResponse: func(ctx context.Context, mc *MiddlewareContext) error {
			r := mc.Response
			logger().Log(ctx, opts.Level, "llm response", append(base(mc), "stop_reason", r.StopReason,
				"input_tokens", r.Usage.InputTokens, "output_tokens", r.Usage.OutputTokens,
				"tool_calls", len(r.Message.ToolCalls))...)
			return nil
		},
		OnToolCall: func(ctx context.Context, mc *MiddlewareContext, tool *Tool, args map[string]any) {
			attrs := append(base(mc), "tool", tool.Name)
			if opts.Content {
				attrs = append(attrs, "arguments", args)
			}
			logger().Log(ctx, opts.Level, "llm tool call", attrs...)
		},
		OnToolResult: func(ctx context.Context, mc *MiddlewareContext, tool *Tool, res ToolResult) {
			attrs := append(base(mc), "tool", tool.Name, "tool_call_id", res.ToolCallID, "is_error", res.IsError)
			if opts.Content {
				attrs = append(attrs, "result", ResultText(res.Result))
			}
			logger().Log(ctx, opts.Level, "llm tool result", attrs...)
		},
		OnEnd: func(ctx context.Context, mc *MiddlewareContext) error {
			t := mc.Turn
			logger().Log(ctx, opts.Level, "llm end", append(base(mc), "cycles", t.Cycles,
				"input_tokens", t.Usage.InputTokens, "output_tokens", t.Usage.OutputTokens,
				"duration", mc.EndTime.Sub(mc.StartTime))...)
			return nil
		},
		OnError: func(ctx context.Context, mc *MiddlewareContext, err error) {
			logger().Log(ctx, slog.LevelError, "llm error", append(base(mc), "error", err)...)
		},
	}
}

// ParsedObjectOptions configures ParsedObject. The zero value parses both
// kinds of fragments.
type ParsedObjectOptions struct {
	SkipObjects   bool // leave object_delta events alone
	SkipToolCalls bool // leave tool_call_delta events alone
}

// ParsedObject returns middleware that sets EventDelta.Parsed on
// object_delta and tool_call_delta events to the value parsed so far from
// the fragments of that object or call (UPP-1.3 §10.7
// parsedObjectMiddleware), using ParsePartialJSON. Events whose
// accumulated text is not yet usable carry a nil Parsed.
func ParsedObject(options *ParsedObjectOptions) Middleware {
	var opts ParsedObjectOptions
	if options != nil {
		opts = *options
	}
	return Middleware{
		Name: "parsed-object",
		OnStreamEvent: func(_ context.Context, mc *MiddlewareContext, ev StreamEvent) []StreamEvent {
			var key, fragment string
			switch {
			case ev.Type == ObjectDelta && !opts.SkipObjects:
				key, fragment = "parsed-object:object:"+strconv.Itoa(ev.Index), ev.Delta.Text
			case ev.Type == ToolCallDelta && !opts.SkipToolCalls:
				id := ev.Delta.ToolCallID
				if id == "" {
					id = "#" + strconv.Itoa(ev.Index)
				}
				key, fragment = "parsed-object:call:"+id, ev.Delta.ArgumentsJSON
			case ev.Type == MessageStart:
				clearPrefix(mc.State, "parsed-object:")
				return []StreamEvent{ev}
			default:
				return []StreamEvent{ev}
			}
			acc, _ := mc.State.LoadOrStore(key, &strings.Builder{})
			b := acc.(*strings.Builder)
			b.WriteString(fragment)
			if v, ok := parsePartialJSON(b.String()); ok {
				ev.Delta.Parsed = v
			}
			return []StreamEvent{ev}
		},
	}
}

func clearPrefix(m *sync.Map, prefix string) {
	m.Range(func(k, _ any) bool {
		if s, ok := k.(string); ok && strings.HasPrefix(s, prefix) {
			m.Delete(k)
		}
		return true
	})
}
