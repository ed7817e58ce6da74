package envelope

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/gowebpki/jcs"
)

// maxSigSize bounds the sig strings parseCompactJWS reads.
const maxSigSize = 1024

// canonical returns the canonical form of e (§4.2, DESIGN §5): the RFC
// 8785 (JCS) serialization of e without sig. It refuses (4.00) an
// envelope Decode would refuse for its numbers (beyond ±2^53 in Ext or
// an Extra), since its peer could not verify it.
func (e *Envelope) canonical() ([]byte, error) {
	c, ok, err := e.canonicalDirect()
	if err != nil {
		return nil, NewError(CodeBadRequest, cut(err.Error()), err)
	}
	if ok {
		return c, nil
	}
	return e.canonicalGeneral()
}

// canonicalGeneral is Canonical by the general path: the envelope's JSON
// through jcs.Transform.
func (e *Envelope) canonicalGeneral() ([]byte, error) {
	b, err := e.appendJSON(make([]byte, 0, 1024), false)
	if err != nil {
		return nil, NewError(CodeBadRequest, cut(err.Error()), err)
	}
	c, err := jcs.Transform(b)
	if err != nil {
		return nil, badRequest(fmt.Errorf("not canonicalizable: %w", err))
	}
	return c, nil
}

// canonicalize returns the JCS form of the JSON text b, refusing what the
// strict decoders refuse.
func canonicalize(b []byte) ([]byte, error) {
	if err := scanStrict(b); err != nil {
		return nil, badRequest(err)
	}
	c, err := jcs.Transform(b)
	if err != nil {
		return nil, badRequest(fmt.Errorf("not canonicalizable: %w", err))
	}
	return c, nil
}

// signingPayload returns the JWS payload for a canonical envelope (§6.3,
// DESIGN §5): the JCS of {"sha256":"<lowercase hex SHA-256>"}, which is
// that object written without spaces (a test checks it against jcs).
func signingPayload(canonical []byte) []byte {
	sum := sha256.Sum256(canonical)
	out := make([]byte, 0, len(`{"sha256":""}`)+2*sha256.Size)
	out = append(out, `{"sha256":"`...)
	out = hex.AppendEncode(out, sum[:])
	return append(out, `"}`...)
}

// Sign signs e with key: it sets e.Sig to the detached compact JWS
// (<protected>..<signature>, protected header {"alg","kid"}) of the JCS
// of {"sha256": hex SHA-256 of the canonical form} (§6.3, DESIGN §5). Sign
// does not validate e against the schema (Validate does).
func Sign(e *Envelope, key *PrivateKey) error {
	c, err := e.canonical()
	if err != nil {
		return err
	}
	sig, err := key.sign(signingPayload(c), true)
	if err != nil {
		return err
	}
	e.Sig = sig
	return nil
}

// Verify checks e.Sig against the canonical form of e: a detached
// compact JWS as Sign writes it (parseCompactJWS), by a key that keys
// resolves for (e.From, kid) and whose algorithm is the header's. Every
// refusal is an *Error with code 4.01, except a failing key lookup (5.04)
// and an envelope that cannot be canonicalized (4.00).
func Verify(ctx context.Context, e *Envelope, keys KeyResolver) error {
	c, err := e.canonical()
	if err != nil {
		return err
	}
	return verifyDetached(ctx, c, e.From, e.Sig, keys)
}

// Open decodes an envelope from untrusted bytes (Decode) and verifies
// its signature (Verify). The signature is checked over the canonical
// form of the decoded envelope, so that it covers exactly what the
// caller reads; Decode keeps every member, so that form is the one of
// the bytes received (FuzzDecodeEnvelope checks it). Open does not check
// replay, ts skew or cap_token (ReplayGuard, CapTokenPolicy).
func Open(ctx context.Context, b []byte, keys KeyResolver) (*Envelope, error) {
	e, err := Decode(b)
	if err != nil {
		return nil, err
	}
	if err := Verify(ctx, e, keys); err != nil {
		return nil, err
	}
	return e, nil
}

func unauthenticated(msg string, cause error) *Error {
	return NewError(CodeUnauthenticated, msg, cause)
}

func verifyDetached(ctx context.Context, canonical []byte, from, sig string, keys KeyResolver) error {
	s, err := parseCompactJWS(sig)
	if err != nil {
		return err
	}
	if !s.Detached() {
		return unauthenticated("sig is not a detached JWS", nil)
	}
	return verifyJWS(ctx, s, sig, signingPayload(canonical), from, keys)
}

// verifyJWS resolves the key of s for from and checks the signature over
// payload (detached or not, as s is).
func verifyJWS(ctx context.Context, s *compactJWS, token string, payload []byte, from string, keys KeyResolver) error {
	if did, _, ok := strings.Cut(s.KeyID, "#"); ok && strings.HasPrefix(did, "did:") && did != from {
		return unauthenticated("kid "+quote(s.KeyID)+" is a key of another DID than "+quote(from), nil)
	}
	if keys == nil {
		return unauthenticated("no keys to verify with", nil)
	}
	pub, err := keys.ResolveKey(ctx, from, s.KeyID)
	if err != nil {
		var e *Error
		switch {
		case errors.As(err, &e):
			return e
		case errors.Is(err, ErrKeyNotFound):
			return unauthenticated("unknown kid "+quote(s.KeyID), err)
		}
		return NewError(CodeBusy, "cannot resolve the signing key now", err)
	}
	if pub == nil {
		return unauthenticated("unknown kid "+quote(s.KeyID), ErrKeyNotFound)
	}
	if pub.alg != s.Algorithm {
		return unauthenticated(fmt.Sprintf("key %s is an %s key, the signature says %s", quote(s.KeyID), pub.alg, s.Algorithm), nil)
	}
	algs := []jose.SignatureAlgorithm{jose.SignatureAlgorithm(s.Algorithm)}
	if s.Detached() {
		obj, err := jose.ParseDetached(token, payload, algs)
		if err == nil {
			err = obj.DetachedVerify(payload, pub.key)
		}
		if err != nil {
			return unauthenticated("signature does not verify", err)
		}
		return nil
	}
	obj, err := jose.ParseSignedCompact(token, algs)
	if err != nil {
		return unauthenticated("signature does not verify", err)
	}
	if _, err := obj.Verify(pub.key); err != nil {
		return unauthenticated("signature does not verify", err)
	}
	return nil
}

