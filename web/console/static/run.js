// A run, live: its events as the server streams them
// (/v1/runs/{id}/events, Server-Sent Events; the browser reconnects with
// Last-Event-ID), its answer, its pending approvals and its audit trail.
// Events are rendered in batches, one per frame, so a run that emits
// thousands of events a second does not stall the page.
import {api, h, badge, clock, pretty, errorBox, toast} from "./lib.js";

const EVENT_TYPES = ["run_started", "phase", "model_text", "model_turn", "tool_call", "tool_result", "tool_blocked",
  "approval_requested", "approval_decided", "paused", "resumed", "rollback", "ended",
  "subagent_start", "subagent_event", "subagent_end"];

export async function runPage(main, id, config) {
  const status = h("span", {id: "run-status", "aria-live": "polite"});
  const trace = h("dd", {id: "run-trace", class: "mono"}, "—");
  const agent = h("dd", {id: "run-agent"}, "");
  const pending = h("div", {id: "pending"});
  const events = h("ol", {id: "events", class: "events", "aria-label": "Events", dataset: {received: "0", rendered: "0", lastSeq: "0"}});
  const answer = h("section", {id: "answer", class: "card", hidden: true, "aria-labelledby": "answer-h"});
  const audit = h("section", {id: "audit", class: "card", "aria-labelledby": "audit-h"});
  const conn = h("span", {id: "stream-state", class: "muted"}, "connecting…");
  main.append(
    h("h1", {}, "Run ", h("span", {class: "mono"}, id)),
    h("dl", {class: "kv card"}, h("dt", {}, "Agent"), agent, h("dt", {}, "Status"), h("dd", {}, status),
      h("dt", {}, "Trace"), trace, h("dt", {}, "Events"), h("dd", {}, conn)),
    pending, answer,
    h("h2", {}, "Events"), events,
    audit);

  let run;
  try {
    run = await api(`/v1/runs/${encodeURIComponent(id)}`);
  } catch (e) {
    main.append(errorBox(e));
    return;
  }
  showRun(run);

  function showRun(r) {
    run = r;
    agent.textContent = r.agent || "";
    status.replaceChildren(badge(r.status));
    const tid = r.envelope && r.envelope.trace_id;
    if (tid) {
      trace.replaceChildren(config.trace_url
        ? h("a", {href: config.trace_url.replace("{trace_id}", tid), target: "_blank", rel: "noopener"}, tid)
        : tid);
    }
    pending.replaceChildren();
    if (r.status === "paused" && r.pending_approvals && r.pending_approvals.length) {
      pending.append(h("div", {class: "card", role: "note"},
        h("p", {}, "This run waits for a human decision on ", String(r.pending_approvals.length), " call(s)."),
        h("a", {class: "button", href: "#/approvals"}, "Open the approvals inbox")));
    }
    if (r.status === "delivered" || r.status === "fail_safe") {
      answer.hidden = false;
      answer.replaceChildren(...[h("h2", {id: "answer-h"}, r.status === "delivered" ? "Answer" : "Failed safe"),
        r.output ? h("p", {class: "answer", id: "output"}, r.output) : null,
        r.reasons ? h("p", {}, "Reasons: ", h("span", {class: "mono"}, r.reasons.join(", "))) : null,
        r.error ? h("p", {class: "error"}, `${r.error.code}: ${r.error.message}`) : null,
        r.denied_calls ? h("p", {}, "Refused calls: ", r.denied_calls.map((c) => `${c.tool} (${(c.reasons || []).join(", ")})`).join("; ")) : null].filter(Boolean));
    }
  }

  // Audit: loaded on demand, and by itself once the run ended.
  audit.append(h("h2", {id: "audit-h"}, "Audit trail"),
    h("div", {class: "row"},
      h("button", {type: "button", class: "secondary", id: "verify", onclick: loadAudit}, "Verify the audit chain"),
      h("a", {class: "button secondary", href: `/v1/runs/${encodeURIComponent(id)}/audit?format=jsonl`, download: `audit-${id}.jsonl`}, "Export JSONL")),
    h("div", {id: "audit-body"}));
  async function loadAudit() {
    const body = audit.querySelector("#audit-body");
    try {
      const a = await api(`/v1/runs/${encodeURIComponent(id)}/audit`);
      const c = a.chain;
      body.replaceChildren(
        h("p", {id: "chain"}, badge(c.verified ? "verified" : "broken"), " ",
          c.verified ? `${a.records.length} records, each intact and linked into the journal's hash chain.`
            : `Broken at record ${c.broken_at}: ${c.detail} (${c.checked} records before it verified).`),
        h("div", {class: "table-wrap"}, h("table", {id: "audit-records"},
          h("thead", {}, h("tr", {}, ["Seq", "Time", "Kind", "What", "Actor", "Outcome"].map((t) => h("th", {scope: "col"}, t)))),
          h("tbody", {}, a.records.map((r) => h("tr", {},
            h("td", {class: "mono"}, String(r.seq)), h("td", {}, clock(r.timestamp)), h("td", {class: "mono"}, r.kind),
            h("td", {}, [r.from || r.to ? `${r.from || ""}→${r.to || ""}` : "", r.tool ? ` ${r.tool}` : ""].join("")),
            h("td", {}, r.actor ? `${r.actor.id} (${r.actor.kind})` : ""),
            h("td", {}, [r.outcome, ...(r.reasons || [])].filter(Boolean).join(" "))))))));
    } catch (e) {
      body.replaceChildren(errorBox(e));
    }
  }

  // The event stream.
  let received = 0, rendered = 0, lastSeq = 0, textItem = null, scheduled = false, closed = false;
  const queue = [];
  const subs = new Map(); // sub-agent (call_id/agent) → its <ol>

  function put(list, el) { list.append(el); return el; }

  function render(ev) {
    let list = events;
    if (ev.type.startsWith("subagent_") && ev.type !== "subagent_start") list = subs.get(`${ev.call_id}/${ev.agent}`) || events;
    if (ev.type === "model_text" || (ev.type === "subagent_event" && ev.text)) {
      if (!textItem || textItem.list !== list) {
        const pre = h("pre", {});
        const li = put(list, h("li", {class: "e-model_text"}, h("span", {class: "t"}, clock(ev.time)),
          ev.unverified ? h("span", {class: "badge s-pending"}, "unverified") : null, pre));
        textItem = {list, pre, node: pre.appendChild(document.createTextNode(""))};
        li.dataset.type = "model_text";
      }
      textItem.node.appendData(ev.text);
      return;
    }
    textItem = null;
    const li = h("li", {class: `e-${ev.type}`, dataset: {type: ev.type, seq: String(ev.seq || "")}}, h("span", {class: "t"}, clock(ev.time)));
    const add = (...c) => li.append(...c.filter((x) => x != null && x !== false));
    switch (ev.type) {
      case "run_started": add(`Run started (${ev.agent || "agent"})`); break;
      case "phase": add("Phase ", h("b", {}, ev.phase), ev.from ? ` (from ${ev.from})` : "", ev.reasons ? ` — ${ev.reasons.join(", ")}` : ""); break;
      case "model_turn": add("Model asks for ", calls(ev.tool_calls)); break;
      case "tool_call": add("Tool call ", h("b", {class: "mono"}, ev.tool), " ", h("span", {class: "badge"}, ev.tier || ""),
        ev.approval_id ? ` approved (${ev.approval_id.slice(0, 8)})` : "", ev.args ? h("pre", {}, pretty(ev.args)) : null); break;
      case "tool_result": add("Result of ", h("b", {class: "mono"}, ev.tool), " ", badge(ev.outcome || ""),
        ev.reasons ? ` ${ev.reasons.join(", ")}` : "", ev.result ? h("pre", {}, pretty(ev.result)) : null); break;
      case "tool_blocked": add("Held ", h("b", {class: "mono"}, ev.tool), `: ${(ev.reasons || []).join(", ")}`, ev.detail ? ` — ${ev.detail}` : ""); break;
      case "approval_requested": add("Approval requested for ", h("b", {class: "mono"}, ev.tool), " ", h("a", {href: "#/approvals"}, ev.approval_id)); break;
      case "approval_decided":
        li.classList.add(ev.approved ? "approved" : "denied");
        add(badge(ev.approved ? "approved" : "denied"), ` by ${ev.approver || "?"}`, ev.detail ? `: ${ev.detail}` : ""); break;
      case "paused": add(badge("paused"), " waiting for ", String((ev.approvals || []).length), " approval(s)"); setStatus("paused"); refresh("?wait=10s"); break;
      case "resumed": add("Resumed"); setStatus("running"); refresh(""); break;
      case "rollback": add("Rollback of ", h("b", {class: "mono"}, ev.tool), " ", badge(ev.outcome || "pending")); break;
      case "ended": add("Ended ", badge(ev.status || ""), ev.reasons ? ` ${ev.reasons.join(", ")}` : ""); setStatus(ev.status); break;
      case "subagent_start": {
        const ol = h("ol", {class: "events"});
        subs.set(`${ev.call_id}/${ev.agent}`, ol);
        add(h("details", {open: true}, h("summary", {}, "Sub-agent ", h("b", {}, ev.agent), ev.text ? `: ${ev.text}` : ""), ol));
        break;
      }
      case "subagent_event": add(ev.agent, " asks for ", calls(ev.tool_calls)); break;
      case "subagent_end": add(`Sub-agent ${ev.agent} `, badge(ev.outcome || ""), ev.output ? h("pre", {}, ev.output) : null, ev.detail ? ` ${ev.detail}` : ""); break;
      default: add(ev.type);
    }
    put(list, li);
  }

  function calls(list) {
    return h("span", {}, (list || []).map((c, i) => [i ? ", " : "", h("b", {class: "mono"}, c.tool), h("span", {class: "mono"}, JSON.stringify(c.args || {}))]));
  }

  function setStatus(s) { if (s) status.replaceChildren(badge(s)); }

  // refresh re-reads the run (its pending approvals) after a pause —
  // once the run has settled into it (?wait=) — or a resumption, unless
  // the stream ended meanwhile.
  let refreshing = false;
  async function refresh(query) {
    if (refreshing) return;
    refreshing = true;
    try {
      const r = await api(`/v1/runs/${encodeURIComponent(id)}${query}`);
      if (!closed) showRun(r);
    } catch { /* the stream goes on */ } finally { refreshing = false; }
  }

  function flush() {
    scheduled = false;
    const batch = queue.splice(0);
    for (const ev of batch) {
      render(ev);
      rendered++;
    }
    events.dataset.rendered = String(rendered);
    events.dataset.lastSeq = String(lastSeq);
  }

  function schedule() {
    if (scheduled) return;
    scheduled = true;
    // A frame when the page is visible; a timer when it is not (frames
    // stop in background tabs).
    if (document.visibilityState === "visible") requestAnimationFrame(flush);
    else setTimeout(flush, 50);
  }

  const es = new EventSource(`/v1/runs/${encodeURIComponent(id)}/events`);
  const onEvent = (e) => {
    let ev;
    try { ev = JSON.parse(e.data); } catch { return; }
    if (ev.seq && ev.seq <= lastSeq) return; // seen before a reconnect
    if (ev.seq) lastSeq = ev.seq;
    queue.push(ev);
    events.dataset.received = String(++received);
    schedule();
  };
  for (const t of EVENT_TYPES) es.addEventListener(t, onEvent);
  es.addEventListener("run.end", (e) => {
    closed = true;
    es.close();
    conn.textContent = "complete";
    try { showRun(JSON.parse(e.data)); } catch { /* the events said it */ }
    loadAudit();
  });
  es.addEventListener("open", () => { conn.textContent = "live"; });
  es.addEventListener("error", (e) => {
    if (e.data) {
      try { toast(JSON.parse(e.data).error.message); } catch { /* ignore */ }
      return;
    }
    if (!closed) conn.textContent = es.readyState === EventSource.CLOSED ? "disconnected" : "reconnecting…";
  });
  return () => { closed = true; es.close(); };
}
