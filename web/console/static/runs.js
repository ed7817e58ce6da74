// Runs: a page of runs from the store, newest first, with their status,
// agent, start time and duration; filtered by status, paged by cursor.
import {api, h, badge, when, duration, errorBox} from "./lib.js";

const PAGE = 50;

export async function runsPage(main, q) {
  const status = q.get("status") || "";
  const after = q.get("after") || "";
  const select = h("select", {id: "status-filter"},
    ["", "running", "paused", "delivered", "fail_safe"].map((s) => h("option", {value: s, selected: s === status}, s ? s.replace("_", " ") : "all")));
  select.addEventListener("change", () => { location.hash = link({status: select.value}); });
  main.append(h("h1", {}, "Runs"),
    h("div", {class: "row"}, h("label", {for: "status-filter"}, "Status"), select,
      h("a", {href: "#/agents", class: "button secondary"}, "Start a run")));
  const params = new URLSearchParams({limit: String(PAGE)});
  if (status) params.set("status", status);
  if (after) params.set("after", after);
  let page;
  try {
    page = await api(`/v1/runs?${params}`);
  } catch (e) {
    main.append(errorBox(e));
    return;
  }
  if (!page.runs.length) {
    main.append(h("p", {class: "muted"}, after ? "No older runs." : "No runs yet."));
  } else {
    main.append(h("div", {class: "table-wrap"}, h("table", {id: "runs"},
      h("caption", {class: "muted"}, after ? "Older runs" : "Newest runs"),
      h("thead", {}, h("tr", {},
        h("th", {scope: "col"}, "Run"), h("th", {scope: "col"}, "Agent"), h("th", {scope: "col"}, "Status"),
        h("th", {scope: "col", class: "hide-narrow"}, "Started"), h("th", {scope: "col"}, "Duration"))),
      h("tbody", {}, page.runs.map((r) => h("tr", {dataset: {run: r.request_id}},
        h("td", {class: "mono"}, h("a", {href: `#/runs/${encodeURIComponent(r.request_id)}`}, r.request_id.slice(0, 8))),
        h("td", {}, r.agent || ""),
        h("td", {}, badge(r.status), r.pending_approvals ? h("span", {class: "muted"}, ` ${r.pending_approvals.length} approval(s)`) : null),
        h("td", {class: "hide-narrow"}, when(r.started_at)),
        h("td", {}, duration(r.started_at, r.ended_at))))))));
  }
  main.append(h("nav", {class: "pager", "aria-label": "Pages"},
    after ? h("a", {class: "button secondary", href: link({status})}, "Newest") : null,
    page.next ? h("a", {class: "button secondary", id: "older", href: link({status, after: page.next})}, "Older") : null));
}

function link({status, after}) {
  const p = new URLSearchParams();
  if (status) p.set("status", status);
  if (after) p.set("after", after);
  const s = p.toString();
  return s ? `#/runs?${s}` : "#/runs";
}
