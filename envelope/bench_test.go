package envelope_test

import (
	"crypto/ed25519"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/envelope"
)

// benchRequest returns a typical request, an ask whose body makes its
// signed wire form 1 KiB; full adds every optional member of §4 (the
// sample envelope, with context, cap_token and nested ext).
func benchRequest(b *testing.B, k *envelope.PrivateKey, full bool) *envelope.Envelope {
	e := &envelope.Envelope{
		ID: "urn:uuid:6f1c2a4e-8d3b-4c1a-9e2f-0a1b2c3d4e5f", TS: "2025-07-10T13:37:05.000Z",
		From: sampleFrom, To: []string{"did:web:worker.example"}, Intent: envelope.IntentAsk,
		StreamID: "str-42", DeltaWindow: 64,
		Body: envelope.Body{Type: "text/markdown"},
		Ext:  map[string]any{"x-trace": "b3:80f198ee56343ba864fe8b2a57d3eff7"},
	}
	if full {
		e = sampleEnvelope()
	}
	if err := envelope.Sign(e, k); err != nil {
		b.Fatal(err)
	}
	e.Body.Content += strings.Repeat("x", 1024-len(mustJSON(b, e)))
	if err := envelope.Sign(e, k); err != nil {
		b.Fatal(err)
	}
	if n := len(mustJSON(b, e)); n != 1024 {
		b.Fatalf("envelope of %d bytes", n)
	}
	return e
}

// BenchmarkSignVerify measures sign+verify of a 1 KiB envelope next to
// raw crypto/ed25519 sign+verify of the same canonical bytes, in one run
// (target: envelope_EdDSA ≤ 1.5× raw_ed25519). envelope_* signs
// and verifies a typical request (canonical form, JCS, SHA-256, JWS);
// envelope_EdDSA_full does so for an envelope with every member of §4;
// open_EdDSA verifies the wire bytes instead (strict decoding and schema
// validation included); ratio_EdDSA interleaves raw and envelope
// operations and reports the ratio of their medians, which holds up on a
// loaded machine.
func BenchmarkSignVerify(b *testing.B) {
	edk := edKey(b, sampleKID)
	priv := edk.Signer().(ed25519.PrivateKey)
	pub := priv.Public().(ed25519.PublicKey)
	raw := func(c []byte) {
		sig := ed25519.Sign(priv, c)
		if !ed25519.Verify(pub, c, sig) {
			b.Fatal("verify")
		}
	}
	b.Run("raw_ed25519", func(b *testing.B) {
		c, err := benchRequest(b, edk, false).Canonical()
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(c)))
		b.ReportAllocs()
		for b.Loop() {
			raw(c)
		}
	})
	signVerify := func(b *testing.B, e *envelope.Envelope, k *envelope.PrivateKey, keys envelope.KeyResolver) {
		if err := envelope.Sign(e, k); err != nil {
			b.Fatal(err)
		}
		if err := envelope.Verify(ctx, e, keys); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		alg  envelope.Algorithm
		full bool
	}{{"envelope_EdDSA", envelope.EdDSA, false}, {"envelope_ES256", envelope.ES256, false}, {"envelope_EdDSA_full", envelope.EdDSA, true}} {
		k := newKey(b, c.alg, sampleKID)
		keys := keySet(b, k)
		b.Run(c.name, func(b *testing.B) {
			e := benchRequest(b, k, c.full)
			b.SetBytes(1024)
			b.ReportAllocs()
			for b.Loop() {
				signVerify(b, e, k, keys)
			}
		})
	}
	b.Run("open_EdDSA", func(b *testing.B) {
		e := benchRequest(b, edk, false)
		keys := keySet(b, edk)
		b.SetBytes(1024)
		b.ReportAllocs()
		for b.Loop() {
			if err := envelope.Sign(e, edk); err != nil {
				b.Fatal(err)
			}
			if _, err := envelope.Open(ctx, mustJSON(b, e), keys); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, full := range []bool{false, true} {
		name := "ratio_EdDSA"
		if full {
			name += "_full"
		}
		b.Run(name, func(b *testing.B) {
			e := benchRequest(b, edk, full)
			c, _ := e.Canonical()
			keys := keySet(b, edk)
			var rawT, envT []time.Duration
			for b.Loop() {
				t0 := time.Now()
				raw(c)
				t1 := time.Now()
				signVerify(b, e, edk, keys)
				t2 := time.Now()
				rawT, envT = append(rawT, t1.Sub(t0)), append(envT, t2.Sub(t1))
			}
			slices.Sort(rawT)
			slices.Sort(envT)
			m := len(rawT) / 2
			b.ReportMetric(float64(rawT[m].Nanoseconds()), "raw-ns")
			b.ReportMetric(float64(envT[m].Nanoseconds()), "envelope-ns")
			b.ReportMetric(float64(envT[m])/float64(rawT[m]), "x-raw")
		})
	}
}
