package envelope

import (
	"context"
	"encoding/json"
)

// Manifest is an agent manifest (§8, schema A.3 as corrected; closed),
// served at /.well-known/agent-manifest.json as a JWS (SignManifest).
type Manifest struct {
	// Agent is the protocol version the agent speaks, "uamp/1.<minor>".
	Agent       string   `json:"agent"`
	Description string   `json:"description"`
	Intents     []string `json:"intents"`
	BodyTypes   []string `json:"body_types"`
	// Auth lists "oauth2" and/or "mtls".
	Auth   []string `json:"auth"`
	Limits Limits   `json:"limits"`
}

// Limits are a manifest's limits; a zero field is absent.
type Limits struct {
	MaxBodyKB int64 `json:"max_body_kb,omitempty"`
	// RateLPH is the rate limit, in envelopes per hour.
	RateLPH int64 `json:"rate_lph,omitempty"`
}

// MarshalJSON writes the manifest; a nil list is written as [] (the
// members are required).
func (m Manifest) MarshalJSON() ([]byte, error) {
	type plain Manifest
	p := plain(m)
	for _, l := range []*[]string{&p.Intents, &p.BodyTypes, &p.Auth} {
		if *l == nil {
			*l = []string{}
		}
	}
	return json.Marshal(p)
}

// ManifestMediaType is the media type of a signed manifest (§8, §11).
const ManifestMediaType = "application/manifest+jws"

// SignManifest returns m as a compact JWS (§8): the payload is the JCS of
// m, the protected header {"alg","kid"} as for envelopes.
func SignManifest(m *Manifest, key *PrivateKey) (string, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	c, err := canonicalize(b)
	if err != nil {
		return "", err
	}
	return key.sign(c, false)
}

// OpenManifest verifies a signed manifest, a compact JWS whose key keys
// resolves for signer (the identity the manifest is expected from, such
// as the did:web of its host), and decodes its payload (DecodeManifest).
// A bad signature is an *Error with code 4.01, a bad manifest 4.00.
func OpenManifest(ctx context.Context, jws, signer string, keys KeyResolver) (*Manifest, error) {
	s, err := parseCompactJWS(jws)
	if err != nil {
		return nil, err
	}
	if s.Detached() {
		return nil, unauthenticated("a signed manifest carries its payload", nil)
	}
	if err := verifyJWS(ctx, s, jws, nil, signer, keys); err != nil {
		return nil, err
	}
	return DecodeManifest(s.Payload)
}
