package approvalapi

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/ids"
)

// DefaultTokenTTL is the lifetime of a token Sign issues when given none:
// long enough to be presented, short enough that a stolen token is soon
// worthless.
const DefaultTokenTTL = 15 * time.Minute

// ErrBindingMismatch is returned (wrapped) by Sign for a request whose
// args_hash or rollback_hash does not match the arguments or rollback
// action it shows: an approver signs only what it was shown.
var ErrBindingMismatch = errors.New("approvalapi: approval request does not match its own hashes")

// Sign issues an approval token for req, signed with key in approver's
// name: iss approver, aud govern.TokenAudience, a fresh UUIDv4 jti, valid from now
// for ttl (0 means DefaultTokenTTL; at most govern.MaxTokenLifetime), bound to
// req.Binding(). It refuses (ErrBindingMismatch) a request whose
// args_hash or rollback_hash is not the hash of the arguments or rollback
// action it carries, so that what an approver is shown is what it signs.
func Sign(approver string, key ed25519.PrivateKey, req govern.ApprovalRequest, ttl time.Duration) (string, error) {
	if approver == "" {
		return "", errors.New("approvalapi: no approver to sign as")
	}
	switch {
	case ttl == 0:
		ttl = DefaultTokenTTL
	case ttl < time.Second:
		return "", fmt.Errorf("approvalapi: token lifetime %s is too short", ttl)
	case ttl > govern.MaxTokenLifetime:
		return "", fmt.Errorf("approvalapi: token lifetime %s exceeds the maximum %s", ttl, govern.MaxTokenLifetime)
	}
	if err := checkHashes(&req); err != nil {
		return "", err
	}
	// time.Now, not the ids clock: governors verify against wall time.
	now := time.Now()
	return govern.SignApproval(key, govern.ApprovalClaims{
		Issuer:   approver,
		Audience: govern.TokenAudience,
		ID:       ids.New(),
		IssuedAt: now.Unix(),
		Expiry:   now.Add(ttl).Unix(),
		Binding:  req.Binding(),
	})
}

func checkHashes(req *govern.ApprovalRequest) error {
	h, err := govern.PayloadHash(req.Args)
	if err != nil {
		return fmt.Errorf("%w: args: %v", ErrBindingMismatch, err)
	}
	if h != req.ArgsHash {
		return fmt.Errorf("%w: args_hash is not the hash of args", ErrBindingMismatch)
	}
	switch {
	case req.Rollback == nil && req.RollbackHash != "":
		return fmt.Errorf("%w: rollback_hash without a rollback_action", ErrBindingMismatch)
	case req.Rollback != nil:
		h, err := req.Rollback.Hash()
		if err != nil {
			return fmt.Errorf("%w: rollback_action: %v", ErrBindingMismatch, err)
		}
		if h != req.RollbackHash {
			return fmt.Errorf("%w: rollback_hash is not the hash of rollback_action", ErrBindingMismatch)
		}
	}
	return nil
}
