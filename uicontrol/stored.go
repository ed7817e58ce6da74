package uicontrol

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentry-dev/agentry/internal/uiapsession"
)

// Sessions kept in a store (AppOptions.Sessions) — docs/spec-notes/
// uiap.md, "Sessions that move between replicas". The App holding a
// session writes through to the store what a resume elsewhere needs:
// the session at the handshake (what it settled, the token's hash), each
// event before it is sent, the expiry when the transport is lost, the
// deletion when it ends. A resume claims the session in the store (the
// token is checked and replaced in one conditional write), so the App
// that held it before finds its next write refused and lets go.

// storeTimeout bounds a store call made on no caller's behalf (expiry
// refreshes, deletion at the end).
const storeTimeout = 10 * time.Second

// stored reports whether the App keeps its sessions in a store.
func (a *App) stored() bool { return a.opts.Sessions != nil && a.opts.ResumeWindow > 0 }

// heldFor is how long a stored session stays resumable while an App
// holds it attached: two windows, refreshed every window, so that after
// the App dies it stays resumable for one to two windows.
func (a *App) heldFor() time.Duration { return 2 * a.opts.ResumeWindow }

// storedState is the State of a stored session: what the handshake
// settled, in the members session.initialized and session.initialize
// use for it.
type storedState struct {
	SelectedVersion    string              `json:"selectedVersion"`
	SelectedProfiles   []string            `json:"selectedProfiles,omitempty"`
	SelectedExtensions []SelectedExtension `json:"selectedExtensions,omitempty"`
	CapabilityDelivery Delivery            `json:"capabilityDelivery"`
	HeartbeatMs        int64               `json:"heartbeatMs,omitempty"`
	Peer               PeerInfo            `json:"peer"`
}

func encodeStoredState(sel *selection, peer PeerInfo) []byte {
	b, _ := json.Marshal(&storedState{SelectedVersion: sel.version, SelectedProfiles: sel.profiles,
		SelectedExtensions: sel.extensions, CapabilityDelivery: sel.delivery, HeartbeatMs: sel.heartbeat.Milliseconds(), Peer: peer})
	return b
}

// decodeStoredState reads the State of a stored session (bytes from the
// database, written by this or another version of the package): the
// selection and the peer. A version this package does not speak is an
// error: the session cannot be resumed here.
func decodeStoredState(b []byte) (*selection, PeerInfo, error) {
	if !json.Valid(b) {
		return nil, PeerInfo{}, errors.New("stored session: not JSON")
	}
	f := payloadFields(b, "state")
	sel := &selection{version: f.str("selectedVersion", true)}
	if f.err == nil && !slices.Contains(supportedVersions, sel.version) {
		f.fail("selectedVersion", "is not a version this package speaks")
	}
	if sel.profiles = f.strs("selectedProfiles", false); len(sel.profiles) == 0 {
		sel.profiles = nil
	}
	sel.extensions = selectedExtensions(f)
	sel.delivery = delivery(f, true)
	if ms := heartbeatMs(f); ms <= int64(time.Duration(1<<62)/time.Millisecond) {
		sel.heartbeat = time.Duration(ms) * time.Millisecond
	} else {
		f.fail("heartbeatMs", "is too large")
	}
	var peer PeerInfo
	if g := f.sub("peer", true); g != nil {
		peer = PeerInfo{Role: g.str("role", true), Name: g.str("name", false), Version: g.str("version", false),
			Locale: g.str("locale", false), Timezone: g.str("timezone", false), TenantID: g.str("tenantId", false),
			UserRole: g.str("userRole", false)}
		if g.err != nil {
			f.err = g.err
		}
	}
	if f.err != nil {
		return nil, PeerInfo{}, fmt.Errorf("stored session: %s", f.err.Message)
	}
	return sel, peer, nil
}

// tokenHash returns the SHA-256 of a resume token.
func tokenHash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// create stores a session that completed its handshake, with the hash of
// its first resume token; the App holds it attached.
func (s *AppSession) create(ctx context.Context) error {
	a := s.app
	s.mu.Lock()
	rec := &uiapsession.Session{ID: s.id, TokenHash: s.tokenHash, State: encodeStoredState(s.sel, s.info.Peer),
		ExpiresAt: time.Now().Add(a.heldFor())}
	s.mu.Unlock()
	if err := a.opts.Sessions.Create(ctx, rec); err != nil {
		return err
	}
	s.mu.Lock()
	s.version = 1
	s.armRefresh()
	s.mu.Unlock()
	return nil
}

