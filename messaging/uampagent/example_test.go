package uampagent_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"strings"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/messaging/uampagent"
)

// ExampleNewHandler serves an agent over UAMP: the client's ask runs
// it, and the run streams back as progress deltas (the agent's events)
// and chunk deltas (its text), then done. Client certificates are made
// with the key that signs the envelopes (KeyCertificate), which the
// server trusts (ClientKeys).
func ExampleNewHandler() {
	ctx := context.Background()
	model := scripted.New(scripted.Step{Text: "Here is your sheep."})
	a, _ := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: model.Ref()}})

	serverCert, _ := messaging.GenerateDevCert(nil)
	clientKey, _ := envelope.GenerateKey(envelope.EdDSA, "did:web:client.example#key-1")
	trusted, _ := envelope.NewKeySet(clientKey.Public())
	srv := messaging.NewServer(uampagent.NewHandler(a, nil), &messaging.Options{
		ID: "did:web:agent.example", Keys: trusted, Authenticate: messaging.ClientKeys(trusted, nil)})
	defer srv.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	hs := messaging.NewHTTPServer(srv, messaging.RequestClientCertificates(messaging.TLSConfig(serverCert.TLS, nil)))
	go hs.ServeTLS(ln, "", "")
	defer hs.Close()

	clientCert, _ := messaging.KeyCertificate(clientKey, "did:web:client.example", 0)
	client, _ := messaging.NewClient("https://"+ln.Addr().String(), &messaging.ClientOptions{
		Key: clientKey, TLS: &tls.Config{RootCAs: serverCert.Pool(), Certificates: []tls.Certificate{clientCert}}})
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
			var done uampagent.Done
			json.Unmarshal(d.Payload, &done)
			fmt.Printf("chunks: %q\ndone: %q\n", text.String(), done.Content)
		}
	}
	// Output:
	// chunks: "Here is your sheep."
	// done: "Here is your sheep."
}

// ExampleNewTool makes an agent served over UAMP a tool of a local agent:
// the local agent asks it, and its reply is the tool's result. Both
// agents run on scripted models here.
func ExampleNewTool() {
	ctx := context.Background()
	remote, _ := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: scripted.New(scripted.Step{Text: "Sheep eat grass."}).Ref()}})

	serverCert, _ := messaging.GenerateDevCert(nil)
	clientKey, _ := envelope.GenerateKey(envelope.EdDSA, "did:web:client.example#key-1")
	trusted, _ := envelope.NewKeySet(clientKey.Public())
	srv := messaging.NewServer(uampagent.NewHandler(remote, nil), &messaging.Options{
		ID: "did:web:agent.example", Keys: trusted, Authenticate: messaging.ClientKeys(trusted, nil)})
	defer srv.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	hs := messaging.NewHTTPServer(srv, messaging.RequestClientCertificates(messaging.TLSConfig(serverCert.TLS, nil)))
	go hs.ServeTLS(ln, "", "")
	defer hs.Close()
	clientCert, _ := messaging.KeyCertificate(clientKey, "did:web:client.example", 0)
	client, _ := messaging.NewClient("https://"+ln.Addr().String(), &messaging.ClientOptions{
		Key: clientKey, TLS: &tls.Config{RootCAs: serverCert.Pool(), Certificates: []tls.Certificate{clientCert}}})

	ask, err := uampagent.NewTool(client, "did:web:agent.example", &uampagent.ToolOptions{
		Name: "ask_expert", Description: "Asks the sheep expert a question.",
		Parameters: llm.MustSchema(`{"type":"object","properties":{"prompt":{"type":"string"}},"required":["prompt"]}`)})
	if err != nil {
		fmt.Println(err)
		return
	}
	model := scripted.New(
		scripted.Step{ToolCalls: []llm.ToolCall{{ToolCallID: "1", ToolName: "ask_expert", Arguments: map[string]any{"prompt": "What do sheep eat?"}}}},
		scripted.Step{Text: "The expert says sheep eat grass."},
	)
	local, _ := agent.New(&agent.Options{LLMOptions: llm.LLMOptions{Model: model.Ref(), Tools: []llm.Tool{ask}}})
	res, err := local.Generate(ctx, llm.Text("What do sheep eat?"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("tool result:", res.Turn.ToolExecutions[0].Result)
	fmt.Println(res.Turn.Text())
	// Output:
	// tool result: Sheep eat grass.
	// The expert says sheep eat grass.
}
