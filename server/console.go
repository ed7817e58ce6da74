package server

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/agentry-dev/agentry/internal/httpx"
	"github.com/agentry-dev/agentry/web/console"
	"github.com/agentry-dev/agentry/workflow"
)

// sessionCookie is the console's session cookie: it stands for the
// server's token, so a browser that logged in with the token is
// authenticated on every route the token opens.
const sessionCookie = "agentry_session"

// sessionTTL is how long a console login lasts.
const sessionTTL = 12 * time.Hour

// maxLoginBody bounds a login form.
const maxLoginBody = 4 << 10

// consoleAuth turns the token into browser sessions and back. A session
// is a cookie "v1.EXPIRY.NONCE.MAC", MAC an HMAC-SHA256 over the rest
// under a key derived from the token: nothing is stored, every replica
// that has the token accepts it, and a new token ends every session.
type consoleAuth struct {
	token  string
	key    []byte
	now    func() time.Time
	failed *rate.Limiter // failed logins, server-wide
}

func newConsoleAuth(token string) *consoleAuth {
	m := hmac.New(sha256.New, []byte(token))
	io.WriteString(m, "agentry console session key v1")
	return &consoleAuth{token: token, key: m.Sum(nil), now: time.Now, failed: rate.NewLimiter(rate.Every(time.Second), 10)}
}

func (a *consoleAuth) mac(payload string) string {
	m := hmac.New(sha256.New, a.key)
	io.WriteString(m, payload)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// issue returns a new session cookie value valid until exp.
func (a *consoleAuth) issue(exp time.Time) string {
	var nonce [16]byte
	rand.Read(nonce[:])
	payload := "v1." + strconv.FormatInt(exp.Unix(), 10) + "." + base64.RawURLEncoding.EncodeToString(nonce[:])
	return payload + "." + a.mac(payload)
}

// valid reports whether v is a session cookie this token issued that has
// not expired.
func (a *consoleAuth) valid(v string) bool {
	i := strings.LastIndexByte(v, '.')
	if i < 0 || len(v) > 256 {
		return false
	}
	payload, mac := v[:i], v[i+1:]
	if !hmac.Equal([]byte(mac), []byte(a.mac(payload))) {
		return false
	}
	parts := strings.Split(payload, ".")
	if len(parts) != 3 || parts[0] != "v1" {
		return false
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	return err == nil && a.now().Unix() < exp
}

// front is what every request goes through before the routes: browsers'
// cross-origin requests that could change something are refused (the
// origins of CORSOrigins excepted), and a request that carries no
// Authorization but a valid session cookie is served as if it carried
// the token.
func (s *Server) front(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	anyOrigin := false
	for _, o := range s.cfg.CORSOrigins {
		if o == "*" {
			anyOrigin = true
		} else if err := cop.AddTrustedOrigin(o); err != nil {
			s.log.Warn("a CORS origin is not an origin (scheme://host[:port]): cross-origin browser requests from it that change something are refused", "origin", o, "error", err)
		}
	}
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteJSON(w, http.StatusForbidden, map[string]any{"error": map[string]string{"code": "CROSS_ORIGIN",
			"message": "cross-origin browser requests that change something are refused (serve --cors names the origins allowed)"}}, "")
	}))
	a := s.console
	h := next
	if a != nil {
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "" {
				if c, err := r.Cookie(sessionCookie); err == nil && a.valid(c.Value) {
					r2 := *r
					r2.Header = r.Header.Clone()
					r2.Header.Set("Authorization", "Bearer "+a.token)
					r = &r2
				}
			}
			next.ServeHTTP(w, r)
		})
	}
	if anyOrigin {
		return h
	}
	return cop.Handler(h)
}

// mountConsole serves the console at /console/: with a token, behind a
// login that exchanges the token for a session cookie.
func (s *Server) mountConsole() {
	opts := &console.Options{Token: s.cfg.Token != "", TraceURL: s.cfg.ConsoleTraceURL}
	pages := console.Handler(opts)
	s.core.handle("GET /console/api/workflows/{name}/sessions", bearer(s.cfg.Token, http.HandlerFunc(s.listSessions)))
	if s.cfg.Token == "" {
		s.core.handle("/console/", pages)
		s.core.handle("/console", http.RedirectHandler("/console/", http.StatusMovedPermanently))
		return
	}
	a := s.console
	login := func(w http.ResponseWriter, status int, msg string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Security-Policy", console.LoginCSP)
		w.WriteHeader(status)
		w.Write(console.LoginPage(msg))
	}
	s.core.handle("/console/", httpx.Bearer(s.cfg.Token, "agentry", func(w http.ResponseWriter, r *http.Request) {
		login(w, http.StatusUnauthorized, "")
	}, pages))
	s.core.handle("/console", http.RedirectHandler("/console/", http.StatusMovedPermanently))
	s.core.handle("POST /console/login", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.failed.TokensAt(a.now()) < 1 {
			w.Header().Set("Retry-After", "1")
			login(w, http.StatusTooManyRequests, "Too many failed logins: wait a moment.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
		if err := r.ParseForm(); err != nil {
			login(w, http.StatusBadRequest, "The login form could not be read.")
			return
		}
		if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("token")), []byte(s.cfg.Token)) != 1 {
			a.failed.AllowN(a.now(), 1)
			login(w, http.StatusUnauthorized, "That is not the server's token.")
			return
		}
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: a.issue(a.now().Add(sessionTTL)), Path: "/",
			MaxAge: int(sessionTTL / time.Second), HttpOnly: true, Secure: overTLS(r), SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
	}))
	s.core.handle("POST /console/logout", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: overTLS(r), SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
	}))
}

// overTLS reports whether the browser reached the server over TLS: the
// server's own, or a proxy's that says so (X-Forwarded-Proto: https). A
// forged header could only make the cookie stricter (Secure).
func overTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// listSessions serves GET /console/api/workflows/{name}/sessions
// (?limit=, ?after=CURSOR): {"sessions": [session…], "next": CURSOR}.
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, code, msg string) {
		httpx.WriteJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}}, "")
	}
	name := r.PathValue("name")
	if _, ok := s.engine.Workflow(name); !ok {
		fail(http.StatusNotFound, "WORKFLOW_NOT_FOUND", fmt.Sprintf("no workflow named %q", name))
		return
	}
	limit := 50
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			fail(http.StatusBadRequest, "BAD_REQUEST", "limit must be a number from 1 to 1000")
			return
		}
		limit = n
	}
	after := r.URL.Query().Get("after")
	if _, _, err := workflow.ParseSessionCursor(after); err != nil {
		fail(http.StatusBadRequest, "BAD_REQUEST", "after is not a cursor a page of sessions gave")
		return
	}
	list, next, err := s.engine.ListSessions(r.Context(), name, after, limit)
	switch {
	case errors.Is(err, workflow.ErrListUnsupported):
		fail(http.StatusNotImplemented, "UNSUPPORTED", "this server's session store cannot list sessions")
		return
	case err != nil:
		s.log.Error("console: listing sessions", "workflow", name, "error", err)
		fail(http.StatusInternalServerError, "INTERNAL", "internal error")
		return
	}
	if list == nil {
		list = []*workflow.Session{}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"sessions": list, "next": next}, "")
}
