package govern

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentry-dev/agentry/internal/strictjson"
	jose "github.com/go-jose/go-jose/v4"
)

// Approval tokens (DESIGN §5): a compact JWS signed with EdDSA (Ed25519)
// by a key in the governor's Keyring, whose payload binds the approval to
// one call of one run. The protected header is {"alg":"EdDSA","kid":…,
// "typ":"JWT"}, kid being the RFC 7638 thumbprint of the approver's key.

// TokenAudience is the aud of every approval token.
const TokenAudience = "uaicp-approval"

// maxTokenSize bounds the tokens Verify reads.
const maxTokenSize = 8 << 10

// MaxTokenLifetime bounds exp − iat; longer-lived tokens are refused.
const MaxTokenLifetime = 24 * time.Hour

// clockSkew is how far in the future iat and nbf may be.
const clockSkew = time.Minute

// Binding is what an approval token approves: one call (tool, tier,
// arguments, rollback) of one run (request, trace) at one repair attempt,
// answering one approval request.
type Binding struct {
	ApprovalID   string `json:"approval_id"`
	RequestID    string `json:"request_id"`
	TraceID      string `json:"trace_id"`
	Tool         string `json:"tool"`
	Tier         string `json:"tier"`
	ArgsHash     string `json:"args_hash"`
	RollbackHash string `json:"rollback_hash"`
	Attempt      int    `json:"attempt"`
}

// ApprovalClaims is an approval token's payload.
type ApprovalClaims struct {
	Issuer    string  `json:"iss"` // the approver's identity
	Audience  string  `json:"aud"` // TokenAudience
	ID        string  `json:"jti"` // unique; a token is consumed once
	IssuedAt  int64   `json:"iat"`
	NotBefore int64   `json:"nbf,omitempty"`
	Expiry    int64   `json:"exp"`
	Binding   Binding `json:"uaicp"`
}

