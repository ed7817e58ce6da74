package uicontrol

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentry-dev/agentry/internal/telemetry"
	"github.com/agentry-dev/agentry/internal/uiapsession"
	"github.com/agentry-dev/agentry/internal/uiapwire"
)

// AppOptions configures an App. The zero value works: no profiles or
// extensions, no heartbeat, sessions resumable for a minute.
type AppOptions struct {
	// Source names the app in the messages it sends; zero means
	// {role: "app", id: "agentry-app"}.
	Source EndpointRef
	// Profiles are the profile IDs the app supports ("web@0.1").
	Profiles []string
	// Extensions are the extensions the app supports; one marked
	// Required must be selected or the handshake fails.
	Extensions []ExtensionOffer
	// Heartbeat is the heartbeatMs the app selects; 0 means none.
	Heartbeat time.Duration
	// MissedPongs is how many pings in a row may go unanswered before
	// the session is terminated; 0 means 2.
	MissedPongs int
	// ResumeWindow is how long a session whose transport was lost stays
	// resumable; 0 means one minute, a negative value disables resume (no
	// resume token is issued and a lost transport terminates the session).
	ResumeWindow time.Duration
	// ReplayLimit is how many of its latest events a session keeps for
	// replay after a resume; 0 means 1024.
	ReplayLimit int
	// MaxMessageSize bounds a received message; 0 means
	// DefaultMaxMessageSize.
	MaxMessageSize int
	// RateLimit bounds the requests each session may send (§16); the
	// zero value sets no limit.
	RateLimit RateLimit
	// Policy decides, per action request, whether the action runs
	// (allow), needs the controller's explicit confirmation (confirm), is
	// refused (deny) or is handed to the human (handoff); nil is
	// DefaultPolicy.
	Policy PolicyFunc
	// Handoff hands an action to the human when the policy says handoff;
	// nil refuses such actions (permission_denied).
	Handoff HandoffFunc
	// Logger receives operational records; nil is slog.Default().
	Logger *slog.Logger
	// Sessions, when set, keeps every session in a store that other Apps
	// share — replicas of a server on one database (agentry's
	// store.Store.UIAPSessions): a session whose transport was lost can be
	// resumed through any of them (§8.2), with its sequence numbers, the
	// events the agent missed and its single-use token, and the App that
	// held it lets go. Close then leaves the sessions resumable elsewhere
	// instead of ending them. nil keeps sessions in this App's memory; so
	// does a negative ResumeWindow.
	Sessions uiapsession.Store
	// TracerProvider makes a span of each message the app handles
	// ("uiap {type}", under the span of the connection's request); nil
	// is the global provider.
	TracerProvider trace.TracerProvider
}

// HandlerFunc answers requests of one type on the app side. It runs on
// its own goroutine; ctx ends when the session terminates. An *Error
// result is sent as it is; any other error as internal_error, its text
// kept local.
type HandlerFunc func(ctx context.Context, s *AppSession, req *Envelope) (*Reply, error)

// Reply is a handler's successful answer: a response of Type (required)
// with Payload (a JSON object; nil means {}).
type Reply struct {
	Type    string
	Payload any
}

// App is the controlled side of UIAP: the session owner that answers
// session.initialize. It publishes one capability document to every
// session and dispatches requests of other types to registered handlers.
// Serve runs one connection; an App serves any number at once. Its
// methods are safe for concurrent use.
type App struct {
	opts   AppOptions
	log    *slog.Logger
	tracer trace.Tracer
	exts   []ExtensionOffer // the supported extensions, the Action Runtime's included

	mu       sync.Mutex
	doc      *CapabilityDocument
	rev      string
	handlers map[string]HandlerFunc
	actions  map[string]*actionEntry
	sessions map[string]*AppSession
	links    map[*link]struct{}
	closed   bool
	wg       sync.WaitGroup // Serve calls and what they start
}

// NewApp returns an App; opts may be nil. Its capability document is
// empty until SetCapabilities.
func NewApp(opts *AppOptions) *App {
	a := &App{handlers: map[string]HandlerFunc{}, actions: map[string]*actionEntry{}, sessions: map[string]*AppSession{},
		links: map[*link]struct{}{}}
	if opts != nil {
		a.opts = *opts
	}
	a.tracer = telemetry.Tracer(a.opts.TracerProvider)
	a.exts = slices.Clone(a.opts.Extensions)
	if !slices.ContainsFunc(a.exts, func(e ExtensionOffer) bool { return canonicalExtension(e.ID) == ExtensionAction }) {
		a.exts = append(a.exts, ExtensionOffer{ID: ExtensionAction, Versions: []string{"0.1"}})
	}
	if a.opts.Source.Role == "" {
		a.opts.Source.Role = "app"
	}
	if a.opts.Source.ID == "" {
		a.opts.Source.ID = "agentry-app"
	}
	if a.opts.MissedPongs <= 0 {
		a.opts.MissedPongs = 2
	}
	if a.opts.ResumeWindow == 0 {
		a.opts.ResumeWindow = time.Minute
	}
	if a.opts.ReplayLimit <= 0 {
		a.opts.ReplayLimit = 1024
	}
	if a.opts.MaxMessageSize <= 0 {
		a.opts.MaxMessageSize = DefaultMaxMessageSize
	}
	if a.opts.Heartbeat > 0 && a.opts.Heartbeat < time.Millisecond {
		a.opts.Heartbeat = time.Millisecond
	}
	a.log = a.opts.Logger
	if a.log == nil {
		a.log = slog.Default()
	}
	a.doc = &CapabilityDocument{}
	a.rev, _, _ = revisionOf(a.doc)
	return a
}

