// uiap.js — the APP side of UIAP Core 0.1 for a web page, over the ws@0.1
// binding (one envelope per WebSocket text frame, subprotocol uiap.v0.1).
// Dependency-free ES module; see docs/spec-notes/uiap.md, "Browser app".
//
// A browser cannot accept connections, so the page DIALS the agent and then
// plays the app: it answers session.initialize (version 0.1, extension
// uiap.action@0.1), capabilities.get, session.ping, session.interrupt/resume
// (same connection) and session.terminate, and runs registered action
// handlers on action.request (action.started → action.progress* →
// action.result, all carrying requestId).
//
//   import { connectApp } from '/web/uiap.js';
//   const app = await connectApp('ws://host/web/demo/ws', {
//     capabilities: { actions: [{ id: 'add_to_cart' }], risk: { add_to_cart: 'low' } },
//     actions: { add_to_cart: async (args, ctx) => { ctx.progress(0.5, 'adding'); return { items: 1 }; } },
//     onState: (state) => console.log(state),
//   });
//   app.publish(newDoc, 'cart_changed'); // capabilities.changed, new revision
//   app.signal('shop.order_placed', { order: 'A-1' }); // an app event

export const VERSION = '0.1';
export const SUBPROTOCOL = 'uiap.v0.1';
export const ACTION_EXTENSION = 'uiap.action';
export const ACTION_EXTENSION_VERSION = '0.1';

const KINDS = new Set(['request', 'response', 'event', 'error']);
const SECTIONS = ['roles', 'states', 'affordances', 'actions', 'risk', 'signals'];
const VERSION_RE = /^[0-9]{1,9}\.[0-9]{1,9}$/;
const TS_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]00:00)$/;
const DUP_WINDOW = 4096;

/** An error with a UIAP code; throw one from an action handler to choose the code. */
export class UIAPError extends Error {
  constructor(code, message, details) {
    super(message || code);
    this.code = code;
    if (details !== undefined) this.details = details;
  }
}

function isObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function validId(v) {
  if (typeof v !== 'string') return false;
  const n = [...v].length; // code points
  return n >= 1 && n <= 128;
}

function uuid() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

function randomHex(n) {
  const b = new Uint8Array(n);
  crypto.getRandomValues(b);
  return [...b].map((x) => x.toString(16).padStart(2, '0')).join('');
}

function reserved(type) {
  return type === 'error' || /^(session|capabilities|error|action)\./.test(type);
}

/**
 * connectApp dials url and serves the page as a UIAP app over it. It
 * resolves, once the socket is open, to a connection object:
 *   publish(doc, reason?)  replace the capability document (capabilities.changed)
 *   signal(type, data?)    emit an app event (type like "shop.order_placed")
 *   close(reason?)         terminate the session (session.terminate) and close
 *   state, sessionId, revision, closed (a Promise settled when the socket closes)
 *
 * options:
 *   capabilities  the CapabilityDocument (sections roles, states, affordances,
 *                 actions, risk, signals; other members kept)
 *   actions       {actionId: async (args, ctx) => result}; ctx has requestId,
 *                 actionId, request (the payload), signal (AbortSignal: cancel,
 *                 timeout, session end) and progress(fraction, message, data)
 *   source        {role, id} of the app (default {role: "app", id: "web-app"})
 *   profiles      profiles supported (default ["web@0.1"])
 *   heartbeatMs   announced in session.initialized (default: omitted, none)
 *   maxMessageSize  bytes (UTF-16 units) of a received frame (default 1 MiB)
 *   onState(state)            NEW, ACTIVE, INTERRUPTED, TERMINATED
 *   onSignal(type, payload, envelope)  an event from the agent
 *   onAction(phase, info)     "started" | "result" of each action run
 *   onError(err)              a protocol error the page may want to log
 */
export function connectApp(url, options = {}) {
  const app = new AppConnection(options);
  return app._dial(url);
}

