package grpcmsg

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
)

// benchPayload is a 100-byte delta payload, as in messaging's benchmark.
var benchPayload = []byte(`{"content":"` + strings.Repeat("x", 100-len(`{"content":""}`)) + `"}`)

// BenchmarkUAMP_DeltaThroughput measures deltas/s from a Handler to a
// client on loopback over every binding in one run — SSE (HTTP/2, TLS
// 1.3), WebSocket (TLS 1.3), gRPC (TLS 1.3), SSE over HTTP/3 (QUIC) —
// for 100-byte payloads
// with a window of 256 (ACK every 128), next to the baseline of
// messaging's benchmark: the same delta bytes, length-prefixed, written
// to a raw TCP connection on loopback, one write per delta.
func BenchmarkUAMP_DeltaThroughput(b *testing.B) {
	if len(benchPayload) != 100 {
		b.Fatalf("payload of %d bytes", len(benchPayload))
	}
	delta := []byte(`{"delta_seq":123456,"stream_id":"str-0123456789abcdef","ts":"2025-07-10T10:00:00.000Z","type":"chunk","payload":` + string(benchPayload) + `}`)
	b.Run("tcp_write_per_delta", func(b *testing.B) {
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
		frame := binary.BigEndian.AppendUint32(nil, uint32(len(delta)))
		frame = append(frame, delta...)
		b.SetBytes(int64(len(delta)))
		b.ResetTimer()
		for range b.N {
			if _, err := c.Write(frame); err != nil {
				b.Fatal(err)
			}
		}
		c.Close()
		if n := <-got; n != b.N {
			b.Fatalf("read %d of %d", n, b.N)
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "deltas/s")
	})
	n := 0
	h := messaging.HandlerFunc(func(ctx context.Context, req *envelope.Envelope, s *messaging.Stream) error {
		for range n {
			if err := s.Send(ctx, envelope.DeltaChunk, benchPayload); err != nil {
				return err
			}
		}
		return nil
	})
	env := newTestEnv(b, h, nil)
	for _, bc := range env.everyBinding() {
		b.Run(strings.ToLower(bc.name), func(b *testing.B) {
			b.SetBytes(int64(len(delta)))
			b.ReportAllocs()
			n = b.N
			req := ask("")
			req.DeltaWindow = 256
			b.ResetTimer()
			reply, err := bc.ask(b, context.Background(), req, nil)
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