// armRefresh (s.mu held) schedules the next refresh of the stored
// session's expiry while an App holds it attached.
func (s *AppSession) armRefresh() {
	if s.version == 0 {
		return
	}
	if s.refresh == nil {
		s.refresh = time.AfterFunc(s.app.opts.ResumeWindow, s.refreshExpiry)
		return
	}
	s.refresh.Reset(s.app.opts.ResumeWindow)
}

// disarmRefresh (s.mu held) stops the refreshes.
func (s *AppSession) disarmRefresh() {
	if s.refresh != nil {
		s.refresh.Stop()
	}
}

// refreshExpiry pushes the stored session's expiry forward while it is
// attached; a refusal means another App resumed it.
func (s *AppSession) refreshExpiry() {
	a := s.app
	s.mu.Lock()
	ver, attached := s.version, s.link != nil && s.state != StateTerminated
	s.mu.Unlock()
	if ver == 0 || !attached {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, storeTimeout)
	err := a.opts.Sessions.Touch(ctx, s.id, ver, time.Now().Add(a.heldFor()))
	cancel()
	switch {
	case errors.Is(err, uiapsession.ErrConflict):
		s.movedAway(ver)
		return
	case err != nil && s.ctx.Err() == nil:
		a.log.Warn("uicontrol: refreshing a stored session's expiry failed", "session", s.id, "err", err)
	}
	s.mu.Lock()
	if s.version == ver && s.link != nil && s.state != StateTerminated {
		s.armRefresh()
	}
	s.mu.Unlock()
}

// detached records in the store that the session's transport was lost
// at version ver: it stays resumable for the resume window.
func (s *AppSession) detached(ver int64) {
	a := s.app
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	err := a.opts.Sessions.Touch(ctx, s.id, ver, time.Now().Add(a.opts.ResumeWindow))
	switch {
	case errors.Is(err, uiapsession.ErrConflict):
		s.movedAway(ver)
	case err != nil:
		a.log.Warn("uicontrol: recording a lost transport in the store failed", "session", s.id, "err", err)
	}
}

// movedAway lets the session go when the store refused a write at
// version ver: another App resumed it (or it was swept). Unless this App
// itself claimed a newer version meanwhile, the session ends here
// without touching the store.
func (s *AppSession) movedAway(ver int64) {
	s.mu.Lock()
	same := s.version == ver
	if same {
		s.version = 0
	}
	s.mu.Unlock()
	if same {
		s.app.log.Debug("uicontrol: session resumed elsewhere", "session", s.id)
		s.end(NewError(CodeUnknownSession, "the session was resumed elsewhere"), storeLeave)
	}
}

