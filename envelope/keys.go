package envelope

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	jose "github.com/go-jose/go-jose/v4"
)

// Algorithm is a JWS algorithm envelopes may be signed with: EdDSA
// (Ed25519) or ES256 (ECDSA P-256 with SHA-256), and nothing else (§6.3,
// DESIGN §5).
type Algorithm string

// The two algorithms of §6.3.
const (
	EdDSA Algorithm = "EdDSA"
	ES256 Algorithm = "ES256"
)

// Valid reports whether a is EdDSA or ES256.
func (a Algorithm) Valid() bool { return a == EdDSA || a == ES256 }

// PrivateKey is a signing key with its kid: an Ed25519 or P-256 private
// key. It is safe for concurrent use.
type PrivateKey struct {
	kid string
	alg Algorithm
	key crypto.Signer // ed25519.PrivateKey or *ecdsa.PrivateKey

	once   sync.Once
	signer jose.Signer
	err    error
}

// PublicKey is a verification key with its kid: an Ed25519 or P-256
// public key.
type PublicKey struct {
	kid string
	alg Algorithm
	key crypto.PublicKey // ed25519.PublicKey or *ecdsa.PublicKey
}

// GenerateKey returns a new private key for alg. An empty kid becomes
// the key's RFC 7638 thumbprint (SHA-256, base64url).
func GenerateKey(alg Algorithm, kid string) (*PrivateKey, error) {
	switch alg {
	case EdDSA:
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		return NewPrivateKey(k, kid)
	case ES256:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		return NewPrivateKey(k, kid)
	}
	return nil, fmt.Errorf("envelope: algorithm %q is not EdDSA or ES256", alg)
}

// NewPrivateKey wraps an ed25519.PrivateKey or a P-256 *ecdsa.PrivateKey.
// An empty kid becomes the key's thumbprint.
func NewPrivateKey(key crypto.Signer, kid string) (*PrivateKey, error) {
	alg, err := algorithmOf(key)
	if err != nil {
		return nil, err
	}
	pub, err := NewPublicKey(key.Public(), kid)
	if err != nil {
		return nil, err
	}
	return &PrivateKey{kid: pub.kid, alg: alg, key: key}, nil
}

// NewPublicKey wraps an ed25519.PublicKey or a P-256 *ecdsa.PublicKey. An
// empty kid becomes the key's thumbprint.
func NewPublicKey(key crypto.PublicKey, kid string) (*PublicKey, error) {
	alg, err := algorithmOf(key)
	if err != nil {
		return nil, err
	}
	if kid == "" {
		tp, err := (&jose.JSONWebKey{Key: key}).Thumbprint(crypto.SHA256)
		if err != nil {
			return nil, fmt.Errorf("envelope: key thumbprint: %w", err)
		}
		kid = base64.RawURLEncoding.EncodeToString(tp)
	}
	return &PublicKey{kid: kid, alg: alg, key: key}, nil
}

// algorithmOf returns the algorithm of an Ed25519 or P-256 key, public or
// private.
func algorithmOf(key any) (Algorithm, error) {
	switch k := key.(type) {
	case ed25519.PrivateKey:
		if len(k) == ed25519.PrivateKeySize {
			return EdDSA, nil
		}
	case ed25519.PublicKey:
		if len(k) == ed25519.PublicKeySize {
			return EdDSA, nil
		}
	case *ecdsa.PrivateKey:
		if k != nil && k.Curve == elliptic.P256() {
			return ES256, nil
		}
	case *ecdsa.PublicKey:
		if k != nil && k.Curve == elliptic.P256() {
			return ES256, nil
		}
	}
	return "", fmt.Errorf("envelope: %T is not an Ed25519 or P-256 key", key)
}

// KID returns the key's id, the kid of the signatures it makes.
func (k *PrivateKey) KID() string { return k.kid }

// Algorithm returns EdDSA or ES256.
func (k *PrivateKey) Algorithm() Algorithm { return k.alg }

// Public returns the public half.
func (k *PrivateKey) Public() *PublicKey {
	return &PublicKey{kid: k.kid, alg: k.alg, key: k.key.Public()}
}