// KeyID returns the kid of an approver key: the base64url RFC 7638
// thumbprint (SHA-256) of its JWK.
func KeyID(pub ed25519.PublicKey) (string, error) {
	jwk := jose.JSONWebKey{Key: pub}
	tp, err := jwk.Thumbprint(crypto.SHA256)
	if err != nil {
		return "", fmt.Errorf("govern: key thumbprint: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(tp), nil
}

// SignApproval signs claims with the approver's private key, returning a
// compact JWS.
func SignApproval(key ed25519.PrivateKey, claims ApprovalClaims) (string, error) {
	if len(key) != ed25519.PrivateKeySize {
		return "", errors.New("govern: approval key is not an Ed25519 private key")
	}
	kid, err := KeyID(key.Public().(ed25519.PublicKey))
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	opts := (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.EdDSA, Key: key}, opts)
	if err != nil {
		return "", fmt.Errorf("govern: %w", err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", fmt.Errorf("govern: %w", err)
	}
	return jws.CompactSerialize()
}

// ApproverKey is a trusted approver's public key.
type ApproverKey struct {
	Approver string
	Key      ed25519.PublicKey
	KID      string
}

// Keyring holds the approver keys a governor trusts: keys added with Add
// (or UnmarshalJSON), and for a keyring made by OpenKeyring, the keys of
// its file as last read. It is safe for concurrent use.
type Keyring struct {
	mu    sync.RWMutex
	byKID map[string]ApproverKey
	file  map[string]ApproverKey // OpenKeyring: the file's keys
	src   *keyringSource         // OpenKeyring: the file followed
}

// NewKeyring returns an empty keyring.
func NewKeyring() *Keyring { return &Keyring{byKID: map[string]ApproverKey{}} }

// defaultKeyringReload is the least time between two looks at a keyring
// file (KeyringOptions.ReloadInterval).
const defaultKeyringReload = time.Second

// KeyringOptions configures a keyring that follows its file (OpenKeyring).
type KeyringOptions struct {
	// ReloadInterval is the least time between two looks at the file, so
	// that a flood of tokens signed by unknown keys cannot make the
	// keyring read the disk on every one; 0 is one second.
	ReloadInterval time.Duration
	// Hint follows the refusal of a token whose key the keyring does not
	// hold: how to trust a key (agentry serve: "add it with `agentry keys
	// create NAME --dir DIR`"). The keyring's path is added to it.
	Hint string
	// Logger receives why the file could not be read (a refused token
	// only says that it could not); nil is slog.Default().
	Logger *slog.Logger
}

// keyringSource is the file an OpenKeyring keyring follows.
type keyringSource struct {
	path     string
	interval time.Duration
	hint     string
	log      *slog.Logger

	mu      sync.Mutex // serialises looks at the file
	checked time.Time  // when the last look started
	seen    os.FileInfo
	err     error // why the last read failed, if it did
}

// OpenKeyring returns a keyring that follows the keyring file at path (the
// JSON form of Keyring) while it is in use, so that a server picks up keys
// created after it started (agentry keys create) without a restart:
//
//   - a token whose key the keyring does not hold makes it look at the
//     file again — at once if it last looked ReloadInterval ago or more,
//     else once that much time has passed (the token's check waits), so
//     that a key written before the token came in is always found, and a
//     flood of unknown keys costs one look per interval;
//   - a token whose key it holds makes it look again when its last look
//     is ReloadInterval old, without waiting.
//
// A look re-reads the file only when it changed (another file, size or
// modification time). The file's keys replace those of the last read, so
// a key removed from the file stops being trusted at the first look after
// its removal — also for approvals decided but not acted on yet, which
// are checked again when their call runs. A missing file trusts no key
// (it may be created later); so does a file that cannot be read or
// parsed (fail closed: the refusal says why). Keys added with Add are
// kept apart and stay trusted.
func OpenKeyring(path string, opts *KeyringOptions) (*Keyring, error) {
	if opts == nil {
		opts = &KeyringOptions{}
	}
	src := &keyringSource{path: path, interval: opts.ReloadInterval, hint: opts.Hint, log: opts.Logger}
	if src.interval <= 0 {
		src.interval = defaultKeyringReload
	}
	if src.log == nil {
		src.log = slog.Default()
	}
	k := NewKeyring()
	k.src = src
	src.checked = time.Now()
	src.load(k)
	if src.err != nil {
		return nil, src.err
	}
	return k, nil
}

// Path returns the file a keyring made by OpenKeyring follows, or "".
func (k *Keyring) Path() string {
	if k.src == nil {
		return ""
	}
	return k.src.path
}

// load reads the file into k.file when it changed since the last read.
// The caller holds s.mu (or owns k alone).
func (s *keyringSource) load(k *Keyring) {
	fi, err := os.Stat(s.path)
	if err == nil && s.seen != nil && s.err == nil && os.SameFile(fi, s.seen) && fi.Size() == s.seen.Size() && fi.ModTime().Equal(s.seen.ModTime()) {
		return
	}
	keys := map[string]ApproverKey{}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		err = nil // trusts nobody until it is created
	case err == nil:
		var nk *Keyring
		if nk, err = loadKeyring(s.path); err == nil {
			keys = nk.byKID
		}
	}
	if err != nil && (s.err == nil || s.err.Error() != err.Error()) && k.file != nil {
		s.log.Error("govern: the approver keyring cannot be read: no key is trusted until it can", "keyring", s.path, "error", err)
	}
	s.seen, s.err = fi, err
	k.mu.Lock()
	k.file = keys
	k.mu.Unlock()
}

// refresh looks at the file unless a look started after need; with wait
// it waits for the interval to allow one, without it gives up.
func (s *keyringSource) refresh(k *Keyring, need time.Time, wait bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.checked.After(need) {
			return
		}
		d := time.Until(s.checked.Add(s.interval))
		if d <= 0 {
			break
		}
		if !wait {
			return
		}
		s.mu.Unlock()
		time.Sleep(d)
		s.mu.Lock()
	}
	s.checked = time.Now()
	s.load(k)
}

