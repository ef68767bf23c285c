// The console's task explorer: the filter form (in the page, outside the refreshed panels), one page of
// rows as an HTML fragment (GET /console/tasks, the same query as GET /console/api/tasks), and its
// script. A row's task id opens the timeline the page already has (a.tasklink).
import { Priority, TaskState, TaskType } from "@pipeline/shared/schemas";
import type { TaskListPage } from "../explorer/task-query.ts";
import { esc } from "./charts.ts";

const options = (values: readonly string[]) =>
  `<option value="">any</option>${values.map((v) => `<option value="${esc(v)}">${esc(v)}</option>`).join("")}`;

const field = (id: string, label: string, control: string) =>
  `<div class="xf"><label for="${id}">${esc(label)}</label>${control}</div>`;

const input = (id: string, name: string, extra = "") =>
  `<input id="${id}" name="${name}" autocomplete="off" spellcheck="false"${extra}>`;

export interface ExplorerOptions {
  regions: string[];
  /** TASK_RETENTION_DAYS: params (pageurl, sitekey) of finished tasks are erased after it. */
  retentionDays: number;
  /** The bulk actions' buttons (operators only; console/bulk-page.ts). */
  bulk?: string;
}

/** The explorer's section: filters, search, and an empty result area the script fills. */
export function renderExplorer(o: ExplorerOptions): string {
  const regions = `<select id="x-region" name="region">${options(o.regions)}</select>`;
  return `<section id="explorer" aria-labelledby="h-explorer" class="card"><h2 id="h-explorer">Task explorer</h2>
<form id="explorer-form">
${field("x-search", "Search", input("x-search", "search", ` type="search" placeholder="task id, idempotency key, sitekey or pageurl start" class="xsearch"`))}
${field("x-state", "State", `<select id="x-state" name="state">${options(TaskState.options)}</select>`)}
${field("x-client", "Client", input("x-client", "client", ` placeholder="owner"`))}
${field("x-type", "Type", `<select id="x-type" name="type">${options(TaskType.options)}</select>`)}
${field("x-priority", "Priority", `<select id="x-priority" name="priority">${options(Priority.options)}</select>`)}
${field("x-region", "Region", regions)}
${field("x-version", "Solver version", input("x-version", "solverVersion", ` placeholder="charged by"`))}
${field("x-from", "Created from", `<input id="x-from" name="from" type="datetime-local" step="1">`)}
${field("x-to", "Created before", `<input id="x-to" name="to" type="datetime-local" step="1">`)}
<div class="xf xbuttons"><button type="submit">Find tasks</button> <button type="reset" id="explorer-reset">Clear</button></div>
</form>
<p class="muted hint">Newest first, ${50} a page. A pageurl is matched from its start (<code>site.example.com/login</code> or a full URL), a sitekey, idempotency key or task id exactly. Retention erases the pageurl and sitekey of tasks finished over ${esc(o.retentionDays)} days ago (TASK_RETENTION_DAYS): find those by id or idempotency key. The solver version is the one that charged the task (the ledger).</p>
${o.bulk ?? ""}
<div id="explorer-out" aria-live="polite"></div></section>`;
}

const cell = (v: string | null) => (v === null ? `<span class="muted">–</span>` : esc(v));

