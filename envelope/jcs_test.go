package envelope_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/gowebpki/jcs"
)

// TestUAMP_4_2_RFC8785Vectors runs the RFC 8785 test vectors
// (testdata/rfc8785) through the canonicalizer: each output byte for
// byte, and the same bytes as the hex of outhex/.
func TestUAMP_4_2_RFC8785Vectors(t *testing.T) {
	inputs, _ := filepath.Glob(filepath.Join("testdata", "rfc8785", "input", "*.json"))
	if len(inputs) < 10 {
		t.Fatalf("found %d vectors, want 10", len(inputs))
	}
	for _, in := range inputs {
		name := filepath.Base(in)
		t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
			input, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join("testdata", "rfc8785", "output", name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := jcs.Transform(input)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("canonical form\n got %q\nwant %q", got, want)
			}
			if h, err := os.ReadFile(filepath.Join("testdata", "rfc8785", "outhex", strings.TrimSuffix(name, ".json")+".txt")); err == nil {
				wantHex := strings.ToLower(strings.Join(strings.Fields(string(h)), ""))
				if gotHex := hex.EncodeToString(got); gotHex != wantHex {
					t.Errorf("hex\n got %s\nwant %s", gotHex, wantHex)
				}
			}
		})
	}
}

// rfc8785AppendixB is the number table of RFC 8785 Appendix B: IEEE-754
// double bits and their canonical text; "" marks NaN and Infinity, which
// have no JSON form.
var rfc8785AppendixB = []struct{ bits, want string }{
	{"0000000000000000", "0"},
	{"8000000000000000", "0"},
	{"0000000000000001", "5e-324"},
	{"8000000000000001", "-5e-324"},
	{"7fefffffffffffff", "1.7976931348623157e+308"},
	{"ffefffffffffffff", "-1.7976931348623157e+308"},
	{"4340000000000000", "9007199254740992"},
	{"c340000000000000", "-9007199254740992"},
	{"4430000000000000", "295147905179352830000"},
	{"7fffffffffffffff", ""},
	{"7ff0000000000000", ""},
	{"44b52d02c7e14af5", "9.999999999999997e+22"},
	{"44b52d02c7e14af6", "1e+23"},
	{"44b52d02c7e14af7", "1.0000000000000001e+23"},
	{"444b1ae4d6e2ef4e", "999999999999999700000"},
	{"444b1ae4d6e2ef4f", "999999999999999900000"},
	{"444b1ae4d6e2ef50", "1e+21"},
	{"3eb0c6f7a0b5ed8c", "9.999999999999997e-7"},
	{"3eb0c6f7a0b5ed8d", "0.000001"},
	{"41b3de4355555553", "333333333.3333332"},
	{"41b3de4355555554", "333333333.33333325"},
	{"41b3de4355555555", "333333333.3333333"},
	{"41b3de4355555556", "333333333.3333334"},
	{"41b3de4355555557", "333333333.33333343"},
	{"becbf647612f3696", "-0.0000033333333333333333"},
	{"43143ff3c1cb0959", "1424953923781206.2"},
}