// lookup returns the trusted key kid, following the file of an
// OpenKeyring keyring (see there).
func (k *Keyring) lookup(kid string) (ApproverKey, error) {
	get := func() (ApproverKey, bool) {
		k.mu.RLock()
		defer k.mu.RUnlock()
		if ak, ok := k.byKID[kid]; ok {
			return ak, true
		}
		ak, ok := k.file[kid]
		return ak, ok
	}
	if k.src != nil {
		now := time.Now()
		if _, ok := get(); ok {
			k.src.refresh(k, now.Add(-k.src.interval), false) // notice a removal
		} else {
			k.src.refresh(k, now, true) // a key created before this token came in
		}
	}
	if ak, ok := get(); ok {
		return ak, nil
	}
	msg := fmt.Sprintf("key %q is not a trusted approver key", kid)
	if k.src == nil {
		return ApproverKey{}, errors.New(msg)
	}
	k.src.mu.Lock()
	rerr := k.src.err
	k.src.mu.Unlock()
	if rerr != nil { // the cause is in the server's log, not for a peer
		return ApproverKey{}, fmt.Errorf("%s: the keyring %s cannot be read", msg, k.src.path)
	}
	if k.src.hint != "" {
		msg += "; " + k.src.hint
	}
	return ApproverKey{}, fmt.Errorf("%s (keyring: %s)", msg, k.src.path)
}

// Add trusts pub as approver's key and returns its kid.
func (k *Keyring) Add(approver string, pub ed25519.PublicKey) (string, error) {
	if approver == "" {
		return "", errors.New("govern: approver identity is empty")
	}
	if len(pub) != ed25519.PublicKeySize {
		return "", errors.New("govern: approver key is not an Ed25519 public key")
	}
	kid, err := KeyID(pub)
	if err != nil {
		return "", err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if prev, ok := k.byKID[kid]; ok && prev.Approver != approver {
		return "", fmt.Errorf("govern: key %s already belongs to approver %q", kid, prev.Approver)
	}
	k.byKID[kid] = ApproverKey{Approver: approver, Key: slices.Clone(pub), KID: kid}
	return kid, nil
}

// Keys returns the trusted keys, sorted by approver then kid: those
// added, and those of the keyring's file as last read.
func (k *Keyring) Keys() []ApproverKey {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := make([]ApproverKey, 0, len(k.byKID)+len(k.file))
	for _, v := range k.byKID {
		out = append(out, v)
	}
	for kid, v := range k.file {
		if _, dup := k.byKID[kid]; !dup {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b ApproverKey) int {
		if a.Approver != b.Approver {
			if a.Approver < b.Approver {
				return -1
			}
			return 1
		}
		if a.KID < b.KID {
			return -1
		}
		if a.KID > b.KID {
			return 1
		}
		return 0
	})
	return out
}

// keyringFile is the JSON form of a keyring: approvers and their public
// JWKs.
type keyringFile struct {
	Approvers []keyringEntry `json:"approvers"`
}

type keyringEntry struct {
	Approver string          `json:"approver"`
	JWK      jose.JSONWebKey `json:"jwk"`
}

// MarshalJSON writes {"approvers":[{"approver":…,"jwk":{…public JWK…}}]}.
func (k *Keyring) MarshalJSON() ([]byte, error) {
	f := keyringFile{Approvers: []keyringEntry{}}
	for _, v := range k.Keys() {
		f.Approvers = append(f.Approvers, keyringEntry{Approver: v.Approver, JWK: jose.JSONWebKey{Key: v.Key, KeyID: v.KID, Algorithm: string(jose.EdDSA), Use: "sig"}})
	}
	return json.MarshalIndent(f, "", "  ")
}

// UnmarshalJSON reads the form MarshalJSON writes; every key must be a
// public Ed25519 key.
func (k *Keyring) UnmarshalJSON(b []byte) error {
	var f keyringFile
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return fmt.Errorf("govern: keyring: %w", err)
	}
	nk := NewKeyring()
	for i, e := range f.Approvers {
		pub, ok := e.JWK.Key.(ed25519.PublicKey)
		if !ok {
			return fmt.Errorf("govern: keyring: approver %d (%q): not a public Ed25519 key", i, e.Approver)
		}
		kid, err := nk.Add(e.Approver, pub)
		if err != nil {
			return fmt.Errorf("govern: keyring: approver %d: %w", i, err)
		}
		if e.JWK.KeyID != "" && e.JWK.KeyID != kid {
			return fmt.Errorf("govern: keyring: approver %q: kid %q is not the key's thumbprint %q", e.Approver, e.JWK.KeyID, kid)
		}
	}
	k.mu.Lock()
	k.byKID = nk.byKID
	k.mu.Unlock()
	return nil
}

