package uicontrol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"sync"

	"github.com/agentry-dev/agentry/internal/uiapwire"
)

// AgentOptions configures an Agent. The zero value works: UIAP 0.1
// only, no profiles or extensions, the app's choice of capability
// delivery.
type AgentOptions struct {
	// Source names the agent in the messages it sends; zero means
	// {role: "agent", id: "agentry-agent"}.
	Source EndpointRef
	// Peer describes the agent in session.initialize; an empty Role is
	// "agent".
	Peer PeerInfo
	// Profiles and Extensions are offered in session.initialize; an
	// extension marked Required must be selected or Connect fails.
	Profiles   []string
	Extensions []ExtensionOffer
	// CapabilityDelivery is requested in session.initialize; empty leaves
	// it to the app.
	CapabilityDelivery Delivery
	// MissedPongs is how many heartbeat pings in a row may go unanswered
	// before the session is terminated; 0 means 2.
	MissedPongs int
	// MaxMessageSize bounds a received message; 0 means
	// DefaultMaxMessageSize.
	MaxMessageSize int
	// OnEvent, if set, is called for each event the agent processes
	// (capabilities.changed included), in order, on the goroutine that
	// receives messages: it must return quickly and must not call the
	// Agent's blocking methods.
	OnEvent func(*Envelope)
	// InitializeExt is sent as the ext of session.initialize: extension
	// data by extension ID (such as the workflow an agentry app should
	// bind the session to, uiapworkflow.ExtWorkflow). Each value must
	// encode to JSON; core field names are refused as ext keys.
	InitializeExt map[string]any
	// Confirm answers the app's requests to confirm an action
	// (action.confirm); nil answers "not confirmed".
	Confirm ConfirmFunc
	// Logger receives operational records; nil is slog.Default().
	Logger *slog.Logger
}

// Agent is the controlling side of UIAP: it initiates a session with an
// app, reads and follows its capabilities, and sends requests. Its
// methods are safe for concurrent use.
type Agent struct {
	opts  AgentOptions
	log   *slog.Logger
	offer *sessionInitialize
	wg    sync.WaitGroup // receive loops, heartbeats, confirmations
	done  chan struct{}
	ctx   context.Context // ends when the session terminates
	stop  context.CancelFunc

	mu      sync.Mutex
	state   State
	sel     *selection
	info    SessionInfo
	token   string
	lastSeq int64
	link    *link // nil while detached
	seen    idWindow
	caps    *CapabilitiesChanged // the current document, its revision and reason
	changed chan struct{}        // closed and replaced when caps changes
	actions map[string]*actionCall
	err     error
}

// Connect starts a session over t (§7.2): it sends session.initialize,
// checks the app's session.initialized against its offer (§8.1) and
// returns the Agent once the session is ACTIVE. On failure the transport
// is closed; an error from the app is an *Error. If the reply breaks the
// negotiation rules the agent sends session.terminate (reason "error")
// before closing.
func Connect(ctx context.Context, t Transport, opts *AgentOptions) (*Agent, error) {
	a := &Agent{done: make(chan struct{}), changed: make(chan struct{}), state: StateNew}
	a.ctx, a.stop = context.WithCancel(context.Background())
	if opts != nil {
		a.opts = *opts
	}
	if a.opts.Source.Role == "" {
		a.opts.Source.Role = "agent"
	}
	if a.opts.Source.ID == "" {
		a.opts.Source.ID = "agentry-agent"
	}
	if a.opts.Peer.Role == "" {
		a.opts.Peer.Role = "agent"
	}
	if a.opts.MissedPongs <= 0 {
		a.opts.MissedPongs = 2
	}
	if a.opts.MaxMessageSize <= 0 {
		a.opts.MaxMessageSize = DefaultMaxMessageSize
	}
	a.log = a.opts.Logger
	if a.log == nil {
		a.log = slog.Default()
	}
	a.offer = &sessionInitialize{SupportedVersions: supportedVersions, SupportedProfiles: a.opts.Profiles,
		SupportedExtensions: a.opts.Extensions, CapabilityDelivery: a.opts.CapabilityDelivery, Peer: a.opts.Peer}

	// Before negotiation the initiator writes its highest version (DESIGN §5).
	env, err := a.stamp().envelope(KindRequest, uiapwire.TypeInitialize, a.offer)
	if err != nil {
		return nil, err
	}
	if len(a.opts.InitializeExt) > 0 {
		env.Ext = make(map[string]json.RawMessage, len(a.opts.InitializeExt))
		for k, v := range a.opts.InitializeExt {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("uicontrol: InitializeExt[%q]: %w", k, err)
			}
			env.Ext[k] = b
		}
	}
	l := newLink(context.Background(), t)
	a.mu.Lock()
	a.link, a.state = l, StateInitializing
	a.mu.Unlock()
	a.wg.Go(func() { a.receive(l) })

	var herr *Error
	r, err := l.call(ctx, env, func(r *Envelope) { herr = a.completeHandshake(l, r) })
	switch {
	case err != nil:
	case r.Kind == KindError:
		err = remoteError(r)
	case herr != nil:
		err = herr
		if bye, e := a.stamp().envelope(KindRequest, uiapwire.TypeTerminate, &sessionTerminate{Reason: "error"}); e == nil {
			_ = l.send(ctx, bye)
		}
	}
	if err != nil {
		a.finish(err)
		a.wg.Wait()
		return nil, err
	}
	return a, nil
}