// superseded reports whether the store holds the session at another
// version than this App — another App resumed it — when a resume
// presents a token this App did not issue. The store is asked only then.
func (s *AppSession) superseded(ctx context.Context, token string) bool {
	s.mu.Lock()
	ver, own := s.version, s.tokenHash != nil && subtle.ConstantTimeCompare(tokenHash(token), s.tokenHash) == 1
	s.mu.Unlock()
	if ver == 0 || own {
		return false
	}
	rec, err := s.app.opts.Sessions.Get(ctx, s.id, time.Now())
	if err != nil {
		return false // the resume finds out
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// A resume through this App may have claimed a newer version meanwhile.
	return s.version == ver && rec.Version != ver
}

// unstore deletes the stored session (it ended): no App can resume it.
func (s *AppSession) unstore() {
	s.mu.Lock()
	ver := s.version
	s.version = 0
	s.disarmRefresh()
	s.mu.Unlock()
	if ver > 0 {
		s.deleteStored(ver)
	}
}

// deleteStored deletes the stored session at version ver.
func (s *AppSession) deleteStored(ver int64) {
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := s.app.opts.Sessions.Delete(ctx, s.id, ver); err != nil && !errors.Is(err, uiapsession.ErrConflict) {
		// It expires and is swept; until then a resume finds its token
		// consumed or the session unknown.
		s.app.log.Warn("uicontrol: deleting a stored session failed", "session", s.id, "err", err)
	}
}

// storeEvent writes event e (its Seq set) of the session at version ver
// before it is sent.
func (s *AppSession) storeEvent(ctx context.Context, ver int64, e *Envelope) error {
	b, err := e.MarshalJSON()
	if err != nil {
		return err
	}
	err = s.app.opts.Sessions.Append(ctx, s.id, ver, uiapsession.Event{Seq: e.Seq, Data: b}, s.app.opts.ReplayLimit)
	if errors.Is(err, uiapsession.ErrConflict) {
		s.movedAway(ver)
		return NewError(CodeSessionNotActive, "the session was resumed elsewhere")
	}
	if err != nil {
		return fmt.Errorf("uicontrol: storing event %d of session %s: %w", e.Seq, s.id, err)
	}
	return nil
}

// claim is the store's half of a resume of a session this App holds, at
// version ver with the token hash h: the token is replaced by next.
func (s *AppSession) claim(ctx context.Context, ver int64, h, next []byte) (int64, fate, *Error) {
	a := s.app
	now := time.Now()
	got, err := a.opts.Sessions.Claim(ctx, s.id, h, next, now.Add(a.heldFor()), now)
	switch {
	case errors.Is(err, uiapsession.ErrNotFound):
		return 0, fateEnd, newErrorf(CodeUnknownSession, "session %q is not known or not resumable", s.id)
	case errors.Is(err, uiapsession.ErrConflict):
		return 0, fateMoved, NewError(CodePermissionDenied, "invalid resume token")
	case err != nil:
		a.log.Error("uicontrol: resuming a stored session failed", "session", s.id, "err", err)
		return 0, fateKeep, NewError(CodeInternalError, "internal error")
	}
	if got.Version != ver+1 || got.Seq != s.seq {
		// Another App wrote the session between this App's writes: what it
		// holds is stale.
		return 0, fateMoved, newErrorf(CodeUnknownSession, "session %q is not known or not resumable", s.id)
	}
	return got.Version, fateKeep, nil
}

// fate is what becomes of a session after a failed resume.
type fate int

const (
	fateKeep  fate = iota // it stays as it was
	fateEnd               // it ends (its events were lost, or it is gone from the store)
	fateMoved             // another App holds it: it ends here, the store untouched
)

// How a session that ends leaves the store.
const (
	storeDelete = iota // deleted: it ended for good
	storeLeave         // untouched: another App holds it
	storeDetach        // kept, resumable for the window: this App closes
)

// restore takes up, for a session.resume over l, a session this App
// does not hold but the store does (another App started it, and may have
// died): the same checks as a resume here, then a claim in the store; it
// returns the session, attached to l and registered, and the events to
// replay. next is the hash of the token session.resumed will carry.
func (a *App) restore(ctx context.Context, l *link, env *Envelope, p *sessionResume, next []byte) (*AppSession, []*Envelope, *Error) {
	unknown := newErrorf(CodeUnknownSession, "session %q is not known or not resumable", p.SessionID)
	now := time.Now()
	rec, err := a.opts.Sessions.Get(ctx, p.SessionID, now)
	switch {
	case errors.Is(err, uiapsession.ErrNotFound):
		return nil, nil, unknown
	case err != nil:
		a.log.Error("uicontrol: reading a stored session failed", "session", p.SessionID, "err", err)
		return nil, nil, NewError(CodeInternalError, "internal error")
	}
	h := tokenHash(p.ResumeToken)
	if rec.TokenHash == nil || subtle.ConstantTimeCompare(h, rec.TokenHash) != 1 {
		return nil, nil, NewError(CodePermissionDenied, "invalid resume token")
	}
	sel, peer, derr := decodeStoredState(rec.State)
	if derr != nil {
		a.log.Warn("uicontrol: a stored session cannot be resumed here", "session", p.SessionID, "err", derr)
		return nil, nil, unknown
	}
	if env.UIAP != sel.version {
		return nil, nil, newErrorf(CodeUnsupportedVersion, "uiap is %q but the session's selected version is %q", env.UIAP, sel.version)
	}
	if perr := sel.unmet(env.Requires); perr != nil {
		return nil, nil, perr
	}
	if p.LastSeq > rec.Seq {
		return nil, nil, newErrorf(CodeBadRequest, "lastSeq %d is beyond the last event sent (%d)", p.LastSeq, rec.Seq)
	}
	got, err := a.opts.Sessions.Claim(ctx, p.SessionID, h, next, now.Add(a.heldFor()), now)
	switch {
	case errors.Is(err, uiapsession.ErrNotFound):
		return nil, nil, unknown
	case errors.Is(err, uiapsession.ErrConflict):
		return nil, nil, NewError(CodePermissionDenied, "invalid resume token") // another resume won
	case err != nil:
		a.log.Error("uicontrol: resuming a stored session failed", "session", p.SessionID, "err", err)
		return nil, nil, NewError(CodeInternalError, "internal error")
	}
	// The session is this App's now: the App that held it can no longer
	// append, so the events are complete.
	evs, err := a.opts.Sessions.Events(ctx, p.SessionID, p.LastSeq)
	if err != nil {
		// Give the token back (a failed attempt does not consume it).
		a.log.Error("uicontrol: reading a stored session's events failed", "session", p.SessionID, "err", err)
		if _, uerr := a.opts.Sessions.Claim(ctx, p.SessionID, next, h, now.Add(a.opts.ResumeWindow), now); uerr != nil {
			a.log.Warn("uicontrol: giving a resume token back failed", "session", p.SessionID, "err", uerr)
		}
		return nil, nil, NewError(CodeInternalError, "internal error")
	}
	var replay []*Envelope
	for i, ev := range evs {
		e, perr := decodeEnvelope(ev.Data, len(ev.Data))
		if perr != nil || e.Seq != ev.Seq || (i == 0 && ev.Seq != p.LastSeq+1) || (i > 0 && ev.Seq != evs[i-1].Seq+1) {
			replay = nil
			break
		}
		replay = append(replay, e)
	}
	if int64(len(replay)) != got.Seq-p.LastSeq {
		// Events after lastSeq are no longer kept (or unreadable): the
		// session cannot be resumed faithfully, so it ends.
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		_ = a.opts.Sessions.Delete(ctx, p.SessionID, got.Version)
		return nil, nil, unknown
	}
	s := a.newSessionWithID(p.SessionID, l, sel, peer)
	s.state, s.version, s.seq, s.tokenHash = StateActive, got.Version, got.Seq, next
	s.replay = replay
	if n := len(s.replay) - a.opts.ReplayLimit; n > 0 {
		s.replay = slices.Delete(s.replay, 0, n)
	}
	s.armRefresh()
	out := make([]*Envelope, len(replay))
	for i, ev := range replay {
		r := *ev // a replayed event is a new message: new id, same seq and ts
		r.ID = newMessageID()
		out[i] = &r
	}
	return s, out, nil
}

// restore answers a session.resume of a session this App does not hold
// but may find in the store (App.restore).
func (c *appConn) restore(env *Envelope, p *sessionResume, token string, next []byte) {
	a := c.app
	s, replay, perr := a.restore(c.l.ctx, c.l, env, p, next)
	if perr != nil {
		c.replyError(env, perr)
		return
	}
	// The write slot is held from registration until the replay is sent,
	// so that a capabilities.changed for the session goes out after it.
	if err := acquire(c.l.ctx, s.sem, s.done); err != nil {
		return
	}
	defer func() { <-s.sem }()
	a.mu.Lock()
	closed := a.closed
	if !closed {
		a.sessions[s.id] = s
	}
	a.mu.Unlock()
	if closed {
		// Give the token back, so that the agent can resume elsewhere.
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		now := time.Now()
		if _, err := a.opts.Sessions.Claim(ctx, s.id, next, tokenHash(p.ResumeToken), now.Add(a.opts.ResumeWindow), now); err != nil {
			a.log.Warn("uicontrol: giving a resume token back failed", "session", s.id, "err", err)
		}
		s.mu.Lock()
		s.version = 0
		s.mu.Unlock()
		s.end(ErrClosed, storeLeave)
		c.replyError(env, NewError(CodeInternalError, "internal error"))
		return
	}
	c.session = s
	s.mu.Lock()
	s.seen.add(env.ID)
	s.mu.Unlock()
	c.resumed(s, env, token, replay)
}