class AppConnection {
  constructor(opts) {
    this.opts = opts;
    this.source = opts.source || { role: 'app', id: 'web-app' };
    this.profiles = opts.profiles || ['web@0.1'];
    this.handlers = { ...(opts.actions || {}) };
    this.maxMessageSize = opts.maxMessageSize || 1 << 20;
    this.state = 'NEW';
    this.sessionId = null;
    this.selectedProfiles = [];
    this.selectedExtensions = [];
    this.delivery = 'deferred';
    this.seq = 0;
    this.seen = new Set();
    this.seenOrder = [];
    this.running = new Map(); // requestId → AbortController
    this.withheld = []; // events held while INTERRUPTED
    this.resumeToken = null;
    this._rev = 0;
    this._setDoc(opts.capabilities || {});
  }

  _dial(url) {
    return new Promise((resolve, reject) => {
      let ws;
      try {
        ws = new WebSocket(url, [SUBPROTOCOL]);
      } catch (e) {
        reject(e);
        return;
      }
      this.ws = ws;
      let opened = false;
      this.closed = new Promise((done) => {
        ws.addEventListener('close', (ev) => {
          for (const c of this.running.values()) c.abort(new UIAPError('session_not_active', 'session ended'));
          this.running.clear();
          this._setState('TERMINATED');
          done({ code: ev.code, reason: ev.reason });
          if (!opened) reject(new Error(`uiap: WebSocket to ${url} closed (${ev.code})`));
        });
      });
      ws.addEventListener('open', () => {
        opened = true;
        resolve(this);
      });
      ws.addEventListener('message', (ev) => this._receive(ev.data));
    });
  }

  get revision() {
    return this.rev;
  }

  _setDoc(doc) {
    if (!isObject(doc)) throw new TypeError('uiap: a capability document must be an object');
    const out = {};
    for (const k of SECTIONS) if (doc[k] !== undefined && doc[k] !== null) out[k] = doc[k];
    for (const k of Object.keys(doc).sort()) if (!SECTIONS.includes(k) && doc[k] !== undefined && doc[k] !== null) out[k] = doc[k];
    const json = JSON.stringify(out);
    if (json === this.docJSON) return false;
    this.doc = out;
    this.docJSON = json;
    this._rev++;
    this.rev = `r${this._rev}-${randomHex(4)}`;
    return true;
  }

  _setState(s) {
    if (this.state === s) return;
    this.state = s;
    if (this.opts.onState) this.opts.onState(s);
  }

  /** Replace the capability document; pushes capabilities.changed when it changed. */
  publish(doc, reason) {
    if (!this._setDoc(doc)) return this.rev;
    if (this.delivery !== 'none') {
      const p = { revision: this.rev, capabilities: this.doc };
      if (reason) p.reason = reason;
      this._event('capabilities.changed', p);
    }
    return this.rev;
  }

  /** Emit an app event of the given type (not in a core or action namespace). */
  signal(type, data) {
    if (typeof type !== 'string' || type === '' || reserved(type)) throw new TypeError(`uiap: cannot emit event type ${JSON.stringify(type)}`);
    this._event(type, data === undefined ? {} : isObject(data) ? data : { value: data });
  }

  /** Terminate the session (if any) and close the socket. */
  close(reason = 'app_closed') {
    if (this.state === 'ACTIVE' || this.state === 'INTERRUPTED') {
      this._send({ kind: 'request', type: 'session.terminate', payload: { reason } });
      this._setState('TERMINATING');
      setTimeout(() => this.ws.close(1000, 'terminated'), 1000); // the answer closes it sooner
    } else {
      this.ws.close(1000, reason);
    }
    return this.closed;
  }

  // --- sending

