package approverkey_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/govern/approvalapi"
	"github.com/agentry-dev/agentry/internal/approverkey"
)

// pending drives a real write_high_risk call to an approval request on a
// governor trusting kr.
func pending(t *testing.T, kr *govern.Keyring) (*govern.Governor, govern.ApprovalRequest) {
	t.Helper()
	ctx := context.Background()
	g, err := govern.New(ctx, &govern.Options{Journal: govern.NewMemoryJournal(), Keyring: kr,
		Rollbacks: map[string]govern.RollbackFunc{"refund.cancel": func(context.Context, govern.RollbackAction) error { return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	auditJournal(t, g.Journal())
	r, err := g.Start(ctx, &govern.RunOptions{Identity: govern.Identity{AgentID: "agent:a", OwnerID: "org:x", ControlClass: govern.HumanSupervised}})
	if err != nil {
		t.Fatal(err)
	}
	checkWire(t, r.Envelope())
	spec := govern.ToolSpec{Name: "refund", Tier: govern.WriteHighRisk, Rollback: func(_ context.Context, c govern.Call) (*govern.RollbackAction, error) {
		return &govern.RollbackAction{Type: "refund.cancel", Target: c.ID, Payload: map[string]any{"amount": 5}}, nil
	}}
	_, err = r.Invoke(ctx, spec, govern.Call{ID: "c1", Args: map[string]any{"amount": 5, "order": "o-1"}}, func(context.Context) (any, error) {
		t.Error("the tool ran without approval")
		return nil, nil
	})
	var ge *govern.Error
	if !errors.As(err, &ge) || !errors.Is(err, govern.ApprovalRequired) {
		t.Fatalf("Invoke: %v, want ApprovalRequired", err)
	}
	checkWire(t, ge.Envelope)
	req, err := g.Approval(ctx, ge.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	// What a client sees: the request after a JSON round trip.
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var got govern.ApprovalRequest
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	return g, got
}

func TestCreateSignVerifyRoundTrip(t *testing.T) {
	d := approverkey.Dir(filepath.Join(t.TempDir(), "keys"))
	k, err := d.Create("alice")
	if err != nil {
		t.Fatal(err)
	}
	path, _ := d.KeyPath("alice")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" && fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %#o, want 0600", fi.Mode().Perm())
	}
	back, err := d.Key("alice")
	if err != nil {
		t.Fatal(err)
	}
	if !back.Private.Equal(k.Private) || back.Approver != "alice" {
		t.Errorf("key file does not read back as the created key")
	}
	var f struct {
		Approver string         `json:"approver"`
		JWK      map[string]any `json:"jwk"`
	}
	b, _ := os.ReadFile(path)
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	kid, _ := k.KeyID()
	if f.Approver != "alice" || f.JWK["kty"] != "OKP" || f.JWK["crv"] != "Ed25519" || f.JWK["d"] == nil || f.JWK["kid"] != kid {
		t.Errorf("key file = %s", b)
	}

	kr, err := d.Keyring() // the file, as a server would load it
	if err != nil {
		t.Fatal(err)
	}
	keys := kr.Keys()
	if len(keys) != 1 || keys[0].Approver != "alice" || keys[0].KID != kid {
		t.Fatalf("keyring = %+v", keys)
	}
	kb, _ := os.ReadFile(d.KeyringPath())
	if strings.Contains(string(kb), `"d"`) {
		t.Errorf("keyring file holds a private key: %s", kb)
	}

	g, req := pending(t, kr)
	tok, err := approvalapi.Sign(k.Approver, k.Private, req, 0)
	if err != nil {
		t.Fatal(err)
	}
	claims, err := kr.Verify(tok, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if claims.Issuer != "alice" || claims.Audience != govern.TokenAudience || claims.Binding != req.Binding() ||
		claims.Expiry-claims.IssuedAt != int64(approvalapi.DefaultTokenTTL/time.Second) || len(claims.ID) != 36 {
		t.Errorf("claims = %+v", claims)
	}
	dec, err := g.Decide(context.Background(), req.ID, govern.ApprovalInput{Approve: true, Token: tok})
	if err != nil || dec.Status != govern.StatusApproved || dec.Decision.Approver != "alice" {
		t.Fatalf("Decide: %+v, %v", dec, err)
	}
}

func TestReadKeyFileRefusesUnprotectedFile(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no Unix permissions")
	}
	d := approverkey.Dir(t.TempDir())
	if _, err := d.Create("alice"); err != nil {
		t.Fatal(err)
	}
	path, _ := d.KeyPath("alice")
	for _, mode := range []fs.FileMode{0o640, 0o604, 0o644, 0o660} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		if _, err := approverkey.ReadKeyFile(path); !errors.Is(err, approverkey.ErrUnprotected) {
			t.Errorf("mode %#o: err = %v, want ErrUnprotected", mode, err)
		}
		if _, err := d.Key("alice"); !errors.Is(err, approverkey.ErrUnprotected) {
			t.Errorf("Dir.Key, mode %#o: err = %v, want ErrUnprotected", mode, err)
		}
	}
	if err := os.Chmod(path, 0o400); err != nil {
		t.Fatal(err)
	}
	if _, err := approverkey.ReadKeyFile(path); err != nil {
		t.Errorf("mode 0400: %v", err)
	}
}

func TestTwoApproversInOneKeyring(t *testing.T) {
	d := approverkey.Dir(t.TempDir())
	alice, err := d.Create("alice")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := d.Create("bob@example.com")
	if err != nil {
		t.Fatal(err)
	}
	kr, err := d.Keyring()
	if err != nil {
		t.Fatal(err)
	}
	if keys := kr.Keys(); len(keys) != 2 || keys[0].Approver != "alice" || keys[1].Approver != "bob@example.com" {
		t.Fatalf("keyring = %+v", keys)
	}
	_, req := pending(t, kr)
	for _, k := range []*approverkey.Key{alice, bob} {
		tok, err := approvalapi.Sign(k.Approver, k.Private, req, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if c, err := kr.Verify(tok, time.Now()); err != nil || c.Issuer != k.Approver {
			t.Errorf("%s: claims %+v, %v", k.Approver, c, err)
		}
	}
}

func TestSameApproverTwice(t *testing.T) {
	d := approverkey.Dir(t.TempDir())
	old, err := d.Create("alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Create("bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Create("alice"); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second Create: %v, want fs.ErrExist", err)
	}
	if k, err := d.Key("alice"); err != nil || !k.Private.Equal(old.Private) {
		t.Fatalf("the refused Create changed the key file: %v", err)
	}
	kr, _ := d.Keyring()
	if n := len(kr.Keys()); n != 2 {
		t.Fatalf("the refused Create changed the keyring: %d keys", n)
	}

	// Replacing rotates: the new key is alice's only key, bob is kept.
	nk, err := d.Replace("alice")
	if err != nil {
		t.Fatal(err)
	}
	if k, err := d.Key("alice"); err != nil || !k.Private.Equal(nk.Private) {
		t.Fatalf("key file after Replace: %v", err)
	}
	kr, err = d.Keyring()
	if err != nil {
		t.Fatal(err)
	}
	newKID, _ := nk.KeyID()
	keys := kr.Keys()
	if len(keys) != 2 || keys[0].Approver != "alice" || keys[0].KID != newKID || keys[1].Approver != "bob" {
		t.Fatalf("keyring after Replace = %+v", keys)
	}
	_, req := pending(t, kr)
	tok, _ := approvalapi.Sign(old.Approver, old.Private, req, 0)
	if _, err := kr.Verify(tok, time.Now()); !errors.Is(err, govern.ApprovalInvalid) {
		t.Errorf("token of the replaced key: %v, want ApprovalInvalid", err)
	}
	tok, _ = approvalapi.Sign(nk.Approver, nk.Private, req, 0)
	if _, err := kr.Verify(tok, time.Now()); err != nil {
		t.Errorf("token of the new key: %v", err)
	}
	if ents, _ := os.ReadDir(string(d)); len(ents) != 3 {
		t.Errorf("directory holds %d files, want 3 (no temporaries left)", len(ents))
	}
}

func TestSignRefuses(t *testing.T) {
	d := approverkey.Dir(t.TempDir())
	k, err := d.Create("alice")
	if err != nil {
		t.Fatal(err)
	}
	kr, _ := d.Keyring()
	_, req := pending(t, kr)
	for _, ttl := range []time.Duration{-time.Minute, time.Millisecond, govern.MaxTokenLifetime + time.Second} {
		if _, err := approvalapi.Sign(k.Approver, k.Private, req, ttl); err == nil {
			t.Errorf("ttl %s: signed", ttl)
		}
	}
	if _, err := approvalapi.Sign(k.Approver, k.Private, req, govern.MaxTokenLifetime); err != nil {
		t.Errorf("ttl %s: %v", govern.MaxTokenLifetime, err)
	}
	tampered := map[string]func(r *govern.ApprovalRequest){
		"args":    func(r *govern.ApprovalRequest) { r.Args = json.RawMessage(`{"amount":5000,"order":"o-1"}`) },
		"no args": func(r *govern.ApprovalRequest) { r.Args = nil },
		"rollback payload": func(r *govern.ApprovalRequest) {
			r.Rollback = &govern.RollbackAction{Type: "refund.cancel", Target: "c1"}
		},
		"no rollback": func(r *govern.ApprovalRequest) { r.Rollback = nil },
	}
	for name, edit := range tampered {
		r := req
		edit(&r)
		if _, err := approvalapi.Sign(k.Approver, k.Private, r, 0); !errors.Is(err, approvalapi.ErrBindingMismatch) {
			t.Errorf("%s: %v, want ErrBindingMismatch", name, err)
		}
	}
}

func TestKeyFileIsStrict(t *testing.T) {
	k, err := approverkey.Generate("alice")
	if err != nil {
		t.Fatal(err)
	}
	good, err := k.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(good, &m)
	jwk := m["jwk"].(map[string]any)
	edit := func(f func(m, jwk map[string]any)) []byte {
		m2 := map[string]any{"approver": m["approver"]}
		j2 := map[string]any{}
		for k, v := range jwk {
			j2[k] = v
		}
		m2["jwk"] = j2
		f(m2, j2)
		b, _ := json.Marshal(m2)
		return b
	}
	other, _ := approverkey.Generate("alice")
	otherKID, _ := other.KeyID()
	for name, b := range map[string][]byte{
		"unknown member": edit(func(m, _ map[string]any) { m["note"] = "x" }),
		"no approver":    edit(func(m, _ map[string]any) { delete(m, "approver") }),
		"public only":    edit(func(_, j map[string]any) { delete(j, "d") }),
		"foreign kid":    edit(func(_, j map[string]any) { j["kid"] = otherKID }),
		"wrong alg":      edit(func(_, j map[string]any) { j["alg"] = "ES256" }),
		"x not d":        edit(func(_, j map[string]any) { j["x"] = base64.RawURLEncoding.EncodeToString(other.Public()) }),
		"two values":     append(append([]byte{}, good...), good...),
	} {
		var k approverkey.Key
		if err := k.UnmarshalJSON(b); err == nil {
			t.Errorf("%s: accepted %s", name, b)
		}
	}
	var back approverkey.Key
	if err := back.UnmarshalJSON(good); err != nil || !back.Private.Equal(k.Private) {
		t.Errorf("round trip: %v", err)
	}
}

func TestKeyNames(t *testing.T) {
	d := approverkey.Dir(t.TempDir())
	for _, name := range []string{"", ".alice", "../alice", "a/b", `a\b`, "a b", strings.Repeat("a", 129)} {
		if _, err := d.Create(name); err == nil {
			t.Errorf("Create(%q) succeeded", name)
		}
	}
	for _, name := range []string{"alice", "bob@example.com", "ops-1.on_call+x"} {
		if !approverkey.ValidName(name) {
			t.Errorf("ValidName(%q) = false", name)
		}
	}
	// A key file must name the approver it is filed under.
	bob, _ := d.Create("bob")
	b, _ := bob.MarshalJSON()
	path, _ := d.KeyPath("mallory")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Key("mallory"); err == nil {
		t.Error("Dir.Key read bob's key as mallory's")
	}
}
