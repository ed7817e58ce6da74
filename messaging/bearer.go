package messaging

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/envelope"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// BearerOptions configures BearerJWT.
type BearerOptions struct {
	// Issuer is the authorization server: a token's iss must equal it.
	Issuer string
	// Audience is this server (its ID or URL): a token's aud must
	// contain it.
	Audience string
	// Keys are the issuer's signing keys (its JWK set), looked up by the
	// token's kid. As everywhere in UAMP, only EdDSA and ES256 are
	// accepted.
	Keys *envelope.KeySet
	// Leeway is the clock skew allowed on exp, nbf and iat; default 30 s.
	Leeway time.Duration
	// AnyType accepts tokens whose typ header is not at+jwt (RFC 9068
	// §2.1 requires it of JWT access tokens; some issuers write "JWT").
	AnyType bool
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// maxBearerSize bounds the token read from the Authorization header.
const maxBearerSize = 8 << 10

// BearerJWT authenticates a request by an OAuth 2.1 bearer access token
// (§6.2): "Authorization: Bearer <JWT>" whose signature verifies with a
// key of opts.Keys (EdDSA or ES256; alg none, HMAC and RSA are refused),
// whose typ is at+jwt (RFC 9068) unless AnyType, and whose claims say
// iss = Issuer, aud ∋ Audience, an exp in the future and no nbf or iat in
// the future (within Leeway). The principal is the token's sub, which an
// envelope's from must then equal. Every refusal is 4.01.
func BearerJWT(options *BearerOptions) (Authenticator, error) {
	var opts BearerOptions
	if options != nil {
		opts = *options
	}
	if opts.Issuer == "" || opts.Audience == "" || opts.Keys == nil {
		return nil, errors.New("messaging: BearerJWT needs an issuer, an audience and the issuer's keys")
	}
	if opts.Leeway <= 0 {
		opts.Leeway = 30 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	algs := []jose.SignatureAlgorithm{jose.EdDSA, jose.ES256}
	refuse := func(msg string, cause error) (string, error) {
		return "", envelope.NewError(envelope.CodeUnauthenticated, msg, cause)
	}
	return func(r *http.Request) (string, error) {
		h := r.Header.Values("Authorization")
		if len(h) != 1 {
			return refuse("one Authorization: Bearer header is required", nil)
		}
		scheme, token, ok := strings.Cut(h[0], " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" || len(token) > maxBearerSize {
			return refuse("the Authorization header is not a bearer token", nil)
		}
		tok, err := jwt.ParseSigned(token, algs)
		if err != nil {
			return refuse("the bearer token is not an EdDSA or ES256 JWT", err)
		}
		if len(tok.Headers) != 1 {
			return refuse("the bearer token has more than one signature", nil)
		}
		hdr := tok.Headers[0]
		if typ, _ := hdr.ExtraHeaders[jose.HeaderType].(string); !opts.AnyType && !strings.EqualFold(typ, "at+jwt") && !strings.EqualFold(typ, "application/at+jwt") {
			return refuse("the bearer token is not a JWT access token (typ at+jwt)", nil)
		}
		key, ok := opts.Keys.Key(hdr.KeyID)
		if !ok {
			return refuse(fmt.Sprintf("the bearer token's key %q is not the issuer's", hdr.KeyID), envelope.ErrKeyNotFound)
		}
		if string(key.Algorithm()) != hdr.Algorithm {
			return refuse("the bearer token's algorithm is not its key's", nil)
		}
		var c jwt.Claims
		if err := tok.Claims(key.Key(), &c); err != nil {
			return refuse("the bearer token's signature does not verify", err)
		}
		if c.Expiry == nil {
			return refuse("the bearer token has no exp", nil)
		}
		if err := c.ValidateWithLeeway(jwt.Expected{Issuer: opts.Issuer, AnyAudience: jwt.Audience{opts.Audience}, Time: opts.Now()}, opts.Leeway); err != nil {
			return refuse("the bearer token is not valid here and now", err)
		}
		if c.Subject == "" {
			return refuse("the bearer token names no subject", nil)
		}
		return c.Subject, nil
	}, nil
}