// TestUAMP_4_2_RFC8785Numbers runs the number table of RFC 8785 Appendix
// B: each double, written in Go's shortest form, canonicalizes to the
// RFC's text byte for byte.
func TestUAMP_4_2_RFC8785Numbers(t *testing.T) {
	for _, row := range rfc8785AppendixB {
		bits, err := strconv.ParseUint(row.bits, 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		f := math.Float64frombits(bits)
		if row.want == "" {
			if !math.IsNaN(f) && !math.IsInf(f, 0) {
				t.Errorf("%s: %v is finite", row.bits, f)
			}
			if _, err := json.Marshal(f); err == nil {
				t.Errorf("%s: %v has a JSON form", row.bits, f)
			}
			continue
		}
		in := "[" + strconv.FormatFloat(f, 'g', -1, 64) + "]"
		got, err := jcs.Transform([]byte(in))
		if err != nil {
			t.Errorf("%s: %s: %v", row.bits, in, err)
			continue
		}
		if want := "[" + row.want + "]"; string(got) != want {
			t.Errorf("%s: %s canonicalizes to %s, want %s", row.bits, in, got, want)
		}
	}
}

// TestUAMP_4_2_CanonicalForm pins the canonical form of the sample
// envelope (testdata/golden/canonical.txt): JCS of every member but sig.
// The canonical form of the decoded wire bytes (what Open hashes) is the
// same, whatever the layout, member order, escapes and number spelling of
// the bytes.
func TestUAMP_4_2_CanonicalForm(t *testing.T) {
	e, k := signed(t)
	c, err := e.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(c, []byte(`"sig"`)) {
		t.Fatalf("canonical form contains sig: %s", c)
	}
	path := filepath.Join("testdata", "golden", "canonical.txt")
	if *update {
		if err := os.WriteFile(path, c, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c, want) {
		t.Errorf("canonical form\n got %s\nwant %s", c, want)
	}
	again, err := jcs.Transform(c)
	if err != nil || !bytes.Equal(again, c) {
		t.Errorf("canonical form is not a JCS fixed point: %s, %v", again, err)
	}
	// Sig does not enter the canonical form.
	e2 := e.Clone()
	e2.Sig = "other"
	if c2, _ := e2.Canonical(); !bytes.Equal(c2, c) {
		t.Errorf("sig changes the canonical form")
	}

	// The same envelope, spelled differently, verifies.
	wire := mustJSON(t, e)
	var indented bytes.Buffer
	json.Indent(&indented, wire, "", "\t")
	variants := map[string]string{
		"indented":         indented.String(),
		"members reversed": reverseMembers(t, wire),
		"escapes":          strings.Replace(strings.Replace(string(wire), `"intent":"ask"`, `"intent":"\u0061sk"`, 1), `"x-trace"`, `"x\u002dtrace"`, 1),
		"number spelling":  strings.Replace(strings.Replace(string(wire), `"delta_window":64`, `"delta_window":6.4e1`, 1), `"n":1.5`, `"n":15E-1`, 1),
		"solidus escape":   strings.Replace(string(wire), `"text/markdown"`, `"text\/markdown"`, 1),
	}
	for name, v := range variants {
		if v == string(wire) {
			t.Fatalf("%s: variant did not change the bytes", name)
		}
		if _, err := envelope.Open(ctx, []byte(v), keySet(t, k)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// reverseMembers rewrites the top-level object with its members in
// reverse order.
func reverseMembers(t *testing.T, b []byte) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	// Sorted descending.
	for i := range keys {
		for j := i + 1; j < len(keys); j++ {
			if keys[j] > keys[i] {
				keys[i], keys[j] = keys[j], keys[i]
			}
		}
	}
	var sb strings.Builder
	sb.WriteString("{")
	for i, k := range keys {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(strconv.Quote(k) + ":" + string(m[k]))
	}
	sb.WriteString("}")
	return sb.String()
}

// TestUAMP_6_3_SigningPayload checks the JWS payload: the JCS of
// {"sha256": lowercase hex SHA-256 of the canonical form}.
func TestUAMP_6_3_SigningPayload(t *testing.T) {
	e, k := signed(t)
	c, _ := e.Canonical()
	sum := sha256.Sum256(c)
	payload := `{"sha256":"` + hex.EncodeToString(sum[:]) + `"}`
	canon, err := jcs.Transform([]byte(payload))
	if err != nil || string(canon) != payload {
		t.Fatalf("payload %s is not in JCS form (%s, %v)", payload, canon, err)
	}
	// The detached signature verifies as an attached compact JWS over
	// exactly that payload.
	prot, _, _ := strings.Cut(e.Sig, "..")
	sig := e.Sig[strings.LastIndex(e.Sig, ".")+1:]
	attached := prot + "." + b64url([]byte(payload)) + "." + sig
	s, err := envelope.ParseSignature(attached)
	if err != nil {
		t.Fatal(err)
	}
	if string(s.Payload) != payload {
		t.Fatalf("payload %s", s.Payload)
	}
	pub := k.Public().Key().(ed25519.PublicKey)
	if !ed25519.Verify(pub, []byte(prot+"."+b64url([]byte(payload))), s.Value) {
		t.Errorf("the signature is not an Ed25519 signature of <protected>.<base64url(payload)>")
	}
}
