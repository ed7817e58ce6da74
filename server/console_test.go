package server_test

import (
	"crypto/ed25519"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/agentry-dev/agentry/server"
)

// consoleServer is a server with the console and a token.
func consoleServer(t *testing.T, cors ...string) (*server.Server, http.Handler) {
	t.Helper()
	pub, _, _ := ed25519.GenerateKey(nil)
	cfg := supportConfig(t, nil, pub)
	cfg.Token, cfg.Console, cfg.CORSOrigins = "s3cret", true, cors
	srv := newServer(t, cfg)
	return srv, srv.Handler()
}

type consoleReq struct {
	method, path, body string
	cookie             string
	header             map[string]string
}

func (c consoleReq) do(h http.Handler) *httptest.ResponseRecorder {
	req := httptest.NewRequest(c.method, c.path, strings.NewReader(c.body))
	if c.body != "" && c.header["Content-Type"] == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	if c.cookie != "" {
		req.AddCookie(&http.Cookie{Name: "agentry_session", Value: c.cookie})
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestConsole_EveryRouteNeedsTheTokenOrASession: with a token, every
// console and API route answers 401 without it or a session cookie —
// also with a forged, an expired or a malformed cookie — and a valid
// session cookie opens them as the token does.
func TestConsole_EveryRouteNeedsTheTokenOrASession(t *testing.T) {
	srv, h := consoleServer(t)
	valid := server.ConsoleCookie(srv, time.Now().Add(time.Hour))
	expired := server.ConsoleCookie(srv, time.Now().Add(-time.Second))
	forged := valid[:strings.LastIndexByte(valid, '.')+1] + strings.Repeat("A", 43)
	for _, r := range guardedRoutes {
		for name, cookie := range map[string]string{"nothing": "", "a forged cookie": forged, "an expired cookie": expired, "a malformed cookie": "v1.x"} {
			if code := (consoleReq{method: r.method, path: r.path, body: r.body, cookie: cookie}).do(h).Code; code != http.StatusUnauthorized {
				t.Errorf("%s %s with %s: %d, want 401", r.method, r.path, name, code)
			}
		}
		if r.method != "GET" || r.path == "/v1/runs/x/events" || r.path == "/uiap/ws" {
			continue
		}
		if code := (consoleReq{method: r.method, path: r.path, cookie: valid}).do(h).Code; code == http.StatusUnauthorized || code >= 500 {
			t.Errorf("%s %s with a session: %d", r.method, r.path, code)
		}
	}
	rec := consoleReq{method: "GET", path: "/console/"}.do(h)
	if ct := rec.Header().Get("Content-Type"); rec.Code != http.StatusUnauthorized || !strings.HasPrefix(ct, "text/html") || !strings.Contains(rec.Body.String(), `action="/console/login"`) {
		t.Errorf("GET /console/ without a session: %d %s, want the login form", rec.Code, ct)
	}
	rec = consoleReq{method: "GET", path: "/console/", cookie: valid}.do(h)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `src="app.js"`) || rec.Header().Get("Content-Security-Policy") == "" {
		t.Errorf("GET /console/ with a session: %d, CSP %q", rec.Code, rec.Header().Get("Content-Security-Policy"))
	}
}

// TestConsole_Login: the login form exchanges the token for an HttpOnly,
// SameSite=Strict session cookie; a wrong token is a 401, and after ten
// wrong ones logins wait (429) — the right token too, so guessing gains
// nothing from the limit.
func TestConsole_Login(t *testing.T) {
	srv, h := consoleServer(t)
	at := time.Now()
	server.SetConsoleClock(srv, func() time.Time { return at }) // no login is given back while the test runs
	form := func(token string) consoleReq {
		return consoleReq{method: "POST", path: "/console/login", body: url.Values{"token": {token}}.Encode(),
			header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}
	}
	rec := form("s3cret").do(h)
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/console/" || len(cookies) != 1 {
		t.Fatalf("login: %d %v %v", rec.Code, rec.Header(), cookies)
	}
	c := cookies[0]
	if c.Name != "agentry_session" || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.MaxAge <= 0 {
		t.Errorf("session cookie: %+v", c)
	}
	if code := (consoleReq{method: "GET", path: "/v1/agents", cookie: c.Value}).do(h).Code; code != http.StatusOK {
		t.Errorf("/v1/agents with the new session: %d", code)
	}
	behind := form("s3cret")
	behind.header["X-Forwarded-Proto"] = "https"
	if out := behind.do(h).Result().Cookies(); len(out) != 1 || !out[0].Secure {
		t.Errorf("login behind a TLS proxy: %v, want a Secure cookie", out)
	}
	if rec := form("wrong").do(h); rec.Code != http.StatusUnauthorized || len(rec.Result().Cookies()) != 0 || !strings.Contains(rec.Body.String(), "not the server") {
		t.Errorf("wrong token: %d %v", rec.Code, rec.Result().Cookies())
	}
	for range 10 {
		form("wrong").do(h)
	}
	if rec := form("s3cret").do(h); rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Errorf("login after 11 wrong tokens: %d, want 429 with Retry-After", rec.Code)
	}
	at = at.Add(2 * time.Second) // two logins given back
	if rec := form("s3cret").do(h); rec.Code != http.StatusSeeOther {
		t.Errorf("login two seconds later: %d, want 303", rec.Code)
	}
	rec = consoleReq{method: "POST", path: "/console/logout", cookie: c.Value}.do(h)
	if out := rec.Result().Cookies(); rec.Code != http.StatusSeeOther || len(out) != 1 || out[0].MaxAge >= 0 {
		t.Errorf("logout: %d %v", rec.Code, out)
	}
}

