package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/agentry-dev/agentry/envelope"
	"github.com/agentry-dev/agentry/messaging"
	"github.com/agentry-dev/agentry/messaging/discovery"
	"github.com/agentry-dev/agentry/messaging/grpcmsg"
	"github.com/spf13/cobra"
)

// uampClientFlags are how a UAMP client command reaches a server: its
// signing key, its TLS client certificate and the server's CA.
type uampClientFlags struct {
	key      string
	cert     string
	certKey  string
	ca       string
	insecure bool
}

func (f *uampClientFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.key, "key", "", "private JWK that signs the envelopes (agentry uamp keygen); the server must trust its public half")
	fl.StringVar(&f.cert, "cert", "", "PEM client certificate (default: one made with --key, naming the envelope's from)")
	fl.StringVar(&f.certKey, "cert-key", "", "PEM key of --cert")
	fl.StringVar(&f.ca, "ca", "", "PEM CA certificates the server's certificate must chain to (agentry serve's dev certificate: <data>/tls/cert.pem)")
	fl.BoolVar(&f.insecure, "insecure-dev", false, "do not verify the server's certificate (loopback servers only)")
}

// load reads the signing key and checks the flags' combinations.
func (f *uampClientFlags) load() (*envelope.PrivateKey, error) {
	if f.key == "" {
		return nil, usageError("--key FILE is required: envelopes are signed")
	}
	if (f.cert == "") != (f.certKey == "") {
		return nil, usageError("--cert and --cert-key go together")
	}
	if f.ca != "" && f.insecure {
		return nil, usageError("--ca and --insecure-dev exclude each other")
	}
	b, err := os.ReadFile(f.key)
	if err != nil {
		return nil, err
	}
	k, err := envelope.ParsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("--key %s: %w", f.key, err)
	}
	return k, nil
}

// serverTLS returns the TLS configuration verifying the server at u
// (without a client certificate).
func (f *uampClientFlags) serverTLS(u *url.URL) (*tls.Config, error) {
	conf := &tls.Config{MinVersion: tls.VersionTLS13}
	switch {
	case f.ca != "":
		b, err := os.ReadFile(f.ca)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("--ca %s: no PEM certificate", f.ca)
		}
		conf.RootCAs = pool
	case f.insecure:
		if !isLoopback(u.Hostname()) {
			return nil, usageError("--insecure-dev is for loopback servers only, not %s: give its CA with --ca", u.Hostname())
		}
		conf.InsecureSkipVerify = true
	}
	return conf, nil
}

// clientCertificate returns --cert/--cert-key, or a certificate made with
// key naming principal (messaging.KeyCertificate).
func (f *uampClientFlags) clientCertificate(key *envelope.PrivateKey, principal string) (tls.Certificate, error) {
	if f.cert != "" {
		c, err := tls.LoadX509KeyPair(f.cert, f.certKey)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("--cert/--cert-key: %w", err)
		}
		return c, nil
	}
	return messaging.KeyCertificate(key, principal, time.Hour)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// parseServerURL accepts an https URL of a server root.
func parseServerURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, usageError("%q is not an https:// URL: UAMP is served over TLS only", raw)
	}
	return u, nil
}

// keyDID returns the DID a key's kid is a DID URL of, or "".
func keyDID(k *envelope.PrivateKey) string {
	if did, _, ok := strings.Cut(k.KID(), "#"); ok && strings.HasPrefix(did, "did:") {
		return did
	}
	return ""
}

// certPrincipal returns the single URI of a certificate, or "".
func certPrincipal(c tls.Certificate) string {
	leaf := c.Leaf
	if leaf == nil && len(c.Certificate) > 0 {
		leaf, _ = x509.ParseCertificate(c.Certificate[0])
	}
	if leaf == nil || len(leaf.URIs) != 1 {
		return ""
	}
	return leaf.URIs[0].String()
}

// discoverDID returns the DID of the server at base from its signed hub
// (verified by did:web, as discovery.Discover does).
func discoverDID(ctx context.Context, base string, conf *tls.Config) (string, error) {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: conf.Clone()}}
	defer hc.CloseIdleConnections()
	d, err := discovery.Discover(ctx, base, &discovery.ClientOptions{HTTPClient: hc})
	if err != nil {
		return "", err
	}
	return d.Hub.DID, nil
}

