package envelope_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/envelope"
	jose "github.com/go-jose/go-jose/v4"
)

// TestUAMP_6_3_SignVerifyRoundTrip signs with both algorithms and
// verifies the envelope and its wire bytes.
func TestUAMP_6_3_SignVerifyRoundTrip(t *testing.T) {
	for _, alg := range []envelope.Algorithm{envelope.EdDSA, envelope.ES256} {
		t.Run(string(alg), func(t *testing.T) {
			k := newKey(t, alg, sampleKID)
			e := sampleEnvelope()
			if err := envelope.Sign(e, k); err != nil {
				t.Fatal(err)
			}
			keys := keySet(t, k)
			if err := envelope.Verify(ctx, e, keys); err != nil {
				t.Fatal(err)
			}
			got, err := envelope.Open(ctx, mustJSON(t, e), keys)
			if err != nil {
				t.Fatal(err)
			}
			if err := envelope.Verify(ctx, got, keys); err != nil {
				t.Errorf("the decoded envelope does not verify: %v", err)
			}
			s, err := envelope.ParseSignature(e.Sig)
			if err != nil {
				t.Fatal(err)
			}
			if s.Algorithm != alg || s.KeyID != sampleKID || !s.Detached() {
				t.Errorf("signature %+v", s)
			}
			// A key of the other algorithm under the same kid does not
			// verify.
			other := envelope.ES256
			if alg == envelope.ES256 {
				other = envelope.EdDSA
			}
			wantCode(t, envelope.Verify(ctx, e, keySet(t, newKey(t, other, sampleKID))), envelope.CodeUnauthenticated)
			// Nor does another key of the same algorithm.
			wantCode(t, envelope.Verify(ctx, e, keySet(t, newKey(t, alg, sampleKID+"x"))), envelope.CodeUnauthenticated)
		})
	}
}