// Handle registers h for requests of type typ. The core namespaces
// (session.*, capabilities.*, error) and the Action Runtime's (action.*;
// see HandleAction) are the App's own: registering in them panics, as
// does registering a type twice.
func (a *App) Handle(typ string, h HandlerFunc) {
	if typ == "" || typ == uiapwire.TypeError || strings.HasPrefix(typ, "session.") || strings.HasPrefix(typ, "capabilities.") ||
		strings.HasPrefix(typ, "action.") {
		panic("uicontrol: Handle: type " + typ + " is reserved by UIAP Core or the Action Runtime")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, dup := a.handlers[typ]; dup {
		panic("uicontrol: Handle: type " + typ + " registered twice")
	}
	a.handlers[typ] = h
}

// Capabilities returns the published document and its revision.
func (a *App) Capabilities() (*CapabilityDocument, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.doc.Filter(nil), a.rev
}

// SetCapabilities publishes doc as the app's capability document and
// returns its revision (derived from its content). If it differs from the
// current one, every session whose capability delivery is not "none" gets
// capabilities.changed with the new revision, reason (optional) and the
// full document (§9.2); sessions that are interrupted get it when they
// resume. It returns once every connected session was sent the event; a
// session whose transport does not take it before ctx ends loses that
// connection and gets the event by replay when it resumes.
func (a *App) SetCapabilities(ctx context.Context, doc *CapabilityDocument, reason string) (string, error) {
	rev, b, err := revisionOf(doc)
	if err != nil {
		return "", fmt.Errorf("uicontrol: capability document: %w", err)
	}
	doc, perr := decodeCapabilityDocument(b, len(b)) // a private copy
	if perr != nil {
		return "", fmt.Errorf("uicontrol: capability document: %w", perr)
	}
	a.mu.Lock()
	if rev == a.rev {
		a.mu.Unlock()
		return rev, nil
	}
	a.doc, a.rev = doc, rev
	var push []*AppSession
	for _, s := range a.sessions {
		if s.info.CapabilityDelivery != DeliveryNone {
			push = append(push, s)
		}
	}
	a.mu.Unlock()
	// Each session gets the change after its handshake reply (emit waits
	// for the session's write slot, which the handshake holds); one that
	// registered after the update above got the new document inline or
	// will ask for it.
	// Sessions are served concurrently so that a slow one delays no other.
	p := &CapabilitiesChanged{Revision: rev, Reason: reason, Capabilities: doc}
	errs := make([]error, len(push))
	var wg sync.WaitGroup
	for i, s := range push {
		wg.Go(func() {
			if err := s.emit(ctx, uiapwire.TypeCapabilitiesChanged, p); !errors.Is(err, CodeSessionNotActive) {
				errs[i] = err
			}
		})
	}
	wg.Wait()
	return rev, errors.Join(errs...)
}

// Session returns the session with the given ID, or nil if there is none
// (never was, or terminated).
func (a *App) Session(id string) *AppSession {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sessions[id]
}

// Close terminates every session at once (as a fatal transport error
// would, without session.terminate), closes every connection, and waits
// for the goroutines the App started. Serve returns ErrClosed after it.
// With AppOptions.Sessions the sessions end here but stay in the store,
// resumable through another App for the resume window.
func (a *App) Close() error {
	a.mu.Lock()
	a.closed = true
	sessions := make([]*AppSession, 0, len(a.sessions))
	for _, s := range a.sessions {
		sessions = append(sessions, s)
	}
	links := make([]*link, 0, len(a.links))
	for l := range a.links {
		links = append(links, l)
	}
	a.mu.Unlock()
	mode := storeDelete
	if a.stored() {
		mode = storeDetach
	}
	for _, s := range sessions {
		s.end(ErrClosed, mode)
	}
	for _, l := range links {
		l.close()
	}
	a.wg.Wait()
	return nil
}

// Serve runs one connection over t until it ends: the peer initiates
// with session.initialize (a new session) or session.resume (an existing
// one); Serve answers every request on it. It returns nil when the
// connection ended (the session terminated, the peer or the App closed
// it), ctx's error when ctx ended, or the transport's error. A session
// whose transport is lost stays resumable (over another Serve) for the
// resume window.
func (a *App) Serve(ctx context.Context, t Transport) error {
	l := newLink(ctx, t)
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		_ = t.Close()
		return ErrClosed
	}
	a.links[l] = struct{}{}
	a.wg.Add(1)
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.links, l)
		a.mu.Unlock()
		a.wg.Done()
	}()
	c := &appConn{app: a, l: l, ctx: ctx, done: make(chan error, 1), baton: make(chan struct{})}
	c.read()
	return <-c.done
}

