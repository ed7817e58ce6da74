// Package web serves the browser side of UIAP: web/uiap.js, a
// dependency-free ES module with which a web page acts as a UIAP app over
// WebSocket, and a demo store page that uses it (DESIGN §5).
//
// A browser cannot accept connections, so the page dials: the server end
// of the WebSocket is the agent. DemoAgentHandler is such an end — it
// runs uicontrol.Connect (the agent role) over the page's WebSocket and
// then an agent on a scripted model whose tools are the page's actions
// (uiapagent.Toolset), which completes a purchase in the demo store.
//
//	mux.Handle("/web/", web.Handler())
//	mux.Handle("/web/demo/ws", web.DemoAgentHandler(nil))
package web

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/agentry-dev/agentry/agent"
	"github.com/agentry-dev/agentry/llm"
	"github.com/agentry-dev/agentry/llm/scripted"
	"github.com/agentry-dev/agentry/uicontrol"
	"github.com/agentry-dev/agentry/uicontrol/uiapagent"
)

//go:embed uiap.js demo
var files embed.FS

// Files is the embedded tree: uiap.js and demo/index.html.
func Files() fs.FS { return files }

// Handler serves /web/uiap.js and the demo page at /web/demo/ from the
// embedded files. It is meant to be mounted at /web/.
func Handler() http.Handler {
	fsrv := http.StripPrefix("/web/", http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		switch r.URL.Path {
		case "/web/", "/web":
			http.Redirect(w, r, "/web/demo/", http.StatusFound)
			return
		case "/web/demo":
			http.Redirect(w, r, "/web/demo/", http.StatusMovedPermanently)
			return
		}
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		fsrv.ServeHTTP(w, r)
	})
}

// DemoOptions configures DemoAgentHandler. The zero value works.
type DemoOptions struct {
	// Model, if set, is the model the demo agent runs on; zero means a
	// scripted model playing DemoScript.
	Model llm.ModelReference
	// OriginPatterns authorize cross-origin pages (same origin always is).
	OriginPatterns []string
	// Timeout bounds one page's whole session; 0 means 2 minutes.
	Timeout time.Duration
	// StepDelay is waited before each model reply of the default script so
	// a person watching can follow; 0 means none.
	StepDelay time.Duration
	// Confirm answers an app's action.confirm (policy "confirm", e.g. for
	// a high-risk checkout); nil confirms: the demo user asked for the
	// purchase.
	Confirm uicontrol.ConfirmFunc
	// Logger receives operational records; nil is slog.Default().
	Logger *slog.Logger
}

// demoScript is the default demo agent's script: it searches the store,
// adds two bags of espresso beans to the cart and checks out.
func demoScript(delay time.Duration) []scripted.Step {
	call := func(name string, args map[string]any) scripted.Step {
		return scripted.Step{Delay: delay, ToolCalls: []llm.ToolCall{{ToolName: name, Arguments: args}}}
	}
	return []scripted.Step{
		call("search", map[string]any{"query": "espresso"}),
		call("add_to_cart", map[string]any{"sku": "ESP-250", "quantity": 2}),
		call("checkout", map[string]any{}),
		{Delay: delay, Text: "Order placed: two bags of espresso beans."},
	}
}

// DemoAgentHandler accepts the demo page's WebSocket (ws@0.1 binding,
// subprotocol uiap.v0.1) and acts as the agent of the session the page
// serves: it connects (offering uiap.action@0.1, required; capabilities
// inline), turns the page's actions into tools and runs an agent on
// opts.Model (default: a fresh scripted model per page playing
// DemoScript) until it ends, then terminates the session.
func DemoAgentHandler(opts *DemoOptions) http.Handler {
	var o DemoOptions
	if opts != nil {
		o = *opts
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Confirm == nil {
		log := o.Logger
		o.Confirm = func(_ context.Context, c *uicontrol.ActionConfirmation) (bool, error) {
			log.Info("web demo: confirming action", "action", c.ActionID)
			return true, nil
		}
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	return uicontrol.NewWSHandler(func(ctx context.Context, t uicontrol.Transport) error {
		ctx, cancel := context.WithTimeout(ctx, o.Timeout)
		defer cancel()
		return runDemo(ctx, t, &o)
	}, &uicontrol.WSOptions{OriginPatterns: o.OriginPatterns, Logger: o.Logger})
}

// runDemo drives one page: handshake, tools, agent run, terminate.
func runDemo(ctx context.Context, t uicontrol.Transport, o *DemoOptions) error {
	a, err := uicontrol.Connect(ctx, t, &uicontrol.AgentOptions{
		Source:             uicontrol.EndpointRef{Role: "agent", ID: "agentry-demo-agent"},
		Peer:               uicontrol.PeerInfo{Role: "agent", Name: "agentry demo agent"},
		Extensions:         []uicontrol.ExtensionOffer{{ID: "uiap.action", Versions: []string{"0.1"}, Required: true}},
		CapabilityDelivery: uicontrol.DeliveryInline,
		Confirm:            o.Confirm,
		Logger:             o.Logger,
	})
	if err != nil {
		return fmt.Errorf("web demo: handshake: %w", err)
	}
	defer a.Close()
	ts, err := uiapagent.NewToolset(ctx, a, &uiapagent.Options{Timeout: 30 * time.Second})
	if err != nil {
		return fmt.Errorf("web demo: tools: %w", err)
	}
	model := o.Model
	if model.Provider == nil {
		model = scripted.New(demoScript(o.StepDelay)...).Ref()
	}
	shopper, err := agent.New(&agent.Options{
		LLMOptions: llm.LLMOptions{Model: model, System: "You are a shopping assistant driving a web store through its UI actions."},
		Toolsets:   []agent.Toolset{ts},
	})
	if err != nil {
		_ = a.Terminate(ctx, "error")
		return fmt.Errorf("web demo: agent: %w", err)
	}
	res, err := shopper.Generate(ctx, llm.Text("Buy two bags of espresso beans."), nil)
	if err != nil {
		_ = a.Terminate(ctx, "error")
		return fmt.Errorf("web demo: agent: %w", err)
	}
	o.Logger.Info("web demo: agent finished", "session", a.Session().ID, "reply", res.Turn.Text())
	tctx, tcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer tcancel()
	if err := a.Terminate(tctx, "completed"); err != nil && !errors.Is(err, uicontrol.ErrClosed) {
		return fmt.Errorf("web demo: terminate: %w", err)
	}
	return nil
}