// Signer returns the wrapped crypto.Signer.
func (k *PrivateKey) Signer() crypto.Signer { return k.key }

// KID returns the key's id.
func (k *PublicKey) KID() string { return k.kid }

// Algorithm returns EdDSA or ES256.
func (k *PublicKey) Algorithm() Algorithm { return k.alg }

// Key returns the wrapped ed25519.PublicKey or *ecdsa.PublicKey.
func (k *PublicKey) Key() crypto.PublicKey { return k.key }

// sign returns the compact JWS of payload, detached or not, with the
// protected header {"alg","kid"}.
func (k *PrivateKey) sign(payload []byte, detached bool) (string, error) {
	k.once.Do(func() {
		opts := (&jose.SignerOptions{}).WithHeader(jose.HeaderKey("kid"), k.kid)
		k.signer, k.err = jose.NewSigner(jose.SigningKey{Algorithm: jose.SignatureAlgorithm(k.alg), Key: k.key}, opts)
	})
	if k.err != nil {
		return "", fmt.Errorf("envelope: %w", k.err)
	}
	obj, err := k.signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("envelope: %w", err)
	}
	if detached {
		return obj.DetachedCompactSerialize()
	}
	return obj.CompactSerialize()
}

// jwk returns the key as a go-jose JWK with kid, alg and use "sig".
func jwk(key any, kid string, alg Algorithm) jose.JSONWebKey {
	return jose.JSONWebKey{Key: key, KeyID: kid, Algorithm: string(alg), Use: "sig"}
}

// MarshalJSON writes the private JWK (RFC 7517; OKP or EC) with kid, alg
// and use.
func (k *PrivateKey) MarshalJSON() ([]byte, error) {
	return json.Marshal(jwk(k.key, k.kid, k.alg))
}

// MarshalJSON writes the public JWK with kid, alg and use.
func (k *PublicKey) MarshalJSON() ([]byte, error) {
	return json.Marshal(jwk(k.key, k.kid, k.alg))
}

// ParsePrivateKey reads a private JWK: OKP Ed25519 or EC P-256, "alg"
// absent or matching the key, "use" absent or "sig". A missing kid
// becomes the key's thumbprint.
func ParsePrivateKey(b []byte) (*PrivateKey, error) {
	j, err := parseJWK(b)
	if err != nil {
		return nil, err
	}
	if j.IsPublic() {
		return nil, errors.New("envelope: JWK is a public key, not a private one")
	}
	signer, ok := j.Key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("envelope: JWK holds a %T, not a signing key", j.Key)
	}
	return NewPrivateKey(signer, j.KeyID)
}

// ParsePublicKey reads a public JWK under the rules of ParsePrivateKey. A
// private JWK is refused, so that a private key file is not mistaken for
// a trust anchor.
func ParsePublicKey(b []byte) (*PublicKey, error) {
	j, err := parseJWK(b)
	if err != nil {
		return nil, err
	}
	if !j.IsPublic() {
		return nil, errors.New("envelope: JWK holds a private key; give the public JWK")
	}
	return NewPublicKey(j.Key, j.KeyID)
}

func parseJWK(b []byte) (*jose.JSONWebKey, error) {
	if _, err := parseStrict(b, maxManifestSize); err != nil {
		return nil, fmt.Errorf("envelope: JWK: %s", AsError(err).Message)
	}
	var j jose.JSONWebKey
	if err := j.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("envelope: JWK: %w", err)
	}
	alg, err := algorithmOf(j.Key)
	if err != nil {
		return nil, err
	}
	if j.Algorithm != "" && j.Algorithm != string(alg) {
		return nil, fmt.Errorf("envelope: JWK alg %q does not match its %s key", j.Algorithm, alg)
	}
	if j.Use != "" && j.Use != "sig" {
		return nil, fmt.Errorf("envelope: JWK use %q is not sig", j.Use)
	}
	return &j, nil
}

// KeyResolver finds the public key that verifies a signature: the key
// named kid, which sender from may sign with. Implementations resolve
// through configured keys (KeySet), a sender's manifest or hub JWK set,
// or did:web (DESIGN §5). A kid the resolver does not know is an error
// wrapping ErrKeyNotFound (refused with 4.01); an *Error is passed on
// as is; any other error is a failure to look up (5.04, retryable).
// ResolveKey may be called concurrently.
type KeyResolver interface {
	ResolveKey(ctx context.Context, from, kid string) (*PublicKey, error)
}

