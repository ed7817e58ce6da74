package uicontrol_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/internal/uiapwire"
	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/google/go-cmp/cmp"
)

// addSeeds adds the spec examples and the messages of the golden
// transcript.
func addSeeds(f *testing.F) {
	f.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", "spec", "*.json"))
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	t, err := os.ReadFile(filepath.Join("testdata", "golden", "transcript.txt"))
	if err != nil {
		f.Fatal(err)
	}
	for _, block := range strings.Split(string(t), "\n\n") {
		if _, msg, ok := strings.Cut(block, "\n"); ok {
			f.Add([]byte(msg))
		}
	}
	f.Add([]byte(validMessage))
	for _, s := range []string{
		`{}`, `null`, `[]`, `{"payload":null}`,
		`{"uiap":"0.1","kind":"error","type":"error","id":"e","ts":"2026-03-26T13:00:00Z","source":{"role":"app","id":"a"},"payload":{}}`,
		`{"uiap":"0.1","kind":"event","type":"x","id":"\ud800","ts":"2026-03-26T13:00:00.1234567891Z","source":{"role":"a","id":"b"},"payload":{"<":"&"},"ext":{"x.a":[{}]},"seq":9007199254740993}`,
		`{"uiap":"0.1","uiap":"0.1"}`,
		`{"uiap":"0.1","kind":"request","type":"t","id":"i","ts":"2026-03-26T13:00:00Z","source":{"role":"a","id":"b"},"payload":{},"ext":{"payload":1}}`,
	} {
		f.Add([]byte(s))
	}
}

// FuzzDecodeEnvelope checks DecodeEnvelope on arbitrary bytes: it never
// panics; a refusal is an invalid_message *Error and no envelope; an
// accepted envelope encodes to a message it accepts again, with the same
// fields (ts at millisecond precision), and that encoding is a fixpoint.
func FuzzDecodeEnvelope(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := uicontrol.DecodeEnvelope(b)
		if err != nil {
			var ue *uicontrol.Error
			if !errors.As(err, &ue) || ue.Code != uicontrol.CodeInvalidMessage || e != nil {
				t.Fatalf("refusal %v (%T) with %v", err, err, e)
			}
			return
		}
		if len(e.Payload) == 0 || e.Payload[0] != '{' {
			t.Fatalf("accepted a payload that is not an object: %s", e.Payload)
		}
		enc, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		e2, err := uicontrol.DecodeEnvelope(enc)
		if err != nil {
			t.Fatalf("own encoding refused: %v\n%s", err, enc)
		}
		norm := func(e *uicontrol.Envelope) *uicontrol.Envelope {
			c := *e
			c.TS = c.TS.Truncate(time.Millisecond)
			c.Payload = compact(t, c.Payload)
			c.Ext = nil
			return &c
		}
		if d := cmp.Diff(norm(e), norm(e2)); d != "" {
			t.Fatalf("round trip (-first +second):\n%s", d)
		}
		if len(e.Ext) != len(e2.Ext) {
			t.Fatalf("ext %v became %v", e.Ext, e2.Ext)
		}
		enc2, _ := json.Marshal(e2)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not a fixpoint:\n%s\n%s", enc, enc2)
		}
	})
}

// compact returns b as encoding/json writes a RawMessage: compact, with
// <, > and & escaped.
func compact(t *testing.T, b []byte) []byte {
	c, err := json.Marshal(json.RawMessage(b))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// FuzzDecodeCapabilityDocument checks DecodeCapabilityDocument: it never
// panics; a refusal is an invalid_message *Error; an accepted document
// keeps its members through encode and decode, and encodes the same
// again.
func FuzzDecodeCapabilityDocument(f *testing.F) {
	f.Add([]byte(docJSON))
	for _, s := range []string{`{}`, `{"roles":null}`, `{"actions":1,"x":{"y":[true,"\u003c"]}}`, `{"a":1,"a":2}`, `{"risk":{}}`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d, err := uicontrol.DecodeCapabilityDocument(b)
		if err != nil {
			var ue *uicontrol.Error
			if !errors.As(err, &ue) || ue.Code != uicontrol.CodeInvalidMessage || d != nil {
				t.Fatalf("refusal %v (%T) with %v", err, err, d)
			}
			return
		}
		enc, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		d2, err := uicontrol.DecodeCapabilityDocument(enc)
		if err != nil {
			t.Fatalf("own encoding refused: %v\n%s", err, enc)
		}
		// Members keep their JSON values (encoding/json may escape
		// differently: compare the values).
		var m1, m2 map[string]any
		_ = json.Unmarshal(b, &m1)
		_ = json.Unmarshal(enc, &m2)
		for k, v := range m1 {
			if v == nil {
				delete(m1, k)
			}
		}
		if diff := cmp.Diff(m1, m2); diff != "" {
			t.Fatalf("members changed (-input +encoded):\n%s", diff)
		}
		enc2, _ := json.Marshal(d2)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not a fixpoint:\n%s\n%s", enc, enc2)
		}
	})
}