// read receives and handles messages until the connection ends, then
// reports Serve's result on c.done. A message that needs a handler
// (c.job) hands the reading over to a spare goroutine of the connection
// (or a new one) and runs the handler on this one: the connection is
// read while the handler works, and the reply goes out without first
// switching goroutines. The goroutine then waits as a spare; reusing
// spares saves starting goroutines and growing their stacks per message.
func (c *appConn) read() {
	l := c.l
	for {
		raw, err := l.t.Receive(l.ctx)
		if err != nil {
			c.done <- c.lost(err)
			return
		}
		c.handle(raw)
		job := c.job
		if job == nil {
			continue
		}
		c.job = nil
		select {
		case c.baton <- struct{}{}: // a spare reads on
		default:
			c.app.wg.Go(c.read)
		}
		job()
		if !c.spare() {
			return
		}
	}
}

// maxSpares bounds the goroutines a connection keeps waiting to read.
const maxSpares = 2

// spare waits until the reading is handed to this goroutine (true) or
// the connection ends (false); with maxSpares waiting already it returns
// false at once.
func (c *appConn) spare() bool {
	if c.spares.Add(1) > maxSpares {
		c.spares.Add(-1)
		return false
	}
	defer c.spares.Add(-1)
	select {
	case <-c.baton:
		return true
	case <-c.l.done:
		return false
	}
}

// lost ends the connection after Receive failed with err and returns
// Serve's result.
func (c *appConn) lost(err error) error {
	closedHere := c.l.isClosed()
	c.l.close()
	if s := c.session; s != nil {
		s.linkLost(c.l)
	}
	switch {
	case c.ctx.Err() != nil:
		return c.ctx.Err()
	case closedHere || errors.Is(err, ErrClosed):
		return nil
	}
	return err
}

// appConn is the receiving side of one connection.
type appConn struct {
	app     *App
	l       *link
	ctx     context.Context // Serve's
	done    chan error      // Serve's result, sent once by the last reader
	job     func()          // set by handle: a handler to run off the read loop
	baton   chan struct{}   // hands the reading to a spare goroutine
	spares  atomic.Int32    // goroutines waiting for the baton
	session *AppSession     // nil until a handshake or resume on this link
	seen    idWindow        // message IDs before a session is attached
	span    trace.Span      // the span of the message being handled, until its reply
}

func (c *appConn) stamp() stamp {
	if s := c.session; s != nil {
		return s.stamp()
	}
	return stamp{version: Version, source: c.app.opts.Source}
}

// send writes on this connection, through the session's write slot once
// there is a session so that its events stay in order.
func (c *appConn) send(e *Envelope) {
	var err error
	if s := c.session; s != nil {
		err = s.sendOn(c.l, e)
	} else {
		err = c.l.send(c.l.ctx, e)
	}
	if err != nil && !c.l.isClosed() {
		c.app.log.Debug("uicontrol: send failed", "type", e.Type, "err", err)
	}
}

func (c *appConn) replyError(failed *Envelope, e *Error) {
	if c.span != nil {
		telemetry.SetError(c.span, string(e.Code), nil)
	}
	if failed != nil && failed.Kind == KindError {
		return // an error is never answered
	}
	c.send(c.stamp().errorFor(failed, e))
}

func (c *appConn) reply(req *Envelope, typ string, payload any) {
	e, err := c.stamp().reply(req, typ, payload)
	if err != nil {
		c.replyError(req, wireError(err))
		return
	}
	c.send(e)
}

