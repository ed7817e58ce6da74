package discovery_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging/discovery"
)

// A server publishes its signed manifest, hub and did:web document; a
// client that knows nothing but the URL verifies them before it trusts
// the endpoint.
func ExampleDiscover() {
	srv := httptest.NewUnstartedServer(nil)
	did := "did:web:" + strings.ReplaceAll(srv.Listener.Addr().String(), ":", "%3A")
	key, _ := envelope.GenerateKey(envelope.EdDSA, did+"#key-1")
	h, err := discovery.Handler(&discovery.ServerOptions{DID: did, Key: key, BaseURL: "https://" + srv.Listener.Addr().String(),
		Manifest: envelope.Manifest{Agent: "uamp/1.0", Description: "echo agent", Intents: []string{"ask"}, BodyTypes: []string{"text/plain"}, Auth: []string{"mtls"}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv.Config.Handler = h
	srv.StartTLS()
	defer srv.Close()

	d, err := discovery.Discover(context.Background(), srv.URL, &discovery.ClientOptions{HTTPClient: srv.Client()})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(d.Manifest.Description, d.Manifest.Intents, len(d.Hub.Manifests))
	// Output: echo agent [ask] 1
}
