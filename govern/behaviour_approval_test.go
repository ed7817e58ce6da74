package govern_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/recordkind"
	jose "github.com/go-jose/go-jose/v4"
)

var (
	selfAgent = newApprover(agentID, 4) // an approver key in the requesting agent's name
	selfUser  = newApprover(userID, 5)  // … and in its user's name
)

var b64 = base64.RawURLEncoding

// handJWS builds a compact JWS from a header, a payload and a signing
// function over the signing input (nil: an empty signature).
func handJWS(t testing.TB, header map[string]any, payload []byte, signFn func(input []byte) []byte) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	input := b64.EncodeToString(h) + "." + b64.EncodeToString(payload)
	var sig []byte
	if signFn != nil {
		sig = signFn([]byte(input))
	}
	return input + "." + b64.EncodeToString(sig)
}

func kidOf(t testing.TB, a approver) string {
	t.Helper()
	kid, err := govern.KeyID(a.pub)
	if err != nil {
		t.Fatal(err)
	}
	return kid
}

func claimsJSON(t testing.TB, c govern.ApprovalClaims) []byte {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// editPayload re-encodes a token's payload with edit applied, keeping
// its header and signature.
func editPayload(t testing.TB, tok string, edit func(m map[string]any)) string {
	t.Helper()
	parts := strings.Split(tok, ".")
	raw, err := b64.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, _ := json.Marshal(m)
	parts[1] = b64.EncodeToString(b)
	return strings.Join(parts, ".")
}

// forgery is a token an attacker (or a careless approver) produces for
// the approval request req.
type forgery struct {
	name string
	make func(t testing.TB, req govern.ApprovalRequest, env forgeryEnv) string
	// decideOnly: the forgery has no meaning presented with a call (an
	// empty token means "no token" there).
	decideOnly bool
}

// forgeryEnv gives forgeries what they need of the test's world.
type forgeryEnv struct {
	otherRun *govern.Run            // another run of the same governor
	otherReq govern.ApprovalRequest // another pending request of the same run
}

// bound returns a forgery maker: a's claims for the request, edited.
func bound(a approver, edit func(c *govern.ApprovalClaims)) func(testing.TB, govern.ApprovalRequest, forgeryEnv) string {
	return func(t testing.TB, req govern.ApprovalRequest, _ forgeryEnv) string {
		c := claimsFor(a, req)
		edit(&c)
		return sign(t, a, c)
	}
}

func forgeries() []forgery {
	now := time.Now()
	edit := func(name string, f func(c *govern.ApprovalClaims)) forgery {
		return forgery{name: name, make: bound(alice, f)}
	}
	return []forgery{
		{name: "untrusted key", make: func(t testing.TB, req govern.ApprovalRequest, _ forgeryEnv) string {
			return sign(t, mallory, claimsFor(mallory, req))
		}},
		{name: "untrusted key posing as a trusted approver", make: func(t testing.TB, req govern.ApprovalRequest, _ forgeryEnv) string {
			return sign(t, mallory, claimsFor(alice, req))
		}},
		{name: "trusted kid, untrusted signature", make: func(t testing.TB, req govern.ApprovalRequest, _ forgeryEnv) string {
			return handJWS(t, map[string]any{"alg": "EdDSA", "kid": kidOf(t, alice), "typ": "JWT"}, claimsJSON(t, claimsFor(alice, req)),
				func(in []byte) []byte { return ed25519.Sign(mallory.priv, in) })
		}},
		{name: "edited claims (args hash)", make: func(t testing.TB, req govern.ApprovalRequest, _ forgeryEnv) string {
			c := claimsFor(alice, req)
			c.Binding.ArgsHash = "sha256:" + strings.Repeat("0", 64)
			return editPayload(t, sign(t, alice, c), func(m map[string]any) {
				m["uaicp"].(map[string]any)["args_hash"] = req.ArgsHash
			})
		}},
		{name: "edited claims (expiry)", make: func(t testing.TB, req govern.ApprovalRequest, _ forgeryEnv) string {
			c := claimsFor(alice, req)
			c.IssuedAt, c.Expiry = now.Add(-2*time.Hour).Unix(), now.Add(-time.Hour).Unix()
			return editPayload(t, sign(t, alice, c), func(m map[string]any) { m["exp"] = now.Add(time.Hour).Unix() })
		}},
		{name: "edited claims (attempt)", make: func(t testing.TB, req govern.ApprovalRequest, _ forgeryEnv) string {
			c := claimsFor(alice, req)
			c.Binding.Attempt = 1
			return editPayload(t, sign(t, alice, c), func(m map[string]any) { m["uaicp"].(map[string]any)["attempt"] = 0 })
		}},
		edit("bound to other args", func(c *govern.ApprovalClaims) { c.Binding.ArgsHash, _ = govern.HashJSON(map[string]any{"amount": 1}) }),
		edit("bound to another tool", func(c *govern.ApprovalClaims) { c.Binding.Tool = "harmless" }),
		{name: "bound to another request", make: func(t testing.TB, req govern.ApprovalRequest, env forgeryEnv) string {
			c := claimsFor(alice, req)
			c.Binding.RequestID = env.otherRun.RequestID()
			return sign(t, alice, c)
		}},
		{name: "bound to another trace", make: func(t testing.TB, req govern.ApprovalRequest, env forgeryEnv) string {
			c := claimsFor(alice, req)
			c.Binding.TraceID = env.otherRun.TraceID()
			return sign(t, alice, c)
		}},
		edit("bound to another tier", func(c *govern.ApprovalClaims) { c.Binding.Tier = "write_low_risk" }),
		edit("bound to another attempt", func(c *govern.ApprovalClaims) { c.Binding.Attempt = 1 }),
		edit("bound to another rollback", func(c *govern.ApprovalClaims) {
			c.Binding.RollbackHash, _ = govern.HashJSON(map[string]any{"type": undoType})
		}),
		edit("bound to no rollback", func(c *govern.ApprovalClaims) { c.Binding.RollbackHash = "" }),
		{name: "answers another approval request", make: func(t testing.TB, _ govern.ApprovalRequest, env forgeryEnv) string {
			return sign(t, alice, claimsFor(alice, env.otherReq))
		}},
		edit("bound to no approval request", func(c *govern.ApprovalClaims) { c.Binding.ApprovalID = "" }),
		edit("expired", func(c *govern.ApprovalClaims) {
			c.IssuedAt, c.Expiry = now.Add(-2*time.Hour).Unix(), now.Add(-time.Minute).Unix()
		}),
		edit("not yet valid", func(c *govern.ApprovalClaims) { c.NotBefore = now.Add(time.Hour).Unix() }),
		edit("issued in the future", func(c *govern.ApprovalClaims) {
			c.IssuedAt, c.Expiry = now.Add(time.Hour).Unix(), now.Add(2*time.Hour).Unix()
		}),
		edit("lifetime longer than MaxTokenLifetime", func(c *govern.ApprovalClaims) {
			c.IssuedAt, c.Expiry = now.Add(-time.Minute).Unix(), now.Add(govern.MaxTokenLifetime).Unix()
		}),
		edit("no expiry", func(c *govern.ApprovalClaims) { c.Expiry = 0 }),
		edit("no issued-at", func(c *govern.ApprovalClaims) { c.IssuedAt = 0 }),
		edit("no jti", func(c *govern.ApprovalClaims) { c.ID = "" }),
		edit("wrong aud", func(c *govern.ApprovalClaims) { c.Audience = "some-other-service" }),
		edit("iss is not the key's approver", func(c *govern.ApprovalClaims) { c.Issuer = "bob" }),
		{name: "self-approval by the agent", make: func(t testing.TB, req govern.ApprovalRequest, _ forgeryEnv) string {
			return sign(t, selfAgent, claimsFor(selfAgent, req))
		}},
		{name: "self-approval by the user", make: func(t testing.TB, req govern.ApprovalRequest, _ forgeryEnv) string {
			return sign(t, selfUser, claimsFor(selfUser, req))
		}},
		{name: "alg HS256 keyed with the public key", make: func(t testing.TB, req govern.ApprovalRequest, _ forgeryEnv) string {
			return handJWS(t, map[string]any{"alg": "HS256", "kid": kidOf(t, alice), "typ": "JWT"}, claimsJSON(t, claimsFor(alice, req)),
				func(in []byte) []byte { m := hmac.New(sha256.New, alice.pub); m.Write(in); return m.Sum(nil) })
		}},
		{name: "alg none", make: func(t testing.TB, req govern.ApprovalRequest, _ forgeryEnv) string {
			return handJWS(t, map[string]any{"alg": "none", "kid": kidOf(t, alice)}, claimsJSON(t, claimsFor(alice, req)), nil)
		}},
		{name: "alg ES256 with another key", make: func(t testing.TB, req govern.ApprovalRequest, _ forgeryEnv) string {
			ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: ec}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kidOf(t, alice)))
			if err != nil {
				t.Fatal(err)
			}
			jws, err := s.Sign(claimsJSON(t, claimsFor(alice, req)))
			if err != nil {
				t.Fatal(err)
			}
			tok, err := jws.CompactSerialize()
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}},
		{name: "duplicate claim members", make: func(t testing.TB, req govern.ApprovalRequest, _ forgeryEnv) string {
			p := claimsJSON(t, claimsFor(alice, req))
			p = append(p[:len(p)-1], []byte(`,"aud":"elsewhere"}`)...)
			return handJWS(t, map[string]any{"alg": "EdDSA", "kid": kidOf(t, alice)}, p, func(in []byte) []byte { return ed25519.Sign(alice.priv, in) })
		}},
		{name: "unknown claim member", make: func(t testing.TB, req govern.ApprovalRequest, _ forgeryEnv) string {
			p := claimsJSON(t, claimsFor(alice, req))
			p = append(p[:len(p)-1], []byte(`,"scope":"everything"}`)...)
			return handJWS(t, map[string]any{"alg": "EdDSA", "kid": kidOf(t, alice)}, p, func(in []byte) []byte { return ed25519.Sign(alice.priv, in) })
		}},
		{name: "no kid", make: func(t testing.TB, req govern.ApprovalRequest, _ forgeryEnv) string {
			return handJWS(t, map[string]any{"alg": "EdDSA"}, claimsJSON(t, claimsFor(alice, req)), func(in []byte) []byte { return ed25519.Sign(alice.priv, in) })
		}},
		{name: "JWS JSON serialization", make: func(t testing.TB, req govern.ApprovalRequest, _ forgeryEnv) string {
			parts := strings.Split(sign(t, alice, claimsFor(alice, req)), ".")
			b, _ := json.Marshal(map[string]string{"protected": parts[0], "payload": parts[1], "signature": parts[2]})
			return string(b)
		}},
		{name: "oversized", make: func(t testing.TB, req govern.ApprovalRequest, _ forgeryEnv) string {
			return sign(t, alice, claimsFor(alice, req)) + strings.Repeat("A", govern.MaxTokenSize)
		}},
		{name: "empty", decideOnly: true, make: func(testing.TB, govern.ApprovalRequest, forgeryEnv) string { return "" }},
		{name: "garbage", make: func(testing.TB, govern.ApprovalRequest, forgeryEnv) string { return "yes, approved" }},
		{name: "three garbage parts", make: func(testing.TB, govern.ApprovalRequest, forgeryEnv) string { return "a.b.c" }},
		{name: "empty parts", make: func(testing.TB, govern.ApprovalRequest, forgeryEnv) string { return ".." }},
		{name: "signature only", make: func(t testing.TB, req govern.ApprovalRequest, _ forgeryEnv) string {
			return "..." + strings.Split(sign(t, alice, claimsFor(alice, req)), ".")[2]
		}},
	}
}

