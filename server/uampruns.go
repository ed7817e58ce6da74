package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/messaging/uampagent"
	"github.com/agentry-dev/agentry/runs"
)

// agentPath is the did:web path under which each agent of Config.Agents
// is served over UAMP: the agent NAME of a server whose DID is D is
// D + ":agents:" + NAME, its signed manifest at
// /agents/NAME/.well-known/agent-manifest.json, listed in the server's
// hub.
const agentPath = ":agents:"

// maxDeltaText bounds the text of one chunk delta and the JSON of one
// progress delta, well inside a delta payload's limit.
const (
	maxDeltaText  = 16 << 10
	maxDeltaEvent = 256 << 10
)

// runHandler serves an agent over UAMP as governed runs: an ask (its
// text body is the input) starts a run of the agent, exactly as
// POST /v1/runs does, and streams the run's events (runs.Service.Events):
// the model's text as chunk deltas, every other event as a progress
// delta {"event": EVENT} — the first is run_started, with the run's
// request_id — and, when the run delivers, a done delta {"content":
// OUTPUT, "request_id": ID}. A run that fails safe ends the stream with
// error 5.00 naming its cause. A paused run keeps the stream open until
// an approver decides (the paused event lists its approvals).
//
// The run is durable and outlives the stream: a requester that cancels
// or goes away ends the stream, not the run, which goes on under
// governance (GET /v1/runs/{id}; POST /v1/runs/{id}/cancel stops it).
type runHandler struct {
	svc  *runs.Service
	name string
}

func (h *runHandler) ServeUAMP(ctx context.Context, req *envelope.Envelope, s *messaging.Stream) error {
	if _, _, err := uampagent.TextInput(req); err != nil {
		return err
	}
	run, err := h.svc.Start(ctx, &runs.StartParams{Agent: h.name, Input: req.Body.Content})
	if err != nil {
		if errors.Is(err, runs.Unavailable) {
			return envelope.NewError(envelope.CodeBusy, "the server is shutting down; retry later", err)
		}
		return err
	}
	for ev, err := range h.svc.Events(ctx, run.RequestID, 0) {
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return fmt.Errorf("run %s: %w", run.RequestID, err)
		}
		switch ev.Type {
		case runs.EventModelText:
			if err := sendText(ctx, s, ev.Text, ev.Unverified); err != nil {
				return err
			}
		case runs.EventEnded:
			if ev.Status != runs.Delivered {
				why := string(ev.Status)
				if ev.Error != nil {
					why = ev.Error.Code + ": " + ev.Error.Message
				} else if len(ev.Reasons) > 0 {
					why = string(ev.Reasons[0])
				}
				return envelope.NewError(envelope.CodeInternal, fmt.Sprintf("run %s failed safe (%s)", run.RequestID, why), nil)
			}
			done, _ := json.Marshal(map[string]string{"content": ev.Output, "request_id": run.RequestID})
			if len(done) > maxDeltaEvent {
				done, _ = json.Marshal(map[string]any{"request_id": run.RequestID, "truncated": true})
			}
			return s.Send(ctx, envelope.DeltaDone, done)
		default:
			b, err := json.Marshal(map[string]any{"event": ev})
			if err != nil || len(b) > maxDeltaEvent {
				b, _ = json.Marshal(map[string]any{"event": map[string]any{"type": ev.Type, "seq": ev.Seq, "request_id": ev.RequestID}, "truncated": true})
			}
			if err := s.Send(ctx, envelope.DeltaProgress, b); err != nil {
				return err
			}
		}
	}
	return context.Cause(ctx) // the events end only with the run or ctx
}

// sendText sends text as chunk deltas of at most maxDeltaText bytes,
// cut between runes.
func sendText(ctx context.Context, s *messaging.Stream, text string, unverified bool) error {
	for len(text) > 0 {
		n := min(len(text), maxDeltaText)
		for n < len(text) && !utf8.RuneStart(text[n]) {
			n--
		}
		b, _ := json.Marshal(struct {
			Content    string `json:"content"`
			Unverified bool   `json:"unverified,omitempty"`
		}{text[:n], unverified})
		if err := s.Send(ctx, envelope.DeltaChunk, b); err != nil {
			return err
		}
		text = text[n:]
	}
	return nil
}

// agentDID is the DID agent name is served at, under the server's did.
func agentDID(did, name string) string { return did + agentPath + name }

// agentManifestPath is where the signed manifest of agent name is served:
// under the did:web path of agentDID.
func agentManifestPath(name string) string {
	return "/agents/" + name + "/.well-known/agent-manifest.json"
}
