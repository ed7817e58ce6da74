package messaging

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/envelope"
)

// benchPayload is a 100-byte delta payload.
var benchPayload = []byte(`{"content":"` + strings.Repeat("x", 100-len(`{"content":""}`)) + `"}`)

// BenchmarkUAMP_DeltaThroughput measures deltas/s from a Handler to a
// Client on loopback, over SSE (HTTP/2, TLS 1.3) and WebSocket (TLS
// 1.3), for 100-byte payloads, with a window of 256 (ACK every 128).
// The baselines write the same delta bytes, length-prefixed, to a raw
// TCP connection on loopback in the same run: one write per delta, and
// through a 64 KiB buffer. Issue 6 target: ≥ 100,000 deltas/s.
func BenchmarkUAMP_DeltaThroughput(b *testing.B) {
	if len(benchPayload) != 100 {
		b.Fatalf("payload of %d bytes", len(benchPayload))
	}
	delta := appendDelta(nil, 123456, []byte(`"str-0123456789abcdef"`), time.Now(), envelope.DeltaChunk, benchPayload)
	rawTCP := func(b *testing.B, buffered bool) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		got := make(chan int, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				got <- 0
				return
			}
			defer c.Close()
			r := bufio.NewReaderSize(c, 64<<10)
			var hdr [4]byte
			buf := make([]byte, 1<<16)
			n := 0
			for {
				if _, err := io.ReadFull(r, hdr[:]); err != nil {
					got <- n
					return
				}
				if _, err := io.ReadFull(r, buf[:binary.BigEndian.Uint32(hdr[:])]); err != nil {
					got <- n
					return
				}
				n++
			}
		}()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		frame := appendFrame(nil, delta)
		var w io.Writer = c
		bw := bufio.NewWriterSize(c, 64<<10)
		if buffered {
			w = bw
		}
		b.SetBytes(int64(len(delta)))
		b.ResetTimer()
		for range b.N {
			if _, err := w.Write(frame); err != nil {
				b.Fatal(err)
			}
		}
		bw.Flush()
		c.Close()
		if n := <-got; n != b.N {
			b.Fatalf("read %d of %d", n, b.N)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deltas/s")
	}
	b.Run("tcp_write_per_delta", func(b *testing.B) { rawTCP(b, false) })
	b.Run("tcp_buffered", func(b *testing.B) { rawTCP(b, true) })
	for _, bc := range []struct {
		name string
		b    bool
	}{{"sse", false}, {"websocket", true}} {
		b.Run(bc.name, func(b *testing.B) {
			n := 0
			h := HandlerFunc(func(ctx context.Context, req *envelope.Envelope, s *Stream) error {
				for range n {
					if err := s.Send(ctx, envelope.DeltaChunk, benchPayload); err != nil {
						return err
					}
				}
				return nil
			})
			env := newTestEnv(b, h, nil)
			c := env.client(b, bc.b, nil)
			b.SetBytes(int64(len(delta)))
			b.ReportAllocs()
			n = b.N
			b.ResetTimer()
			req := ask("")
			req.DeltaWindow = 256
			reply, err := c.Ask(context.Background(), req)
			if err != nil {
				b.Fatal(err)
			}
			got := 0
			for d, err := range reply.Deltas() {
				if err != nil {
					b.Fatal(err)
				}
				if d.Type == envelope.DeltaChunk {
					got++
				}
			}
			b.StopTimer()
			if got != b.N {
				b.Fatalf("%d deltas of %d", got, b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deltas/s")
		})
	}
}
