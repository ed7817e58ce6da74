package cli

import (
	"math"

	"github.com/agentry-dev/agentry/uicontrol"
)

// UIAP rate limiting in agentry serve (§16: implementations SHOULD
// support rate limiting for incoming messages; docs/spec-notes/uiap.md,
// "Rate limiting"): a token bucket per session, on by default. A UI agent
// sends a few requests a second (an LLM step, a tool call, a capability
// read); 50 a second with bursts of 100 leaves a scripted client
// (agentry uiap connect) ample room and stops a flood after the burst.
const (
	defaultUIAPRate  = 50.0
	uiapRateUsage    = "UIAP requests a second each session may send, sustained (a token bucket; beyond it requests are answered rate_limited, retryable, with retryAfterMs); 0: no limit"
	uiapBurstUsage   = "UIAP requests each session may send at once (the bucket's size); 0: twice --uiap-rate"
	uiapBurstPerRate = 2
)

// uiapRateLimit is the per-session rate limit of --uiap-rate and
// --uiap-burst.
func uiapRateLimit(f *serveFlags) (uicontrol.RateLimit, error) {
	switch {
	case math.IsNaN(f.uiapRate) || math.IsInf(f.uiapRate, 0) || f.uiapRate < 0:
		return uicontrol.RateLimit{}, usageError("--uiap-rate %v: want a number of requests a second, 0 or more", f.uiapRate)
	case f.uiapBurst < 0:
		return uicontrol.RateLimit{}, usageError("--uiap-burst %d: want 0 or more", f.uiapBurst)
	case f.uiapRate == 0:
		return uicontrol.RateLimit{}, nil
	}
	burst := f.uiapBurst
	if burst == 0 {
		burst = int(min(math.Ceil(f.uiapRate*uiapBurstPerRate), math.MaxInt32))
	}
	return uicontrol.RateLimit{Rate: f.uiapRate, Burst: burst}, nil
}