// compactJWS is a parsed compact JWS as this package accepts it: three
// segments of canonical unpadded base64url, the payload segment empty
// for a detached one; a protected header of exactly {"alg","kid"}, alg
// EdDSA or ES256, kid non-empty, no crit and no other member; a 64-byte
// signature.
type compactJWS struct {
	Algorithm Algorithm
	KeyID     string
	// Payload is the decoded payload segment, nil when detached.
	Payload []byte
	// Value is the signature.
	Value []byte
}

// Detached reports whether the payload segment was empty.
func (s *compactJWS) Detached() bool { return s.Payload == nil }

// parseCompactJWS parses a compact JWS, detached (an envelope's sig) or
// not (a signed manifest), without verifying it. Every refusal is an
// *Error with code 4.01: a malformed signature authenticates nothing.
func parseCompactJWS(token string) (*compactJWS, error) {
	s, err := parseSignature(token)
	if err != nil {
		return nil, unauthenticated("malformed sig: "+err.Error(), err)
	}
	return s, nil
}

func parseSignature(token string) (*compactJWS, error) { return parseCompact(token, false) }

// parseCompact parses a compact JWS; jwt allows a typ header member
// (JWT or at+jwt).
func parseCompact(token string, jwt bool) (*compactJWS, error) {
	if token == "" {
		return nil, errors.New("empty")
	}
	if len(token) > maxSigSize+maxManifestSize*4/3+8 {
		return nil, errors.New("too long")
	}
	protected, rest, ok1 := strings.Cut(token, ".")
	payload, sig, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.Contains(sig, ".") {
		return nil, errors.New("not three dot-separated segments")
	}
	if len(protected)+len(sig) > maxSigSize {
		return nil, errors.New("header or signature too long")
	}
	hb, err := b64(protected)
	if err != nil {
		return nil, fmt.Errorf("protected header: %w", err)
	}
	s := &compactJWS{}
	if payload != "" {
		if s.Payload, err = b64(payload); err != nil {
			return nil, fmt.Errorf("payload: %w", err)
		}
		if s.Payload == nil {
			s.Payload = []byte{}
		}
	}
	if s.Value, err = b64(sig); err != nil {
		return nil, fmt.Errorf("signature: %w", err)
	}
	if err := parseHeader(hb, s, jwt); err != nil {
		return nil, err
	}
	if len(s.Value) != 64 {
		return nil, fmt.Errorf("a %s signature has 64 bytes, not %d", s.Algorithm, len(s.Value))
	}
	return s, nil
}

// b64 decodes canonical unpadded base64url: the one encoding of its
// bytes (base64 decoding ignores the unused bits of the last character,
// so without the check one signature would have several spellings).
func b64(seg string) ([]byte, error) {
	if seg == "" {
		return nil, errors.New("empty segment")
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(seg)
	if err != nil || base64.RawURLEncoding.EncodeToString(b) != seg {
		return nil, errors.New("not canonical unpadded base64url")
	}
	return b, nil
}

// parseHeader reads a protected header of exactly {"alg","kid"}, and
// typ (JWT or at+jwt, any case, "application/" prefix optional) when jwt.
func parseHeader(hb []byte, s *compactJWS, jwt bool) error {
	if !utf8.Valid(hb) || !json.Valid(hb) {
		return errors.New("protected header is not JSON")
	}
	if err := scanStrict(hb); err != nil {
		return fmt.Errorf("protected header: %w", err)
	}
	var h map[string]any
	if err := json.Unmarshal(hb, &h); err != nil {
		return errors.New("protected header is not a JSON object")
	}
	if _, ok := h["crit"]; ok {
		return errors.New(`protected header has "crit"; no extension is understood`)
	}
	for k, v := range h {
		switch {
		case k == "alg" || k == "kid":
		case k == "typ" && jwt:
			typ, _ := v.(string)
			switch strings.TrimPrefix(strings.ToLower(typ), "application/") {
			case "jwt", "at+jwt":
			default:
				return fmt.Errorf("typ %s is not JWT or at+jwt", quote(fmt.Sprint(v)))
			}
		default:
			return fmt.Errorf(`protected header has %s; only "alg" and "kid" are allowed`, quote(k))
		}
	}
	alg, _ := h["alg"].(string)
	if !Algorithm(alg).Valid() {
		return fmt.Errorf("alg %s is not EdDSA or ES256", quote(fmt.Sprint(h["alg"])))
	}
	kid, _ := h["kid"].(string)
	if kid == "" {
		return errors.New("protected header has no kid")
	}
	s.Algorithm, s.KeyID = Algorithm(alg), kid
	return nil
}
