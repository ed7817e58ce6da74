// Package approvalapi is the human side of UAICP 0.3 §5.3 approvals
// (DESIGN §5): an HTTP API over a govern.Governor on which approvers list
// the pending approval requests of write_high_risk calls and decide them —
// an approval with a signed approval token, a denial by name — and a
// Client for it. Tokens are issued by package internal/approverkey.
package approvalapi

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"unicode"

	"github.com/agentry-dev/agentry/govern"
	"github.com/agentry-dev/agentry/internal/httpx"
	"github.com/agentry-dev/agentry/internal/strictjson"
	"github.com/agentry-dev/agentry/internal/unavailable"
)

// defaultMaxBodyBytes bounds request bodies when Options.MaxBodyBytes is
// 0: a decision is a few hundred bytes, a token at most
// 8 KiB (govern refuses longer ones).
const defaultMaxBodyBytes = 64 << 10

// maxApproverLen bounds the approver a denial names.
const maxApproverLen = 256

// Options configures NewHandler; the zero value works: no
// authentication, 64 KiB bodies, slog.Default().
type Options struct {
	// BearerToken, when set, is required on every request as
	// "Authorization: Bearer <token>" (401 otherwise). It is what
	// authenticates the approver a denial names.
	BearerToken string
	// MaxBodyBytes bounds request bodies (413 beyond); 0 means
	// 64 << 10.
	MaxBodyBytes int64
	// Logger receives decisions and internal errors; nil is
	// slog.Default().
	Logger *slog.Logger
}

// NewHandler serves g's approval requests:
//
//	GET  /v1/approvals             {"approvals":[ApprovalRequest…]}: the pending requests;
//	                               ?status=all adds the decided ones of open runs
//	GET  /v1/approvals/{id}        one ApprovalRequest
//	POST /v1/approvals/{id}        decide it; answers the decided ApprovalRequest
//
// A decision is a JSON object (Content-Type application/json) of string
// members, each at most once, no others:
//
//	{"decision":"approve","token":"<compact JWS>","reason":"…"}
//	{"decision":"deny","approver":"<who>","reason":"…"}
//
// Authority. An approval carries its own: a token signed by a key of the
// governor's keyring and bound to exactly this request (govern.Decide
// checks it; the approver is the token's issuer, so an approval names no
// approver). A denial needs no signature — it can only stop a call, never
// let one run — and is recorded as the decision of the human approver it
// names; that name is as trustworthy as the caller, whom BearerToken
// authenticates. Serve the handler with a BearerToken (or on a loopback
// address only) wherever an unauthenticated denial is not acceptable.
//
// Errors are {"error":{"code":…,"message":…}} (see the Code constants):
// 400 malformed body or query, 401 bearer token, 403 an approval token
// that fails verification (APPROVAL_INVALID, nothing recorded), 404
// unknown request, 405 (with Allow), 409 already decided, 413 body over
// MaxBodyBytes, 415 not JSON, 500 anything else — logged, never detailed.
// Answers omit decision.token (its jti identifies it): the journal keeps
// the token, the API does not hand it out.
func NewHandler(g *govern.Governor, options *Options) http.Handler {
	var opts Options
	if options != nil {
		opts = *options
	}
	h := &handler{g: g, opts: opts, log: opts.Logger}
	if h.opts.MaxBodyBytes <= 0 {
		h.opts.MaxBodyBytes = defaultMaxBodyBytes
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/approvals", h.list)
	mux.HandleFunc("GET /v1/approvals/{id}", h.get)
	mux.HandleFunc("POST /v1/approvals/{id}", h.decide)
	mux.HandleFunc("/v1/approvals", methodNotAllowed("GET, HEAD"))
	mux.HandleFunc("/v1/approvals/{id}", methodNotAllowed("GET, HEAD, POST"))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, newError(http.StatusNotFound, CodeNotFound, "no such endpoint"))
	})
	if opts.BearerToken == "" {
		return mux
	}
	return h.auth(mux)
}

