package govern_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/google/go-cmp/cmp"
)

// streamed is what the consumer of a governed agent's Stream saw.
type streamed struct {
	events []agent.Event
	res    *agent.Result
	err    error
}

func streamAgent(a *agent.Agent, prompt string) streamed {
	s := a.Stream(context.Background(), llm.Text(prompt), nil)
	var out streamed
	for ev, err := range s.Events() {
		if err != nil {
			break
		}
		out.events = append(out.events, ev)
	}
	out.res, out.err = s.Result()
	return out
}

// delta is a text delta as the consumer saw it: its text, whether it was
// marked unverified, and its stream_index (-1 without one).
type delta struct {
	Text       string
	Unverified bool
	Index      int
}

func (s streamed) deltas(t *testing.T, requestID string) []delta {
	t.Helper()
	var out []delta
	for _, ev := range s.events {
		if ev.Source != agent.SourceUPP || ev.UPP.Type != llm.TextDelta {
			continue
		}
		d := delta{Text: ev.UPP.Delta.Text, Unverified: ev.Unverified, Index: -1}
		if st, ok := ev.Metadata[govern.EventStreaming].(*govern.Streaming); ok {
			d.Index = st.StreamIndex
			if st.ChunkID == "" || st.IsFinal {
				t.Errorf("delta %q: streaming block %+v", d.Text, st)
			}
		}
		if ev.Unverified != (ev.Metadata[govern.EventRequestID] == requestID) {
			t.Errorf("delta %q: unverified %v, metadata %v (run %s)", d.Text, ev.Unverified, ev.Metadata, requestID)
		}
		out = append(out, d)
	}
	return out
}

// afterLastStepEnd reports whether every text delta comes after the last
// step_end, i.e. was sent from the end of the run (its verification), not
// while the model spoke.
func (s streamed) afterLastStepEnd() bool {
	last := -1
	for i, ev := range s.events {
		if ev.Source == agent.SourceUAP && ev.UAP.Type == agent.EventStepEnd {
			last = i
		}
	}
	for i, ev := range s.events {
		if ev.Source == agent.SourceUPP && ev.UPP.Type == llm.TextDelta && i < last {
			return false
		}
	}
	return true
}

func saveTool(calls *atomic.Int32) llm.Tool {
	return govern.Declare(llm.Tool{Name: "save", Description: "saves", Parameters: llm.Schema{"type": "object"},
		Run: func(context.Context, map[string]any) (any, error) {
			calls.Add(1)
			return "saved", nil
		}}, govern.Declaration{Tier: govern.WriteLowRisk})
}

func answer(chunks ...string) scripted.Step {
	return scripted.Step{Text: strings.Join(chunks, ""), Chunks: chunks}
}

func unverified(index int, texts ...string) []delta {
	var out []delta
	for i, s := range texts {
		out = append(out, delta{Text: s, Unverified: true, Index: index + i})
	}
	return out
}

func verified(texts ...string) []delta {
	var out []delta
	for _, s := range texts {
		out = append(out, delta{Text: s, Index: -1})
	}
	return out
}

