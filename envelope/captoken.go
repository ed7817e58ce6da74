package envelope

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// maxCapTokenSize bounds the cap_token CapTokenPolicy reads.
const maxCapTokenSize = 8 << 10

// CapTokenPolicy checks an envelope's capability token (§6.2): a JWT
// (compact JWS, alg EdDSA or ES256, header {alg, kid[, typ]}, no crit)
// from a trusted issuer, with aud, scope and exp claims. A token that is
// not genuine and current — malformed, another algorithm, an untrusted
// issuer or unknown kid, a bad signature, expired or not yet valid — is
// refused with 4.01; a genuine token that does not grant the envelope —
// aud without the receiver, a scope that does not cover the intent (the
// scope "uamp:" + intent, or "uamp:*" for every intent), a sub other than
// the sender — with 4.03. docs/spec-notes/uamp.md, "cap_token".
type CapTokenPolicy struct {
	// Audience is the receiver's identity; a token's aud must name it.
	// Required.
	Audience string
	// Issuers maps each trusted issuer (the iss claim) to the resolver
	// of its keys; ResolveKey is called with from = iss.
	Issuers map[string]KeyResolver
	// Required refuses an envelope without a cap_token (4.01); otherwise
	// Check accepts it and returns nil claims.
	Required bool
	// Leeway is the clock skew allowed for exp, nbf and iat; default
	// one minute.
	Leeway time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// CapClaims are the claims of a capability token that passed.
type CapClaims struct {
	Issuer    string
	Subject   string // "" when absent
	Audience  []string
	Scope     []string
	Expiry    time.Time
	NotBefore time.Time // zero when absent
	IssuedAt  time.Time // zero when absent
	ID        string    // jti, "" when absent
}

// scopeFor returns the scope that grants an intent: "uamp:" + intent.
// "uamp:*" grants every intent.
func scopeFor(i Intent) string { return "uamp:" + string(i) }

// scopeCovers reports whether scopes grant intent i (scopeFor).
func scopeCovers(scopes []string, i Intent) bool {
	return slices.Contains(scopes, scopeFor(i)) || slices.Contains(scopes, "uamp:*")
}

// Check checks e.CapToken for an envelope whose signature verified, and
// returns its claims. Errors are *Error with code 4.01 or 4.03 (5.04 when
// an issuer's keys cannot be looked up).
func (p *CapTokenPolicy) Check(ctx context.Context, e *Envelope) (*CapClaims, error) {
	if e.CapToken == "" {
		if p.Required {
			return nil, unauthenticated("cap_token required", nil)
		}
		return nil, nil
	}
	if p.Audience == "" {
		return nil, NewError(CodeInternal, "", errors.New("CapTokenPolicy.Audience is empty"))
	}
	tok := e.CapToken
	if len(tok) > maxCapTokenSize {
		return nil, unauthenticated("cap_token too long", nil)
	}
	s, claims, err := parseJWT(tok)
	if err != nil {
		return nil, unauthenticated("malformed cap_token: "+err.Error(), err)
	}
	keys, ok := p.Issuers[claims.Issuer]
	if !ok {
		return nil, unauthenticated("cap_token issuer "+quote(claims.Issuer)+" is not trusted", nil)
	}
	if err := verifyJWS(ctx, s, tok, nil, claims.Issuer, keys); err != nil {
		var ue *Error
		if errors.As(err, &ue) && ue.Code == CodeUnauthenticated {
			return nil, unauthenticated("cap_token: "+ue.Message, err)
		}
		return nil, err
	}
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	t := now()
	leeway := p.Leeway
	if leeway <= 0 {
		leeway = time.Minute
	}
	switch {
	case !t.Before(claims.Expiry.Add(leeway)):
		return nil, unauthenticated("cap_token expired", nil)
	case !claims.NotBefore.IsZero() && t.Add(leeway).Before(claims.NotBefore):
		return nil, unauthenticated("cap_token not valid yet (nbf)", nil)
	case !claims.IssuedAt.IsZero() && t.Add(leeway).Before(claims.IssuedAt):
		return nil, unauthenticated("cap_token issued in the future (iat)", nil)
	case !slices.Contains(claims.Audience, p.Audience):
		return nil, NewError(CodeUnauthorized, "cap_token is not for this agent (aud)", nil)
	case claims.Subject != "" && claims.Subject != e.From:
		return nil, NewError(CodeUnauthorized, "cap_token was issued to another sender (sub)", nil)
	case !scopeCovers(claims.Scope, e.Intent):
		return nil, NewError(CodeUnauthorized, "cap_token scope does not cover intent "+quote(string(e.Intent)), nil)
	}
	return claims, nil
}

// parseJWT parses a compact JWS JWT strictly, without verifying it: the
// rules of parseCompactJWS, except that the header may carry typ (JWT or
// at+jwt); the claims are a JSON object without duplicate members, with
// iss, aud, scope (a space-separated string) and exp.
func parseJWT(tok string) (*compactJWS, *CapClaims, error) {
	s, err := parseCompact(tok, true)
	if err != nil {
		return nil, nil, err
	}
	if s.Detached() {
		return nil, nil, errors.New("no claims")
	}
	tree, err := parseStrict(s.Payload, maxCapTokenSize)
	if err != nil {
		return nil, nil, fmt.Errorf("claims: %s", AsError(err).Message)
	}
	m, ok := tree.(map[string]any)
	if !ok {
		return nil, nil, errors.New("claims are not a JSON object")
	}
	c := &CapClaims{}
	str := func(name string, required bool) (string, error) {
		v, ok := m[name]
		if !ok {
			if required {
				return "", fmt.Errorf("claim %s is missing", name)
			}
			return "", nil
		}
		s, ok := v.(string)
		if !ok || s == "" {
			return "", fmt.Errorf("claim %s is not a non-empty string", name)
		}
		return s, nil
	}
	date := func(name string, required bool) (time.Time, error) {
		v, ok := m[name]
		if !ok {
			if required {
				return time.Time{}, fmt.Errorf("claim %s is missing", name)
			}
			return time.Time{}, nil
		}
		n, ok := v.(json.Number)
		if !ok {
			return time.Time{}, fmt.Errorf("claim %s is not a NumericDate", name)
		}
		f, err := n.Float64()
		if err != nil || f < 0 || f > 1e11 {
			return time.Time{}, fmt.Errorf("claim %s is out of range", name)
		}
		sec, frac := math.Modf(f)
		return time.Unix(int64(sec), int64(frac*1e9)), nil
	}
	var scope string
	if c.Issuer, err = str("iss", true); err != nil {
		return nil, nil, err
	}
	if c.Subject, err = str("sub", false); err != nil {
		return nil, nil, err
	}
	if c.ID, err = str("jti", false); err != nil {
		return nil, nil, err
	}
	if scope, err = str("scope", true); err != nil {
		return nil, nil, err
	}
	c.Scope = strings.Fields(scope)
	switch aud := m["aud"].(type) {
	case string:
		c.Audience = []string{aud}
	case []any:
		for _, a := range aud {
			s, ok := a.(string)
			if !ok {
				return nil, nil, errors.New("claim aud is not a string or an array of strings")
			}
			c.Audience = append(c.Audience, s)
		}
	default:
		return nil, nil, errors.New("claim aud is missing or not a string or an array of strings")
	}
	if c.Expiry, err = date("exp", true); err != nil {
		return nil, nil, err
	}
	if c.NotBefore, err = date("nbf", false); err != nil {
		return nil, nil, err
	}
	if c.IssuedAt, err = date("iat", false); err != nil {
		return nil, nil, err
	}
	return s, c, nil
}
