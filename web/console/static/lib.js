// Small helpers shared by the console's pages: DOM building (text only,
// never HTML strings), the API client and formatting.

// h builds an element: h("a", {href: "#"}, "text", child…). Attributes
// whose value is null, undefined or false are left out; "on…" ones are
// event listeners.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c == null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

// ApiError is a failed API call: its status, code and message.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }
}

// api calls the server's API with the session cookie; a JSON body is
// sent as JSON. A 401 means the session ended: the page reloads into the
// login form.
export async function api(path, {method = "GET", body} = {}) {
  const init = {method, credentials: "same-origin", headers: {Accept: "application/json"}};
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  if (resp.status === 401) {
    location.reload();
    throw new ApiError(401, "UNAUTHORIZED", "your session ended: log in again");
  }
  const text = await resp.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!resp.ok) {
    const e = (data && (data.error || data)) || {};
    throw new ApiError(resp.status, e.code || e.error_code, e.message || e.detail || text || resp.statusText);
  }
  return data;
}

// when formats a timestamp in the viewer's locale.
export function when(t) {
  if (!t) return "";
  const d = new Date(t);
  return isNaN(d) ? String(t) : d.toLocaleString();
}

// clock formats a timestamp as a time of day with milliseconds.
export function clock(t) {
  const d = new Date(t);
  if (isNaN(d)) return "";
  return d.toLocaleTimeString(undefined, {hour12: false}) + "." + String(d.getMilliseconds()).padStart(3, "0");
}

// duration formats the time between two timestamps.
export function duration(from, to) {
  if (!from || !to) return "";
  const ms = new Date(to) - new Date(from);
  if (!(ms >= 0)) return "";
  if (ms < 1000) return `${ms} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const m = Math.floor(ms / 60_000);
  return m < 60 ? `${m} min ${Math.round((ms % 60_000) / 1000)} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

// badge is a status label.
export function badge(status) {
  return h("span", {class: `badge s-${status}`}, String(status).replace("_", " "));
}

// pretty renders JSON (a value or raw text) indented.
export function pretty(v) {
  if (v === undefined) return "";
  try { return JSON.stringify(typeof v === "string" ? JSON.parse(v) : v, null, 2); } catch { return String(v); }
}

// toast shows a short message at the bottom of the page (and to screen
// readers).
export function toast(msg) {
  const t = document.getElementById("toast");
  t.textContent = msg;
  t.classList.add("show");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => t.classList.remove("show"), 4000);
}

// errorBox renders an error.
export function errorBox(err) {
  return h("p", {class: "error", role: "alert"}, err instanceof Error ? err.message : String(err));
}