func (c *appConn) handle(raw []byte) {
	a, s := c.app, c.session
	v := view{maxSize: a.opts.MaxMessageSize, fresh: c.seen.add}
	state := StateNew
	if s != nil {
		v = s.view()
		state = s.State()
	}
	env, perr := admit(raw, v)
	if !(env.Kind == KindResponse && env.Type == uiapwire.TypePong) {
		c.l.alive.Add(1)
	}
	c.span = c.startMessage(env, s)
	defer c.endMessage()
	if perr != nil {
		c.replyError(env, perr)
		return
	}
	switch env.Kind {
	case KindResponse, KindError:
		if !c.l.deliver(env) {
			a.log.Debug("uicontrol: reply to no pending request dropped", "type", env.Type, "correlationId", env.CorrelationID)
		}
		return
	case KindEvent:
		a.log.Debug("uicontrol: event ignored", "type", env.Type, "state", state)
		return
	}
	switch env.Type {
	case uiapwire.TypeInitialize:
		if s != nil {
			c.replyError(env, newErrorf(CodeStateConflict, "session %s is already %s", s.id, state))
			return
		}
		c.initialize(env)
	case uiapwire.TypeResume:
		if s != nil && state != StateInterrupted {
			c.replyError(env, newErrorf(CodeStateConflict, "session %s is %s", s.id, state))
			return
		}
		c.resume(env)
	case uiapwire.TypePing:
		p, perr := decodePing(env.Payload)
		if perr != nil {
			c.replyError(env, perr)
			return
		}
		c.reply(env, uiapwire.TypePong, sessionPing{Nonce: p.Nonce})
	case uiapwire.TypeInterrupt:
		c.interrupt(env, state)
	case uiapwire.TypeTerminate:
		if s == nil {
			c.replyError(env, NewError(CodeSessionNotActive, "no session on this connection"))
			return
		}
		c.terminate(env)
	default:
		if s == nil || state != StateActive {
			c.replyError(env, newErrorf(CodeSessionNotActive, "%s is not processed while the session is %s", env.Type, state))
			return
		}
		if s.bucket != nil && env.Type != uiapwire.TypeActionCancel { // stopping an action is never throttled
			if wait, ok := s.bucket.take(time.Now()); !ok {
				c.replyError(env, rateLimited(wait))
				return
			}
		}
		if env.Type == uiapwire.TypeCapabilitiesGet {
			c.capabilities(env)
			return
		}
		if strings.HasPrefix(env.Type, "action.") {
			c.action(env)
			return
		}
		a.mu.Lock()
		h := a.handlers[env.Type]
		a.mu.Unlock()
		if h == nil {
			c.replyError(env, newErrorf(CodeUnknownMessageType, "unknown message type %q", env.Type))
			return
		}
		c.dispatch(h, env)
	}
}

func (c *appConn) dispatch(h HandlerFunc, env *Envelope) {
	s, a := c.session, c.app
	span := c.span // the handler's job ends it
	c.span = nil
	c.job = func() {
		var werr *Error
		defer func() {
			if werr != nil {
				telemetry.SetError(span, string(werr.Code), nil)
			}
			span.End()
		}()
		ctx := s.ctx
		if span.SpanContext().IsValid() {
			ctx = trace.ContextWithSpan(ctx, span)
		}
		reply, err := func() (r *Reply, err error) {
			defer func() {
				if p := recover(); p != nil {
					a.log.Error("uicontrol: handler panicked", "type", env.Type, "panic", p)
					err = NewError(CodeInternalError, "internal error")
				}
			}()
			return h(ctx, s, env)
		}()
		if err == nil && (reply == nil || reply.Type == "") {
			err = errors.New("handler returned no reply type")
		}
		var out *Envelope
		if err == nil {
			out, err = s.stamp().reply(env, reply.Type, reply.Payload)
		}
		if err != nil {
			we := wireError(err)
			if we.Code == CodeInternalError {
				a.log.Error("uicontrol: handler failed", "type", env.Type, "err", err)
			}
			werr = we
			out = s.stamp().errorFor(env, we)
		}
		_ = s.sendOn(c.l, out)
	}
}

func (c *appConn) initialize(env *Envelope) {
	a := c.app
	offer, perr := decodeInitialize(env.Payload)
	if perr != nil {
		c.replyError(env, perr)
		return
	}
	sel, perr := negotiate(offer, env.Requires, supportedVersions, a.opts.Profiles, a.exts)
	if perr != nil {
		c.replyError(env, perr) // the connection stays NEW: the initiator may offer again
		return
	}
	sel.heartbeat = a.opts.Heartbeat.Truncate(time.Millisecond)
	s := a.newSessionWithID(newSessionID(), c.l, sel, offer.Peer)
	token := s.newToken()
	if a.stored() {
		if err := s.create(c.l.ctx); err != nil {
			a.log.Error("uicontrol: storing a new session failed", "err", err)
			s.stop()
			c.replyError(env, NewError(CodeInternalError, "internal error")) // the connection stays NEW
			return
		}
	}
	s.seen = c.seen // the IDs seen so far belong to the session now
	c.seen = idWindow{}
	// Hold the session's write slot from registration to the reply, so
	// that a capabilities.changed for it goes out after session.initialized.
	if err := acquire(c.l.ctx, s.sem, s.done); err != nil {
		return
	}
	defer func() { <-s.sem }()
	a.mu.Lock()
	doc, rev := a.doc, a.rev
	a.sessions[s.id] = s
	a.mu.Unlock()
	c.session = s
	p := &sessionInitialized{SessionID: s.id, SelectedVersion: sel.version, SelectedProfiles: sel.profiles,
		SelectedExtensions: sel.extensions, CapabilityDelivery: sel.delivery, HeartbeatMs: sel.heartbeat.Milliseconds(),
		ResumeToken: token}
	if sel.delivery == DeliveryInline {
		p.Capabilities, p.CapabilitiesRevision = doc, rev
	}
	s.mu.Lock()
	s.state = StateActive // INITIALIZING → ACTIVE via session.initialized
	s.mu.Unlock()
	e, err := s.stamp().reply(env, uiapwire.TypeInitialized, p)
	if err == nil {
		err = c.l.send(c.l.ctx, e)
	}
	if err != nil {
		return
	}
	s.startHeartbeat(c.l)
}