// KeyResolverFunc adapts a function to KeyResolver.
type KeyResolverFunc func(ctx context.Context, from, kid string) (*PublicKey, error)

// ResolveKey calls f.
func (f KeyResolverFunc) ResolveKey(ctx context.Context, from, kid string) (*PublicKey, error) {
	return f(ctx, from, kid)
}

// KeySet is a JWK set (RFC 7517 §5) of public keys, looked up by kid. As
// a KeyResolver it trusts every key for every sender (from is not
// consulted, except that a kid which is a DID URL must belong to from,
// as Verify checks for every resolver). It is safe for concurrent use.
type KeySet struct {
	mu   sync.RWMutex
	keys []*PublicKey
	kids map[string]*PublicKey
}

// NewKeySet returns a set of keys; two keys with one kid are an error.
func NewKeySet(keys ...*PublicKey) (*KeySet, error) {
	s := &KeySet{kids: map[string]*PublicKey{}}
	for _, k := range keys {
		if err := s.Add(k); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// ParseKeySet reads a JWK set {"keys":[…]} or a single public JWK.
func ParseKeySet(b []byte) (*KeySet, error) {
	tree, err := parseStrict(b, maxManifestSize)
	if err != nil {
		return nil, fmt.Errorf("envelope: JWK set: %s", AsError(err).Message)
	}
	m, ok := tree.(map[string]any)
	if !ok {
		return nil, errors.New("envelope: JWK set: not a JSON object")
	}
	if _, single := m["kty"]; single {
		k, err := ParsePublicKey(b)
		if err != nil {
			return nil, err
		}
		return NewKeySet(k)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(b, &set); err != nil || set.Keys == nil {
		return nil, errors.New(`envelope: JWK set: not a JWK or a {"keys": […]} object`)
	}
	s := &KeySet{kids: map[string]*PublicKey{}}
	for i, raw := range set.Keys {
		k, err := ParsePublicKey(raw)
		if err != nil {
			return nil, fmt.Errorf("envelope: JWK set: key %d: %w", i, err)
		}
		if err := s.Add(k); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Add adds k; a different key with the same kid is an error.
func (s *KeySet) Add(k *PublicKey) error {
	if k == nil || k.kid == "" {
		return errors.New("envelope: key set: a key needs a kid")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kids == nil {
		s.kids = map[string]*PublicKey{}
	}
	if prev, ok := s.kids[k.kid]; ok {
		if prev.alg == k.alg && publicEqual(prev.key, k.key) {
			return nil
		}
		return fmt.Errorf("envelope: key set: two keys with kid %q", k.kid)
	}
	s.kids[k.kid] = k
	s.keys = append(s.keys, k)
	return nil
}

func publicEqual(a, b crypto.PublicKey) bool {
	type equaler interface{ Equal(crypto.PublicKey) bool }
	e, ok := a.(equaler)
	return ok && e.Equal(b)
}

// Key returns the key named kid.
func (s *KeySet) Key(kid string) (*PublicKey, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	k, ok := s.kids[kid]
	return k, ok
}

// Keys returns the keys in the order they were added.
func (s *KeySet) Keys() []*PublicKey {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.keys)
}

// ResolveKey returns the key named kid, or an error wrapping
// ErrKeyNotFound.
func (s *KeySet) ResolveKey(_ context.Context, _, kid string) (*PublicKey, error) {
	if k, ok := s.Key(kid); ok {
		return k, nil
	}
	return nil, fmt.Errorf("kid %s: %w", quote(kid), ErrKeyNotFound)
}

// MarshalJSON writes the JWK set {"keys":[…]}.
func (s *KeySet) MarshalJSON() ([]byte, error) {
	keys := s.Keys()
	set := struct {
		Keys []*PublicKey `json:"keys"`
	}{Keys: keys}
	if set.Keys == nil {
		set.Keys = []*PublicKey{}
	}
	return json.Marshal(set)
}
