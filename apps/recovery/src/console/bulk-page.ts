// The explorer's bulk actions on the page (operators only): "Redrive all matching" while the form's
// state is failed, "Cancel all matching" while it names a client. A click previews (the count, the
// oldest ids, the limit) and asks; the confirm button runs it and shows the outcome line and its
// audit entry. The form's fields are read as the explorer's script reads them (times sent as UTC).
import { esc } from "./charts.ts";

/** The buttons and the preview/outcome area, inside the explorer's section. */
export function renderBulk(limit: number): string {
  return `<div id="bulk" class="bulk" data-limit="${esc(limit)}">
<button type="button" id="bulk-redrive" hidden>Redrive all matching</button>
<button type="button" id="bulk-cancel" hidden>Cancel all matching</button>
<div id="bulk-out" aria-live="polite"></div></div>`;
}

export const BULK_JS = `
(() => {
  const form = document.getElementById("explorer-form");
  const box = document.getElementById("bulk");
  if (!form || !box) return;
  const redrive = document.getElementById("bulk-redrive");
  const cancel = document.getElementById("bulk-cancel");
  const out = document.getElementById("bulk-out");
  function filterOf() {
    const f = {};
    for (const el of form.elements) {
      if (!el.name || !el.value || !el.value.trim()) continue;
      f[el.name] = el.type === "datetime-local" ? new Date(el.value).toISOString() : el.value.trim();
    }
    return f;
  }
  function sync() {
    const f = filterOf();
    redrive.hidden = f.state !== "failed";
    cancel.hidden = !f.client;
  }
  const line = (cls, text, figure) => {
    const p = document.createElement("p");
    p.className = cls;
    if (figure) p.dataset.figure = figure;
    p.textContent = text;
    return p;
  };
  async function post(path, body) {
    const r = await fetch("/console/api/bulk/" + path, {
      method: "POST",
      headers: { "content-type": "application/json", "x-console-action": "bulk" },
      body: JSON.stringify(body),
    });
    if (r.status === 401) { location.href = "/console/login"; return null; }
    const json = await r.json().catch(() => ({ error: "HTTP " + r.status }));
    return r.ok ? json : { error: json.error || json.reason || "HTTP " + r.status };
  }
  async function confirmRun(action, token, button, res) {
    button.disabled = true;
    res.replaceChildren(line("muted", "working…", "bulk.working"));
    const r = await post("confirm", { action, token });
    res.replaceChildren();
    button.disabled = false;
    if (!r) return;
    if (r.error) { res.append(line("fail", r.error, "bulk.error")); return; }
    res.append(line("ok", r.line, "bulk.result"), line("muted", "audited as bulk." + r.action + " (entry " + r.auditId + ")", "bulk.audit"));
    // Again is safe: only the tasks that still match are taken (a redriven task is no longer failed).
    button.textContent = "Confirm again";
  }
  async function preview(action) {
    out.replaceChildren(line("muted", "counting…", "bulk.working"));
    const p = await post("preview", { action, filter: filterOf() });
    out.replaceChildren();
    if (!p) return;
    if (p.error) { out.append(line("fail", p.error, "bulk.error")); return; }
    out.append(line("", p.line, "bulk.preview"));
    if (p.sample.length) out.append(line("muted sample", "oldest: " + p.sample.join(", ") + (p.count > p.sample.length ? ", …" : ""), "bulk.sample"));
    if (p.count === 0) return;
    const yes = document.createElement("button");
    yes.type = "button";
    yes.id = "bulk-confirm";
    yes.textContent = "Confirm: " + action + " " + Math.min(p.count, p.limit);
    const no = document.createElement("button");
    no.type = "button";
    no.textContent = "Not now";
    no.addEventListener("click", () => out.replaceChildren());
    const res = document.createElement("div");
    yes.addEventListener("click", () => confirmRun(action, p.token, yes, res));
    const row = document.createElement("p");
    const until = document.createElement("span");
    until.className = "muted";
    until.textContent = " the preview holds until " + p.expiresAt.slice(11, 19) + " UTC";
    row.append(yes, " ", no, until);
    out.append(row, res);
  }
  form.addEventListener("input", sync);
  form.addEventListener("change", sync);
  form.addEventListener("reset", () => setTimeout(() => { sync(); out.replaceChildren(); }, 0));
  redrive.addEventListener("click", () => preview("redrive"));
  cancel.addEventListener("click", () => preview("cancel"));
  sync();
})();
`;

export const BULK_CSS = `
.bulk{margin:8px 0;display:flex;flex-wrap:wrap;gap:6px 10px;align-items:center}#bulk-out{flex-basis:100%}
#bulk-out p{margin:4px 0}#bulk-out .sample{font-size:12px;word-break:break-all}
`;