func (c *appConn) resume(env *Envelope) {
	a := c.app
	p, perr := decodeResume(env.Payload)
	if perr != nil {
		c.replyError(env, perr)
		return
	}
	token := a.newResumeToken()
	var next []byte
	if token != "" {
		next = tokenHash(token)
	}
	s := a.Session(p.SessionID)
	if s != nil && c.session == nil && a.stored() && s.superseded(c.l.ctx, p.ResumeToken) {
		// Resumed elsewhere since this App held it, and now resumed here
		// with a token from there: take it up afresh from the store.
		s.end(NewError(CodeUnknownSession, "the session was resumed elsewhere"), storeLeave)
		s = nil
	}
	if s == nil && c.session == nil && a.stored() {
		c.restore(env, p, token, next)
		return
	}
	if s == nil || (c.session != nil && c.session != s) {
		c.replyError(env, newErrorf(CodeUnknownSession, "session %q is not known or not resumable", p.SessionID))
		return
	}
	if err := acquire(c.l.ctx, s.sem, s.done); err != nil {
		c.replyError(env, newErrorf(CodeUnknownSession, "session %q is not known or not resumable", p.SessionID))
		return
	}
	defer func() { <-s.sem }()
	replay, old, after, perr := s.attach(c.l.ctx, c.l, env, p, next)
	if perr != nil {
		// Written directly: this goroutine holds the session's write slot,
		// which c.send would wait for when the session is this
		// connection's (a resume after an interrupt on the same
		// connection) — the request would never be answered.
		if err := c.l.send(c.l.ctx, c.stamp().errorFor(env, perr)); err != nil && !c.l.isClosed() {
			a.log.Debug("uicontrol: send failed", "type", uiapwire.TypeError, "err", err)
		}
		switch after {
		case fateEnd:
			s.finish(perr)
		case fateMoved:
			s.end(perr, storeLeave)
		}
		return
	}
	if old != nil {
		old.close() // a resume over a new connection replaces the old one
	}
	if c.session != s {
		c.session = s
	}
	s.mu.Lock()
	s.seen.add(env.ID)
	s.mu.Unlock()
	c.resumed(s, env, token, replay)
}

// resumed answers a successful session.resume over c with
// session.resumed carrying the next token, then replays the events the
// agent missed; the caller holds the session's write slot.
func (c *appConn) resumed(s *AppSession, env *Envelope, token string, replay []*Envelope) {
	r := &sessionResumed{SessionID: s.id, SelectedVersion: s.sel.version, SelectedProfiles: s.sel.profiles,
		SelectedExtensions: s.sel.extensions, HeartbeatMs: s.sel.heartbeat.Milliseconds(), ResumeToken: token}
	e, err := s.stamp().reply(env, uiapwire.TypeResumed, r)
	if err == nil {
		err = c.l.send(c.l.ctx, e)
	}
	for _, ev := range replay {
		if err != nil {
			break
		}
		err = c.l.send(c.l.ctx, ev)
	}
	if err == nil {
		s.startHeartbeat(c.l)
	}
}

func (c *appConn) interrupt(env *Envelope, state State) {
	s := c.session
	p, perr := decodeInterrupt(env.Payload)
	switch {
	case perr != nil:
		c.replyError(env, perr)
		return
	case s == nil || state != StateActive && state != StateInterrupted:
		c.replyError(env, newErrorf(CodeSessionNotActive, "no active session on this connection (%s)", state))
		return
	case state == StateInterrupted:
		c.replyError(env, NewError(CodeStateConflict, "session is already INTERRUPTED"))
		return
	}
	s.mu.Lock()
	s.state = StateInterrupted
	s.mu.Unlock()
	c.reply(env, uiapwire.TypeInterrupted, &sessionInterrupted{Status: "interrupted", Reason: p.Reason})
}

func (c *appConn) terminate(env *Envelope) {
	s := c.session
	p, perr := decodeTerminate(env.Payload)
	if perr != nil {
		c.replyError(env, perr)
		return
	}
	s.mu.Lock()
	s.state = StateTerminating
	s.mu.Unlock()
	s.forget() // gone for a resume before the peer reads session.terminated
	s.unstore()
	c.reply(env, uiapwire.TypeTerminated, &sessionTerminated{Status: "terminated", Reason: p.Reason})
	s.finish(nil)
}

