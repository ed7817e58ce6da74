package envelope_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentry-dev/agentry/envelope"
)

// exampleKey is a fixed Ed25519 key, so that the examples' output is
// stable (EdDSA signatures are deterministic).
func exampleKey() *envelope.PrivateKey {
	seed := bytes.Repeat([]byte{7}, ed25519.SeedSize)
	k, err := envelope.NewPrivateKey(ed25519.NewKeyFromSeed(seed), "did:web:client.example#key-1")
	if err != nil {
		panic(err)
	}
	return k
}

func ExampleSign() {
	key := exampleKey()
	e := envelope.New("did:web:client.example", []string{"did:web:calc.example"}, envelope.IntentAsk,
		envelope.Body{Type: "text/plain", Content: "2+2"})
	// Fixed here so that the output is stable; New sets a fresh id and
	// the current time.
	e.ID, e.TS = "urn:uuid:11111111-1111-4111-8111-111111111111", "2025-07-10T10:00:00.000Z"

	if err := envelope.Sign(e, key); err != nil {
		fmt.Println(err)
		return
	}
	wire, _ := json.Marshal(e)
	fmt.Println(string(wire))
	// Output:
	// {"id":"urn:uuid:11111111-1111-4111-8111-111111111111","ts":"2025-07-10T10:00:00.000Z","from":"did:web:client.example","to":["did:web:calc.example"],"intent":"ask","body":{"type":"text/plain","content":"2+2"},"sig":"eyJhbGciOiJFZERTQSIsImtpZCI6ImRpZDp3ZWI6Y2xpZW50LmV4YW1wbGUja2V5LTEifQ..SuADRHq5engkYqeuIbT0JjGznUqaWv5IV_NehHApE0hTEJHe5LcHZsHin4f5J-qrUtfGFJdl8mCMN72cKXQ_AA"}
}

func ExampleVerify() {
	ctx := context.Background()
	key := exampleKey()
	// The receiver trusts the sender's public key, as a JWK set.
	trusted, _ := envelope.NewKeySet(key.Public())

	e := envelope.New("did:web:client.example", []string{"did:web:calc.example"}, envelope.IntentAsk,
		envelope.Body{Type: "text/plain", Content: "2+2"})
	envelope.Sign(e, key)
	wire, _ := json.Marshal(e)

	// On the wire: Open decodes strictly and verifies.
	got, err := envelope.Open(ctx, wire, trusted)
	fmt.Println(got.Body.Content, err)

	// Any change to a signed member breaks the signature: 4.01, which a
	// binding answers with HTTP 401 and an error envelope.
	e.Body.Content = "2+3"
	err = envelope.Verify(ctx, e, trusted)
	wireErr := envelope.AsError(err)
	fmt.Println(errors.Is(err, envelope.CodeUnauthenticated), wireErr.HTTPStatus())
	body, _ := json.Marshal(wireErr)
	fmt.Println(string(body))
	// Output:
	// 2+2 <nil>
	// true 401
	// {"code":"4.01","message":"signature does not verify","retry":false}
}