func uampSendCmd(e *env) *cobra.Command {
	var cf uampClientFlags
	var from string
	var ws, grpcBinding bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "send URL [ENVELOPE|-] --key FILE",
		Short: "Sign an envelope, send it to a UAMP server and print the deltas as they arrive",
		Long: `Sign the envelope in ENVELOPE (or standard input) with --key, send it to the
UAMP server at URL (https://host:port) and print its stream: one delta per
line, as JSON, as it arrives, over HTTP/2 + SSE (default), WebSocket
(--ws) or gRPC (--grpc). The stream is ACKed as it is read, and followed
across a dropped connection.

Members the envelope lacks are filled in: "id", "ts", "intent" (ask),
"from" (--from, else the DID of --key's kid when it is a DID URL, else
the URI of --cert) and "to" (the server's DID, read from its signed hub
at /.well-known/agent-hub.json and verified by did:web).

The TLS client certificate is --cert/--cert-key, or one made with --key
naming "from" — which a server trusting --key accepts (agentry serve
--uamp-trust). The server's certificate is verified against --ca, or the
system roots; --insecure-dev skips that for a loopback server.

Exit status 0 after a done delta; 1 with "CODE reason" on standard error
when the server refuses the request or the stream ends with an error or
cancel delta.`,
		Example: `  echo '{"body":{"type":"text/plain","content":"hello"}}' |
    agentry uamp send https://127.0.0.1:8443 --key client.jwk --from did:web:client.example --ca agentry-data/tls/cert.pem
  agentry uamp send https://127.0.0.1:8443 ask.json --key client.jwk --insecure-dev --ws   # or --grpc`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := parseServerURL(args[0])
			if err != nil {
				return err
			}
			key, err := cf.load()
			if err != nil {
				return err
			}
			conf, err := cf.serverTLS(u)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			in, err := readEnvelopeInput(e, args[1:])
			if ue := (*envelope.Error)(nil); errors.As(err, &ue) {
				return uampFailure(e.stderr, err)
			} else if err != nil {
				return err
			}
			var present map[string]json.RawMessage
			if err := json.Unmarshal(in, &present); err != nil || present == nil {
				return uampFailure(e.stderr, envelope.NewError(envelope.CodeBadRequest, "the input is not a JSON object", err))
			}

			var cert tls.Certificate
			haveCert := false
			if cf.cert != "" {
				if cert, err = cf.clientCertificate(key, ""); err != nil {
					return err
				}
				haveCert = true
			}
			var defaults []member
			if _, ok := present["from"]; !ok {
				sender := from
				if sender == "" {
					sender = keyDID(key)
				}
				if sender == "" && haveCert {
					sender = certPrincipal(cert)
				}
				if sender == "" {
					return usageError(`the envelope has no "from": give --from (the key's kid %q is not a DID URL)`, key.KID())
				}
				defaults = append(defaults, member{"from", sender})
			}
			if _, ok := present["to"]; !ok {
				did, err := discoverDID(ctx, u.String(), conf)
				if err != nil {
					fmt.Fprintf(e.stderr, "%s cannot learn the server's DID from its signed hub (give \"to\" in the envelope): %v\n", envelope.AsError(err).Code, err)
					return &exitError{code: 1, err: err, quiet: true}
				}
				defaults = append(defaults, member{"to", []string{did}})
			}
			defaults = append(defaults, member{"intent", envelope.IntentAsk})
			req, err := completeEnvelope(in, defaults)
			if err != nil {
				return uampFailure(e.stderr, err)
			}
			if req.Intent != envelope.IntentAsk && req.Intent != envelope.IntentSubscribe {
				return usageError("intent %q: send opens a stream with an ask or a subscribe", req.Intent)
			}
			if !haveCert {
				if cert, err = cf.clientCertificate(key, req.From); err != nil {
					return err
				}
			}
			conf.Certificates = []tls.Certificate{cert}
			opts := &messaging.ClientOptions{Key: key, TLS: conf}
			var client asker
			switch {
			case ws && grpcBinding:
				return usageError("--ws and --grpc exclude each other")
			case grpcBinding:
				c, err := grpcmsg.NewClient(u.String(), opts)
				if err != nil {
					return err
				}
				defer c.Close()
				client = c
			default:
				if ws {
					opts.WebSocket = true
				}
				c, err := messaging.NewClient(u.String(), opts)
				if err != nil {
					return err
				}
				defer c.CloseIdleConnections()
				client = c
			}
			return sendAndPrint(ctx, e, client, req)
		},
	}
	cf.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&from, "from", "", `the sender when the envelope has no "from" (default: the DID of --key's kid)`)
	fl.BoolVar(&ws, "ws", false, "use the WebSocket binding (/uamp/1/ws) instead of HTTP/2 + SSE")
	fl.BoolVar(&grpcBinding, "grpc", false, "use the gRPC binding (uamp.v1.Agent) instead of HTTP/2 + SSE")
	fl.DurationVar(&timeout, "timeout", 0, "give up after this long (0: never)")
	return cmd
}

// asker is a UAMP client of any binding.
type asker interface {
	Ask(ctx context.Context, req *envelope.Envelope) (*messaging.Reply, error)
}

// sendAndPrint asks and prints the deltas, one JSON line each.
func sendAndPrint(ctx context.Context, e *env, client asker, req *envelope.Envelope) error {
	reply, err := client.Ask(ctx, req)
	if err != nil {
		return sendFailure(e.stderr, err)
	}
	for d, err := range reply.Deltas() {
		if err != nil {
			return sendFailure(e.stderr, err)
		}
		b, err := json.Marshal(d)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "%s\n", b)
		if d.Type == envelope.DeltaCancel {
			return sendFailure(e.stderr, errors.New("the request was cancelled"))
		}
	}
	return nil
}

// sendFailure prints a UAMP error as "CODE reason", and any other
// failure (TLS, network) as it is; exit status 1 either way.
func sendFailure(w io.Writer, err error) error {
	if ue := (*envelope.Error)(nil); errors.As(err, &ue) {
		return uampFailure(w, err)
	}
	fmt.Fprintln(w, "agentry:", err)
	return &exitError{code: 1, err: err, quiet: true}
}