func (c *appConn) capabilities(env *Envelope) {
	p, perr := decodeCapabilitiesGet(env.Payload)
	if perr != nil {
		c.replyError(env, perr)
		return
	}
	a := c.app
	a.mu.Lock()
	doc, rev := a.doc, a.rev
	a.mu.Unlock()
	c.reply(env, uiapwire.TypeCapabilitiesList, &CapabilitiesList{Revision: rev, Capabilities: doc.Filter(p.Include)})
}

// AppSession is one session on the app side. It outlives a connection:
// when the transport is lost it waits, INTERRUPTED, for a resume. Its
// methods are safe for concurrent use.
type AppSession struct {
	app    *App
	id     string
	sel    *selection
	info   SessionInfo
	sem    chan struct{} // write slot: events go out in seq order
	ctx    context.Context
	stop   context.CancelFunc
	done   chan struct{}
	bucket *tokenBucket // nil: no rate limit
	acts   sessionActions

	mu        sync.Mutex
	state     State
	link      *link // nil while detached
	tokenHash []byte
	seq       int64
	replay    []*Envelope // the latest events, for replay
	seen      idWindow
	expiry    *time.Timer
	err       error
	// With AppOptions.Sessions: the version of the stored session this
	// App holds (0: none, or no longer), and the timer that refreshes its
	// expiry while attached.
	version int64
	refresh *time.Timer
}

func (a *App) newSessionWithID(id string, l *link, sel *selection, peer PeerInfo) *AppSession {
	ctx, stop := context.WithCancel(context.Background())
	s := &AppSession{app: a, id: id, sel: sel, sem: make(chan struct{}, 1), ctx: ctx, stop: stop,
		done: make(chan struct{}), bucket: newTokenBucket(a.opts.RateLimit), state: StateInitializing, link: l}
	s.info = sel.info(s.id, peer)
	return s
}

// ID returns the session ID.
func (s *AppSession) ID() string { return s.id }

// Info returns what the handshake settled.
func (s *AppSession) Info() SessionInfo { return s.info }

// State returns the session's current state.
func (s *AppSession) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Done is closed when the session is TERMINATED.
func (s *AppSession) Done() <-chan struct{} { return s.done }

// Err returns why the session terminated: nil for session.terminate, an
// *Error with code timeout after missed pongs, unknown_session after the
// resume window, ErrClosed when the App closed. It is nil before.
func (s *AppSession) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *AppSession) stamp() stamp {
	return stamp{version: s.sel.version, sessionID: s.id, source: s.app.opts.Source}
}

func (s *AppSession) view() view {
	return view{maxSize: s.app.opts.MaxMessageSize, version: s.sel.version, sessionID: s.id, sel: s.sel,
		fresh: func(id string) bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.seen.add(id)
		}}
}

// newToken issues the session's next resume token (none when resume is
// disabled), replacing the previous one: 32 bytes from crypto/rand, kept
// only as a hash.
func (s *AppSession) newToken() string {
	t := s.app.newResumeToken()
	if t == "" {
		return ""
	}
	s.mu.Lock()
	s.tokenHash = tokenHash(t)
	s.mu.Unlock()
	return t
}

// newResumeToken returns a new resume token: 32 bytes from crypto/rand,
// hex-encoded; "" when resume is disabled.
func (a *App) newResumeToken() string {
	if a.opts.ResumeWindow < 0 {
		return ""
	}
	return randomToken(32)
}

// attach checks a session.resume and, if it may proceed, attaches the
// session to l with the token hash next and returns the events to replay
// and the link it replaced; on failure, what becomes of the session. A
// stored session is claimed in the store (ctx bounds that). The caller
// holds the write slot.
func (s *AppSession) attach(ctx context.Context, l *link, env *Envelope, p *sessionResume, next []byte) (replay []*Envelope, old *link, after fate, err *Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	unknown := newErrorf(CodeUnknownSession, "session %q is not known or not resumable", p.SessionID)
	if s.state != StateActive && s.state != StateInterrupted {
		return nil, nil, fateKeep, unknown
	}
	h := tokenHash(p.ResumeToken)
	if s.tokenHash == nil || subtle.ConstantTimeCompare(h, s.tokenHash) != 1 {
		return nil, nil, fateKeep, NewError(CodePermissionDenied, "invalid resume token")
	}
	if env.UIAP != s.sel.version {
		return nil, nil, fateKeep, newErrorf(CodeUnsupportedVersion, "uiap is %q but the session's selected version is %q", env.UIAP, s.sel.version)
	}
	if err := s.sel.unmet(env.Requires); err != nil {
		return nil, nil, fateKeep, err
	}
	if s.state == StateActive && s.link == l {
		return nil, nil, fateKeep, NewError(CodeStateConflict, "session is ACTIVE")
	}
	if p.LastSeq > s.seq {
		return nil, nil, fateKeep, newErrorf(CodeBadRequest, "lastSeq %d is beyond the last event sent (%d)", p.LastSeq, s.seq)
	}
	if p.LastSeq < s.seq && (len(s.replay) == 0 || s.replay[0].Seq > p.LastSeq+1) {
		// Events after lastSeq are no longer kept: the session cannot be
		// resumed faithfully, so it ends.
		return nil, nil, fateEnd, unknown
	}
	if s.version > 0 {
		// Held under s.mu: nothing else changes the session meanwhile.
		v, f, err := s.claim(ctx, s.version, h, next)
		if err != nil {
			if f == fateMoved {
				s.version = 0 // the store is another App's now
			}
			return nil, nil, f, err
		}
		s.version = v
		s.armRefresh()
	}
	for _, ev := range s.replay {
		if ev.Seq > p.LastSeq {
			// A replayed event is a new message: new id, same seq and ts.
			r := *ev
			r.ID = newMessageID()
			replay = append(replay, &r)
		}
	}
	if old = s.link; old == l {
		old = nil
	}
	s.link, s.state, s.tokenHash = l, StateActive, next
	if s.expiry != nil {
		s.expiry.Stop()
		s.expiry = nil
	}
	return replay, old, fateKeep, nil
}

