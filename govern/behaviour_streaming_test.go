package govern_test

import (
	"testing"

	"github.com/agentry-dev/agentry/govern"
)

// TestUAICP_4_2_Streaming: before any write, chunks are streamed with
// stream_index 0, 1, …, unique chunk_ids and metadata
// "uaicp.unverified": true; after a write Chunk refuses; the envelope
// that closes the run — Deliver's or Fail's — is the one is_final chunk,
// with the next index.
func TestUAICP_4_2_Streaming(t *testing.T) {
	for _, end := range []govern.Phase{govern.Deliver, govern.FailSafe} {
		t.Run(string(end), func(t *testing.T) {
			g := newGov(t, govern.Options{})
			r := start(t, g, govern.RunOptions{})
			seen := map[string]bool{}
			var chunks []govern.Envelope
			for i, content := range []any{"Hel", map[string]any{"partial": "lo"}, "!"} {
				if i == 1 {
					invoke(t, r, readOnly("lookup"), govern.Call{ID: "c1"}, &tool{}) // reads do not stop the stream
				}
				env, ok := r.Chunk(content)
				if !ok {
					t.Fatalf("Chunk %d refused", i)
				}
				checkWire(t, env)
				chunks = append(chunks, env)
			}
			for i, env := range chunks {
				s := env.Streaming
				if s == nil || s.StreamIndex != i || s.IsFinal || s.ChunkID == "" || seen[s.ChunkID] {
					t.Errorf("chunk %d streaming %+v", i, s)
					continue
				}
				seen[s.ChunkID] = true
				if env.Metadata[govern.MetaUnverified] != true || env.Outcome != govern.Pending || env.Metadata[govern.MetaContent] == nil {
					t.Errorf("chunk %d: unverified %v outcome %s content %v", i, env.Metadata[govern.MetaUnverified], env.Outcome, env.Metadata[govern.MetaContent])
				}
				if env.RequestID != r.RequestID() || env.TraceID != r.TraceID() {
					t.Errorf("chunk %d of another run", i)
				}
			}
			invoke(t, r, lowRisk("save"), govern.Call{ID: "w1"}, &tool{})
			if env, ok := r.Chunk("after the write"); ok {
				t.Fatalf("Chunk after a write: %+v", env)
			}
			var final *govern.Envelope
			if end == govern.Deliver {
				final = verifyPass(t, r, "Hello!")
			} else {
				var err error
				if final, err = r.Fail(bg, "stop", govern.VerificationFailed); err != nil {
					t.Fatal(err)
				}
				checkWire(t, final)
			}
			s := final.Streaming
			if s == nil || !s.IsFinal || s.StreamIndex != len(chunks) || s.ChunkID == "" || seen[s.ChunkID] {
				t.Fatalf("final envelope streaming %+v, want is_final with index %d", s, len(chunks))
			}
			if final.Metadata[govern.MetaUnverified] != nil {
				t.Error("the final envelope is marked unverified")
			}
			if _, ok := r.Chunk("late"); ok {
				t.Error("Chunk after the end")
			}
		})
	}
	t.Run("no chunks", func(t *testing.T) {
		g := newGov(t, govern.Options{})
		r := start(t, g, govern.RunOptions{})
		if env := verifyPass(t, r, "x"); env.Streaming != nil {
			t.Errorf("a run that streamed nothing ends with streaming %+v", env.Streaming)
		}
	})
}
