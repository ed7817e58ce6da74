package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/uicontrol/uiapworkflow"
	"github.com/spf13/cobra"
)

func uiapCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "uiap",
		Short: "UIAP Core 0.1: talk to an app as an agent",
	}
	cmd.AddCommand(uiapConnectCmd(e))
	return cmd
}

func uiapConnectCmd(e *env) *cobra.Command {
	var token, workflowName string
	var confirm bool
	cmd := &cobra.Command{
		Use:   "connect URL",
		Short: "Open a UIAP session with an app and drive it from standard input",
		Long: `Connect to a UIAP app as an agent — ws:// or wss:// URLs over the ws@0.1
binding, http:// or https:// over http@0.1 — negotiate a session (with the
action extension), print the session and the app's capability document,
then read commands from standard input, one per line, until end of input:

  action ID {JSON args}       run an action (progress and result are printed)
  get [SECTION...]            capabilities.get, optionally only some sections
  ping                        a heartbeat round trip
  {"type":…,"payload":{…}}    any request, as JSON
  # …                         a comment

Every event the app sends (capabilities.changed, signals) is printed as
it arrives. An app that asks to confirm an action (its policy's
"confirm") is answered no, unless --yes; the request is printed either way.
Everything printed is one JSON value per line; errors are
{"error":…} lines and make the exit status 1. The session is terminated
at end of input. Against agentry serve: ws://127.0.0.1:8080/uiap/ws?workflow=store
(WebSocket) or http://127.0.0.1:8080/uiap (HTTP binding: the prefix of its
/sessions paths; it reaches the first workflow).`,
		Example: `  printf 'action search_products {"category":"coffee"}\naction transition:cart {}\n' |
    agentry uiap connect 'ws://127.0.0.1:8080/uiap/ws?workflow=store'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fromEnv(cmd, "token", "AGENTRY_TOKEN", &token)
			return uiapConnect(cmd.Context(), e, args[0], token, workflowName, confirm)
		},
	}
	cmd.Flags().StringVar(&token, "token", "", "bearer token for the app's endpoint (env AGENTRY_TOKEN)")
	cmd.Flags().BoolVar(&confirm, "yes", false, "confirm every action the app asks to confirm")
	cmd.Flags().StringVar(&workflowName, "workflow", "", "with agentry serve: the workflow to drive (sent in session.initialize's ext; works over both bindings)")
	return cmd
}

func uiapConnect(ctx context.Context, e *env, url, token, workflowName string, confirm bool) error {
	header := http.Header{}
	if token != "" {
		header.Set("Authorization", "Bearer "+token)
	}
	var t uicontrol.Transport
	var err error
	switch {
	case strings.HasPrefix(url, "ws://"), strings.HasPrefix(url, "wss://"):
		t, err = uicontrol.DialWS(ctx, url, &uicontrol.WSDialOptions{Header: header})
	case strings.HasPrefix(url, "http://"), strings.HasPrefix(url, "https://"):
		t, err = uicontrol.DialHTTP(ctx, url, &uicontrol.HTTPDialOptions{Header: header})
	default:
		return usageError("URL %q: want ws://, wss://, http:// or https://", url)
	}
	if err != nil {
		return err
	}
	var mu sync.Mutex // one line at a time on stdout
	print := func(v any) {
		b, err := json.Marshal(v)
		if err != nil {
			b, _ = json.Marshal(map[string]string{"error": err.Error()})
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(e.stdout, "%s\n", b)
	}
	var ext map[string]any
	if workflowName != "" {
		ext = map[string]any{uiapworkflow.ExtWorkflow: map[string]string{"name": workflowName}}
	}
	a, err := uicontrol.Connect(ctx, t, &uicontrol.AgentOptions{
		InitializeExt: ext,
		Extensions:    []uicontrol.ExtensionOffer{{ID: uicontrol.ExtensionAction, Versions: []string{"0.1"}}},
		OnEvent:       func(env *uicontrol.Envelope) { print(map[string]any{"event": env}) },
		Confirm: func(_ context.Context, c *uicontrol.ActionConfirmation) (bool, error) {
			print(map[string]any{"confirm": c, "confirmed": confirm})
			return confirm, nil
		},
	})
	if err != nil {
		t.Close()
		return err
	}
	defer a.Close()
	si := a.Session()
	print(map[string]any{"session": map[string]any{"sessionId": si.ID, "uiap": si.Version, "profiles": si.Profiles,
		"extensions": si.Extensions, "capabilityDelivery": si.CapabilityDelivery, "heartbeatMs": si.Heartbeat.Milliseconds()}})
	if caps, err := a.GetCapabilities(ctx); err == nil {
		print(map[string]any{"capabilities": caps})
	} else {
		print(map[string]any{"error": err.Error()})
	}

	failed := false
	fail := func(err error) {
		failed = true
		print(map[string]any{"error": err.Error()})
	}
	sc := bufio.NewScanner(e.stdin)
	sc.Buffer(make([]byte, 64<<10), uicontrol.DefaultMaxMessageSize)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := uiapCommand(ctx, a, line, print); err != nil {
			fail(err)
		}
	}
	if err := sc.Err(); err != nil && err != io.EOF {
		fail(err)
	}
	if err := a.Terminate(ctx, "done"); err != nil {
		fail(err)
	}
	if failed {
		return &exitError{code: 1, err: fmt.Errorf("some commands failed"), quiet: true}
	}
	return nil
}

// uiapCommand runs one input line.
func uiapCommand(ctx context.Context, a *uicontrol.Agent, line string, print func(any)) error {
	word, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	switch {
	case word == "action":
		id, argText, _ := strings.Cut(rest, " ")
		if id == "" {
			return fmt.Errorf("action: want action ID {JSON args}")
		}
		var args any
		if argText = strings.TrimSpace(argText); argText != "" {
			if err := json.Unmarshal([]byte(argText), &args); err != nil {
				return fmt.Errorf("action %s: arguments are not JSON: %w", id, err)
			}
		}
		res, err := a.CallAction(ctx, &uicontrol.ActionRequest{ActionID: id, Args: args}, func(p *uicontrol.ActionProgress) {
			print(map[string]any{"progress": p})
		})
		if err != nil {
			return fmt.Errorf("action %s: %w", id, err)
		}
		print(map[string]any{"result": res})
	case word == "get":
		caps, err := a.GetCapabilities(ctx, strings.Fields(rest)...)
		if err != nil {
			return err
		}
		print(map[string]any{"capabilities": caps})
	case word == "ping":
		if err := a.Ping(ctx); err != nil {
			return err
		}
		print(map[string]any{"pong": true})
	case strings.HasPrefix(line, "{"):
		var req struct {
			Type     string         `json:"type"`
			Payload  map[string]any `json:"payload"`
			Requires []string       `json:"requires"`
			Ext      map[string]any `json:"ext"`
		}
		if err := json.Unmarshal([]byte(line), &req); err != nil || req.Type == "" {
			return fmt.Errorf("a JSON request needs a type: %q", line)
		}
		resp, err := a.Call(ctx, &uicontrol.Request{Type: req.Type, Payload: req.Payload, Requires: req.Requires, Ext: req.Ext})
		if err != nil {
			return err
		}
		print(map[string]any{"response": resp})
	default:
		return fmt.Errorf("unknown command %q (action, get, ping or a JSON request)", word)
	}
	return nil
}
