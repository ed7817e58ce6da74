package messaging

import (
	"fmt"
	"net/http"

	"github.com/agentry-dev/agentry/envelope"
)

// Authenticator names the principal a request is authenticated as
// (§6.2): the identity an envelope's from must equal. An error, or an
// empty principal, refuses the request with 4.01 (an *envelope.Error is
// passed on as it is). It is called concurrently. The default
// (Options.Authenticate) is mTLS with a CA; ClientKeys is mTLS with
// trusted keys, and BearerJWT takes OAuth bearer tokens.
type Authenticator func(r *http.Request) (principal string, err error)

// clientCertificate authenticates a request by its TLS client
// certificate (mTLS, §6.2): the certificate must have been verified by
// the server's tls.Config (TLSConfig with client CAs) and carry exactly
// one URI subject alternative name, which is the principal (such as
// did:web:client.example). One URI, so that which identity a
// certificate grants is never a choice.
func clientCertificate(r *http.Request) (string, error) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.VerifiedChains[0]) == 0 {
		return "", envelope.NewError(envelope.CodeUnauthenticated, "a verified TLS client certificate is required", nil)
	}
	leaf := r.TLS.VerifiedChains[0][0]
	if len(leaf.URIs) != 1 {
		return "", envelope.NewError(envelope.CodeUnauthenticated, "the client certificate must name exactly one URI",
			fmt.Errorf("client certificate has %d URI SANs", len(leaf.URIs)))
	}
	return leaf.URIs[0].String(), nil
}
