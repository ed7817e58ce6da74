// Package httpx holds the HTTP edge helpers the module's handlers share:
// the bearer-token check and the JSON response writer. Each protocol
// keeps its own error body; what is shared is how the token is compared
// (in constant time) and how a JSON body goes out.
package httpx

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strconv"
)

// HasBearer reports whether r carries "Authorization: Bearer <token>",
// comparing in constant time. An empty token is never carried.
func HasBearer(r *http.Request, token string) bool {
	if token == "" {
		return false
	}
	got := r.Header.Get("Authorization")
	want := "Bearer " + token
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// Bearer requires "Authorization: Bearer <token>" on next: a request
// without it gets a WWW-Authenticate challenge for realm and the refusal
// deny writes (a 401 in the protocol's error body). An empty token
// requires nothing: next is returned as is.
func Bearer(token, realm string, deny http.HandlerFunc, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	challenge := `Bearer realm="` + realm + `"`
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !HasBearer(r, token) {
			w.Header().Set("WWW-Authenticate", challenge)
			deny(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// WriteJSON answers with status and v as a JSON body (one line, with its
// Content-Length), marked not to be sniffed or cached. When v cannot be
// encoded, the answer is a 500 with fallback as its body: the protocol's
// internal error.
func WriteJSON(w http.ResponseWriter, status int, v any, fallback string) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(fallback)
	}
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b)
}