// loadKeyring reads a keyring file (the JSON form of Keyring).
func loadKeyring(path string) (*Keyring, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	k := NewKeyring()
	if err := k.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// Verify checks an approval token: compact JWS, alg EdDSA and nothing
// else, a kid the keyring trusts, a valid signature, strict claims (no
// duplicate members, aud TokenAudience, iss the key's approver, a jti, iat
// and nbf not in the future, exp in the future and at most
// MaxTokenLifetime after iat). Every failure is an *Error with reason
// ApprovalInvalid. It does not check the binding or single use; the
// governor does.
func (k *Keyring) Verify(token string, now time.Time) (*ApprovalClaims, error) {
	claims, err := k.verify(token, now)
	if err != nil {
		return nil, &Error{Reasons: []Reason{ApprovalInvalid}, Detail: err.Error()}
	}
	return claims, nil
}

func (k *Keyring) verify(token string, now time.Time) (*ApprovalClaims, error) {
	if token == "" {
		return nil, errors.New("no token")
	}
	if len(token) > maxTokenSize {
		return nil, fmt.Errorf("token longer than %d bytes", maxTokenSize)
	}
	if !canonicalCompact(token) {
		return nil, errors.New("not a compact JWS of three unpadded base64url segments in canonical form")
	}
	jws, err := jose.ParseSignedCompact(token, []jose.SignatureAlgorithm{jose.EdDSA})
	if err != nil {
		return nil, fmt.Errorf("not an EdDSA compact JWS: %v", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("token must have exactly one signature")
	}
	sig := jws.Signatures[0]
	if sig.Protected.Algorithm != string(jose.EdDSA) {
		return nil, fmt.Errorf("alg %q is not EdDSA", sig.Protected.Algorithm)
	}
	kid := sig.Protected.KeyID
	if kid == "" {
		return nil, errors.New("protected header has no kid")
	}
	ak, err := k.lookup(kid)
	if err != nil {
		return nil, err
	}
	payload, err := jws.Verify(ak.Key)
	if err != nil {
		return nil, errors.New("signature does not verify")
	}
	var c ApprovalClaims
	if err := strictjson.Decode(payload, &c, &strictjson.Options{MaxSize: maxTokenSize, DisallowUnknownFields: true, DisallowDuplicates: true}); err != nil {
		return nil, fmt.Errorf("claims: %v", err)
	}
	switch {
	case c.Audience != TokenAudience:
		return nil, fmt.Errorf("aud %q is not %q", c.Audience, TokenAudience)
	case c.Issuer != ak.Approver:
		return nil, fmt.Errorf("iss %q is not the key's approver %q", c.Issuer, ak.Approver)
	case c.ID == "":
		return nil, errors.New("no jti")
	case c.IssuedAt == 0 || c.Expiry == 0:
		return nil, errors.New("iat and exp are required")
	}
	iat, exp := time.Unix(c.IssuedAt, 0), time.Unix(c.Expiry, 0)
	switch {
	case iat.After(now.Add(clockSkew)):
		return nil, errors.New("issued in the future")
	case c.NotBefore != 0 && time.Unix(c.NotBefore, 0).After(now.Add(clockSkew)):
		return nil, errors.New("not valid yet")
	case !now.Before(exp):
		return nil, errors.New("expired")
	case exp.Sub(iat) > MaxTokenLifetime:
		return nil, fmt.Errorf("lifetime longer than %s", MaxTokenLifetime)
	}
	return &c, nil
}

// canonicalCompact reports whether token is three segments of unpadded
// base64url, each the one encoding of its bytes. Base64 decoding skips
// line breaks and ignores the unused bits of the last character, so
// without this check one signed token would have many accepted spellings.
func canonicalCompact(token string) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		b, err := base64.RawURLEncoding.DecodeString(p)
		if err != nil || base64.RawURLEncoding.EncodeToString(b) != p {
			return false
		}
	}
	return true
}
