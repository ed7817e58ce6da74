// The approvals inbox: pending approval requests with everything the
// approver signs — tool, arguments, tier, the rollback that would undo
// the call, the run — approved with a token signed in this page by the
// approver's own key, or denied with a reason. The same decision from a
// terminal is the `agentry approve` command shown with each request.
import {api, h, pretty, when, errorBox, toast} from "./lib.js";
import {available, loadKey, signApproval} from "./sign.js";

let signer = null; // {approver, kid, key}: kept in this page's memory only

export async function approvalsPage(main) {
  main.append(h("h1", {}, "Approvals"));
  main.append(keyCard());
  const list = h("div", {id: "approvals"});
  main.append(list);
  await load(list);
  const timer = setInterval(() => load(list, true), 5000);
  return () => clearInterval(timer);
}

function keyCard() {
  const status = h("p", {id: "key-status", "aria-live": "polite"}, signer ? signingAs() : "No key loaded: approvals need one.");
  const file = h("input", {type: "file", id: "key-file", accept: ".json,application/json"});
  file.addEventListener("change", async () => {
    const f = file.files[0];
    if (!f) return;
    try {
      signer = await loadKey(await f.text());
      status.textContent = signingAs();
      for (const b of document.querySelectorAll("button.approve")) b.disabled = false;
      for (const i of document.querySelectorAll("input.approver")) if (!i.value) i.value = signer.approver;
    } catch (e) {
      signer = null;
      status.textContent = e.message;
    }
    file.value = ""; // the file's content is not kept
  });
  if (!available()) {
    return h("section", {class: "card", "aria-labelledby": "key-h"}, h("h2", {id: "key-h"}, "Approver key"),
      h("p", {class: "error"}, "This page cannot sign here: browsers offer WebCrypto only over HTTPS or on localhost. Use the agentry approve command shown with each request."));
  }
  return h("section", {class: "card", "aria-labelledby": "key-h"},
    h("h2", {id: "key-h"}, "Approver key"),
    h("p", {class: "muted"}, "Your private key file (agentry keys create NAME writes NAME.key.json). It is read by this page into a key that cannot be exported, used to sign the approvals you make here, and forgotten when you leave the page. It is never sent to the server."),
    h("label", {for: "key-file"}, "Key file"), file, status);
}

function signingAs() {
  return `Signing as ${signer.approver} (key ${signer.kid.slice(0, 12)}…).`;
}

async function load(list, quiet) {
  let approvals;
  try {
    ({approvals} = await api("/v1/approvals"));
  } catch (e) {
    if (!quiet) list.replaceChildren(errorBox(e));
    return;
  }
  // Keep the cards being worked on; add new requests, drop decided ones.
  const ids = new Set(approvals.map((a) => a.approval_id));
  for (const card of list.querySelectorAll("[data-approval]")) if (!ids.has(card.dataset.approval)) card.remove();
  for (const a of approvals) if (!list.querySelector(`[data-approval="${CSS.escape(a.approval_id)}"]`)) list.append(card(a));
  const empty = list.querySelector(".empty");
  if (!approvals.length && !empty) list.append(h("p", {class: "muted empty"}, "Nothing waits for a decision."));
  if (approvals.length && empty) empty.remove();
  dispatchEvent(new Event("approvals-changed"));
}

function card(a) {
  const reason = h("textarea", {id: `reason-${a.approval_id}`, placeholder: "Why (recorded in the audit journal)"});
  const approver = h("input", {type: "text", class: "approver", id: `approver-${a.approval_id}`, value: signer ? signer.approver : "", autocomplete: "name"});
  const approve = h("button", {type: "button", class: "approve", disabled: !signer}, "Approve");
  const deny = h("button", {type: "button", class: "danger deny"}, "Deny");
  const out = h("p", {class: "result", "aria-live": "polite"});
  const el = h("section", {class: "card", dataset: {approval: a.approval_id}, "aria-labelledby": `h-${a.approval_id}`},
    h("h2", {id: `h-${a.approval_id}`}, h("span", {class: "mono"}, a.tool), " ", h("span", {class: "badge s-failure"}, a.tier)),
    h("dl", {class: "kv"},
      h("dt", {}, "Run"), h("dd", {}, h("a", {href: `#/runs/${encodeURIComponent(a.request_id)}`, class: "mono"}, a.request_id)),
      h("dt", {}, "Requested"), h("dd", {}, when(a.created_at)),
      h("dt", {}, "By"), h("dd", {}, a.requester ? [a.requester.agent_id, a.requester.user_id && `for ${a.requester.user_id}`].filter(Boolean).join(" ") || "—" : "—"),
      h("dt", {}, "Reasons"), h("dd", {class: "mono"}, (a.reasons || []).join(", ")),
      h("dt", {}, "Approval"), h("dd", {class: "mono"}, a.approval_id)),
    h("h3", {}, "Arguments"), h("pre", {class: "args"}, pretty(a.args)),
    h("h3", {}, "Rollback if it must be undone"),
    a.rollback_action ? h("pre", {class: "rollback"}, pretty(a.rollback_action)) : h("p", {class: "muted"}, "None: this call cannot be rolled back."),
    h("label", {for: approver.id}, "Your name (for a denial)"), approver,
    h("label", {for: reason.id}, "Reason"), reason,
    h("div", {class: "row"}, approve, deny),
    out,
    h("details", {}, h("summary", {}, "Decide from a terminal instead"),
      h("pre", {class: "command"}, `agentry approve ${a.approval_id} --as NAME --server ${location.origin}\nagentry approve ${a.approval_id} --as NAME --deny --reason "…" --server ${location.origin}`)));
  approve.addEventListener("click", () => decide(a, el, true, reason.value, approver.value, [approve, deny], out));
  deny.addEventListener("click", () => decide(a, el, false, reason.value, approver.value, [approve, deny], out));
  return el;
}

async function decide(a, el, approved, reason, approver, buttons, out) {
  for (const b of buttons) b.disabled = true;
  try {
    let body;
    if (approved) {
      if (!signer) throw new Error("load your key file first");
      body = {decision: "approve", token: await signApproval(signer, a)};
      if (reason) body.reason = reason;
    } else {
      if (!approver) throw new Error("a denial names who denies: fill in your name");
      body = {decision: "deny", approver};
      if (reason) body.reason = reason;
    }
    const got = await api(`/v1/approvals/${encodeURIComponent(a.approval_id)}`, {method: "POST", body});
    out.textContent = `${got.status === "approved" ? "Approved" : "Denied"}: the run goes on.`;
    toast(`${a.tool}: ${got.status}`);
    el.dataset.decided = got.status;
    setTimeout(() => el.remove(), 1500);
    dispatchEvent(new Event("approvals-changed"));
  } catch (e) {
    out.textContent = e.message;
    out.classList.add("error");
    for (const b of buttons) b.disabled = false;
    if (!signer) buttons[0].disabled = true;
  }
}