// TestUAICP_4_2_StreamedAgentMarksOrHoldsDeliverContent: partial deliver
// content of a streamed governed agent is either streamed read-only and
// marked unverified (Event.Unverified, the request ID and the chunk's
// streaming block in Event.Metadata, stream_index 0, 1, … across repairs),
// or — once the run has written — held back until the run delivers. A run
// that ends in fail_safe never shows its consumer unmarked content; a run
// that delivers still streams.
func TestUAICP_4_2_StreamedAgentMarksOrHoldsDeliverContent(t *testing.T) {
	sourced := govern.CheckVerifier("mentions-source", func(_ context.Context, in govern.VerifyInput) []govern.Check {
		if strings.Contains(string(in.Output), "source") {
			return []govern.Check{{CheckID: "SOURCE", Result: govern.CheckPass}}
		}
		return []govern.Check{{CheckID: "SOURCE", Result: govern.CheckFail, Details: "cite the source"}}
	})
	tests := []struct {
		name   string
		steps  []scripted.Step
		fail   []govern.Reason // the run ends in fail_safe with these
		want   []delta
		afterd bool // every delta comes after the last step_end (released by deliver)
	}{
		{
			name:  "verification passes",
			steps: []scripted.Step{answer("it is 42, ", "source: ", "the guide")},
			want:  unverified(0, "it is 42, ", "source: ", "the guide"),
		},
		{
			name:  "verification fails then repairs exhausted",
			steps: []scripted.Step{answer("it is ", "42"), answer("really ", "42")},
			fail:  []govern.Reason{govern.VerificationFailed, govern.RepairsExhausted},
			want:  unverified(0, "it is ", "42", "really ", "42"), // marked, never confirmed
		},
		{
			name:  "verification fails then the repair delivers",
			steps: []scripted.Step{answer("it is ", "42"), answer("42, ", "source: the guide")},
			want:  unverified(0, "it is ", "42", "42, ", "source: the guide"),
		},
		{
			name: "wrote before answering then delivers",
			steps: []scripted.Step{{ToolCalls: []llm.ToolCall{call("c1", "save", map[string]any{})}},
				answer("saved, ", "source: ", "the log")},
			want:   verified("saved, ", "source: ", "the log"),
			afterd: true,
		},
		{
			name: "wrote before answering then repairs exhausted",
			steps: []scripted.Step{{ToolCalls: []llm.ToolCall{call("c1", "save", map[string]any{})}},
				answer("saved ", "it"), answer("saved ", "it again")},
			fail: []govern.Reason{govern.VerificationFailed, govern.RepairsExhausted},
			want: nil, // held back, then dropped
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newAgentFixture(t, func(o *govern.Options) {
				o.MaxRepairs = 1
				o.Verifiers = []govern.Verifier{sourced}
				o.Classes = []govern.TaskClass{{Name: "answer", RequiredVerifiers: []string{"mentions-source"}}}
			})
			var saves atomic.Int32
			m := scripted.NewT(t, tt.steps...)
			a := newGovernedAgent(t, f.g, m, govern.AgentOptions{TaskClass: "answer"}, saveTool(&saves))
			s := streamAgent(a, "what is it?")

			var env *govern.Envelope
			if tt.fail != nil {
				wantReasons(t, s.err, tt.fail...)
				env = govErr(t, s.err).Envelope
			} else {
				if s.err != nil {
					t.Fatal(s.err)
				}
				env, _ = govern.EnvelopeOf(s.res.State)
				if env == nil || env.Outcome != govern.Success {
					t.Fatalf("envelope = %+v", env)
				}
				checkWire(t, env)
			}
			got := s.deltas(t, env.RequestID)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("text deltas (-want +got):\n%s", diff)
			}
			if tt.afterd && !s.afterLastStepEnd() {
				t.Error("deltas held back for deliver were sent before the run's steps ended")
			}
			if tt.fail == nil {
				var text strings.Builder // the delivered answer was streamed (last)
				for _, d := range got {
					text.WriteString(d.Text)
				}
				if !strings.HasSuffix(text.String(), s.res.Turn.Text()) {
					t.Errorf("streamed %q, delivered %q", text.String(), s.res.Turn.Text())
				}
			}
			// The envelope that ends the run is the is_final chunk, after
			// the chunks streamed.
			chunks := 0
			for _, d := range got {
				if d.Unverified {
					chunks++
				}
			}
			switch st := env.Streaming; {
			case chunks == 0 && st != nil:
				t.Errorf("no chunk streamed, final envelope streaming %+v", st)
			case chunks > 0 && (st == nil || !st.IsFinal || st.StreamIndex != chunks):
				t.Errorf("final envelope streaming %+v, want is_final at index %d", st, chunks)
			}
		})
	}
}