// completeHandshake applies session.initialized; it runs on the receive
// goroutine, so the session is ACTIVE before the next message is read.
func (a *Agent) completeHandshake(l *link, r *Envelope) *Error {
	if r.Kind == KindError {
		return nil
	}
	if r.Type != uiapwire.TypeInitialized {
		return newErrorf(CodeInvalidMessage, "session.initialize answered with %s", r.Type)
	}
	p, perr := decodeInitialized(r.Payload)
	if perr != nil {
		return perr
	}
	sel, perr := checkInitialized(a.offer, p)
	if perr != nil {
		return perr
	}
	a.mu.Lock()
	a.sel, a.token, a.state = sel, p.ResumeToken, StateActive
	a.info = sel.info(p.SessionID, PeerInfo{})
	if p.Capabilities != nil {
		a.setCaps(&CapabilitiesChanged{Revision: p.CapabilitiesRevision, Capabilities: p.Capabilities})
	}
	a.mu.Unlock()
	a.startHeartbeat(l)
	return nil
}

func (a *Agent) stamp() stamp {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sel == nil {
		return stamp{version: Version, source: a.opts.Source}
	}
	return stamp{version: a.sel.version, sessionID: a.info.ID, source: a.opts.Source}
}

func (a *Agent) view() view {
	a.mu.Lock()
	defer a.mu.Unlock()
	v := view{maxSize: a.opts.MaxMessageSize, fresh: func(id string) bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.seen.add(id)
	}}
	if a.sel != nil {
		v.version, v.sessionID, v.sel = a.sel.version, a.info.ID, a.sel
	}
	return v
}

// receive reads l until it ends.
func (a *Agent) receive(l *link) {
	for {
		raw, err := l.t.Receive(l.ctx)
		if err != nil {
			l.close()
			a.linkLost(l)
			return
		}
		a.handle(l, raw)
	}
}