// TestUAMP_6_3_DetachedJWS pins the form of sig: <protected>..<signature>,
// protected header exactly {"alg","kid"}, 64-byte signature.
func TestUAMP_6_3_DetachedJWS(t *testing.T) {
	for _, alg := range []envelope.Algorithm{envelope.EdDSA, envelope.ES256} {
		e := sampleEnvelope()
		if err := envelope.Sign(e, newKey(t, alg, sampleKID)); err != nil {
			t.Fatal(err)
		}
		parts := strings.Split(e.Sig, ".")
		if len(parts) != 3 || parts[1] != "" {
			t.Fatalf("sig %q is not <protected>..<signature>", e.Sig)
		}
		h, err := base64.RawURLEncoding.DecodeString(parts[0])
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"alg":"` + string(alg) + `","kid":"` + sampleKID + `"}`; string(h) != want {
			t.Errorf("protected header %s, want %s", h, want)
		}
		if sig, _ := base64.RawURLEncoding.DecodeString(parts[2]); len(sig) != 64 {
			t.Errorf("%s signature of %d bytes", alg, len(sig))
		}
	}
}

// tamper is one change to a signed envelope's wire form.
type tamper struct {
	name string
	f    func(m map[string]any)
}

// TestUAMP_6_3_TamperMatrix changes every member of a signed envelope —
// each leaf of every top-level and nested member, open objects gaining a
// member, optional members removed, arrays extended and reordered — and
// checks that each change, which the schema still accepts, breaks the
// signature (4.01). The one public implementation signs only an allow-list
// of top-level members, so that body.content and ext are not signed; here
// they are.
func TestUAMP_6_3_TamperMatrix(t *testing.T) {
	e, k := signed(t)
	keys := keySet(t, k)
	wire := mustJSON(t, e)
	if _, err := envelope.Open(ctx, wire, keys); err != nil {
		t.Fatal(err)
	}
	var orig map[string]any
	if err := json.Unmarshal(wire, &orig); err != nil {
		t.Fatal(err)
	}
	var cases []tamper
	// Every leaf, changed in a way its format allows.
	var walk func(path []string, v any)
	walk = func(path []string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				walk(append(slices.Clone(path), k), c)
			}
			if len(path) == 0 || path[0] != "ext" && path[0] != "body" && path[0] != "context" {
				return
			}
			cases = append(cases, tamper{"add member to /" + strings.Join(path, "/"), func(m map[string]any) {
				at(m, path).(map[string]any)["x-added"] = "v"
			}})
		case []any:
			for i, c := range x {
				walk(append(slices.Clone(path), strconv.Itoa(i)), c)
			}
			if len(x) > 1 {
				cases = append(cases, tamper{"reorder /" + strings.Join(path, "/"), func(m map[string]any) {
					a := at(m, path).([]any)
					a[0], a[1] = a[1], a[0]
				}})
			}
			if path[0] == "to" || path[0] == "ext" {
				cases = append(cases, tamper{"extend /" + strings.Join(path, "/"), func(m map[string]any) {
					setAt(m, path, append(at(m, path).([]any), any("did:web:extra.example")))
				}})
			}
		default:
			if len(path) == 1 && path[0] == "sig" {
				return
			}
			cases = append(cases, tamper{"change /" + strings.Join(path, "/"), func(m map[string]any) {
				setAt(m, path, changed(path, at(m, path)))
			}})
		}
	}
	walk(nil, orig)
	for _, name := range []string{"reply_to", "context", "stream_id", "delta_window", "cap_token", "ext"} {
		cases = append(cases, tamper{"remove /" + name, func(m map[string]any) { delete(m, name) }})
	}
	for _, name := range []string{"encoding", "compression", "lang"} {
		cases = append(cases, tamper{"remove /body/" + name, func(m map[string]any) { delete(m["body"].(map[string]any), name) }})
	}
	cases = append(cases,
		tamper{"remove /context/0/role", func(m map[string]any) { delete(m["context"].([]any)[0].(map[string]any), "role") }},
		tamper{"remove /ext/x-nested", func(m map[string]any) { delete(m["ext"].(map[string]any), "x-nested") }},
		tamper{"empty /ext", func(m map[string]any) { m["ext"] = map[string]any{} }},
		tamper{"empty /context", func(m map[string]any) { m["context"] = []any{} }},
		tamper{"add /context element", func(m map[string]any) {
			m["context"] = append(m["context"].([]any), map[string]any{"id": "urn:uuid:00000000-0000-4000-8000-000000000000", "hash": "sha256:" + hex64('0')})
		}},
	)
	seen := map[string]bool{}
	for _, c := range cases {
		seen[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			m := deepCopy(t, orig)
			c.f(m)
			b := mustJSON(t, m)
			if string(b) == string(wire) {
				t.Fatal("the change changed nothing")
			}
			if _, err := envelope.Decode(b); err != nil {
				t.Fatalf("the changed envelope does not decode: %v", err)
			}
			_, err := envelope.Open(ctx, b, keys)
			wantCode(t, err, envelope.CodeUnauthenticated)
		})
	}
	for _, want := range []string{"change /body/content", "change /ext/x-trace", "change /ext/x-nested/n", "change /ext/x-nested/list/0",
		"change /context/0/hash", "change /to/1", "change /id", "change /ts", "change /intent", "change /delta_window", "change /body/lang",
		"add member to /body", "add member to /ext/x-nested", "reorder /to"} {
		if !seen[want] {
			t.Errorf("the matrix misses %q", want)
		}
	}
	if len(cases) < 40 {
		t.Errorf("only %d tampering cases", len(cases))
	}
}

// changed returns a different value of v that the schema still accepts
// at path.
func changed(path []string, v any) any {
	switch x := v.(type) {
	case string:
		if path[0] == "intent" {
			return "inform"
		}
		// Change the last digit, keeping UUIDs, hashes and date-times
		// well-formed; otherwise append a letter.
		for i := len(x) - 1; i >= 0; i-- {
			if x[i] >= '0' && x[i] <= '9' || x[i] >= 'a' && x[i] <= 'f' && path[0] != "from" && path[0] != "to" {
				r := byte('0')
				if x[i] == '0' {
					r = '1'
				}
				return x[:i] + string(r) + x[i+1:]
			}
		}
		return x + "x"
	case float64:
		return x + 1
	case bool:
		return !x
	case nil:
		return "null"
	}
	panic(fmt.Sprintf("unexpected %T", v))
}

func at(m map[string]any, path []string) any {
	var v any = m
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i, _ := strconv.Atoi(p)
			v = x[i]
		}
	}
	return v
}

func setAt(m map[string]any, path []string, val any) {
	parent := at(m, path[:len(path)-1])
	last := path[len(path)-1]
	switch x := parent.(type) {
	case map[string]any:
		x[last] = val
	case []any:
		i, _ := strconv.Atoi(last)
		x[i] = val
	}
}

func deepCopy(t *testing.T, m map[string]any) map[string]any {
	var out map[string]any
	if err := json.Unmarshal(mustJSON(t, m), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUAMP_6_3_SignatureTransplant moves a valid signature onto another
// envelope of the same sender and key.
func TestUAMP_6_3_SignatureTransplant(t *testing.T) {
	a, k := signed(t)
	b := sampleEnvelope()
	b.ID = "urn:uuid:6f1c2a4e-8d3b-4c1a-9e2f-0a1b2c3d4e60"
	if err := envelope.Sign(b, k); err != nil {
		t.Fatal(err)
	}
	b.Sig = a.Sig
	keys := keySet(t, k)
	wantCode(t, envelope.Verify(ctx, b, keys), envelope.CodeUnauthenticated)
	_, err := envelope.Open(ctx, mustJSON(t, b), keys)
	wantCode(t, err, envelope.CodeUnauthenticated)
}

// signWith returns a detached compact JWS over payload made with
// go-jose for any algorithm and key, with extra protected headers.
func signWith(t *testing.T, alg jose.SignatureAlgorithm, key any, kid string, extra map[jose.HeaderKey]any, payload []byte) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithHeader("kid", kid)
	for k, v := range extra {
		opts.WithHeader(k, v)
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := s.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	out, err := obj.DetachedCompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rawSig signs <b64(header)>.<b64(payload)> with Ed25519 directly, for
// headers go-jose would not write.
func rawSig(priv ed25519.PrivateKey, header string, payload []byte) string {
	h := b64url([]byte(header))
	sig := ed25519.Sign(priv, []byte(h+"."+b64url(payload)))
	return h + ".." + b64url(sig)
}

// envelopePayload is the JWS payload of e (TestUAMP_6_3_SigningPayload
// checks the construction).
func envelopePayload(t *testing.T, e *envelope.Envelope) []byte {
	c, err := e.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(c)
	return []byte(`{"sha256":"` + hex.EncodeToString(sum[:]) + `"}`)
}

// TestUAMP_6_3_AlgorithmAllowList checks signatures that are valid for
// their own header but use another algorithm, a crit, or another header
// member: each is refused with 4.01, whatever key the resolver holds.
func TestUAMP_6_3_AlgorithmAllowList(t *testing.T) {
	e := sampleEnvelope()
	k := edKey(t, sampleKID)
	payload := envelopePayload(t, e)
	priv := k.Signer().(ed25519.PrivateKey)
	pub := k.Public().Key().(ed25519.PublicKey)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p256, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	noneHeader := b64url([]byte(`{"alg":"none","kid":"` + sampleKID + `"}`))
	cases := map[string]string{
		"alg none":                        noneHeader + "..",
		"alg none with sig":               noneHeader + ".." + b64url(make([]byte, 64)),
		"HS256 keyed by the public key":   signWith(t, jose.HS256, []byte(pub), sampleKID, nil, payload),
		"RS256":                           signWith(t, jose.RS256, rsaKey, sampleKID, nil, payload),
		"PS256":                           signWith(t, jose.PS256, rsaKey, sampleKID, nil, payload),
		"ES384":                           signWith(t, jose.ES384, p384, sampleKID, nil, payload),
		"ES512-like header on P-256":      rawSig(priv, `{"alg":"ES512","kid":"`+sampleKID+`"}`, payload),
		"ES256 header, Ed25519 signature": rawSig(priv, `{"alg":"ES256","kid":"`+sampleKID+`"}`, payload),
		"crit b64":                        rawSig(priv, `{"alg":"EdDSA","b64":false,"crit":["b64"],"kid":"`+sampleKID+`"}`, payload),
		"crit unknown":                    rawSig(priv, `{"alg":"EdDSA","crit":["x"],"kid":"`+sampleKID+`","x":1}`, payload),
		"typ":                             rawSig(priv, `{"alg":"EdDSA","kid":"`+sampleKID+`","typ":"JOSE"}`, payload),
		"embedded jwk":                    signWith(t, jose.EdDSA, priv, sampleKID, map[jose.HeaderKey]any{"jwk": jose.JSONWebKey{Key: pub}}, payload),
		"duplicate alg":                   rawSig(priv, `{"alg":"none","alg":"EdDSA","kid":"`+sampleKID+`"}`, payload),
		"no kid":                          rawSig(priv, `{"alg":"EdDSA"}`, payload),
		"empty kid":                       rawSig(priv, `{"alg":"EdDSA","kid":""}`, payload),
		"kid not a string":                rawSig(priv, `{"alg":"EdDSA","kid":1}`, payload),
		"alg lower case":                  rawSig(priv, `{"alg":"eddsa","kid":"`+sampleKID+`"}`, payload),
		"header not an object":            b64url([]byte(`["EdDSA"]`)) + ".." + b64url(make([]byte, 64)),
		"attached payload":                strings.Replace(rawSig(priv, `{"alg":"EdDSA","kid":"`+sampleKID+`"}`, payload), "..", "."+b64url(payload)+".", 1),
		"two dots only":                   "..",
		"four segments":                   rawSig(priv, `{"alg":"EdDSA","kid":"`+sampleKID+`"}`, payload) + ".x",
		"padded base64":                   rawSig(priv, `{"alg":"EdDSA","kid":"`+sampleKID+`"}`, payload) + "==",
		"short signature":                 rawSig(priv, `{"alg":"EdDSA","kid":"`+sampleKID+`"}`, payload)[:100],
	}
	// The control: the same construction with the allowed header verifies.
	good := rawSig(priv, `{"alg":"EdDSA","kid":"`+sampleKID+`"}`, payload)
	ok := e.Clone()
	ok.Sig = good
	all := keySet(t, k)
	if err := envelope.Verify(ctx, ok, all); err != nil {
		t.Fatalf("control: %v", err)
	}
	// Resolvers that hand out whatever key the attacker would like.
	resolvers := map[string]envelope.KeyResolver{
		"key set": all,
		"P-256 key": envelope.KeyResolverFunc(func(_ context.Context, _, kid string) (*envelope.PublicKey, error) {
			return envelope.NewPublicKey(&p256.PublicKey, kid)
		}),
	}
	for name, sig := range cases {
		for rname, r := range resolvers {
			t.Run(name+"/"+rname, func(t *testing.T) {
				bad := e.Clone()
				bad.Sig = sig
				wantCode(t, envelope.Verify(ctx, bad, r), envelope.CodeUnauthenticated)
				_, err := envelope.Open(ctx, mustJSON(t, bad), r)
				wantCode(t, err, envelope.CodeUnauthenticated)
			})
		}
	}
}

// TestUAMP_6_3_NonCanonicalBase64 flips the unused low bits of the last
// character of the signature: base64 decoders ignore them, so the bytes
// are the same, but the spelling is not the one the signer wrote.
func TestUAMP_6_3_NonCanonicalBase64(t *testing.T) {
	e, k := signed(t)
	last := e.Sig[len(e.Sig)-1]
	alphabet := "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, last)
	// 64 bytes = 86 characters, the last carrying 2 bits: 4 unused.
	twin := alphabet[i^1 : i^1+1]
	bad := e.Clone()
	bad.Sig = e.Sig[:len(e.Sig)-1] + twin
	wantCode(t, envelope.Verify(ctx, bad, keySet(t, k)), envelope.CodeUnauthenticated)
}

// TestUAMP_6_3_UnknownKey covers key resolution: an unknown kid and a
// nil key are 4.01, a kid that is a DID URL of another DID than from is
// 4.01 before any lookup, a failing lookup is 5.04 (retryable), a
// resolver's own *Error passes through.
func TestUAMP_6_3_UnknownKey(t *testing.T) {
	e, k := signed(t)
	wantCode(t, envelope.Verify(ctx, e, keySet(t, edKey(t, "other"))), envelope.CodeUnauthenticated)
	err := envelope.Verify(ctx, e, keySet(t))
	wantCode(t, err, envelope.CodeUnauthenticated)
	if !errors.Is(err, envelope.ErrKeyNotFound) {
		t.Errorf("%v does not wrap ErrKeyNotFound", err)
	}
	wantCode(t, envelope.Verify(ctx, e, nil), envelope.CodeUnauthenticated)
	nilKey := envelope.KeyResolverFunc(func(context.Context, string, string) (*envelope.PublicKey, error) { return nil, nil })
	wantCode(t, envelope.Verify(ctx, e, nilKey), envelope.CodeUnauthenticated)

	down := envelope.KeyResolverFunc(func(context.Context, string, string) (*envelope.PublicKey, error) {
		return nil, errors.New("did:web fetch: connection refused")
	})
	err = envelope.Verify(ctx, e, down)
	wantCode(t, err, envelope.CodeBusy)
	if e := envelope.AsError(err); !e.Retry || strings.Contains(e.Message, "refused") {
		t.Errorf("lookup failure %+v: want retryable, without the internal text", e)
	}
	own := envelope.KeyResolverFunc(func(context.Context, string, string) (*envelope.PublicKey, error) {
		return nil, envelope.NewError(envelope.CodeUnauthorized, "sender is blocked", nil)
	})
	wantCode(t, envelope.Verify(ctx, e, own), envelope.CodeUnauthorized)

	// kid did:web:client.example#key-1 may sign only for that DID.
	other := sampleEnvelope()
	other.From = "did:web:mallory.example"
	if err := envelope.Sign(other, k); err != nil {
		t.Fatal(err)
	}
	var asked bool
	spy := envelope.KeyResolverFunc(func(_ context.Context, _, kid string) (*envelope.PublicKey, error) {
		asked = true
		return k.Public(), nil
	})
	wantCode(t, envelope.Verify(ctx, other, spy), envelope.CodeUnauthenticated)
	if asked {
		t.Error("the resolver was asked for a key of another DID")
	}
	// The resolver learns the sender.
	var gotFrom string
	rec := envelope.KeyResolverFunc(func(_ context.Context, from, _ string) (*envelope.PublicKey, error) {
		gotFrom = from
		return k.Public(), nil
	})
	if err := envelope.Verify(ctx, e, rec); err != nil || gotFrom != sampleFrom {
		t.Errorf("Verify: %v; resolver saw from %q", err, gotFrom)
	}
}

// TestUAMP_6_3_SignRefusesUnverifiable: an envelope whose ext carries
// an integer beyond 2^53 cannot be signed (its peer could not decode it).
func TestUAMP_6_3_SignRefusesUnverifiable(t *testing.T) {
	e := sampleEnvelope()
	e.Ext["big"] = int64(1<<53 + 1)
	wantCode(t, envelope.Sign(e, edKey(t, sampleKID)), envelope.CodeBadRequest)
	e.Ext["big"] = int64(1 << 53)
	if err := envelope.Sign(e, edKey(t, sampleKID)); err != nil {
		t.Fatal(err)
	}
}