// linkLost handles the loss of l: an attached session becomes
// INTERRUPTED for the resume window, or TERMINATED if it cannot be
// resumed.
func (s *AppSession) linkLost(l *link) {
	s.mu.Lock()
	if s.link != l || s.state == StateTerminated {
		s.mu.Unlock()
		return
	}
	s.link = nil
	if s.tokenHash == nil || s.state == StateTerminating || s.state == StateInitializing {
		s.mu.Unlock()
		s.finish(nil)
		return
	}
	s.state = StateInterrupted
	s.expiry = time.AfterFunc(s.app.opts.ResumeWindow, func() {
		s.mu.Lock()
		expired := s.link == nil && s.state == StateInterrupted
		s.mu.Unlock()
		if expired {
			s.finish(NewError(CodeUnknownSession, "resume window expired"))
		}
	})
	ver := s.version
	s.disarmRefresh()
	s.mu.Unlock()
	if ver > 0 {
		s.detached(ver)
	}
}

// finish moves the session to TERMINATED: its handlers' context ends, its
// token is void, its connection closes and the App forgets it; a stored
// session is deleted from the store.
func (s *AppSession) finish(err error) { s.end(err, storeDelete) }

// end is finish, with what becomes of a stored session: deleted
// (storeDelete), left to the App that holds it now (storeLeave), or kept
// resumable for the resume window (storeDetach).
func (s *AppSession) end(err error, mode int) {
	s.mu.Lock()
	if s.state == StateTerminated {
		s.mu.Unlock()
		return
	}
	s.state, s.err, s.tokenHash, s.replay = StateTerminated, err, nil, nil
	l := s.link
	s.link = nil
	if s.expiry != nil {
		s.expiry.Stop()
	}
	ver := s.version
	s.version = 0
	s.disarmRefresh()
	s.mu.Unlock()
	s.forget()
	if ver > 0 {
		switch mode {
		case storeDelete:
			s.deleteStored(ver)
		case storeDetach:
			if l != nil {
				s.detached(ver)
			}
		}
	}
	s.stop()
	close(s.done)
	if l != nil {
		l.close()
	}
}

// forget removes the session from the App's sessions.
func (s *AppSession) forget() {
	s.app.mu.Lock()
	if s.app.sessions[s.id] == s {
		delete(s.app.sessions, s.id)
	}
	s.app.mu.Unlock()
}

func (s *AppSession) startHeartbeat(l *link) {
	if s.sel.heartbeat <= 0 {
		return
	}
	s.app.wg.Go(func() {
		heartbeat(l, s.stamp, s.sel.heartbeat, s.app.opts.MissedPongs, func() {
			s.mu.Lock()
			current := s.link == l
			s.mu.Unlock()
			if current {
				s.finish(newErrorf(CodeTimeout, "%d pings in a row went unanswered", s.app.opts.MissedPongs))
			}
		})
	})
}

// sendOn writes e on l through the session's write slot.
func (s *AppSession) sendOn(l *link, e *Envelope) error {
	if err := acquire(l.ctx, s.sem, s.done); err != nil {
		return err
	}
	defer func() { <-s.sem }()
	return l.send(l.ctx, e)
}

// Emit sends an event of type typ with payload (a JSON object) to the
// agent. Events are numbered (seq) and kept for replay: one emitted while
// the session is interrupted or its transport lost is delivered after
// the resume, as is one the transport did not take before ctx ended
// (that connection is then closed). It fails with session_not_active once
// the session is terminating. typ must not be in a core namespace nor
// in the Action Runtime's (action.*).
func (s *AppSession) Emit(ctx context.Context, typ string, payload any) error {
	if typ == "" || typ == uiapwire.TypeError || strings.HasPrefix(typ, "session.") || strings.HasPrefix(typ, "capabilities.") ||
		strings.HasPrefix(typ, "action.") {
		return fmt.Errorf("uicontrol: Emit: type %q is reserved by UIAP Core or the Action Runtime", typ)
	}
	return s.emit(ctx, typ, payload)
}

