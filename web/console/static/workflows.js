// Workflows: the UAIP workflows this server serves, their stages, and
// their sessions with the stage and state each is in.
import {api, h, pretty, when, errorBox} from "./lib.js";

export async function workflowsPage(main) {
  main.append(h("h1", {}, "Workflows"));
  let workflows;
  try {
    ({workflows} = await api("/api/workflows"));
  } catch (e) {
    main.append(errorBox(e));
    return;
  }
  if (!workflows.length) main.append(h("p", {class: "muted"}, "This server serves no workflows."));
  for (const w of workflows) {
    const sessions = h("div", {class: "sessions"});
    main.append(h("section", {class: "card", "aria-labelledby": `wf-${w.name}`},
      h("h2", {id: `wf-${w.name}`}, w.name),
      w.description ? h("p", {}, w.description) : null,
      h("dl", {class: "kv"}, h("dt", {}, "Initial stage"), h("dd", {class: "mono"}, w.initial_stage || ""),
        h("dt", {}, "Stages"), h("dd", {class: "mono"}, (w.stages || []).join(" · "))),
      h("h3", {}, "Sessions"), sessions));
    loadSessions(w.name, sessions, "");
  }
}

async function loadSessions(name, el, after) {
  const p = new URLSearchParams({limit: "50"});
  if (after) p.set("after", after);
  let page;
  try {
    page = await api(`/console/api/workflows/${encodeURIComponent(name)}/sessions?${p}`);
  } catch (e) {
    el.replaceChildren(errorBox(e));
    return;
  }
  if (!page.sessions.length && !after) {
    el.replaceChildren(h("p", {class: "muted"}, "No sessions."));
    return;
  }
  const rows = page.sessions.map((s) => h("tr", {},
    h("td", {class: "mono"}, s.session_id.slice(0, 8)), h("td", {class: "mono"}, s.current_stage),
    h("td", {class: "hide-narrow"}, when(s.updated_at)),
    h("td", {}, h("details", {}, h("summary", {}, "state"), h("pre", {}, pretty(s.state || {}))))));
  const more = page.next ? h("button", {type: "button", class: "secondary", onclick: () => { more.remove(); loadSessions(name, el, page.next); }}, "More sessions") : null;
  let tbody = el.querySelector("tbody");
  if (!tbody) {
    tbody = h("tbody", {});
    el.replaceChildren(h("div", {class: "table-wrap"}, h("table", {},
      h("thead", {}, h("tr", {}, ["Session", "Stage", "Updated", "State"].map((t) => h("th", {scope: "col", class: t === "Updated" ? "hide-narrow" : null}, t)))),
      tbody)));
  }
  tbody.append(...rows);
  if (more) el.append(more);
}
