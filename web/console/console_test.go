package console_test

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/agentry-dev/agentry/web/console"
)

// TestFiles_SelfContained: the page loads nothing from elsewhere (no
// CDN: it works offline) — no absolute URL in any file — and every file
// a page or module refers to is embedded.
func TestFiles_SelfContained(t *testing.T) {
	refs := regexp.MustCompile(`(?:from\s+"|import\s+"|src="|href=")([^"#]+)"`)
	files := console.Files()
	n := 0
	err := fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		b, err := fs.ReadFile(files, path)
		if err != nil {
			return err
		}
		if m := regexp.MustCompile(`(?i)\b(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}`).Find(b); m != nil {
			t.Errorf("%s refers to %s: the console must not load anything from elsewhere", path, m)
		}
		for _, m := range refs.FindAllSubmatch(b, -1) {
			ref := string(m[1])
			if strings.HasPrefix(ref, "data:") || strings.HasPrefix(ref, "/") {
				continue
			}
			if _, err := fs.Stat(files, strings.TrimPrefix(ref, "./")); err != nil {
				t.Errorf("%s refers to %s, which is not embedded", path, ref)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 5 {
		t.Errorf("only %d files embedded", n)
	}
}

// TestHandler: the page, its files and config.json, with a
// Content-Security-Policy that allows only the console's own scripts;
// no directory listings; only GET and HEAD.
func TestHandler(t *testing.T) {
	h := console.Handler(&console.Options{Token: true, TraceURL: "http://localhost:16686/trace/{trace_id}"})
	get := func(method, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec
	}
	for _, tc := range []struct {
		path, contains, ctype string
	}{
		{"/console/", `<script type="module" src="app.js">`, "text/html"},
		{"/console/app.js", "import", "text/javascript"},
		{"/console/style.css", "--accent", "text/css"},
		{"/console/config.json", `"trace_url":"http://localhost:16686/trace/{trace_id}"`, "application/json"},
	} {
		rec := get("GET", tc.path)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), tc.contains) || !strings.HasPrefix(rec.Header().Get("Content-Type"), tc.ctype) {
			t.Errorf("GET %s: %d %q", tc.path, rec.Code, rec.Header().Get("Content-Type"))
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: CSP %q", tc.path, csp)
		}
		if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff", tc.path)
		}
	}
	for path, want := range map[string]int{"/console/nope/": 404, "/console/nope.js": 404, "/console/index.html": 301} {
		if rec := get("GET", path); rec.Code != want {
			t.Errorf("GET %s: %d, want %d", path, rec.Code, want)
		}
	}
	if rec := get("POST", "/console/"); rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /console/: %d", rec.Code)
	}
}

// TestLoginPage: the form posts the token to /console/login; a message
// is escaped.
func TestLoginPage(t *testing.T) {
	page := string(console.LoginPage(`<script>alert(1)</script>`))
	if !strings.Contains(page, `<form method="post" action="/console/login">`) || !strings.Contains(page, `name="token"`) {
		t.Errorf("login page has no token form:\n%s", page)
	}
	if strings.Contains(page, "<script>") || !strings.Contains(page, "&lt;script&gt;") {
		t.Errorf("the message is not escaped:\n%s", page)
	}
}