/** One page of the explorer as rows; its `next` rides on the "Older" button. */
export function renderExplorerRows(page: TaskListPage, pageNo: number): string {
  const rows = page.rows
    .map(
      (r) =>
        `<tr data-row="${esc(r.id)}"><td><a href="#timeline" data-task="${esc(r.id)}" class="tasklink" aria-label="Timeline of task ${esc(r.id)}"><code>${esc(r.id)}</code></a></td><td>${esc(r.createdAt.replace("T", " ").slice(0, 19))}</td><td data-col="state">${esc(r.state)}</td><td data-col="client">${esc(r.client)}</td><td data-col="type">${esc(r.type)}</td><td>${esc(r.priority)}</td><td>${esc(r.region)}</td><td>${cell(r.solverVersion)}</td><td class="clip">${cell(r.pageurl)}</td><td>${cell(r.sitekey)}</td><td>${cell(r.idempotencyKey)}</td></tr>`,
    )
    .join("");
  const head = [
    "task",
    "created (UTC)",
    "state",
    "client",
    "type",
    "priority",
    "region",
    "solver",
    "pageurl",
    "sitekey",
    "idempotency key",
  ];
  const body = rows || `<tr><td colspan="${head.length}" class="empty">no task matches</td></tr>`;
  const nav = `<p class="xnav">page ${fig("explorer.page", pageNo)} · ${fig("explorer.rows", page.rows.length)} rows${page.next ? ` <button type="button" id="explorer-older" data-next="${esc(page.next)}">Older</button>` : ` <span class="muted">(no more)</span>`}${pageNo > 1 ? ` <button type="button" id="explorer-newest">Newest</button>` : ""}</p>`;
  return `<div class="scroll"><table id="explorer-rows"><caption>tasks, newest first (created_at, id); a task id opens its timeline</caption><thead><tr>${head.map((h) => `<th scope="col">${esc(h)}</th>`).join("")}</tr></thead><tbody>${body}</tbody></table></div>${nav}`;
}

const fig = (name: string, value: unknown) => `<span data-figure="${esc(name)}">${esc(value)}</span>`;

/** A refused query: the fields at fault, marked on the form by the script. */
export function renderExplorerError(error: string, fields: string[]): string {
  return `<p class="fail" role="alert" data-figure="explorer.error" data-fields="${esc(fields.join(","))}">${esc(error)}</p>`;
}

/** The explorer's script: the form to a query string (times in the browser's zone, sent as UTC), pages by `next`. */
export const EXPLORER_JS = `
(() => {
  const form = document.getElementById("explorer-form");
  const out = document.getElementById("explorer-out");
  if (!form || !out) return;
  let params = null;
  let pageNo = 1;
  function queryOf() {
    const q = new URLSearchParams();
    for (const el of form.elements) {
      if (!el.name || !el.value) continue;
      q.set(el.name, el.type === "datetime-local" ? new Date(el.value).toISOString() : el.value.trim());
    }
    return q;
  }
  async function load(after) {
    const q = new URLSearchParams(params);
    if (after) q.set("after", after);
    const r = await fetch("/console/tasks?" + q.toString(), { cache: "no-store" });
    if (r.status === 401) { location.href = "/console/login"; return; }
    out.innerHTML = await r.text();
    for (const el of form.elements) el.removeAttribute("aria-invalid");
    const err = out.querySelector("[data-fields]");
    if (err) for (const f of err.dataset.fields.split(",")) { const el = form.elements.namedItem(f); if (el) el.setAttribute("aria-invalid", "true"); }
  }
  form.addEventListener("submit", (e) => { e.preventDefault(); params = queryOf(); pageNo = 1; load(null); });
  form.addEventListener("reset", () => { out.innerHTML = ""; params = null; });
  out.addEventListener("click", (e) => {
    const older = e.target.closest("#explorer-older");
    if (older) { pageNo++; params.set("page", String(pageNo)); load(older.dataset.next); return; }
    if (e.target.closest("#explorer-newest")) { pageNo = 1; params.set("page", "1"); load(null); }
  });
})();
`;

export const EXPLORER_CSS = `
#explorer{margin:12px 16px}#explorer-form{display:flex;flex-wrap:wrap;gap:6px 12px;align-items:flex-end}
.xf{display:flex;flex-direction:column;gap:2px;min-width:0}.xf label{font-size:12px;color:#4b5563}.xsearch{width:min(100%,26em)}
select{font:inherit;padding:4px 6px;border:1px solid #9ca3af;border-radius:4px;min-height:32px;background:#fff}
[aria-invalid="true"]{border-color:#b91c1c;outline:2px solid #fecaca}.hint{font-size:12px;margin:6px 0}
td.clip{max-width:28em;overflow:hidden;text-overflow:ellipsis}.xnav{margin:6px 0}
`;