func (s *AppSession) emit(ctx context.Context, typ string, payload any) error {
	return s.emitWith(ctx, typ, payload, nil)
}

// emitWith is emit with ext entries.
func (s *AppSession) emitWith(ctx context.Context, typ string, payload any, ext map[string]json.RawMessage) error {
	e, err := s.stamp().envelope(KindEvent, typ, payload)
	if err != nil {
		return err
	}
	e.Ext = ext
	if err := acquire(ctx, s.sem, s.done); err != nil {
		if errors.Is(err, ErrClosed) {
			return NewError(CodeSessionNotActive, "session terminated")
		}
		return err
	}
	defer func() { <-s.sem }()
	s.mu.Lock()
	if s.state == StateTerminating || s.state == StateTerminated {
		s.mu.Unlock()
		return NewError(CodeSessionNotActive, "session is "+s.state.String())
	}
	if ver := s.version; ver > 0 {
		// Stored before it is sent: an agent never holds an event the
		// store lacks. The write slot keeps s.seq as it is meanwhile.
		e.Seq = s.seq + 1
		s.mu.Unlock()
		if err := s.storeEvent(ctx, ver, e); err != nil {
			return err
		}
		s.mu.Lock()
		if s.state == StateTerminating || s.state == StateTerminated {
			s.mu.Unlock()
			return NewError(CodeSessionNotActive, "session is "+s.state.String())
		}
	}
	s.seq++
	e.Seq = s.seq
	s.replay = append(s.replay, e)
	if n := len(s.replay) - s.app.opts.ReplayLimit; n > 0 {
		s.replay = slices.Delete(s.replay, 0, n)
	}
	l, live := s.link, s.state == StateActive && s.link != nil
	s.mu.Unlock()
	if live {
		// An event that cannot be written ends the connection (a half-done
		// write leaves it in an unknown state): the agent gets the event by
		// replay when it resumes.
		if err := l.send(ctx, e); err != nil {
			l.close()
		}
	}
	return nil
}

// Interrupt interrupts the session (§8.3): it becomes INTERRUPTED at
// once, the agent is told with session.interrupt, and only session
// messages are processed until the agent resumes. by says who
// interrupted ("user", "system", "policy").
func (s *AppSession) Interrupt(ctx context.Context, reason, by string) error {
	s.mu.Lock()
	l := s.link
	if s.state != StateActive || l == nil {
		st := s.state
		s.mu.Unlock()
		return newErrorf(CodeSessionNotActive, "session is %s", st)
	}
	s.state = StateInterrupted
	s.mu.Unlock()
	e, err := s.stamp().envelope(KindRequest, uiapwire.TypeInterrupt, &sessionInterrupt{Reason: reason, By: by})
	if err != nil {
		return err
	}
	r, err := l.call(ctx, e, nil)
	if err != nil {
		return err
	}
	return expectReply(r, uiapwire.TypeInterrupted, "interrupted")
}

// Terminate ends the session gracefully (§8.5): session.terminate, then
// TERMINATED when the agent answers or ctx ends.
func (s *AppSession) Terminate(ctx context.Context, reason string) error {
	s.mu.Lock()
	l, st := s.link, s.state
	if st == StateActive || st == StateInterrupted {
		s.state = StateTerminating
	}
	s.mu.Unlock()
	if st == StateTerminated {
		return nil
	}
	if l == nil || st == StateTerminating {
		s.finish(nil)
		return nil
	}
	defer s.finish(nil)
	e, err := s.stamp().envelope(KindRequest, uiapwire.TypeTerminate, &sessionTerminate{Reason: reason})
	if err != nil {
		return err
	}
	r, err := l.call(ctx, e, nil)
	if errors.Is(err, ErrClosed) {
		return nil // the session ended either way
	}
	if err != nil {
		return err
	}
	return expectReply(r, uiapwire.TypeTerminated, "terminated")
}

// expectReply checks the answer to a session.interrupt or
// session.terminate: an error from the peer is returned as *Error; a
// response must have the expected type and status.
func expectReply(r *Envelope, typ, status string) error {
	if r.Kind == KindError {
		return remoteError(r)
	}
	if r.Type != typ {
		return newErrorf(CodeInvalidMessage, "answered with %s instead of %s", r.Type, typ)
	}
	if _, _, perr := decodeStatus(r.Payload, status); perr != nil {
		return perr
	}
	return nil
}

// remoteError returns the *Error a peer's error message carries.
func remoteError(r *Envelope) *Error {
	e, perr := decodeErrorPayload(r.Payload)
	if perr != nil {
		return NewError(CodeInvalidMessage, "peer sent a malformed error: "+perr.Message)
	}
	return e
}

// newSessionID issues a session ID (UUIDv4, DESIGN §2).
func newSessionID() string { return newMessageID() }
