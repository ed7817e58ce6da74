package llm

// TokenUsage is token accounting (UPP-1.3 §7.2). Providers that do not
// report cache figures leave them 0.
type TokenUsage struct {
	InputTokens      int
	OutputTokens     int
	TotalTokens      int // InputTokens + OutputTokens
	CacheReadTokens  int
	CacheWriteTokens int
	// Cycles breaks a turn's usage down per provider call; nil on the usage
	// of a single call.
	Cycles []CycleUsage
}

// CycleUsage is the usage of one provider call within a turn.
type CycleUsage struct {
	InputTokens      int
	OutputTokens     int
	CacheReadTokens  int
	CacheWriteTokens int
}

// Add returns the sum of u and v (per-cycle breakdowns are concatenated).
func (u TokenUsage) Add(v TokenUsage) TokenUsage {
	out := TokenUsage{
		InputTokens:      u.InputTokens + v.InputTokens,
		OutputTokens:     u.OutputTokens + v.OutputTokens,
		CacheReadTokens:  u.CacheReadTokens + v.CacheReadTokens,
		CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
	}
	out.TotalTokens = out.InputTokens + out.OutputTokens
	if u.Cycles != nil || v.Cycles != nil {
		out.Cycles = append(append(make([]CycleUsage, 0, len(u.Cycles)+len(v.Cycles)), u.Cycles...), v.Cycles...)
	}
	return out
}

// aggregate sums per-call usages into a turn's usage with its breakdown.
func aggregate(calls []TokenUsage) TokenUsage {
	out := TokenUsage{Cycles: make([]CycleUsage, 0, len(calls))}
	for _, c := range calls {
		out.InputTokens += c.InputTokens
		out.OutputTokens += c.OutputTokens
		out.CacheReadTokens += c.CacheReadTokens
		out.CacheWriteTokens += c.CacheWriteTokens
		out.Cycles = append(out.Cycles, CycleUsage{
			InputTokens: c.InputTokens, OutputTokens: c.OutputTokens,
			CacheReadTokens: c.CacheReadTokens, CacheWriteTokens: c.CacheWriteTokens,
		})
	}
	out.TotalTokens = out.InputTokens + out.OutputTokens
	return out
}

// Turn is the complete result of one Generate or Stream call (UPP-1.3 §7).
type Turn struct {
	// Messages holds everything this call produced, in order, starting
	// with the new input messages (not the history passed in).
	Messages []Message
	// Response is the last assistant message.
	Response *AssistantMessage
	// ToolExecutions lists executed calls in completion order.
	ToolExecutions []ToolExecution
	Usage          TokenUsage
	// Cycles counts provider calls (1 + tool rounds).
	Cycles int
	// Data is the parsed structured output when LLMOptions.Structure was
	// set, nil otherwise. It is not validated against the schema.
	Data any
}

// Text returns the response's text, or "" when there is no response.
func (t *Turn) Text() string {
	if t == nil || t.Response == nil {
		return ""
	}
	return t.Response.Text()
}