func (a *Agent) handle(l *link, raw []byte) {
	env, perr := admit(raw, a.view())
	if !(env.Kind == KindResponse && env.Type == uiapwire.TypePong) {
		l.alive.Add(1)
	}
	if perr != nil {
		a.replyError(l, env, perr)
		return
	}
	state := a.State()
	switch env.Kind {
	case KindResponse, KindError:
		if !l.deliver(env) {
			a.log.Debug("uicontrol: reply to no pending request dropped", "type", env.Type, "correlationId", env.CorrelationID)
		}
		return
	case KindEvent:
		a.event(l, env, state)
		return
	}
	switch env.Type {
	case uiapwire.TypePing:
		p, perr := decodePing(env.Payload)
		if perr != nil {
			a.replyError(l, env, perr)
			return
		}
		a.reply(l, env, uiapwire.TypePong, sessionPing{Nonce: p.Nonce})
	case uiapwire.TypeInterrupt:
		p, perr := decodeInterrupt(env.Payload)
		switch {
		case perr != nil:
			a.replyError(l, env, perr)
		case state == StateInterrupted:
			a.replyError(l, env, NewError(CodeStateConflict, "session is already INTERRUPTED"))
		case state != StateActive:
			a.replyError(l, env, newErrorf(CodeSessionNotActive, "session is %s", state))
		default:
			a.mu.Lock()
			a.state = StateInterrupted
			a.mu.Unlock()
			a.reply(l, env, uiapwire.TypeInterrupted, &sessionInterrupted{Status: "interrupted", Reason: p.Reason})
		}
	case uiapwire.TypeTerminate:
		p, perr := decodeTerminate(env.Payload)
		switch {
		case perr != nil:
			a.replyError(l, env, perr)
		case state < StateActive:
			a.replyError(l, env, newErrorf(CodeSessionNotActive, "session is %s", state))
		default:
			a.mu.Lock()
			a.state = StateTerminating
			a.mu.Unlock()
			a.reply(l, env, uiapwire.TypeTerminated, &sessionTerminated{Status: "terminated", Reason: p.Reason})
			a.finish(nil)
		}
	case uiapwire.TypeInitialize, uiapwire.TypeResume:
		// The agent initiates; it never owns a session to start or resume.
		a.replyError(l, env, newErrorf(CodeStateConflict, "%s is sent by the initiator", env.Type))
	default:
		if state != StateActive {
			a.replyError(l, env, newErrorf(CodeSessionNotActive, "%s is not processed while the session is %s", env.Type, state))
			return
		}
		if env.Type == uiapwire.TypeActionConfirm {
			if _, ok := a.view().sel.extension(ExtensionAction); !ok {
				a.replyError(l, env, newErrorf(CodeUnsupportedExtension, "%s needs the extension %s, which this session did not select",
					env.Type, ExtensionAction).with("extension", ExtensionAction))
				return
			}
			a.wg.Go(func() { a.confirmAction(l, env) })
			return
		}
		a.replyError(l, env, newErrorf(CodeUnknownMessageType, "unknown message type %q", env.Type))
	}
}

// event processes an event: only while ACTIVE (§8.3), once per seq.
func (a *Agent) event(l *link, env *Envelope, state State) {
	if state != StateActive {
		a.log.Debug("uicontrol: event not processed", "type", env.Type, "state", state)
		return
	}
	a.mu.Lock()
	if env.Seq > 0 {
		if env.Seq <= a.lastSeq {
			a.mu.Unlock()
			return // already processed (a replay overlapping what arrived)
		}
		a.lastSeq = env.Seq
	}
	a.mu.Unlock()
	if env.Type == uiapwire.TypeActionStarted || env.Type == uiapwire.TypeActionProgress {
		if perr := a.actionEvent(env); perr != nil {
			a.replyError(l, env, perr)
			return
		}
	}
	if env.Type == uiapwire.TypeCapabilitiesChanged {
		rev, reason, doc, perr := decodeCapabilitiesPayload(env.Payload, true)
		if perr != nil {
			a.replyError(l, env, perr)
			return
		}
		a.mu.Lock()
		a.setCaps(&CapabilitiesChanged{Revision: rev, Reason: reason, Capabilities: doc})
		a.mu.Unlock()
	}
	if a.opts.OnEvent != nil {
		a.opts.OnEvent(env)
	}
}

// setCaps replaces the current document (§9.2: full replacement). The
// caller holds a.mu.
func (a *Agent) setCaps(c *CapabilitiesChanged) {
	if a.caps != nil && c.Revision != "" && a.caps.Revision == c.Revision {
		return
	}
	a.caps = c
	close(a.changed)
	a.changed = make(chan struct{})
}

func (a *Agent) reply(l *link, req *Envelope, typ string, payload any) {
	e, err := a.stamp().reply(req, typ, payload)
	if err != nil {
		a.replyError(l, req, wireError(err))
		return
	}
	_ = l.send(l.ctx, e)
}

