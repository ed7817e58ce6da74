package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/internal/ids"
	"github.com/spf13/cobra"
)

// maxEnvelopeInput bounds what uamp sign and verify read.
const maxEnvelopeInput = envelope.MaxEnvelopeSize + 1

func uampCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "uamp",
		Short: "UAMP 1.0 envelopes: make keys, sign, verify, send",
		Long: `Work with UAMP 1.0 message envelopes (uamp.dev).

An envelope is signed with a detached compact JWS (EdDSA or ES256) over the
RFC 8785 canonical form of the envelope without "sig"; keys are JWKs.`,
		Example: `  agentry uamp keygen --alg EdDSA --kid client-1 --out ~/.config/agentry/client.jwk > ~/.config/agentry/client.pub.jwk
  agentry uamp sign --key ~/.config/agentry/client.jwk ask.json > ask.signed.json
  agentry uamp verify --keys ~/.config/agentry/client.pub.jwk ask.signed.json
  agentry uamp send https://127.0.0.1:8443 ask.json --key ~/.config/agentry/client.jwk --ca agentry-data/tls/cert.pem`,
	}
	cmd.AddCommand(uampKeygenCmd(e), uampSignCmd(e), uampVerifyCmd(e), uampSendCmd(e))
	return cmd
}

func uampKeygenCmd(e *env) *cobra.Command {
	var alg, kid, out string
	var force bool
	cmd := &cobra.Command{
		Use:   "keygen --out FILE",
		Short: "Create a signing key: the private JWK to --out (mode 0600), the public JWK on stdout",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return usageError("--out FILE is required: the private key is never printed")
			}
			a := envelope.Algorithm(alg)
			if !a.Valid() {
				return usageError("--alg %q: want EdDSA or ES256", alg)
			}
			k, err := envelope.GenerateKey(a, kid)
			if err != nil {
				return err
			}
			priv, err := json.MarshalIndent(k, "", "  ")
			if err != nil {
				return err
			}
			flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
			if force {
				flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
			}
			if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
				return err
			}
			f, err := os.OpenFile(out, flags, 0o600)
			if errors.Is(err, os.ErrExist) {
				return fmt.Errorf("%s exists (use --force to replace it)", out)
			} else if err != nil {
				return err
			}
			_, err = f.Write(append(priv, '\n'))
			if err == nil {
				err = f.Sync()
			}
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				os.Remove(out)
				return err
			}
			pub, err := json.Marshal(k.Public())
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s\n", pub)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&alg, "alg", string(envelope.EdDSA), "EdDSA (Ed25519) or ES256 (P-256)")
	fl.StringVar(&kid, "kid", "", "key id (default: the key's RFC 7638 thumbprint)")
	fl.StringVar(&out, "out", "", "file for the private JWK")
	fl.BoolVar(&force, "force", false, "replace an existing --out file")
	return cmd
}

func uampSignCmd(e *env) *cobra.Command {
	var keyFile string
	cmd := &cobra.Command{
		Use:   "sign --key FILE [ENVELOPE|-]",
		Short: "Sign an envelope and print it",
		Long: `Sign the envelope in the file ENVELOPE (or standard input) with the private
JWK in --key and print the signed envelope. Members the envelope lacks are
filled in: "id" (a new urn:uuid) and "ts" (now). The result is checked
against the envelope schema before it is signed; an existing "sig" is
replaced.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keyFile == "" {
				return usageError("--key FILE is required")
			}
			kb, err := os.ReadFile(keyFile)
			if err != nil {
				return err
			}
			key, err := envelope.ParsePrivateKey(kb)
			if err != nil {
				return fmt.Errorf("--key %s: %w", keyFile, err)
			}
			in, err := readEnvelopeInput(e, args)
			if ue := (*envelope.Error)(nil); errors.As(err, &ue) {
				return uampFailure(e.stderr, err)
			} else if err != nil {
				return err
			}
			env, err := completeEnvelope(in, nil)
			if err != nil {
				return uampFailure(e.stderr, err)
			}
			if err := envelope.Sign(env, key); err != nil {
				return uampFailure(e.stderr, err)
			}
			out, err := json.Marshal(env)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "%s\n", out)
			return nil
		},
	}
	cmd.Flags().StringVar(&keyFile, "key", "", "private JWK (from agentry uamp keygen)")
	return cmd
}

func uampVerifyCmd(e *env) *cobra.Command {
	var keysFile string
	cmd := &cobra.Command{
		Use:   "verify --keys FILE [ENVELOPE|-]",
		Short: "Verify an envelope's signature: exit 0 and ok, or exit 1 with the UAMP error code",
		Long: `Decode the envelope in ENVELOPE (or standard input) strictly — closed schema,
no duplicate members, valid UTF-8, numbers within ±2^53 — and verify its
detached JWS against the key its "kid" names in --keys (a JWK or a JWK set;
a private JWK stands for its public half). Prints "ok" and exits 0, or
prints the UAMP error code and reason and exits 1.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if keysFile == "" {
				return usageError("--keys FILE is required")
			}
			kb, err := os.ReadFile(keysFile)
			if err != nil {
				return err
			}
			keys, err := parseKeys(kb)
			if err != nil {
				return fmt.Errorf("--keys %s: %w", keysFile, err)
			}
			in, err := readEnvelopeInput(e, args)
			if ue := (*envelope.Error)(nil); errors.As(err, &ue) {
				return uampFailure(e.stdout, err)
			} else if err != nil {
				return err
			}
			if _, err := envelope.Open(cmd.Context(), in, keys); err != nil {
				return uampFailure(e.stdout, err)
			}
			fmt.Fprintln(e.stdout, "ok")
			return nil
		},
	}
	cmd.Flags().StringVar(&keysFile, "keys", "", "public JWK or JWK set")
	return cmd
}

