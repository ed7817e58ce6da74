package messaging_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/messaging"
)

// ExampleAgentHandler serves an agent over UAMP: the client's ask runs
// it, and the run streams back as progress deltas (the agent's events)
// and chunk deltas (its text), then done. Client certificates are made
// with the key that signs the envelopes (KeyCertificate), which the
// server trusts (ClientKeys).
func ExampleAgentHandler() {
	ctx := context.Background()
	model := scripted.New(scripted.Step{Text: "Here is your sheep."})
	a, _ := agent.New(agent.Options{LLMOptions: llm.LLMOptions{Model: model.Ref()}})

	serverCert, _ := messaging.GenerateDevCert(nil)
	clientKey, _ := envelope.GenerateKey(envelope.EdDSA, "did:web:client.example#key-1")
	trusted, _ := envelope.NewKeySet(clientKey.Public())
	srv := messaging.NewServer(messaging.AgentHandler(a, nil), &messaging.Options{
		ID: "did:web:agent.example", Keys: trusted, Authenticate: messaging.ClientKeys(trusted, nil)})
	defer srv.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	hs := messaging.NewHTTPServer(srv, messaging.RequestClientCertificates(messaging.TLSConfig(serverCert.TLS, nil)))
	go hs.ServeTLS(ln, "", "")
	defer hs.Close()

	clientCert, _ := messaging.KeyCertificate(clientKey, "did:web:client.example", 0)
	client, _ := messaging.NewClient("https://"+ln.Addr().String(), &messaging.ClientOptions{
		Key: clientKey, TLS: messaging.ClientTLSConfig(serverCert.Pool(), &clientCert)})
	reply, err := client.Ask(ctx, envelope.New("did:web:client.example", []string{"did:web:agent.example"},
		envelope.IntentAsk, envelope.Body{Type: "text/plain", Content: "Draw me a sheep"}))
	if err != nil {
		fmt.Println(err)
		return
	}
	var text strings.Builder
	for d, err := range reply.Deltas() {
		if err != nil {
			fmt.Println(err)
			return
		}
		switch d.Type {
		case envelope.DeltaChunk:
			var p struct{ Content string }
			json.Unmarshal(d.Payload, &p)
			text.WriteString(p.Content)
		case envelope.DeltaDone:
			var done messaging.AgentDone
			json.Unmarshal(d.Payload, &done)
			fmt.Printf("chunks: %q\ndone: %q\n", text.String(), done.Content)
		}
	}
	// Output:
	// chunks: "Here is your sheep."
	// done: "Here is your sheep."
}