func (a *Agent) replyError(l *link, failed *Envelope, e *Error) {
	if failed != nil && failed.Kind == KindError {
		return // an error is never answered
	}
	_ = l.send(l.ctx, a.stamp().errorFor(failed, e))
}

// linkLost handles the loss of l: an established session that has a
// resume token becomes INTERRUPTED, waiting for Resume; otherwise the
// loss is fatal (§7.1).
func (a *Agent) linkLost(l *link) {
	a.mu.Lock()
	if a.link != l {
		a.mu.Unlock()
		return
	}
	a.link = nil
	if a.token != "" && (a.state == StateActive || a.state == StateInterrupted) {
		a.state = StateInterrupted
		a.mu.Unlock()
		return
	}
	terminating := a.state == StateTerminating
	a.mu.Unlock()
	if terminating {
		a.finish(nil) // the app closed after session.terminated
		return
	}
	a.finish(ErrClosed)
}

// finish moves the agent to TERMINATED and closes its transport.
func (a *Agent) finish(err error) {
	a.mu.Lock()
	if a.state == StateTerminated {
		a.mu.Unlock()
		return
	}
	a.state, a.err, a.token = StateTerminated, err, ""
	l := a.link
	a.link = nil
	a.mu.Unlock()
	a.stop()
	close(a.done)
	if l != nil {
		l.close()
	}
}

func (a *Agent) startHeartbeat(l *link) {
	a.mu.Lock()
	hb := a.sel.heartbeat
	a.mu.Unlock()
	if hb <= 0 {
		return
	}
	a.wg.Go(func() {
		heartbeat(l, a.stamp, hb, a.opts.MissedPongs, func() {
			a.mu.Lock()
			current := a.link == l
			a.mu.Unlock()
			if current {
				a.finish(newErrorf(CodeTimeout, "%d pings in a row went unanswered", a.opts.MissedPongs))
			}
		})
	})
}

// Session returns what the handshake settled.
func (a *Agent) Session() SessionInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.info
}

// State returns the session's current state.
func (a *Agent) State() State {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state
}

// Done is closed when the session is TERMINATED.
func (a *Agent) Done() <-chan struct{} { return a.done }

// Err returns why the session terminated: nil after session.terminate
// or Close, an *Error with code timeout after missed pongs, ErrClosed
// after a transport loss that could not be resumed. It is nil before.
func (a *Agent) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// activeLink returns the link to send a request on, if the session is
// ACTIVE.
func (a *Agent) activeLink() (*link, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state != StateActive || a.link == nil {
		return nil, newErrorf(CodeSessionNotActive, "session is %s", a.state)
	}
	return a.link, nil
}

// Request is a request the agent sends with Call.
type Request struct {
	// Type is the message type, e.g. "x.vendor.do".
	Type string
	// Payload is a JSON object; nil means {}.
	Payload any
	// Requires lists the profiles and extensions the request depends on
	// (§12 rule 3).
	Requires []string
	// Ext carries extension data by extension ID.
	Ext map[string]any
}

// Call sends a request and returns its response. An error the app
// answers with is returned as *Error. Call fails with session_not_active
// unless the session is ACTIVE; session.* types are refused (Ping,
// Interrupt, Resume and Terminate send them).
func (a *Agent) Call(ctx context.Context, req *Request) (*Envelope, error) {
	if req.Type == "" || req.Type == uiapwire.TypeError || strings.HasPrefix(req.Type, "session.") {
		return nil, fmt.Errorf("uicontrol: Call: type %q: session messages have their own methods", req.Type)
	}
	l, err := a.activeLink()
	if err != nil {
		return nil, err
	}
	e, err := a.stamp().envelope(KindRequest, req.Type, req.Payload)
	if err != nil {
		return nil, err
	}
	e.Requires = req.Requires
	for id, v := range req.Ext {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		if e.Ext == nil {
			e.Ext = map[string]json.RawMessage{}
		}
		e.Ext[id] = b
	}
	r, err := l.call(ctx, e, nil)
	if err != nil {
		return nil, err
	}
	if r.Kind == KindError {
		return nil, remoteError(r)
	}
	return r, nil
}

