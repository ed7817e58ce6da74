package envelope

import (
	"context"
	"encoding/json"
	"errors"
)

var errNotObject = errors.New("the document is not a JSON object")

// SignDocument signs a JSON object the way envelopes are signed (§6.3,
// DESIGN §5), for documents that travel as JSON with their signature in
// a "sig" member, such as the discovery hub (§8): it returns the detached
// compact JWS of the JCS of {"sha256": hex SHA-256 of the canonical form
// of doc without "sig"}. doc must encode to a JSON object.
func SignDocument(doc any, key *PrivateKey) (string, error) {
	c, err := documentCanonical(doc)
	if err != nil {
		return "", err
	}
	return key.sign(signingPayload(c), true)
}

// VerifyDocument checks a JSON object's "sig" member as SignDocument
// writes it: by a key keys resolves for signer, over the canonical form
// of the object without "sig". The text is decoded strictly first
// (duplicate members, invalid UTF-8, numbers beyond ±2^53 are refused
// with 4.00, more than MaxEnvelopeSize bytes with 4.13); a bad signature
// is an *Error with code 4.01.
func VerifyDocument(ctx context.Context, b []byte, signer string, keys KeyResolver) error {
	if _, err := parseStrict(b, MaxEnvelopeSize); err != nil {
		return err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return badRequest(errNotObject)
	}
	var sig string
	if err := json.Unmarshal(m["sig"], &sig); err != nil || sig == "" {
		return unauthenticated("the document has no sig", nil)
	}
	delete(m, "sig")
	c, err := documentCanonical(m)
	if err != nil {
		return err
	}
	return verifyDetached(ctx, c, signer, sig, keys)
}

// documentCanonical is the canonical form of doc without its "sig".
func documentCanonical(doc any) ([]byte, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, badRequest(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, badRequest(errNotObject)
	}
	delete(m, "sig")
	if b, err = json.Marshal(m); err != nil {
		return nil, badRequest(err)
	}
	return canonicalize(b)
}
