// The console's entry: the hash router and the header.
import {api} from "./lib.js";
import {agentsPage} from "./agents.js";
import {runsPage} from "./runs.js";
import {runPage} from "./run.js";
import {approvalsPage} from "./approvals.js";
import {workflowsPage} from "./workflows.js";

export const config = {token: false, trace_url: ""};

const main = document.getElementById("main");
let cleanup = null; // the current page's teardown (an event stream to close)

const routes = [
  [/^#\/runs\/([^/?]+)$/, (m) => runPage(main, decodeURIComponent(m[1]), config)],
  [/^#\/runs(?:\?(.*))?$/, (m) => runsPage(main, new URLSearchParams(m[1] || ""))],
  [/^#\/approvals$/, () => approvalsPage(main)],
  [/^#\/agents$/, () => agentsPage(main)],
  [/^#\/workflows$/, () => workflowsPage(main)],
];

async function route() {
  if (cleanup) { cleanup(); cleanup = null; }
  document.getElementById("toast").classList.remove("show");
  const hash = location.hash || "#/runs";
  for (const [re, page] of routes) {
    const m = hash.match(re);
    if (!m) continue;
    const section = hash.slice(2).split(/[/?]/)[0];
    for (const a of document.querySelectorAll("header nav a")) {
      if (a.dataset.nav === section) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
    main.replaceChildren();
    cleanup = (await page(m)) || null;
    main.focus({preventScroll: true});
    return;
  }
  location.hash = "#/runs";
}

// pendingCount keeps the approvals count in the header current.
async function pendingCount() {
  try {
    const {approvals} = await api("/v1/approvals");
    const el = document.getElementById("pending-count");
    el.textContent = String(approvals.length);
    el.hidden = approvals.length === 0;
    el.setAttribute("aria-label", `${approvals.length} pending`);
  } catch { /* shown on the page itself */ }
}

async function start() {
  try {
    Object.assign(config, await api("/console/config.json"));
  } catch { /* defaults */ }
  document.getElementById("logout").hidden = !config.token;
  addEventListener("hashchange", route);
  addEventListener("approvals-changed", pendingCount);
  await route();
  pendingCount();
  setInterval(pendingCount, 10_000);
}

start();
