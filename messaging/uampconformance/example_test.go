package uampconformance_test

import (
	"context"
	"fmt"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging/uampconformance"
)

// Example runs the suite against a server that trusts key and prints
// one line per check, then the summary — what agentry conformance uamp
// does.
func Example() {
	key, _ := envelope.GenerateKey(envelope.EdDSA, "") // in practice: a key the server trusts
	rep := uampconformance.Run(context.Background(), &uampconformance.Options{
		BaseURL:            "https://127.0.0.1:8443",
		Key:                key,
		InsecureSkipVerify: true, // a development server on loopback
	})
	for _, r := range rep.Results {
		fmt.Println(r)
	}
	fmt.Printf("%d passed, %d failed\n", rep.Passed(), rep.Failed())
}
