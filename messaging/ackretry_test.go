package messaging

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/envelope"
)

// loseACKs is a client transport on which the first lose ACK POSTs
// fail before they reach the server, as on a connection that a network
// failure closed under them.
type loseACKs struct {
	rt   http.RoundTripper
	lose atomic.Int64
	lost atomic.Int64
}

func (l *loseACKs) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		if bytes.Contains(body, []byte(`"intent":"progress"`)) && l.lose.Add(-1) >= 0 {
			l.lost.Add(1)
			return nil, errors.New("connection reset by peer (lost by the test)")
		}
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	return l.rt.RoundTrip(r)
}

// TestUAMP_5_LostACKsAreSentAgain: ACKs that fail on the way (the first
// two of a window of 16, the consumer ACKing every 8) are sent again, so
// the producer, waiting for window space, is not left waiting while the
// consumer waits for deltas: every delta arrives. Before, a failed ACK
// was dropped, and two in a row stalled the stream until the idle
// timeout (the load-balancer test's rare failure).
func TestUAMP_5_LostACKsAreSentAgain(t *testing.T) {
	const n = 64
	h := newCounter(n)
	env := newTestEnv(t, h, nil)
	lose := &loseACKs{rt: env.rawClient(&env.clientCert.TLS).Transport}
	lose.lose.Store(2)
	client := env.client(t, false, &ClientOptions{Transport: lose})
	// Far beyond the work: the stream takes milliseconds unless it stalls
	// (the server's idle timeout is a minute).
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := ask("")
	req.DeltaWindow = 16
	reply, err := client.Ask(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	idx, last := collect(t, reply, nil)
	checkSequence(t, idx, n)
	if last.Type != envelope.DeltaDone || last.Seq != n {
		t.Fatalf("final %+v", last)
	}
	if got := lose.lost.Load(); got != 2 {
		t.Fatalf("%d ACKs lost, want 2", got)
	}
}