type handler struct {
	g    *govern.Governor
	opts Options
	log  *slog.Logger
}

func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, newError(http.StatusMethodNotAllowed, CodeMethodNotAllowed, r.Method+" is not allowed here; use "+allow))
	}
}

func (h *handler) auth(next http.Handler) http.Handler {
	return httpx.Bearer(h.opts.BearerToken, "agentry-approvals", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, newError(http.StatusUnauthorized, CodeUnauthorized, "a valid bearer token is required"))
	}, next)
}

// approvalList is the body of GET /v1/approvals.
type approvalList struct {
	Approvals []govern.ApprovalRequest `json:"approvals"`
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	pendingOnly := true
	switch s := q["status"]; {
	case len(s) == 0 || len(s) == 1 && (s[0] == "" || s[0] == govern.StatusPending):
	case len(s) == 1 && s[0] == "all":
		pendingOnly = false
	default:
		writeError(w, badRequest("status must be %q or %q", govern.StatusPending, "all"))
		return
	}
	as, err := h.g.Approvals(r.Context(), pendingOnly)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := approvalList{Approvals: make([]govern.ApprovalRequest, len(as))}
	for i, a := range as {
		out.Approvals[i] = redact(a)
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *handler) get(w http.ResponseWriter, r *http.Request) {
	a, err := h.g.Approval(r.Context(), r.PathValue("id"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, redact(a))
}

// The decision values of a POST body.
const (
	decisionApprove = "approve"
	decisionDeny    = "deny"
)

func (h *handler) decide(w http.ResponseWriter, r *http.Request) {
	in, e := h.readDecision(w, r)
	if e != nil {
		writeError(w, e)
		return
	}
	id := r.PathValue("id")
	a, err := h.g.Decide(r.Context(), id, in)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.log.LogAttrs(r.Context(), slog.LevelInfo, "approval decided", slog.String("approval_id", id),
		slog.String("status", a.Status), slog.String("approver", a.Decision.Approver), slog.String("request_id", a.RequestID))
	writeJSON(w, http.StatusOK, redact(a))
}

// readDecision reads and checks a POST body.
func (h *handler) readDecision(w http.ResponseWriter, r *http.Request) (govern.ApprovalInput, *Error) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return govern.ApprovalInput{}, newError(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "the body must be application/json")
	}
	if r.ContentLength > h.opts.MaxBodyBytes {
		return govern.ApprovalInput{}, tooLarge()
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return govern.ApprovalInput{}, tooLarge()
		}
		return govern.ApprovalInput{}, badRequest("could not read the body")
	}
	m, e := decodeStrings(body, h.opts.MaxBodyBytes, "decision", "token", "approver", "reason")
	if e != nil {
		return govern.ApprovalInput{}, e
	}
	in := govern.ApprovalInput{Reason: m["reason"]}
	token, hasToken := m["token"]
	approver, hasApprover := m["approver"]
	switch d, ok := m["decision"]; {
	case !ok:
		return in, badRequest("decision is required")
	case d == decisionApprove:
		switch {
		case token == "":
			return in, badRequest("an approval needs a token")
		case hasApprover:
			return in, badRequest("an approval names no approver: the token's issuer is the approver")
		}
		in.Approve, in.Token = true, token
	case d == decisionDeny:
		switch {
		case hasToken:
			return in, badRequest("a denial carries no token")
		case approver == "":
			return in, badRequest("a denial names its approver")
		case len(approver) > maxApproverLen || hasControl(approver):
			return in, badRequest("approver must be at most %d bytes without control characters", maxApproverLen)
		}
		in.Approver = approver
	default:
		return in, badRequest("decision must be %q or %q", decisionApprove, decisionDeny)
	}
	return in, nil
}