// Capabilities returns the current capability document, its revision
// and the reason of the last change, as the handshake (inline), the last
// full GetCapabilities or the last capabilities.changed left it; nil
// before any.
func (a *Agent) Capabilities() *CapabilitiesChanged {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.caps
}

// GetCapabilities asks for the capability document (§9.1), reduced to
// the include sections if any are given. A full document (no include)
// becomes the current one.
func (a *Agent) GetCapabilities(ctx context.Context, include ...string) (*CapabilitiesList, error) {
	r, err := a.Call(ctx, &Request{Type: uiapwire.TypeCapabilitiesGet, Payload: &capabilitiesGet{Include: include}})
	if err != nil {
		return nil, err
	}
	if r.Type != uiapwire.TypeCapabilitiesList {
		return nil, newErrorf(CodeInvalidMessage, "capabilities.get answered with %s", r.Type)
	}
	rev, _, doc, perr := decodeCapabilitiesPayload(r.Payload, false)
	if perr != nil {
		return nil, perr
	}
	if len(include) == 0 {
		a.mu.Lock()
		a.setCaps(&CapabilitiesChanged{Revision: rev, Capabilities: doc})
		a.mu.Unlock()
	}
	return &CapabilitiesList{Revision: rev, Capabilities: doc}, nil
}

// Changes follows the capability document: it yields the current one
// each time it is replaced after Changes is called — by
// capabilities.changed or a full GetCapabilities — skipping intermediate
// versions a slow consumer missed. It ends when ctx ends (yielding ctx's
// error) or the session terminates (yielding the reason, if any).
func (a *Agent) Changes(ctx context.Context) iter.Seq2[*CapabilitiesChanged, error] {
	a.mu.Lock()
	ch0, last0 := a.changed, a.caps
	a.mu.Unlock()
	return func(yield func(*CapabilitiesChanged, error) bool) {
		ch, last := ch0, last0
		for {
			select {
			case <-ch:
			case <-a.done:
				if err := a.Err(); err != nil {
					yield(nil, err)
				}
				return
			case <-ctx.Done():
				yield(nil, ctx.Err())
				return
			}
			a.mu.Lock()
			cur := a.caps
			ch = a.changed
			a.mu.Unlock()
			if cur == last {
				continue
			}
			last = cur
			if !yield(cur, nil) {
				return
			}
		}
	}
}

// Ping sends session.ping with a random nonce and checks that the pong
// echoes it (§8.4). It works in any state with a transport.
func (a *Agent) Ping(ctx context.Context) error {
	a.mu.Lock()
	l := a.link
	a.mu.Unlock()
	if l == nil {
		return NewError(CodeSessionNotActive, "no transport")
	}
	nonce := randomToken(8)
	e, err := a.stamp().envelope(KindRequest, uiapwire.TypePing, sessionPing{Nonce: nonce})
	if err != nil {
		return err
	}
	r, err := l.call(ctx, e, nil)
	if err != nil {
		return err
	}
	if r.Kind == KindError {
		return remoteError(r)
	}
	p, perr := decodePing(r.Payload)
	if perr != nil {
		return perr
	}
	if r.Type != uiapwire.TypePong || p.Nonce != nonce {
		return NewError(CodeInvalidMessage, "pong does not echo the ping's nonce")
	}
	return nil
}

// Interrupt interrupts the session (§8.3): it is INTERRUPTED at once;
// only session messages are processed until Resume.
func (a *Agent) Interrupt(ctx context.Context, reason string) error {
	a.mu.Lock()
	l := a.link
	if a.state != StateActive || l == nil {
		st := a.state
		a.mu.Unlock()
		return newErrorf(CodeSessionNotActive, "session is %s", st)
	}
	a.state = StateInterrupted
	a.mu.Unlock()
	e, err := a.stamp().envelope(KindRequest, uiapwire.TypeInterrupt, &sessionInterrupt{Reason: reason, By: "user"})
	if err != nil {
		return err
	}
	r, err := l.call(ctx, e, nil)
	if err != nil {
		return err
	}
	return expectReply(r, uiapwire.TypeInterrupted, "interrupted")
}