  _send(m) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return;
    const env = {
      uiap: VERSION,
      kind: m.kind,
      type: m.type,
      id: uuid(),
    };
    if (this.sessionId) env.sessionId = this.sessionId;
    if (m.correlationId) env.correlationId = m.correlationId;
    env.ts = new Date().toISOString();
    env.source = this.source;
    if (m.seq !== undefined) env.seq = m.seq;
    env.payload = m.payload || {};
    this.ws.send(JSON.stringify(env));
  }

  _reply(req, type, payload) {
    this._send({ kind: 'response', type, correlationId: req.id, payload });
  }

  _error(failed, code, message, details) {
    const p = { code, message: message || code };
    if (failed && typeof failed.type === 'string' && failed.type !== '') p.failedType = failed.type;
    if (details !== undefined) p.details = details;
    if (code === 'rate_limited') p.retryable = true;
    const corr = failed && validId(failed.id) ? failed.id : undefined;
    this._send({ kind: 'error', type: 'error', correlationId: corr, payload: p });
    if (this.opts.onError) this.opts.onError(new UIAPError(code, p.message, details));
  }

  _event(type, payload) {
    if (this.state === 'INTERRUPTED') {
      this.withheld.push({ type, payload, seq: ++this.seq });
      return;
    }
    if (this.state !== 'ACTIVE') return;
    this._send({ kind: 'event', type, seq: ++this.seq, payload });
  }

  // --- receiving

  _receive(data) {
    if (typeof data !== 'string') {
      this._error(null, 'invalid_message', 'binary frames are not UIAP messages');
      return;
    }
    if (data.length > this.maxMessageSize) {
      this._error(null, 'invalid_message', 'message too large');
      return;
    }
    let env;
    try {
      env = JSON.parse(data);
    } catch {
      this._error(null, 'invalid_message', 'not JSON');
      return;
    }
    if (!isObject(env)) {
      this._error(null, 'invalid_message', 'not a JSON object');
      return;
    }
    const bad = this._check(env);
    if (bad) {
      if (env.kind !== 'error') this._error(env, bad.code, bad.message, bad.details);
      return;
    }
    try {
      this._dispatch(env);
    } catch (e) {
      this._error(env, 'internal_error', 'internal error');
      if (this.opts.onError) this.opts.onError(e);
    }
  }

  // _check validates the envelope (strict by envelope); it returns the
  // first failure as {code, message, details} or null.
  _check(env) {
    const field = (f, why) => ({ code: 'invalid_message', message: `${f}: ${why}`, details: { field: f } });
    for (const f of ['uiap', 'kind', 'type', 'id', 'ts', 'source', 'payload']) {
      if (env[f] === undefined || env[f] === null) return field(f, 'missing');
    }
    if (typeof env.uiap !== 'string' || !VERSION_RE.test(env.uiap)) return field('uiap', 'not major.minor');
    if (!KINDS.has(env.kind)) return field('kind', 'not request, response, event or error');
    if (typeof env.type !== 'string' || env.type === '') return field('type', 'not a non-empty string');
    if ((env.type === 'error') !== (env.kind === 'error')) return field('type', '"error" exactly when kind is "error"');
    if (!validId(env.id)) return field('id', 'not 1..128 characters');
    if (typeof env.ts !== 'string' || !TS_RE.test(env.ts) || isNaN(Date.parse(env.ts))) return field('ts', 'not RFC 3339 UTC');
    if (!isObject(env.source) || typeof env.source.role !== 'string' || env.source.role === '' || typeof env.source.id !== 'string' || env.source.id === '') return field('source', 'not {role, id}');
    if (!isObject(env.payload)) return field('payload', 'not an object');
    if (env.correlationId !== undefined && env.correlationId !== null && !validId(env.correlationId)) return field('correlationId', 'not 1..128 characters');
    if (env.kind === 'response' && (env.correlationId === undefined || env.correlationId === null)) return field('correlationId', 'missing on a response');
    if (env.sessionId !== undefined && env.sessionId !== null && !validId(env.sessionId)) return field('sessionId', 'not 1..128 characters');
    if (env.seq !== undefined && env.seq !== null && !(Number.isSafeInteger(env.seq) && env.seq >= 0)) return field('seq', 'not a non-negative integer');
    if (env.ext !== undefined && env.ext !== null && !isObject(env.ext)) return field('ext', 'not an object');
    if (env.requires !== undefined && env.requires !== null && !(Array.isArray(env.requires) && env.requires.every((r) => typeof r === 'string' && r !== ''))) return field('requires', 'not an array of non-empty strings');
    // ids are unique per session (the last DUP_WINDOW remembered)
    if (this.seen.has(env.id)) return { code: 'invalid_message', message: 'duplicate message id', details: { field: 'id' } };
    this.seen.add(env.id);
    this.seenOrder.push(env.id);
    if (this.seenOrder.length > DUP_WINDOW) this.seen.delete(this.seenOrder.shift());
    if (this.sessionId) {
      if (env.uiap !== VERSION) return { code: 'unsupported_version', message: `uiap must be ${VERSION}`, details: { selectedVersion: VERSION } };
      if (env.sessionId && env.sessionId !== this.sessionId) return { code: 'unknown_session', message: 'unknown session' };
      const missing = (env.requires || []).filter((r) => !this._fulfils(r));
      if (missing.length && env.type !== 'session.initialize') {
        const ext = missing.some((r) => r.split('@')[0].includes('.'));
        return { code: ext ? 'unsupported_extension' : 'unsupported_profile', message: 'required feature not selected', details: { requires: missing } };
      }
    }
    return null;
  }

  _fulfils(r) {
    const [name, version] = r.split('@');
    if (name.includes('.')) {
      const id = name === 'uicp.action' ? ACTION_EXTENSION : name;
      return this.selectedExtensions.some((e) => e.id === id && (!version || e.version === version));
    }
    return this.selectedProfiles.some((p) => p === r || (!version && p.split('@')[0] === name));
  }

  _dispatch(env) {
    const { kind, type } = env;
    if (kind === 'request') {
      if (type === 'session.initialize') return this._initialize(env);
      if (type === 'session.ping') return this._reply(env, 'session.pong', typeof env.payload.nonce === 'string' ? { nonce: env.payload.nonce } : {});
      if (type === 'session.resume') return this._resume(env);
      if (type === 'session.terminate') return this._terminate(env);
      if (type === 'session.interrupt') return this._interrupt(env);
      if (this.state !== 'ACTIVE') return this._error(env, 'session_not_active', `session is ${this.state}`);
      if (type === 'capabilities.get') return this._capabilities(env);
      if (type === 'action.request') return this._action(env);
      if (type === 'action.cancel') return this._cancel(env);
      return this._error(env, 'unknown_message_type', `unknown message type ${JSON.stringify(type)}`);
    }
    if (kind === 'event') {
      if (this.state === 'ACTIVE' && this.opts.onSignal) this.opts.onSignal(type, env.payload, env);
      return;
    }
    // responses and errors: the app sends no requests but session.terminate
    if (type === 'session.terminated' && this.state === 'TERMINATING') this.ws.close(1000, 'terminated');
  }

  _initialize(env) {
    if (this.sessionId) return this._error(env, 'state_conflict', 'session already established');
    const p = env.payload;
    const versions = p.supportedVersions;
    if (!Array.isArray(versions) || versions.length === 0 || !versions.every((v) => typeof v === 'string' && VERSION_RE.test(v))) {
      return this._error(env, 'invalid_message', 'supportedVersions: not a non-empty array of versions', { field: 'supportedVersions' });
    }
    if (!versions.includes(VERSION)) return this._error(env, 'unsupported_version', 'no common version', { supportedVersions: [VERSION] });
    const profiles = Array.isArray(p.supportedProfiles) ? p.supportedProfiles.filter((x) => this.profiles.includes(x)) : [];
    const exts = [];
    const offers = p.supportedExtensions === undefined || p.supportedExtensions === null ? [] : p.supportedExtensions;
    if (!Array.isArray(offers)) return this._error(env, 'invalid_message', 'supportedExtensions: not an array', { field: 'supportedExtensions' });
    for (const o of offers) {
      if (!isObject(o) || typeof o.id !== 'string' || o.id === '' || !Array.isArray(o.versions)) {
        return this._error(env, 'invalid_message', 'supportedExtensions: entry not {id, versions}', { field: 'supportedExtensions' });
      }
      if (o.id === ACTION_EXTENSION && o.versions.includes(ACTION_EXTENSION_VERSION)) {
        if (exts.length) return this._error(env, 'bad_request', 'extension offered twice', { extension: o.id });
        exts.push({ id: o.id, version: ACTION_EXTENSION_VERSION });
      } else if (o.required === true) {
        return this._error(env, 'unsupported_extension', `extension ${o.id} not supported`, { extension: o.id });
      }
    }
    const delivery = p.capabilityDelivery === undefined || p.capabilityDelivery === null ? 'deferred' : p.capabilityDelivery;
    if (!['inline', 'deferred', 'none'].includes(delivery)) return this._error(env, 'invalid_message', 'capabilityDelivery: not inline, deferred or none', { field: 'capabilityDelivery' });
    this.sessionId = uuid();
    this.selectedProfiles = profiles;
    this.selectedExtensions = exts;
    this.delivery = delivery;
    this.resumeToken = randomHex(32);
    const out = { sessionId: this.sessionId, selectedVersion: VERSION };
    if (profiles.length) out.selectedProfiles = profiles;
    out.selectedExtensions = exts;
    out.capabilityDelivery = delivery;
    if (this.opts.heartbeatMs) out.heartbeatMs = this.opts.heartbeatMs;
    out.resumeToken = this.resumeToken;
    if (delivery === 'inline') {
      out.capabilities = this.doc;
      out.capabilitiesRevision = this.rev;
    }
    this._reply(env, 'session.initialized', out);
    this._setState('ACTIVE');
  }

  _resume(env) {
    const p = env.payload;
    if (!validId(p.sessionId) || typeof p.resumeToken !== 'string' || p.resumeToken === '') {
      return this._error(env, 'invalid_message', 'session.resume needs sessionId and resumeToken', { field: validId(p.sessionId) ? 'resumeToken' : 'sessionId' });
    }
    if (p.sessionId !== this.sessionId || this.state === 'TERMINATED') return this._error(env, 'unknown_session', 'unknown session');
    if (this.state === 'ACTIVE') return this._error(env, 'state_conflict', 'session is active');
    if (p.resumeToken !== this.resumeToken) return this._error(env, 'permission_denied', 'invalid resume token');
    this.resumeToken = randomHex(32);
    const out = { sessionId: this.sessionId, selectedVersion: VERSION };
    if (this.selectedProfiles.length) out.selectedProfiles = this.selectedProfiles;
    out.selectedExtensions = this.selectedExtensions;
    if (this.opts.heartbeatMs) out.heartbeatMs = this.opts.heartbeatMs;
    out.resumeToken = this.resumeToken;
    this._reply(env, 'session.resumed', out);
    this._setState('ACTIVE');
    const lastSeq = Number.isSafeInteger(p.lastSeq) ? p.lastSeq : 0;
    for (const e of this.withheld.splice(0)) if (e.seq > lastSeq) this._send({ kind: 'event', type: e.type, seq: e.seq, payload: e.payload });
  }

  _interrupt(env) {
    if (!this.sessionId) return this._error(env, 'session_not_active', 'no session');
    if (this.state !== 'ACTIVE') return this._error(env, 'state_conflict', `session is ${this.state}`);
    const out = { status: 'interrupted' };
    if (typeof env.payload.reason === 'string') out.reason = env.payload.reason;
    this._reply(env, 'session.interrupted', out);
    this._setState('INTERRUPTED');
  }

  _terminate(env) {
    if (!this.sessionId) return this._error(env, 'session_not_active', 'no session');
    const out = {};
    if (typeof env.payload.reason === 'string') out.reason = env.payload.reason;
    for (const c of this.running.values()) c.abort(new UIAPError('session_not_active', 'session terminated'));
    this._reply(env, 'session.terminated', out);
    this._setState('TERMINATED');
    this.ws.close(1000, 'terminated');
  }

  _capabilities(env) {
    const inc = env.payload.include;
    if (inc !== undefined && inc !== null && !(Array.isArray(inc) && inc.every((x) => typeof x === 'string' && x !== ''))) {
      return this._error(env, 'invalid_message', 'include: not an array of non-empty strings', { field: 'include' });
    }
    let caps = this.doc;
    if (Array.isArray(inc) && !inc.includes('all')) {
      caps = {};
      for (const k of inc) if (this.doc[k] !== undefined) caps[k] = this.doc[k];
    }
    this._reply(env, 'capabilities.list', { revision: this.rev, capabilities: caps });
  }

  _action(env) {
    if (!this.selectedExtensions.some((e) => e.id === ACTION_EXTENSION)) {
      return this._error(env, 'unsupported_extension', 'uiap.action was not selected', { extension: ACTION_EXTENSION });
    }
    const p = env.payload;
    if (typeof p.actionId !== 'string' || p.actionId === '') return this._error(env, 'invalid_message', 'actionId: not a non-empty string', { field: 'actionId' });
    for (const f of ['args', 'target', 'verification', 'presentation', 'metadata']) {
      if (p[f] !== undefined && p[f] !== null && !isObject(p[f])) return this._error(env, 'invalid_message', `${f}: not an object`, { field: f });
    }
    if (p.timeoutMs !== undefined && p.timeoutMs !== null && !(Number.isSafeInteger(p.timeoutMs) && p.timeoutMs >= 0)) {
      return this._error(env, 'invalid_message', 'timeoutMs: not a non-negative integer', { field: 'timeoutMs' });
    }
    const fn = Object.prototype.hasOwnProperty.call(this.handlers, p.actionId) ? this.handlers[p.actionId] : undefined;
    if (typeof fn !== 'function') return this._error(env, 'capability_unavailable', `no action ${JSON.stringify(p.actionId)}`, { actionId: p.actionId });
    const requestId = env.id;
    const actionId = p.actionId;
    const ac = new AbortController();
    this.running.set(requestId, ac);
    let timer;
    if (p.timeoutMs) timer = setTimeout(() => ac.abort(new UIAPError('timeout', 'action timed out')), p.timeoutMs);
    let done = false;
    const base = { requestId, actionId };
    const result = (payload) => {
      done = true;
      clearTimeout(timer);
      this.running.delete(requestId);
      if (p.idempotencyKey) payload.idempotencyKey = p.idempotencyKey;
      if (this.opts.onAction) this.opts.onAction('result', payload);
      this._reply(env, 'action.result', payload);
    };
    this._event('action.started', { ...base, state: 'EXECUTING' });
    if (this.opts.onAction) this.opts.onAction('started', { ...base, args: p.args || {} });
    const ctx = {
      requestId,
      actionId,
      request: p,
      signal: ac.signal,
      progress: (fraction, message, data) => {
        if (done) return;
        const e = { ...base, state: 'EXECUTING' };
        if (typeof fraction === 'number' && fraction > 0 && fraction <= 1) e.progress = fraction;
        if (typeof message === 'string' && message !== '') e.message = message;
        if (data !== undefined) e.data = data;
        this._event('action.progress', e);
      },
    };
    Promise.resolve()
      .then(() => fn(p.args || {}, ctx))
      .then(
        (value) => {
          if (done) return;
          const out = { ...base, state: 'SUCCEEDED' };
          if (value !== undefined) out.result = value;
          result(out);
        },
        (err) => {
          if (done) return;
          const reason = ac.signal.aborted ? ac.signal.reason : err;
          if (reason instanceof UIAPError && reason.code === 'cancelled') {
            result({ ...base, state: 'CANCELLED' });
            return;
          }
          const e = reason instanceof UIAPError ? { code: reason.code, message: reason.message } : { code: 'internal_error', message: 'internal error' };
          if (reason instanceof UIAPError && reason.details !== undefined) e.details = reason.details;
          if (!(reason instanceof UIAPError) && this.opts.onError) this.opts.onError(err);
          result({ ...base, state: 'FAILED', error: e });
        },
      );
  }

  _cancel(env) {
    const id = env.payload.requestId;
    if (!validId(id)) return this._error(env, 'invalid_message', 'requestId: not 1..128 characters', { field: 'requestId' });
    const ac = this.running.get(id);
    if (!ac) return this._error(env, 'state_conflict', `no action of request ${JSON.stringify(id)} is running`, { requestId: id });
    // the answer precedes the action.result
    this._reply(env, 'action.cancelled', { requestId: id, state: 'EXECUTING' });
    ac.abort(new UIAPError('cancelled', 'action cancelled'));
  }
}
