package messaging_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
)

// Example serves the built-in Echo agent over TLS 1.3 with client
// certificates, and asks it over SSE.
func Example() {
	ctx := context.Background()
	// Identities: a development certificate for the server, one naming
	// the client's DID, and the key the client signs envelopes with.
	serverCert, _ := messaging.GenerateDevCert(nil)
	clientCert, _ := messaging.GenerateDevCert(&messaging.DevCertOptions{URIs: []string{"did:web:client.example"}})
	clientKey, _ := envelope.GenerateKey(envelope.EdDSA, "did:web:client.example#key-1")
	trusted, _ := envelope.NewKeySet(clientKey.Public())

	srv := messaging.NewServer(messaging.Echo, &messaging.Options{ID: "did:web:echo.example", Keys: trusted})
	defer srv.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	hs := messaging.NewHTTPServer(srv, messaging.TLSConfig(serverCert.TLS, clientCert.Pool()))
	go hs.ServeTLS(ln, "", "")
	defer hs.Close()

	client, _ := messaging.NewClient("https://"+ln.Addr().String(), &messaging.ClientOptions{
		Key: clientKey,
		TLS: &tls.Config{RootCAs: serverCert.Pool(), Certificates: []tls.Certificate{clientCert.TLS}},
	})
	req := envelope.New("did:web:client.example", []string{"did:web:echo.example"}, envelope.IntentAsk,
		envelope.Body{Type: "text/plain", Content: "Draw me a sheep"})
	reply, err := client.Ask(ctx, req) // signs, POSTs, 202 + Location
	if err != nil {
		fmt.Println(err)
		return
	}
	for d, err := range reply.Deltas() { // follows the SSE stream, ACKing
		if err != nil {
			fmt.Println(err)
			return
		}
		var p struct{ Content string }
		json.Unmarshal(d.Payload, &p)
		fmt.Println(d.Seq, d.Type, p.Content)
	}
	// Output:
	// 0 chunk Draw me a sheep
	// 1 done
}