// readEnvelopeInput reads the file args[0], or standard input when there
// is none or it is "-", up to the envelope size limit.
func readEnvelopeInput(e *env, args []string) ([]byte, error) {
	r := e.stdin
	if len(args) == 1 && args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxEnvelopeInput))
	if err != nil {
		return nil, err
	}
	if len(b) >= maxEnvelopeInput {
		return nil, envelope.NewError(envelope.CodePayloadTooLarge, fmt.Sprintf("envelope larger than %d bytes", envelope.MaxEnvelopeSize), nil)
	}
	return b, nil
}

// member is a top-level envelope member and its value.
type member struct {
	name  string
	value any
}

// completeEnvelope fills a missing id and ts of the envelope JSON in b,
// and the members of defaults it lacks, and decodes it strictly, so that
// what is signed is what a verifier decodes. The members are inserted
// into the text as given, so that the strict decoder still sees
// everything the input said (a duplicate member is refused, not
// resolved).
func completeEnvelope(b []byte, defaults []member) (*envelope.Envelope, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return nil, envelope.NewError(envelope.CodeBadRequest, "the input is not a JSON object", err)
	}
	// The schema requires sig: a placeholder stands in for the one Sign
	// writes (an existing sig is replaced the same way).
	var add []byte
	fill := append([]member{{"id", "urn:uuid:" + ids.New()}, {"ts", ids.Now().UTC().Format(envelope.TimeFormat)}, {"sig", "unsigned"}}, defaults...)
	for _, f := range fill {
		if _, ok := m[f.name]; !ok {
			v, err := json.Marshal(f.value)
			if err != nil {
				return nil, err
			}
			add = fmt.Appendf(add, "%q:%s,", f.name, v)
		}
	}
	if len(add) > 0 {
		i := bytes.IndexByte(b, '{') + 1
		if len(m) == 0 {
			add = add[:len(add)-1]
		}
		b = slices.Concat(b[:i], add, b[i:])
	}
	e, err := envelope.Decode(b)
	if err != nil {
		return nil, err
	}
	e.Sig = ""
	return e, nil
}

// parseKeys reads a JWK set, a public JWK or a private JWK.
func parseKeys(b []byte) (envelope.KeyResolver, error) {
	if s, err := envelope.ParseKeySet(b); err == nil {
		return s, nil
	}
	if k, err := envelope.ParsePublicKey(b); err == nil {
		return envelope.NewKeySet(k)
	}
	k, err := envelope.ParsePrivateKey(b)
	if err != nil {
		return nil, errors.New("not a JWK set, a public JWK or a private JWK (EdDSA or ES256)")
	}
	return envelope.NewKeySet(k.Public())
}

// uampFailure prints err as "CODE reason" to w (an error that is not a
// UAMP error is 5.00) and returns an exit status 1 error, which Main does
// not print again.
func uampFailure(w io.Writer, err error) error {
	ue := envelope.AsError(err)
	fmt.Fprintf(w, "%s %s\n", ue.Code, ue.Message)
	return &exitError{code: 1, err: err, quiet: true}
}