// FuzzAppMessage sends arbitrary bytes to an App in an active session and
// checks what comes back: at most one answer, a valid message correlated
// to the input's id when it has one, never a panic; the session then
// still answers a ping unless the input ended it.
func FuzzAppMessage(f *testing.F) {
	addSeeds(f)
	f.Add([]byte(`{"uiap":"0.1","kind":"request","type":"x.echo","id":"r","ts":"2026-03-26T13:00:00Z","source":{"role":"a","id":"b"},"payload":{"a":1}}`))
	f.Add([]byte(`{"uiap":"0.1","kind":"request","type":"session.terminate","id":"t","ts":"2026-03-26T13:00:00Z","source":{"role":"a","id":"b"},"payload":{}}`))
	f.Add([]byte(`{"uiap":"0.1","kind":"request","type":"session.interrupt","id":"t","ts":"2026-03-26T13:00:00Z","source":{"role":"a","id":"b"},"payload":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		app := uicontrol.NewApp(&uicontrol.AppOptions{Profiles: []string{"web@0.1"}, MaxMessageSize: 4 << 10, Logger: discard})
		defer app.Close()
		app.Handle("x.echo", func(ctx context.Context, s *uicontrol.AppSession, req *uicontrol.Envelope) (*uicontrol.Reply, error) {
			return &uicontrol.Reply{Type: "x.echoed", Payload: req.Payload}, nil
		})
		appEnd, agentEnd := uicontrol.Pair()
		defer agentEnd.Close()
		go app.Serve(ctx, appEnd)
		send := func(s string) {
			if err := agentEnd.Send(ctx, []byte(s)); err != nil {
				t.Fatal(err)
			}
		}
		recv := func() *uicontrol.Envelope {
			m, err := agentEnd.Receive(ctx)
			if errors.Is(err, uicontrol.ErrClosed) {
				return nil
			}
			if err != nil {
				t.Fatal(err)
			}
			e, err := uicontrol.DecodeEnvelope(m)
			if err != nil {
				t.Fatalf("app sent an invalid message: %v\n%s", err, m)
			}
			return e
		}
		send(`{"uiap":"0.1","kind":"request","type":"session.initialize","id":"fuzz-init","ts":"2026-03-26T13:00:00Z","source":{"role":"agent","id":"f"},"payload":{"supportedVersions":["0.1"],"peer":{"role":"agent"}}}`)
		if e := recv(); e == nil || e.Type != uiapwire.TypeInitialized {
			t.Fatalf("handshake: %+v", e)
		}
		if err := agentEnd.Send(ctx, b); err != nil {
			t.Fatal(err)
		}
		// The input may have ended the session: then the ping finds the
		// connection closed and the loop below sees the close.
		ping := `{"uiap":"0.1","kind":"request","type":"session.ping","id":"fuzz-ping","ts":"2026-03-26T13:00:00Z","source":{"role":"agent","id":"f"},"payload":{}}`
		if err := agentEnd.Send(ctx, []byte(ping)); err != nil && !errors.Is(err, uicontrol.ErrClosed) {
			t.Fatal(err)
		}
		in, _ := uicontrol.DecodeEnvelope(b)
		answers := 0
		for {
			e := recv()
			if e == nil {
				return // the input terminated the session
			}
			if e.CorrelationID == "fuzz-ping" && e.Type == uiapwire.TypePong {
				break
			}
			if in != nil && in.ID == "fuzz-ping" {
				continue // the input took the ping's id: anything goes
			}
			if e.Kind != uicontrol.KindEvent {
				answers++
			}
			if in != nil && e.CorrelationID != in.ID {
				t.Fatalf("answer correlated to %q, input id %q", e.CorrelationID, in.ID)
			}
		}
		if answers > 1 {
			t.Fatalf("%d answers to one message", answers)
		}
	})
}

var discard = slog.New(slog.DiscardHandler)