// TestConsole_CrossSiteWritesRefused: a browser's cross-origin request
// that could change something is refused with 403 before any handler —
// with the session cookie or not, by Sec-Fetch-Site or by Origin — and
// nothing is started; a same-origin one goes through; an origin of
// CORSOrigins is trusted.
func TestConsole_CrossSiteWritesRefused(t *testing.T) {
	srv, h := consoleServer(t, "https://partner.example")
	valid := server.ConsoleCookie(srv, time.Now().Add(time.Hour))
	start := `{"agent":"support","input":"status of o-1002?"}`
	for name, hdr := range map[string]map[string]string{
		"Sec-Fetch-Site cross-site": {"Sec-Fetch-Site": "cross-site"},
		"Sec-Fetch-Site same-site":  {"Sec-Fetch-Site": "same-site"},
		"foreign Origin":            {"Origin": "https://evil.example"},
	} {
		for _, path := range []string{"/v1/runs", "/console/login", "/v1/approvals/x"} {
			rec := consoleReq{method: "POST", path: path, body: start, cookie: valid, header: hdr}.do(h)
			if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "CROSS_ORIGIN") {
				t.Errorf("%s POST %s: %d %s, want 403", name, path, rec.Code, rec.Body.String())
			}
		}
	}
	rec := consoleReq{method: "GET", path: "/v1/runs", cookie: valid}.do(h)
	var list struct{ Runs []json.RawMessage }
	json.Unmarshal(rec.Body.Bytes(), &list)
	if len(list.Runs) != 0 {
		t.Fatalf("a refused request started a run: %s", rec.Body.String())
	}
	for name, hdr := range map[string]map[string]string{
		"same-origin":     {"Sec-Fetch-Site": "same-origin", "Origin": "http://example.com"},
		"trusted origin":  {"Origin": "https://partner.example"},
		"no browser mark": {},
	} {
		if rec := (consoleReq{method: "POST", path: "/v1/runs", body: start, cookie: valid, header: hdr}).do(h); rec.Code != http.StatusAccepted {
			t.Errorf("%s POST /v1/runs: %d %s, want 202", name, rec.Code, rec.Body.String())
		}
	}
}

// TestConsole_WorkflowSessions: the console lists a workflow's sessions,
// newest first, a page at a time; a bad cursor is a 400, an unknown
// workflow a 404.
func TestConsole_WorkflowSessions(t *testing.T) {
	_, h := consoleServer(t)
	var ids []string
	for range 3 {
		rec := consoleReq{method: "POST", path: "/initialize", body: `{"workflow_name":"store"}`, header: map[string]string{"Authorization": "Bearer s3cret"}}.do(h)
		var out struct {
			SessionID string `json:"session_id"`
		}
		if json.Unmarshal(rec.Body.Bytes(), &out); rec.Code != http.StatusOK || out.SessionID == "" {
			t.Fatalf("initialize: %d %s", rec.Code, rec.Body.String())
		}
		ids = append(ids, out.SessionID)
	}
	auth := map[string]string{"Authorization": "Bearer s3cret"}
	type page struct {
		Sessions []struct {
			SessionID    string `json:"session_id"`
			CurrentStage string `json:"current_stage"`
		}
		Next string
	}
	var seen []string
	next := ""
	for range 3 {
		rec := consoleReq{method: "GET", path: "/console/api/workflows/store/sessions?limit=2&after=" + url.QueryEscape(next), header: auth}.do(h)
		var p page
		if err := json.Unmarshal(rec.Body.Bytes(), &p); rec.Code != http.StatusOK || err != nil {
			t.Fatalf("list: %d %s", rec.Code, rec.Body.String())
		}
		for _, s := range p.Sessions {
			if s.CurrentStage != "browse" {
				t.Errorf("session %s at %q", s.SessionID, s.CurrentStage)
			}
			seen = append(seen, s.SessionID)
		}
		if next = p.Next; next == "" {
			break
		}
	}
	if len(seen) != 3 {
		t.Errorf("listed %v, want the 3 sessions %v", seen, ids)
	}
	for path, want := range map[string]int{
		"/console/api/workflows/store/sessions?after=nonsense": http.StatusBadRequest,
		"/console/api/workflows/store/sessions?limit=0":        http.StatusBadRequest,
		"/console/api/workflows/nope/sessions":                 http.StatusNotFound,
	} {
		if rec := (consoleReq{method: "GET", path: path, header: auth}).do(h); rec.Code != want {
			t.Errorf("GET %s: %d, want %d", path, rec.Code, want)
		}
	}
}
