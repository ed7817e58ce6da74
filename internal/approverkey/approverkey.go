// Package approverkey provides approvers' signing keys for the approval
// tokens of UAICP 0.3 §5.3 (DESIGN §5): Ed25519 keys kept as private JWK
// files, the keyring file a governor trusts (the JSON form of
// govern.Keyring); approvalapi.Sign issues the tokens.
//
// A key directory (Dir) holds one private key file per approver and the
// keyring of their public keys:
//
//	DIR/alice.key.json   {"approver":"alice","jwk":{…private OKP JWK…}}   mode 0600
//	DIR/approvers.json   {"approvers":[{"approver":"alice","jwk":{…public…}}]}
//
// The kid of every JWK is govern.KeyID of the key. Like ssh, ReadKeyFile
// refuses a private key file that group or others may access.
package approverkey

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/agentry-dev/agentry/govern"
)

// ErrUnprotected is returned (wrapped) by ReadKeyFile for a private key
// file that group or others may access.
var ErrUnprotected = errors.New("approverkey: private key file is accessible by group or others")

// Key is an approver's private signing key.
type Key struct {
	// Approver is the identity the key signs as: the iss of its tokens and
	// the name the keyring trusts it under.
	Approver string
	// Private is the Ed25519 private key.
	Private ed25519.PrivateKey
}

// Generate returns a new random key for approver.
func Generate(approver string) (*Key, error) {
	if approver == "" {
		return nil, errors.New("approverkey: approver identity is empty")
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("approverkey: %w", err)
	}
	return &Key{Approver: approver, Private: priv}, nil
}

// Public returns the public half of the key.
func (k *Key) Public() ed25519.PublicKey { return k.Private.Public().(ed25519.PublicKey) }

// KeyID returns the key's kid (govern.KeyID of its public key).
func (k *Key) KeyID() (string, error) { return govern.KeyID(k.Public()) }

// keyFile is the JSON form of a Key.
type keyFile struct {
	Approver string          `json:"approver"`
	JWK      jose.JSONWebKey `json:"jwk"`
}

// MarshalJSON writes {"approver":…,"jwk":{…private OKP JWK…}}, the JWK's
// kid being KeyID.
func (k *Key) MarshalJSON() ([]byte, error) {
	if len(k.Private) != ed25519.PrivateKeySize {
		return nil, errors.New("approverkey: not an Ed25519 private key")
	}
	kid, err := k.KeyID()
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(keyFile{Approver: k.Approver,
		JWK: jose.JSONWebKey{Key: k.Private, KeyID: kid, Algorithm: string(jose.EdDSA), Use: "sig"}}, "", "  ")
}

// UnmarshalJSON reads the form MarshalJSON writes, strictly: no other
// members, a named approver, a private Ed25519 JWK whose public half
// matches its private half, and a kid, if any, that is the key's
// thumbprint.
func (k *Key) UnmarshalJSON(b []byte) error {
	var f keyFile
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return fmt.Errorf("approverkey: key file: %w", err)
	}
	if d.More() {
		return errors.New("approverkey: key file: more than one JSON value")
	}
	if f.Approver == "" {
		return errors.New("approverkey: key file names no approver")
	}
	priv, ok := f.JWK.Key.(ed25519.PrivateKey)
	if !ok {
		return errors.New("approverkey: key file does not hold a private Ed25519 key")
	}
	if f.JWK.Algorithm != "" && f.JWK.Algorithm != string(jose.EdDSA) {
		return fmt.Errorf("approverkey: key file: alg %q is not EdDSA", f.JWK.Algorithm)
	}
	nk := Key{Approver: f.Approver, Private: priv}
	kid, err := nk.KeyID()
	if err != nil {
		return err
	}
	if f.JWK.KeyID != "" && f.JWK.KeyID != kid {
		return fmt.Errorf("approverkey: key file: kid %q is not the key's thumbprint %q", f.JWK.KeyID, kid)
	}
	*k = nk
	return nil
}

// ReadKeyFile reads a private key file. Outside Windows it refuses
// (ErrUnprotected) a file whose mode lets group or others in at all, as
// ssh does: chmod 600 it.
func ReadKeyFile(path string) (*Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 && runtime.GOOS != "windows" {
		return nil, fmt.Errorf("%w: %s has mode %#o; run chmod 600 on it", ErrUnprotected, path, perm)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("approverkey: %s is not a regular file", path)
	}
	b, err := readAll(f, 64<<10)
	if err != nil {
		return nil, fmt.Errorf("approverkey: %s: %w", path, err)
	}
	k := new(Key)
	if err := k.UnmarshalJSON(b); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

func readAll(f *os.File, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("file larger than %d bytes", limit)
	}
	return b, nil
}