// Resume resumes an INTERRUPTED session (§8.2) with the resume token
// the app issued: over t, a new transport to the same app, after the
// previous one was lost; or, if t is nil, over the current one after an
// interrupt. The app replays the events sent after the last one the
// agent processed. The token is single-use: the app issues the next one
// with session.resumed. unknown_session from the app terminates the
// agent; any other error leaves it INTERRUPTED.
func (a *Agent) Resume(ctx context.Context, t Transport) error {
	a.mu.Lock()
	if a.state != StateInterrupted {
		st := a.state
		a.mu.Unlock()
		return newErrorf(CodeStateConflict, "session is %s", st)
	}
	token, lastSeq, l, old := a.token, a.lastSeq, a.link, a.link
	if t != nil {
		l = newLink(context.Background(), t)
		a.link = l
	}
	a.mu.Unlock()
	if l == nil {
		return NewError(CodeSessionNotActive, "no transport to resume over")
	}
	if t != nil {
		if old != nil {
			old.close()
		}
		a.wg.Go(func() { a.receive(l) })
	}
	e, err := a.stamp().envelope(KindRequest, uiapwire.TypeResume, &sessionResume{SessionID: a.Session().ID, ResumeToken: token, LastSeq: lastSeq})
	if err != nil {
		return err
	}
	var rerr *Error
	r, err := l.call(ctx, e, func(r *Envelope) { rerr = a.completeResume(l, r) })
	if err != nil {
		return err
	}
	if r.Kind == KindError {
		err := remoteError(r)
		if errors.Is(err, CodeUnknownSession) {
			a.finish(err)
		}
		return err
	}
	if rerr != nil {
		return rerr
	}
	return nil
}

// completeResume applies session.resumed on the receive goroutine, so
// that the replayed events after it are processed as ACTIVE.
func (a *Agent) completeResume(l *link, r *Envelope) *Error {
	if r.Kind == KindError {
		return nil
	}
	if r.Type != uiapwire.TypeResumed {
		return newErrorf(CodeInvalidMessage, "session.resume answered with %s", r.Type)
	}
	p, perr := decodeResumed(r.Payload)
	if perr != nil {
		return perr
	}
	a.mu.Lock()
	if p.SessionID != a.info.ID || p.SelectedVersion != a.sel.version {
		a.mu.Unlock()
		return NewError(CodeInvalidMessage, "session.resumed names another session or version")
	}
	a.state, a.token = StateActive, p.ResumeToken
	a.mu.Unlock()
	a.startHeartbeat(l)
	return nil
}

// Terminate ends the session gracefully (§8.5): session.terminate, then
// TERMINATED when the app answers or ctx ends; the transport is closed.
func (a *Agent) Terminate(ctx context.Context, reason string) error {
	a.mu.Lock()
	l, st := a.link, a.state
	if st == StateActive || st == StateInterrupted {
		a.state = StateTerminating
	}
	a.mu.Unlock()
	if st == StateTerminated {
		a.wg.Wait()
		return nil
	}
	defer a.wg.Wait()
	defer a.finish(nil)
	if l == nil || st == StateTerminating {
		return nil
	}
	e, err := a.stamp().envelope(KindRequest, uiapwire.TypeTerminate, &sessionTerminate{Reason: reason})
	if err != nil {
		return err
	}
	r, err := l.call(ctx, e, nil)
	if errors.Is(err, ErrClosed) {
		return nil
	}
	if err != nil {
		return err
	}
	return expectReply(r, uiapwire.TypeTerminated, "terminated")
}

// Close ends the session at once, without session.terminate: the
// transport is closed (the app sees a transport loss) and the agent is
// TERMINATED. It waits for the agent's goroutines.
func (a *Agent) Close() error {
	a.finish(nil)
	a.wg.Wait()
	return nil
}