// forgeryOpts are the options of the forgery tests: the self-approval
// keys are trusted, so that only the self-approval rule stops them.
func forgeryOpts(t testing.TB) govern.Options {
	o := baseOpts(t, nil)
	o.Keyring = keyring(t, alice, bob, selfAgent, selfUser)
	return o
}

// TestDESIGN_5_ForgedApprovals: every forged, foreign, stale or
// self-issued approval token is refused with APPROVAL_INVALID — through
// Governor.Decide and presented with the call — and the tool never runs;
// the approval request stays pending and nothing is recorded as decided.
func TestDESIGN_5_ForgedApprovals(t *testing.T) {
	spec := highRisk("transfer")
	args := map[string]any{"amount": 250, "to": "acct-9"}
	for _, fg := range forgeries() {
		for _, via := range []string{"Decide", "Call.Approval"} {
			if fg.decideOnly && via != "Decide" {
				continue
			}
			t.Run(fg.name+"/"+via, func(t *testing.T) {
				g := newGov(t, forgeryOpts(t))
				other := start(t, g, govern.RunOptions{})
				r := start(t, g, govern.RunOptions{})
				f := &tool{}
				_, err := r.Invoke(bg, spec, govern.Call{ID: "c1", Args: args}, f.fn)
				req := approvalOf(t, g, err)
				_, err = r.Invoke(bg, spec, govern.Call{ID: "c2", Args: map[string]any{"amount": 1}}, f.fn)
				otherReq := approvalOf(t, g, err)
				tok := fg.make(t, req, forgeryEnv{otherRun: other, otherReq: otherReq})

				if via == "Decide" {
					before := len(records(t, g.Journal()))
					_, err := g.Decide(bg, req.ID, govern.ApprovalInput{Approve: true, Token: tok})
					wantReasons(t, err, govern.ApprovalInvalid)
					if after := len(records(t, g.Journal())); after != before {
						t.Errorf("a refused decision was journaled (%d → %d records)", before, after)
					}
					_, err = r.Invoke(bg, spec, govern.Call{ID: "c1", Args: args}, f.fn)
					wantReasons(t, err, govern.ApprovalRequired)
				} else {
					_, err := r.Invoke(bg, spec, govern.Call{ID: "c1", Args: args, Approval: tok}, f.fn)
					wantReasons(t, err, govern.ApprovalInvalid)
					if ge := govErr(t, err); ge.Envelope == nil || ge.Envelope.Outcome != govern.Failure {
						t.Errorf("refusal envelope %+v, want outcome failure", ge.Envelope)
					}
				}
				if f.n() != 0 {
					t.Fatalf("tool ran %d times on a forged approval", f.n())
				}
				if a, err := g.Approval(bg, req.ID); err != nil || a.Status != govern.StatusPending {
					t.Errorf("approval request after the forgery: %+v %v, want pending", a, err)
				}
				for _, rec := range records(t, g.Journal()) {
					if rec.Kind == recordkind.Intent {
						t.Errorf("intent journaled for a forged approval: %s", rec.Data)
					}
				}
				// The genuine token still works afterwards.
				good := sign(t, alice, claimsFor(alice, req))
				invoke(t, r, spec, govern.Call{ID: "c1", Args: args, Approval: good}, f)
				if f.n() != 1 {
					t.Errorf("genuine approval: tool ran %d times", f.n())
				}
				for _, run := range []*govern.Run{r, other} {
					if _, err := run.Fail(bg, "done"); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
}

// TestDESIGN_5_KeyringVerify pins Keyring.Verify on its own: a genuine
// token verifies, and every failure is APPROVAL_INVALID.
func TestDESIGN_5_KeyringVerify(t *testing.T) {
	k := keyring(t, alice)
	req := govern.ApprovalRequest{ID: "a1", RequestID: "r", TraceID: "t", Tool: "x", Tier: govern.WriteHighRisk}
	c := claimsFor(alice, req)
	got, err := k.Verify(sign(t, alice, c), time.Now())
	if err != nil || *got != c {
		t.Fatalf("Verify(genuine) = %+v, %v", got, err)
	}
	for _, tok := range []string{"", "x", sign(t, mallory, claimsFor(mallory, req))} {
		if _, err := k.Verify(tok, time.Now()); !errors.Is(err, govern.ApprovalInvalid) {
			t.Errorf("Verify(%q) = %v", tok, err)
		}
	}
	// Within the clock skew a slightly early iat is fine; beyond, not.
	early := c
	early.IssuedAt = time.Now().Add(30 * time.Second).Unix()
	if _, err := k.Verify(sign(t, alice, early), time.Now()); err != nil {
		t.Errorf("iat 30s ahead: %v", err)
	}
	if _, err := k.Add("carol", alice.pub); err == nil {
		t.Error("one key added for two approvers")
	}
	if _, err := k.Add("", bob.pub); err == nil {
		t.Error("key added without an approver")
	}
	// The keyring's JSON form round-trips.
	b, err := json.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	k2 := govern.NewKeyring()
	if err := json.Unmarshal(b, k2); err != nil {
		t.Fatal(err)
	}
	if _, err := k2.Verify(sign(t, alice, c), time.Now()); err != nil {
		t.Errorf("round-tripped keyring: %v", err)
	}
}

// TestDESIGN_5_ApprovalReplay: a token is consumed once. Used again for a
// second identical call — presented with it or as a decision on its own
// approval request, before and after a restart — it is refused.
func TestDESIGN_5_ApprovalReplay(t *testing.T) {
	for _, first := range []string{"Decide", "Call.Approval"} {
		t.Run("consumed via "+first, func(t *testing.T) {
			j := govern.NewMemoryJournal()
			opts := baseOpts(t, nil)
			opts.Journal = j
			g := newGov(t, opts)
			r := start(t, g, govern.RunOptions{})
			spec := highRisk("pay")
			args := map[string]any{"amount": 10}
			f := &tool{}
			_, err := r.Invoke(bg, spec, govern.Call{ID: "c1", Args: args}, f.fn)
			req := approvalOf(t, g, err)
			tok := sign(t, alice, claimsFor(alice, req))
			call := govern.Call{ID: "c1", Args: args}
			if first == "Decide" {
				if _, err := g.Decide(bg, req.ID, govern.ApprovalInput{Approve: true, Token: tok}); err != nil {
					t.Fatal(err)
				}
			} else {
				call.Approval = tok
			}
			invoke(t, r, spec, call, f)

			replays := func(g *govern.Governor, r *govern.Run, callID string) {
				t.Helper()
				_, err := r.Invoke(bg, spec, govern.Call{ID: callID, Args: args, Approval: tok}, f.fn)
				wantReasons(t, err, govern.ApprovalInvalid)
				// Without the token the call asks anew; the old token
				// cannot answer the new request.
				_, err = r.Invoke(bg, spec, govern.Call{ID: callID, Args: args}, f.fn)
				again := approvalOf(t, g, err)
				if again.ID == req.ID {
					t.Fatalf("a consumed approval request was offered again")
				}
				_, err = g.Decide(bg, again.ID, govern.ApprovalInput{Approve: true, Token: tok})
				wantReasons(t, err, govern.ApprovalInvalid)
				// Nor can the old request be decided again.
				if _, err := g.Decide(bg, req.ID, govern.ApprovalInput{Approve: true, Token: tok}); err == nil {
					t.Error("the consumed approval request was decided again")
				}
				if f.n() != 1 {
					t.Fatalf("tool ran %d times", f.n())
				}
			}
			replays(g, r, "c2")

			// Restart: a new governor over the same journal.
			g2 := newGov(t, opts)
			r2, err := g2.Attach(bg, r.RequestID())
			if err != nil {
				t.Fatal(err)
			}
			replays(g2, r2, "c3")
			// The committed call itself is replayed, not re-run.
			inv, err := r2.Invoke(bg, spec, govern.Call{ID: "c1", Args: args, Approval: tok}, f.fn)
			if err != nil || !inv.Replayed || f.n() != 1 {
				t.Fatalf("replaying c1: %v, ran %d", err, f.n())
			}
			if _, err := r2.Fail(bg, "done"); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("jti reused by the approver", func(t *testing.T) {
		g := newGov(t, baseOpts(t, nil))
		r := start(t, g, govern.RunOptions{})
		spec := highRisk("pay")
		f := &tool{}
		_, err := r.Invoke(bg, spec, govern.Call{ID: "c1", Args: map[string]any{"n": 1}}, f.fn)
		req1 := approvalOf(t, g, err)
		_, err = r.Invoke(bg, spec, govern.Call{ID: "c2", Args: map[string]any{"n": 2}}, f.fn)
		req2 := approvalOf(t, g, err)
		c1, c2 := claimsFor(alice, req1), claimsFor(alice, req2)
		c2.ID = c1.ID
		invoke(t, r, spec, govern.Call{ID: "c1", Args: map[string]any{"n": 1}, Approval: sign(t, alice, c1)}, f)
		_, err = r.Invoke(bg, spec, govern.Call{ID: "c2", Args: map[string]any{"n": 2}, Approval: sign(t, alice, c2)}, f.fn)
		wantReasons(t, err, govern.ApprovalInvalid)
		if f.n() != 1 {
			t.Fatalf("tool ran %d times", f.n())
		}
		if _, err := r.Fail(bg, "done"); err != nil {
			t.Fatal(err)
		}
	})
}

// TestDESIGN_5_DecideRefusesUsedToken: Decide refuses a token whose jti
// was already used — by a call that presented it, by an earlier decision
// (before or after a restart), or by a concurrent decision — with the
// reason Invoke gives (APPROVAL_INVALID, replay), and records nothing: the
// request stays pending, and the one recorded approval can be acted on.
func TestDESIGN_5_DecideRefusesUsedToken(t *testing.T) {
	cases := []struct {
		name string
		// use spends the jti of c (bound to another request of the run)
		// and returns the governor to decide with.
		use func(t *testing.T, g *govern.Governor, opts govern.Options, r *govern.Run, other govern.ApprovalRequest, c govern.ApprovalClaims) *govern.Governor
	}{
		{"used by a call", func(t *testing.T, g *govern.Governor, _ govern.Options, r *govern.Run, other govern.ApprovalRequest, c govern.ApprovalClaims) *govern.Governor {
			invoke(t, r, highRisk("pay"), govern.Call{ID: other.CallID, Args: map[string]any{"n": 1}, Approval: sign(t, alice, c)}, &tool{})
			return g
		}},
		{"used by a decision", func(t *testing.T, g *govern.Governor, _ govern.Options, _ *govern.Run, other govern.ApprovalRequest, c govern.ApprovalClaims) *govern.Governor {
			if _, err := g.Decide(bg, other.ID, govern.ApprovalInput{Approve: true, Token: sign(t, alice, c)}); err != nil {
				t.Fatal(err)
			}
			return g
		}},
		{"used by a decision before a restart", func(t *testing.T, g *govern.Governor, opts govern.Options, _ *govern.Run, other govern.ApprovalRequest, c govern.ApprovalClaims) *govern.Governor {
			if _, err := g.Decide(bg, other.ID, govern.ApprovalInput{Approve: true, Token: sign(t, alice, c)}); err != nil {
				t.Fatal(err)
			}
			return newGov(t, opts)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts := baseOpts(t, nil)
			opts.Journal = govern.NewMemoryJournal()
			g := newGov(t, opts)
			r := start(t, g, govern.RunOptions{})
			spec := highRisk("pay")
			_, err := r.Invoke(bg, spec, govern.Call{ID: "c1", Args: map[string]any{"n": 1}}, notCalled(t))
			req1 := approvalOf(t, g, err)
			f := &tool{}
			_, err = r.Invoke(bg, spec, govern.Call{ID: "c2", Args: map[string]any{"n": 2}}, f.fn)
			req2 := approvalOf(t, g, err)
			c1, c2 := claimsFor(alice, req1), claimsFor(alice, req2)
			c2.ID = c1.ID // the approver's tool reused a jti
			g = tc.use(t, g, opts, r, req1, c1)

			before := len(records(t, g.Journal()))
			_, err = g.Decide(bg, req2.ID, govern.ApprovalInput{Approve: true, Token: sign(t, alice, c2)})
			wantReasons(t, err, govern.ApprovalInvalid)
			if ge := govErr(t, err); ge.Detail != "approval token already used (replay)" {
				t.Errorf("detail %q", ge.Detail)
			}
			if n := len(records(t, g.Journal())); n != before {
				t.Errorf("the refused decision journaled %d record(s)", n-before)
			}
			if got, err := g.Approval(bg, req2.ID); err != nil || got.Status != govern.StatusPending {
				t.Errorf("request after the refusal: %+v, %v", got, err)
			}
			// A fresh token still decides it, and the call runs once.
			if _, err := g.Decide(bg, req2.ID, govern.ApprovalInput{Approve: true, Token: sign(t, alice, claimsFor(alice, req2))}); err != nil {
				t.Fatal(err)
			}
			r2, err := g.Attach(bg, r.RequestID())
			if err != nil {
				t.Fatal(err)
			}
			invoke(t, r2, spec, govern.Call{ID: "c2", Args: map[string]any{"n": 2}}, f)
			if f.n() != 1 {
				t.Errorf("approved call ran %d times", f.n())
			}
			if _, err := r2.Fail(bg, "done"); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("two concurrent decisions", func(t *testing.T) {
		for range 20 {
			opts := baseOpts(t, nil)
			g := newGov(t, opts)
			r := start(t, g, govern.RunOptions{})
			spec := highRisk("pay")
			var reqs [2]govern.ApprovalRequest
			var toks [2]string
			jti := fmt.Sprintf("shared-%d", jtiSeq.Add(1))
			for i := range reqs {
				_, err := r.Invoke(bg, spec, govern.Call{ID: fmt.Sprint("c", i), Args: map[string]any{"n": i}}, notCalled(t))
				reqs[i] = approvalOf(t, g, err)
				c := claimsFor(alice, reqs[i])
				c.ID = jti
				toks[i] = sign(t, alice, c)
			}
			var errs [2]error
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range reqs {
				wg.Go(func() {
					<-start
					_, errs[i] = g.Decide(bg, reqs[i].ID, govern.ApprovalInput{Approve: true, Token: toks[i]})
				})
			}
			close(start)
			wg.Wait()
			won := 0
			for i, err := range errs {
				switch {
				case err == nil:
					won++
				case errors.Is(err, govern.ApprovalInvalid):
					if got, _ := g.Approval(bg, reqs[i].ID); got.Status != govern.StatusPending {
						t.Errorf("the losing request is %s", got.Status)
					}
				default:
					t.Errorf("Decide: %v", err)
				}
			}
			decided := 0
			for _, rec := range records(t, g.Journal()) {
				if rec.Kind == recordkind.ApprovalDecided {
					decided++
				}
			}
			if won != 1 || decided != 1 {
				t.Fatalf("%d decisions won, %d journaled; want exactly one", won, decided)
			}
			if _, err := r.Fail(bg, "done"); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestDESIGN_5_ApprovalDenied: a denied call does not run, stays denied
// when asked again (also with a token), and the decision is final.
func TestDESIGN_5_ApprovalDenied(t *testing.T) {
	g := newGov(t, baseOpts(t, nil))
	r := start(t, g, govern.RunOptions{})
	spec := highRisk("drop_table")
	call := govern.Call{ID: "c1", Args: map[string]any{"table": "users"}}
	f := &tool{}
	_, err := r.Invoke(bg, spec, call, f.fn)
	req := approvalOf(t, g, err)
	if _, err := g.Decide(bg, req.ID, govern.ApprovalInput{Approve: false}); err == nil {
		t.Error("a denial without an approver was accepted")
	}
	d, err := g.Decide(bg, req.ID, govern.ApprovalInput{Approve: false, Approver: "bob", Reason: "not on a Friday"})
	if err != nil || d.Status != govern.StatusDenied || d.Decision == nil || d.Decision.Approver != "bob" {
		t.Fatalf("Decide(deny) = %+v, %v", d, err)
	}
	for i := range 3 {
		_, err := r.Invoke(bg, spec, call, f.fn)
		wantReasons(t, err, govern.ApprovalDenied)
		if ge := govErr(t, err); ge.ApprovalID != req.ID || !strings.Contains(ge.Detail, "not on a Friday") {
			t.Errorf("attempt %d: refusal %+v", i, ge)
		}
	}
	withToken := call
	withToken.Approval = sign(t, alice, claimsFor(alice, req))
	_, err = r.Invoke(bg, spec, withToken, f.fn)
	wantReasons(t, err, govern.ApprovalDenied)
	if f.n() != 0 {
		t.Fatalf("denied call ran %d times", f.n())
	}
	for _, in := range []govern.ApprovalInput{{Approve: true, Token: withToken.Approval}, {Approve: false, Approver: "alice"}} {
		if _, err := g.Decide(bg, req.ID, in); !errors.Is(err, govern.ErrAlreadyDecided) {
			t.Errorf("second decision: err = %v, want ErrAlreadyDecided", err)
		}
	}
	if len(r.PendingApprovals()) != 0 {
		t.Errorf("pending approvals %v", r.PendingApprovals())
	}
	env, err := r.Fail(bg, "denied", govern.ApprovalDenied)
	if err != nil {
		t.Fatal(err)
	}
	wantEnvReasons(t, env, govern.ApprovalDenied)
}

// TestDESIGN_5_ApprovalRequests: deciding twice is refused; a pending
// call asked again keeps its one approval request; other arguments open
// another; unknown requests are reported.
func TestDESIGN_5_ApprovalRequests(t *testing.T) {
	decided := make(chan govern.ApprovalRequest, 1)
	opts := baseOpts(t, nil)
	opts.OnDecision = func(req govern.ApprovalRequest) { decided <- req }
	g := newGov(t, opts)
	r := start(t, g, govern.RunOptions{})
	spec := highRisk("pay")
	call := govern.Call{ID: "c1", Args: map[string]any{"amount": 10}}
	var ids []string
	for range 3 {
		_, err := r.Invoke(bg, spec, call, notCalled(t))
		ids = append(ids, approvalOf(t, g, err).ID)
	}
	if ids[0] != ids[1] || ids[1] != ids[2] {
		t.Fatalf("approval ids %v, want one", ids)
	}
	_, err := r.Invoke(bg, spec, govern.Call{ID: "c1", Args: map[string]any{"amount": 11}}, notCalled(t))
	if other := approvalOf(t, g, err); other.ID == ids[0] {
		t.Error("other arguments share the approval request")
	}
	list, err := g.Approvals(bg, true)
	if err != nil || len(list) != 2 || list[0].ID != ids[0] {
		t.Fatalf("Approvals = %+v, %v", list, err)
	}
	req := list[0]
	if req.RequestID != r.RequestID() || req.TraceID != r.TraceID() || req.Tool != "pay" || req.CallID != "c1" ||
		req.Tier != govern.WriteHighRisk || req.Rollback == nil || req.RollbackHash == "" || req.Requester.AgentID != agentID {
		t.Errorf("approval request %+v", req)
	}
	if b := req.Binding(); b.ApprovalID != req.ID || b.ArgsHash != req.ArgsHash || b.Tier != "write_high_risk" || b.Attempt != 0 {
		t.Errorf("binding %+v", b)
	}
	tok := sign(t, alice, claimsFor(alice, req))
	d, err := g.Decide(bg, req.ID, govern.ApprovalInput{Approve: true, Token: tok})
	if err != nil || d.Status != govern.StatusApproved || d.Decision.Approver != "alice" {
		t.Fatalf("Decide = %+v, %v", d, err)
	}
	if got := <-decided; got.ID != req.ID || got.Status != govern.StatusApproved {
		t.Errorf("OnDecision got %+v", got)
	}
	if _, err := g.Decide(bg, req.ID, govern.ApprovalInput{Approve: true, Token: sign(t, bob, claimsFor(bob, req))}); !errors.Is(err, govern.ErrAlreadyDecided) {
		t.Errorf("second approval: err = %v, want ErrAlreadyDecided", err)
	}
	if _, err := g.Decide(bg, req.ID, govern.ApprovalInput{Approve: false, Approver: "bob"}); !errors.Is(err, govern.ErrAlreadyDecided) {
		t.Errorf("denial after approval: err = %v, want ErrAlreadyDecided", err)
	}
	if _, err := g.Decide(bg, "00000000-0000-4000-8000-000000000000", govern.ApprovalInput{Approve: false, Approver: "bob"}); !errors.Is(err, govern.ErrUnknownApproval) {
		t.Errorf("unknown approval: err = %v", err)
	}
	if list, _ := g.Approvals(bg, true); len(list) != 1 {
		t.Errorf("pending approvals %+v, want the other one", list)
	}
	if all, _ := g.Approvals(bg, false); len(all) != 2 {
		t.Errorf("all approvals %+v", all)
	}
	if _, err := r.Fail(bg, "done"); err != nil {
		t.Fatal(err)
	}
	if all, _ := g.Approvals(bg, false); len(all) != 0 {
		t.Errorf("approvals of a closed run still listed: %+v", all)
	}
}

// TestDESIGN_5_DurablePause: a run paused for an approval survives a
// restart: the new governor lists the request, the decision is taken
// there, the run is attached and resumed with its snapshot, the approved
// call runs exactly once and the calls committed before the pause are
// replayed, not re-run.
func TestDESIGN_5_DurablePause(t *testing.T) {
	j := govern.NewMemoryJournal()
	log := &rollbackLog{}
	opts := baseOpts(t, log)
	opts.Journal = j
	g1 := newGov(t, opts)
	r := start(t, g1, govern.RunOptions{Resumer: "agent-x"})
	read, write, risky := &tool{result: "read"}, &tool{result: "written"}, &tool{result: "done"}
	invoke(t, r, readOnly("get"), govern.Call{ID: "c0", Args: map[string]any{"k": 1}}, read)
	invoke(t, r, withRollback(lowRisk("put")), govern.Call{ID: "c1", Args: map[string]any{"k": 2}}, write)
	spec := highRisk("deploy")
	call := govern.Call{ID: "c2", Args: map[string]any{"env": "prod"}}
	_, err := r.Invoke(bg, spec, call, risky.fn)
	approvalID := govErr(t, err).ApprovalID
	if err := r.Pause(bg, json.RawMessage(`{"step":3}`)); err != nil {
		t.Fatal(err)
	}
	if !r.Paused() {
		t.Error("not paused")
	}
	if _, err := r.Invoke(bg, spec, call, risky.fn); err == nil {
		t.Error("a released run took a call")
	}

	g2 := newGov(t, opts) // restart
	list, err := g2.Approvals(bg, true)
	if err != nil || len(list) != 1 || list[0].ID != approvalID {
		t.Fatalf("Approvals after restart = %+v, %v", list, err)
	}
	early, err := g2.Attach(bg, r.RequestID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := early.Resume(bg); !errors.Is(err, govern.ApprovalRequired) {
		t.Errorf("Resume before the decision: err = %v, want APPROVAL_REQUIRED", err)
	}
	if _, err := g2.Decide(bg, approvalID, govern.ApprovalInput{Approve: true, Token: sign(t, alice, claimsFor(alice, list[0]))}); err != nil {
		t.Fatal(err)
	}
	r2, err := g2.Attach(bg, r.RequestID())
	if err != nil {
		t.Fatal(err)
	}
	if r2.Resumer() != "agent-x" || !r2.Paused() || r2.TraceID() != r.TraceID() {
		t.Errorf("attached run: resumer %q paused %v trace %s", r2.Resumer(), r2.Paused(), r2.TraceID())
	}
	snap, err := r2.Resume(bg)
	if err != nil || string(snap) != `{"step":3}` {
		t.Fatalf("Resume = %s, %v", snap, err)
	}
	for _, c := range []struct {
		spec govern.ToolSpec
		call govern.Call
		f    *tool
		want string
	}{
		{readOnly("get"), govern.Call{ID: "c0", Args: map[string]any{"k": 1}}, read, "read"},
		{withRollback(lowRisk("put")), govern.Call{ID: "c1", Args: map[string]any{"k": 2}}, write, "written"},
	} {
		inv, err := r2.Invoke(bg, c.spec, c.call, c.f.fn)
		if err != nil || !inv.Replayed || inv.Result != c.want || c.f.n() != 1 {
			t.Fatalf("replaying %s: %+v %v, ran %d", c.call.ID, inv, err, c.f.n())
		}
		checkInvocation(t, inv)
	}
	// The same call ID with other arguments is not a replay.
	if _, err := r2.Invoke(bg, readOnly("get"), govern.Call{ID: "c0", Args: map[string]any{"k": 99}}, notCalled(t)); !errors.Is(err, govern.PolicyBlocked) {
		t.Errorf("call ID reused with other arguments: %v", err)
	}
	inv := invoke(t, r2, spec, call, risky)
	if risky.n() != 1 || inv.Replayed {
		t.Fatalf("approved call ran %d times (replayed %v)", risky.n(), inv.Replayed)
	}
	if _, err := r2.Invoke(bg, spec, call, risky.fn); err != nil || risky.n() != 1 {
		t.Fatalf("approved call asked again: %v, ran %d", err, risky.n())
	}
	verifyPass(t, r2, "deployed")
	if len(log.targets()) != 0 {
		t.Errorf("rollbacks on a delivered run: %v", log.targets())
	}
}

// TestDESIGN_5_PauseNeedsPending: Pause refuses without pending
// approvals, and Resume without a pause.
func TestDESIGN_5_PauseNeedsPending(t *testing.T) {
	g := newGov(t, baseOpts(t, nil))
	r := start(t, g, govern.RunOptions{})
	if err := r.Pause(bg, nil); err == nil {
		t.Error("Pause without pending approvals succeeded")
	}
	if _, err := r.Resume(bg); err == nil {
		t.Error("Resume of a run not paused succeeded")
	}
	verifyPass(t, r, "out")
}

// TestDESIGN_5_ArgsHashBindsExactly: a token approves exactly the
// arguments it was issued for, also for integers JCS cannot represent
// exactly (beyond ±2^53, which it would round to the same number): such
// arguments are refused rather than hashed ambiguously.
func TestDESIGN_5_ArgsHashBindsExactly(t *testing.T) {
	g := newGov(t, baseOpts(t, nil))
	r := start(t, g, govern.RunOptions{})
	spec := highRisk("close_account")
	f := &tool{}
	approved := map[string]any{"account": int64(9007199254740993)}
	other := map[string]any{"account": int64(9007199254740992)}
	_, err := r.Invoke(bg, spec, govern.Call{ID: "c1", Args: approved}, f.fn)
	if err == nil {
		t.Fatal("call ran without approval")
	}
	if errors.Is(err, govern.ApprovalRequired) {
		req := approvalOf(t, g, err)
		tok := sign(t, alice, claimsFor(alice, req))
		if _, err := r.Invoke(bg, spec, govern.Call{ID: "c2", Args: other, Approval: tok}, f.fn); err == nil {
			t.Error("a token for one account closed another")
		}
	}
	if f.n() != 0 {
		t.Fatalf("tool ran %d times", f.n())
	}
	if _, err := r.Fail(bg, "done"); err != nil {
		t.Fatal(err)
	}
}
