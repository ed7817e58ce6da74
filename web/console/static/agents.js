// Agents: the loaded agents, their model and tools with risk tiers, and
// a form to start a run.
import {api, h, errorBox, toast} from "./lib.js";

export async function agentsPage(main) {
  main.append(h("h1", {}, "Agents"));
  let agents;
  try {
    ({agents} = await api("/v1/agents"));
  } catch (e) {
    main.append(errorBox(e));
    return;
  }
  if (!agents.length) main.append(h("p", {class: "muted"}, "This server runs no agents (agentry serve --agents DIR)."));
  for (const a of agents) {
    const input = h("textarea", {id: `input-${a.name}`, name: "input", required: true, placeholder: "What should the agent do?"});
    const button = h("button", {type: "submit"}, "Start run");
    const form = h("form", {class: "start", dataset: {agent: a.name}},
      h("label", {for: input.id}, "Input"), input, h("div", {class: "row"}, button));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      button.disabled = true;
      try {
        const run = await api("/v1/runs", {method: "POST", body: {agent: a.name, input: input.value}});
        location.hash = `#/runs/${encodeURIComponent(run.request_id)}`;
      } catch (e) {
        toast(`Could not start the run: ${e.message}`);
        button.disabled = false;
      }
    });
    const tools = h("table", {},
      h("thead", {}, h("tr", {}, h("th", {scope: "col"}, "Tool"), h("th", {scope: "col"}, "Risk tier"))),
      h("tbody", {}, (a.tools || []).map((t) => h("tr", {}, h("td", {class: "mono"}, t.name), h("td", {}, h("span", {class: `badge s-${riskClass(t.risk)}`}, t.risk))))));
    main.append(h("section", {class: "card", "aria-labelledby": `agent-${a.name}`},
      h("h2", {id: `agent-${a.name}`}, a.name),
      a.description ? h("p", {}, a.description) : null,
      h("dl", {class: "kv"}, h("dt", {}, "Model"), h("dd", {class: "mono"}, a.model || "—")),
      (a.tools || []).length ? h("div", {class: "table-wrap"}, tools) : h("p", {class: "muted"}, "No tools."),
      form));
  }
}

function riskClass(tier) {
  return {read_only: "success", write_low_risk: "pending", write_high_risk: "failure"}[tier] || "";
}
