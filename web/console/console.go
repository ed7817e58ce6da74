// Package console is agentry's web console (docs/console.md): a page
// served by `agentry serve` at /console/ on which people who have no
// terminal follow the agents' runs live, decide the approvals UAICP 0.3
// §5.3 asks of them — signing approval tokens in the browser with their
// own key — read each run's audit trail with its chain check, and see the
// workflows' sessions. It is plain HTML, CSS and JavaScript modules,
// embedded in the binary: no build step, no CDN, nothing to install.
//
// The page talks to the server's own HTTP API (/v1/agents, /v1/runs,
// /v1/runs/{id}/events, /v1/runs/{id}/audit, /v1/approvals, /api/…);
// authentication — the login that exchanges the server's token for a
// session cookie — is the server's (package server).
package console

import (
	"bytes"
	"embed"
	"encoding/json"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed static
var files embed.FS

// Files is the embedded tree of the page: index.html, its modules and
// style sheet.
func Files() fs.FS {
	sub, _ := fs.Sub(files, "static")
	return sub
}

// CSP is the Content-Security-Policy of the console's pages: only its
// own scripts, styles and API, never framed.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// LoginCSP is the Content-Security-Policy of LoginPage: its style is
// inline, it has no script.
const LoginCSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Options configures Handler; nil means no token and no trace links.
type Options struct {
	// Token says the server requires its token: the page then offers to
	// log out.
	Token bool
	// TraceURL, when set, links a run to its trace; "{trace_id}" in it
	// is replaced by the run's trace ID.
	TraceURL string
}

// Handler serves the console under /console/: the page, its files, and
// /console/config.json (what Options tells the page). Mount it at
// "/console/" behind the server's authentication.
func Handler(opts *Options) http.Handler {
	var o Options
	if opts != nil {
		o = *opts
	}
	cfg, _ := json.Marshal(map[string]any{"token": o.Token, "trace_url": o.TraceURL})
	static := http.StripPrefix("/console/", http.FileServerFS(Files()))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Content-Security-Policy", CSP)
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-cache")
		switch p := r.URL.Path; {
		case p == "/console/config.json":
			h.Set("Content-Type", "application/json")
			h.Set("Cache-Control", "no-store")
			w.Write(cfg)
			return
		case p == "/console/index.html":
			http.Redirect(w, r, "/console/", http.StatusMovedPermanently)
			return
		case strings.HasSuffix(p, "/") && p != "/console/":
			http.NotFound(w, r)
			return
		}
		static.ServeHTTP(w, r)
	})
}

var loginTemplate = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Log in · agentry console</title>
<style>
body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f4f5f7;color:#1c1e21;display:flex;min-height:100vh;align-items:center;justify-content:center}
main{background:#fff;border:1px solid #d8dbe0;border-radius:8px;padding:2rem;width:min(26rem,92vw);box-sizing:border-box}
h1{font-size:1.3rem;margin:0 0 1rem}
label{display:block;font-weight:600;margin-bottom:.3rem}
input{width:100%;box-sizing:border-box;font:inherit;padding:.5rem;border:1px solid #8a8f98;border-radius:4px}
button{margin-top:1rem;font:inherit;padding:.5rem 1.2rem;border:0;border-radius:4px;background:#1f5fbf;color:#fff;cursor:pointer}
button:focus-visible,input:focus-visible{outline:3px solid #f0b400;outline-offset:2px}
.error{color:#a4161a;margin:0 0 1rem}
p.hint{color:#555;font-size:.9rem}
</style>
</head>
<body>
<main>
<h1>agentry console</h1>
{{if .}}<p class="error" role="alert">{{.}}</p>{{end}}
<form method="post" action="/console/login">
<label for="token">Server token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<button type="submit">Log in</button>
</form>
<p class="hint">The token <code>agentry serve --token</code> was started with. It is exchanged for a session cookie and not kept by the page.</p>
</main>
</body>
</html>
`))

// LoginPage returns the login form, with msg (if any) shown as an error.
// Serve it with LoginCSP.
func LoginPage(msg string) []byte {
	var b bytes.Buffer
	loginTemplate.Execute(&b, msg)
	return b.Bytes()
}
