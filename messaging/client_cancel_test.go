package messaging

import (
	"context"
	"errors"
	"testing"

	"github.com/agentry-dev/agentry/envelope"
)

// TestUAMP_4_1_ClientCancelWithoutReply: Client.Cancel cancels a request
// by its envelope, without the Reply's connection (over WebSocket, on a
// fresh one): the producer stops and the stream ends with a cancel delta.
func TestUAMP_4_1_ClientCancelWithoutReply(t *testing.T) {
	for _, bc := range bindings() {
		t.Run(bc.name, func(t *testing.T) {
			h := newCounter(-1) // endless
			env := newTestEnv(t, h, nil)
			ctx := context.Background()
			c := env.client(t, bc.b, nil)
			reply, err := c.Ask(ctx, ask(""))
			if err != nil {
				t.Fatal(err)
			}
			_, last := collect(t, reply, func(d *envelope.Delta) {
				if d.Seq == 3 {
					if err := c.Cancel(ctx, reply.Request()); err != nil {
						t.Error(err)
					}
				}
			})
			if last.Type != envelope.DeltaCancel {
				t.Fatalf("final %s", last.Type)
			}
			if err := h.waitEnded(t); !errors.Is(err, errCancelled) {
				t.Fatalf("producer ended with %v", err)
			}
		})
	}
}

func TestClientKeyID(t *testing.T) {
	env := newTestEnv(t, Echo, nil)
	if got := env.client(t, false, nil).KeyID(); got != clientDID+"#key-1" {
		t.Errorf("KeyID = %q", got)
	}
}
