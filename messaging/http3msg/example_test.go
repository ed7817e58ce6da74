package http3msg_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/messaging/http3msg"
)

// Example serves the built-in Echo agent over HTTP/3 (QUIC, client
// certificates) and asks it with the ordinary Client on an HTTP/3
// transport.
func Example() {
	ctx := context.Background()
	serverCert, _ := messaging.GenerateDevCert(nil)
	clientCert, _ := messaging.GenerateDevCert(&messaging.DevCertOptions{URIs: []string{"did:web:client.example"}})
	clientKey, _ := envelope.GenerateKey(envelope.EdDSA, "did:web:client.example#key-1")
	trusted, _ := envelope.NewKeySet(clientKey.Public())

	srv := messaging.NewServer(messaging.Echo, &messaging.Options{ID: "did:web:echo.example", Keys: trusted})
	defer srv.Close()
	udp, _ := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	defer udp.Close()
	hs := http3msg.NewServer(srv, messaging.TLSConfig(serverCert.TLS, clientCert.Pool()))
	go hs.Serve(udp)
	defer hs.Close()

	tr := http3msg.NewTransport(&tls.Config{RootCAs: serverCert.Pool(), Certificates: []tls.Certificate{clientCert.TLS}})
	defer tr.Close()
	client, _ := messaging.NewClient("https://"+udp.LocalAddr().String(), &messaging.ClientOptions{Key: clientKey, Transport: tr})
	req := envelope.New("did:web:client.example", []string{"did:web:echo.example"}, envelope.IntentAsk,
		envelope.Body{Type: "text/plain", Content: "Draw me a sheep"})
	reply, err := client.Ask(ctx, req) // POST /v1/messages over HTTP/3
	if err != nil {
		fmt.Println(err)
		return
	}
	for d, err := range reply.Deltas() { // GET /v1/stream/{id}: SSE over HTTP/3
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
