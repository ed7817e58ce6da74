package grpcmsg

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/messaging/grpcmsg/internal/uampv1"
	"github.com/agentry-dev/agentry/messaging/internal/binding"
)

// frameCarrier is a binding.Carrier whose one call delivers the
// records of given frames, then ends; it cannot reconnect.
type frameCarrier struct{ frames []*uampv1.Frame }

func (c *frameCarrier) Send(context.Context, []byte) error { return nil }
func (c *frameCarrier) Close() error                       { return nil }
func (c *frameCarrier) Reconnect(context.Context) error {
	return envelope.NewError(envelope.CodeBadRequest, "no reconnection", nil)
}

func (c *frameCarrier) Receive(ctx context.Context, deliver func([]byte) bool) error {
	frames := c.frames
	c.frames = nil
	for _, f := range frames {
		recs, err := serverRecords(f)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			if !deliver(rec) {
				return nil
			}
		}
	}
	return errCallEnded
}

// FuzzExchangeFrames decodes two frames as gRPC would and reads them as
// both ends do: the server takes one envelope from a client's frame or
// refuses it with 4.00; a Reply reading the records of a server's frames
// yields deltas of its stream numbered 0, 1, … with nothing after a
// final one, and otherwise ends with an error.
func FuzzExchangeFrames(f *testing.F) {
	fixtures()
	delta := func(seq, typ string) []byte {
		return []byte(`{"delta_seq":` + seq + `,"stream_id":"s","ts":"2025-07-10T10:00:00Z","type":"` + typ + `","payload":{"i":1}}`)
	}
	frame := func(m *uampv1.Frame) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		return b
	}
	deltas := func(ds ...[]byte) []byte {
		return frame(&uampv1.Frame{Kind: &uampv1.Frame_Deltas{Deltas: &uampv1.Deltas{Delta: ds}}})
	}
	errEnv := envelope.NewErrorEnvelope(serverDID, []string{clientDID}, "", envelope.NewError(envelope.CodeBusy, "", nil))
	envelope.Sign(errEnv, serverKey)
	f.Add(deltas(delta("0", "chunk"), delta("1", "chunk")), deltas(delta("2", "done")))
	f.Add(deltas(delta("0", "chunk"), delta("2", "chunk")), []byte{})
	f.Add(deltas(delta("0", "done"), delta("1", "chunk")), deltas(delta("0", "chunk")))
	f.Add(frame(envelopeFrame(signed(f, errEnv, serverKey))), []byte{0x12, 0x00})
	f.Add([]byte{0x0a, 0x02, '{', '}'}, []byte{0xff})
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var frames []*uampv1.Frame
		for _, raw := range [][]byte{a, b} {
			var m uampv1.Frame
			if proto.Unmarshal(raw, &m) != nil {
				continue
			}
			frames = append(frames, &m)
			// The server's reading of a client's frame.
			env, err := clientEnvelope(&m)
			if err != nil {
				if e := (*envelope.Error)(nil); !errors.As(err, &e) || e.Code != envelope.CodeBadRequest {
					t.Fatalf("refusal %v", err)
				}
			} else if len(env) == 0 || !bytes.Equal(env, m.GetEnvelope()) {
				t.Fatalf("envelope %q of %v", env, &m)
			}
			// What was decoded encodes to the same frame.
			again, err := proto.Marshal(&m)
			if err != nil {
				t.Fatal(err)
			}
			var m2 uampv1.Frame
			if err := proto.Unmarshal(again, &m2); err != nil || !proto.Equal(&m, &m2) {
				t.Fatalf("round trip: %v", err)
			}
		}
		// A Reply reading the frames as a server's.
		mc, err := messaging.NewClient("https://server.example", &messaging.ClientOptions{Key: clientKey, MaxReconnects: 1, ReconnectDelay: time.Nanosecond})
		if err != nil {
			t.Fatal(err)
		}
		req := ask("x")
		req.StreamID = "s"
		r, err := binding.AskOver(mc, context.Background(), req, func(context.Context, []byte) (binding.Carrier, error) {
			return &frameCarrier{frames: frames}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		reply := r.(*messaging.Reply)
		next, final := int64(0), false
		for d, err := range reply.Deltas() {
			if err != nil {
				break
			}
			if final || d.Seq != next || d.StreamID != "s" {
				t.Fatalf("delta %+v after %d (final %v)", d, next, final)
			}
			next++
			final = d.Type.Final()
		}
	})
}