func tooLarge() *Error {
	return newError(http.StatusRequestEntityTooLarge, CodeTooLarge, "the body is too large")
}

func hasControl(s string) bool {
	for _, c := range s {
		if unicode.IsControl(c) {
			return true
		}
	}
	return false
}

// decodeStrings decodes body as exactly one JSON object whose members
// are strings named in allowed (case-sensitively), each at most once:
// strictly (DESIGN §2), so that nothing after the object, no invalid
// UTF-8 and no lone surrogate escape is accepted, let alone repaired.
func decodeStrings(body []byte, limit int64, allowed ...string) (map[string]string, *Error) {
	var raw map[string]json.RawMessage
	err := strictjson.Decode(body, &raw, &strictjson.Options{MaxSize: int(limit), DisallowDuplicates: true})
	var se *strictjson.Error
	switch {
	case errors.As(err, &se) && se.Reason == strictjson.ErrType && se.Path == "":
		return nil, badRequest("the body must be a JSON object")
	case errors.As(err, &se) && se.Reason == strictjson.ErrTrailingData:
		return nil, badRequest("the body must be a single JSON object (%s)", se.Message)
	case errors.As(err, &se) && se.Reason == strictjson.ErrDuplicate:
		return nil, badRequest("%s", se.Message)
	case err != nil:
		return nil, badRequest("the body is not valid JSON: %s", err)
	case raw == nil: // null
		return nil, badRequest("the body must be a JSON object")
	}
	names := make([]string, 0, len(raw))
	for k := range raw {
		names = append(names, k)
	}
	slices.Sort(names) // the first problem, by name: the same answer every time
	m := make(map[string]string, len(raw))
	for _, k := range names {
		if !slices.Contains(allowed, k) {
			return nil, badRequest("unknown member %q", clip(k))
		}
		var s string
		if v := raw[k]; len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &s) != nil {
			return nil, badRequest("member %q must be a string", k)
		}
		m[k] = s
	}
	return m, nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// redact drops the token from a decision: the API names it by its jti.
func redact(a govern.ApprovalRequest) govern.ApprovalRequest {
	if a.Decision != nil {
		d := *a.Decision
		d.Token = ""
		a.Decision = &d
	}
	return a
}

// fail answers err: govern's refusals with their codes, anything else as
// a logged, undetailed 500.
func (h *handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ge *govern.Error
	switch {
	case errors.Is(err, govern.ErrUnknownApproval):
		writeError(w, newError(http.StatusNotFound, CodeNotFound, "no approval request "+clip(r.PathValue("id"))))
	case errors.Is(err, govern.ErrAlreadyDecided):
		writeError(w, newError(http.StatusConflict, CodeAlreadyDecided, "the approval request was already decided"))
	case errors.Is(err, govern.ApprovalInvalid) && errors.As(err, &ge):
		// The detail names the check that failed (untrusted key, expired,
		// bound to another call, self-approval…): what the approver needs
		// to fix, and nothing of the server's internals.
		writeError(w, newError(http.StatusForbidden, CodeApprovalInvalid, "approval token refused: "+ge.Detail))
	case unavailable.Is(err):
		w.Header().Set("Retry-After", unavailable.RetryAfter)
		writeError(w, newError(http.StatusServiceUnavailable, codeUnavailable, "the journal is unavailable; retry shortly"))
	default:
		h.log.LogAttrs(r.Context(), slog.LevelError, "approval API", slog.String("method", r.Method),
			slog.String("path", r.URL.Path), slog.String("error", err.Error()))
		writeError(w, newError(http.StatusInternalServerError, CodeInternal, "internal error"))
	}
}

func writeError(w http.ResponseWriter, e *Error) {
	var b errorBody
	b.Error.Code, b.Error.Message = e.Code, e.Message
	writeJSON(w, e.Status, b)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	httpx.WriteJSON(w, status, v, `{"error":{"code":"INTERNAL","message":"internal error"}}`)
}
