// The console's HTML, rendered on the server: the page shell, the live panels (re-fetched every
// 2 s by app.js and swapped in), a task's timeline and the login form. Every figure carries a
// `data-figure` name so a test can read what a person sees; every control has a label.

import { formatMicros } from "@pipeline/shared/provider";
import { FINAL_STATUSES, VisibleState } from "@pipeline/shared/schemas";
import { esc, fmtMs, latencyChart, throughputChart } from "./charts.ts";
import type { ConsoleState, Timeline } from "./data.ts";
import { INCIDENTS_PANEL } from "./incidents-page.ts";
import { LANES_PANEL } from "./lanes-page.ts";
import { rolloutPanel } from "./rollout-panel.ts";
import type { Principal } from "./tokens.ts";

const fig = (name: string, value: unknown) => `<span data-figure="${esc(name)}">${esc(value)}</span>`;
const badge = (level: string) => `<span class="badge ${esc(level)}">${esc(level)}</span>`;
const ago = (ms: number) => (ms < 1000 ? "now" : `${fmtMs(ms)} ago`);

function table(caption: string, head: string[], rows: string[][], empty: string, id?: string): string {
  const body = rows.length
    ? rows.map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join("")}</tr>`).join("")
    : `<tr><td colspan="${head.length}" class="empty">${esc(empty)}</td></tr>`;
  return `<div class="scroll"><table${id ? ` id="${id}"` : ""}><caption>${esc(caption)}</caption><thead><tr>${head.map((h) => `<th scope="col">${esc(h)}</th>`).join("")}</tr></thead><tbody>${body}</tbody></table></div>`;
}

function tasksPanel(s: ConsoleState): string {
  const states: readonly string[] = VisibleState.options;
  const present = [
    ...new Set([...states.filter((x) => s.tasks.some((t) => t.state === x)), ...s.tasks.map((t) => t.state)]),
  ];
  const groups = new Map<string, Map<string, number>>();
  for (const t of s.tasks) {
    const k = `${t.region}\u0000${t.type}`;
    const m = groups.get(k) ?? new Map<string, number>();
    m.set(t.state, (m.get(t.state) ?? 0) + t.n);
    groups.set(k, m);
  }
  const rows = [...groups.entries()].map(([k, m]) => {
    const [region, type] = k.split("\u0000") as [string, string];
    return [esc(region), esc(type), ...present.map((st) => fig(`tasks.${region}.${type}.${st}`, m.get(st) ?? 0))];
  });
  const totals = new Map<string, number>();
  for (const t of s.tasks) totals.set(t.state, (totals.get(t.state) ?? 0) + t.n);
  if (rows.length > 1)
    rows.push([
      "<strong>all</strong>",
      "",
      ...present.map((st) => `<strong>${fig(`tasks.all.${st}`, totals.get(st) ?? 0)}</strong>`),
    ]);
  const summary =
    present.map((st) => `${esc(st)} ${fig(`tasks.total.${st}`, totals.get(st) ?? 0)}`).join(" · ") || "no task yet";
  return `<section aria-labelledby="h-tasks" class="card wide"><h2 id="h-tasks">Tasks by state and type</h2><p>${summary}</p>${table("tasks by region, type and state (rows of the tasks table)", ["region", "type", ...present], rows, "no task yet")}</section>`;
}

function windowPanel(s: ConsoleState): string {
  const w = s.window;
  const p = s.provider;
  return `<section aria-labelledby="h-window" class="card wide"><h2 id="h-window">Last ${w.minutes} minutes</h2>
<p>completed ${fig("window.completed", w.completed)} (${fig("window.perMinute", w.perMinute.toFixed(1))}/min) · p50 ${fig("window.p50", fmtMs(w.p50))} · p95 ${fig("window.p95", fmtMs(w.p95))} (accepted to completed)</p>
<div class="charts"><figure>${throughputChart(w.buckets)}<figcaption>Throughput: tasks completed per minute</figcaption></figure><figure>${latencyChart(w.buckets)}<figcaption>Solve time per minute: <span class="p50t">p50</span> and <span class="p95t">p95</span></figcaption></figure></div>
<p>Provider calls per solved task ${fig("provider.callsPerSolved", p.callsPerSolved === null ? "–" : p.callsPerSolved.toFixed(2))} (${fig("provider.calls", p.calls)} calls for ${fig("provider.solved", p.solved)} solved) · extra paid submissions ${fig("provider.extraPaid", p.extraPaid)}</p></section>`;
}

function fleetPanel(s: ConsoleState): string {
  const rows = s.fleet.workers.map((w) => [
    fig(`worker.${w.workerId}.id`, w.workerId),
    esc(s.region),
    esc(w.version),
    `${esc(w.host)} pid ${esc(w.pid)}`,
    fig(`worker.${w.workerId}.inFlight`, w.inFlight),
    fig(`worker.${w.workerId}.waiting`, w.waiting),
    `${esc(w.keyName)}: ${badge(w.breaker === "closed" ? "ok" : w.breaker === "open" ? "fail" : "warn")} ${fig(`worker.${w.workerId}.breaker`, w.breaker)}`,
    `${esc(ago(w.heartbeatAgeMs))}`,
    w.configRejected ? `refuses rev ${esc(w.configRejected.revision)}` : `rev ${esc(w.configRevision ?? "env")}`,
  ]);
  return `<section aria-labelledby="h-fleet" class="card wide"><h2 id="h-fleet">Solver fleet ${fig("fleet.count", s.fleet.workers.length)}</h2>${s.fleet.error ? `<p class="fail">heartbeats unreadable: ${esc(s.fleet.error)}</p>` : ""}${table("live solvers from their heartbeats (workers_" + s.region + ")", ["worker", "region", "version", "host", "in flight", "waiting at provider", "breaker per key", "last heartbeat", "config"], rows, "no live solver (no heartbeat in the last 10 s)")}</section>`;
}

function keysPanel(s: ConsoleState): string {
  const rows = s.keys.map((k) => [
    fig(`key.${k.keyRef}.name`, k.names.join(", ") || "(no live solver uses it)"),
    esc(k.keyRef),
    fig(`key.${k.keyRef}.threads`, k.threads),
    fig(`key.${k.keyRef}.inUse`, k.inUse),
    esc(k.balance ?? "unknown"),
  ]);
  return `<section aria-labelledby="h-keys" class="card"><h2 id="h-keys">Provider keys</h2>${table("provider keys by name and hash reference (never the key)", ["name", "reference", "thread plan", "threads in use", "balance"], rows, "no provider key in use")}</section>`;
}

const usd = (micros: number) => (micros < 0 ? `-$${formatMicros(-micros)}` : `$${formatMicros(micros)}`);

/** Spend from the ledger, and each provider account's balance and how long it lasts (docs/money.md). */
function moneyPanel(s: ConsoleState): string {
  const m = s.money;
  if ("error" in m)
    return `<section aria-labelledby="h-money" class="card"><h2 id="h-money">Money</h2><p class="fail">ledger unreadable: ${esc(m.error)}</p></section>`;
  const spend = (name: string, label: string, x: typeof m.today) =>
    `${esc(label)} ${fig(`money.${name}.net`, usd(x.netMicros))} <span class="muted">(charged ${fig(`money.${name}.charged`, usd(x.chargedMicros))}, refunded ${fig(`money.${name}.refunded`, usd(x.refundedMicros))})</span>`;
  const rows = m.accounts.map((a) => [
    esc(a.provider),
    fig(`money.${a.provider}.balance`, a.balanceMicros === null ? "no sample" : usd(a.balanceMicros)),
    fig(`money.${a.provider}.spendPerHour`, `${usd(a.spendPerHourMicros)}/h`),
    fig(
      `money.${a.provider}.hoursLeft`,
      a.hoursLeft === null
        ? a.balanceMicros === null
          ? "unknown"
          : "no spend in the last hour"
        : `${a.hoursLeft.toFixed(1)} h`,
    ),
    esc(a.sampledAt === null ? "–" : ago(Date.parse(s.at) - a.sampledAt)),
  ]);
  return `<section aria-labelledby="h-money" class="card"><h2 id="h-money">Money ${badge(m.level)}</h2><p>${spend("today", "spend today (UTC)", m.today)}<br>${spend("last30Days", "last 30 days", m.last30Days)}</p>${table("provider accounts: newest balance sample and hours left at the last hour's spend", ["account", "balance", "spend", "hours left", "sampled"], rows, "no balance sample yet")}</section>`;
}

function dlqPanel(s: ConsoleState, who: Principal): string {
  const rows = s.dlq.failed.map((f) => [
    `<a href="#timeline" data-task="${esc(f.id)}" class="tasklink">${esc(f.id)}</a>`,
    esc(f.type),
    esc(f.at.replace("T", " ").slice(0, 19)),
    `${f.code ? `<code>${esc(f.code)}</code> ` : ""}${esc(f.reason ?? "")}`,
    esc(f.redrives),
    who.role === "operator" && f.home
      ? `<button type="button" data-redrive="${esc(f.id)}" aria-label="Redrive task ${esc(f.id)}">Redrive</button>`
      : `<span class="muted">${f.home ? "operator role needed" : `home ${esc(f.region)}`}</span>`,
  ]);
  return `<section aria-labelledby="h-dlq" class="card wide"><h2 id="h-dlq">Dead letters</h2><p>failed tasks ${fig("dlq.failed", s.dlq.failed.length)}${s.dlq.failed.length >= 50 ? "+" : ""} · messages in DLQ_${esc(s.region.toUpperCase())} ${fig("dlq.stream", s.dlq.stream ?? "?")}</p>${table("failed (dead-lettered) tasks, newest first", ["task", "type", "failed at (UTC)", "reason", "redrives", "action"], rows, "no dead-lettered task", "dlq")}</section>`;
}

function recoveryPanel(s: ConsoleState): string {
  const r = s.recovery;
  const snap = r.snapshot
    ? `${fig("snapshot.name", r.snapshot.name)}, ${fig("snapshot.age", fmtMs(r.snapshot.ageSec * 1000))} old`
    : fig("snapshot.name", "no snapshot yet");
  const drills = r.drills.map((d) => [
    esc(d.scenario),
    esc(d.at.replace("T", " ").slice(0, 19)),
    esc(d.rpo ?? "?"),
    esc(typeof d.rtoMs === "number" ? fmtMs(d.rtoMs) : "?"),
    badge(d.passed ? "ok" : "fail"),
    esc(d.actor),
  ]);
  const checks = r.assess ? r.assess.checks.map((c) => [esc(c.name), badge(c.level), esc(c.summary)]) : [];
  return `<section aria-labelledby="h-recovery" class="card wide"><h2 id="h-recovery">Recovery</h2><p>last snapshot: ${snap}</p>
${table("last drill of each kind (audit_log)", ["drill", "at (UTC)", "RPO", "RTO", "passed", "by"], drills, "no drill run yet")}
<h3>assess ${r.assess ? `${badge(r.assess.level)} <span class="muted">at ${esc(r.assess.at.slice(11, 19))} UTC</span>` : "(first run pending)"}</h3>
${table("assess verdicts", ["check", "level", "summary"], checks, "assess has not run yet")}</section>`;
}

function regionsPanel(s: ConsoleState): string {
  if (!s.regionsView)
    return `<section aria-labelledby="h-regions" class="card"><h2 id="h-regions">Regions</h2><p>one region: ${fig("region", s.region)} (REGIONS names one)</p></section>`;
  const l = s.regionsView.lease;
  const lease =
    typeof l === "string"
      ? `unreadable: ${esc(l)}`
      : l
        ? `held by ${fig("lease.holder", l.holder)} (epoch ${esc(l.epoch)}, valid for ${esc(fmtMs(l.validForMs))})`
        : "no lease seen";
  const rows = s.regionsView.mirrors.map((m) => [
    esc(m.remote),
    m.error ? `<span class="fail">${esc(m.error)}</span>` : fig(`mirror.${m.remote}.lag`, m.lag ?? 0),
    esc(m.activeMs === undefined || m.activeMs === null ? "–" : ago(m.activeMs)),
  ]);
  return `<section aria-labelledby="h-regions" class="card"><h2 id="h-regions">Regions</h2><p>${esc(s.regions.join(", "))}; this region ${esc(s.region)}; lease ${lease}</p>${table("mirrors of other regions' events", ["region", "replication lag (events)", "link last active"], rows, "no mirror")}</section>`;
}

/** The panels refreshed every 2 s. */
export function renderLive(s: ConsoleState, who: Principal): string {
  return `<p class="stamp">as of ${fig("at", s.at.replace("T", " ").slice(0, 19))} UTC · region ${esc(s.region)}</p><div class="grid">${tasksPanel(s)}${windowPanel(s)}${fleetPanel(s)}${keysPanel(s)}${moneyPanel(s)}${regionsPanel(s)}${dlqPanel(s, who)}${recoveryPanel(s)}${rolloutPanel(s, who)}</div>`;
}

export function renderTimeline(t: Timeline | undefined, id: string): string {
  if (!t) return `<p class="fail" data-figure="timeline.missing">no task ${esc(id)}</p>`;
  const k = t.task;
  const facts: Array<[string, unknown]> = [
    ["state", k.state],
    ["type", k.type],
    ["priority", k.priority],
    ["region", k.region],
    ["version", k.version],
    ["attempts", k.attempts],
    ["redrives", k.redrives],
    ["provider id", k.providerId ?? "–"],
    ["provider key", k.providerKeyRef ?? "–"],
    ["provider submissions / polls", `${k.providerSubmissions} / ${k.providerPolls}`],
    ["claimed by (lease)", k.leaseOwner ?? "–"],
    ["submitted by", k.submitOwner ?? "–"],
    ["error", k.errorCode ? `${k.errorCode} ${k.errorMessage ?? ""}` : "–"],
    ["accepted", k.createdAt],
    ["started", k.startedAt ?? "–"],
    ["finished", k.completedAt ?? "–"],
    ["deadline", k.deadlineAt ?? "–"],
    ["token", k.hasToken ? "stored (never shown)" : "none"],
  ];
  const rows = t.events.map((e) => [
    esc(e.seq),
    esc(e.at.replace("T", " ").slice(0, 23)),
    `<strong>${esc(e.kind)}</strong>`,
    esc(e.state),
    esc(e.version),
    esc(
      Object.entries(e.data)
        .map(([a, b]) => `${a}=${typeof b === "string" ? b : JSON.stringify(b)}`)
        .join(" "),
    ),
  ]);
  const audit = t.audit.map((a) => [
    esc(a.at.replace("T", " ").slice(0, 19)),
    esc(a.actor),
    esc(a.action),
    esc(JSON.stringify(a.detail)),
  ]);
  return `<h3>Task <code data-figure="timeline.id">${esc(k.id)}</code> <span data-figure="timeline.heading-state">${esc(k.state)}</span></h3>
<dl class="facts">${facts.map(([a, b]) => `<div><dt>${esc(a)}</dt><dd data-figure="timeline.${esc(a.replace(/[^a-z]+/g, "-"))}">${esc(b)}</dd></div>`).join("")}</dl>
${table(`events of the task (EVENTS_${k.region.toUpperCase()})${t.truncated ? ", read stopped at its limit" : ""}`, ["seq", "at (UTC)", "event", "state", "version", "detail"], rows, "no event found", "timeline-events")}
${audit.length ? table("audit entries naming the task", ["at (UTC)", "who", "action", "detail"], audit, "") : ""}`;
}

/** The page: header, the timeline, `explorer` (the task explorer's section), and the live panels. */
export function renderPage(inner: string, who: Principal, region: string, explorer = ""): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Pipeline console · region ${esc(region)}</title><link rel="stylesheet" href="/console/app.css"><script src="/console/app.js" defer></script></head>
<body><header><h1>Pipeline console <span class="muted">region ${esc(region)}</span></h1><div class="who">signed in as <strong data-figure="who">${esc(who.name)}</strong> (${esc(who.role)})
<form method="post" action="/console/logout"><button type="submit" aria-label="Sign out">Sign out</button></form></div></header>
<div id="flash" role="status" aria-live="polite"></div>
<section id="timeline" aria-labelledby="h-timeline" class="card"><h2 id="h-timeline">Task timeline</h2>
<form id="timeline-form"><label for="task-id">Task id</label> <input id="task-id" name="id" inputmode="text" autocomplete="off" spellcheck="false" placeholder="00000000-0000-0000-0000-000000000000" pattern="[0-9a-fA-F-]{36}" required> <button type="submit">Show timeline</button> <button type="button" id="timeline-close" aria-label="Close the timeline">Close</button></form>
<div id="timeline-out"></div></section>
${explorer}
${INCIDENTS_PANEL}
${LANES_PANEL}
<main id="live" aria-label="live figures, refreshed every 2 seconds">${inner}</main>
<footer><label><input type="checkbox" id="autorefresh" checked> refresh every 2 s</label> <span id="refresh-state" class="muted"></span></footer>
</body></html>`;
}

export function renderLogin(region: string, error?: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Sign in · pipeline console</title><link rel="stylesheet" href="/console/app.css"></head>
<body><main class="login"><h1>Pipeline console <span class="muted">region ${esc(region)}</span></h1>
${error ? `<p class="fail" role="alert">${esc(error)}</p>` : ""}
<form method="post" action="/console/login"><label for="token">Operator token</label><input id="token" name="token" type="password" autocomplete="current-password" required><button type="submit">Sign in</button></form>
<p class="muted">A console token (CONSOLE_TOKENS, roles viewer and operator), not a client API key. <code>npm run dev</code> prints one.</p></main></body></html>`;
}

export const CSS = `
*{box-sizing:border-box}body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1b1f24;background:#f4f5f7}
header{display:flex;flex-wrap:wrap;justify-content:space-between;align-items:center;gap:8px;padding:10px 16px;background:#1f2937;color:#fff}
header h1{font-size:18px;margin:0}header .muted{color:#cbd5e1}.who{display:flex;gap:8px;align-items:center}.who form{margin:0}
main#live,#timeline,#flash{margin:12px 16px}.grid{display:grid;gap:12px;grid-template-columns:repeat(auto-fit,minmax(min(100%,420px),1fr))}
.card{background:#fff;border:1px solid #d8dde3;border-radius:6px;padding:10px 12px;min-width:0}.card.wide{grid-column:1/-1}
h2{font-size:16px;margin:0 0 6px}h3{font-size:14px;margin:10px 0 4px}.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}caption{text-align:left;color:#4b5563;font-size:12px;padding:2px 0}
th,td{border-bottom:1px solid #e5e7eb;padding:4px 6px;text-align:left;white-space:nowrap}td.empty{color:#6b7280}
.charts{display:grid;gap:12px;grid-template-columns:repeat(auto-fit,minmax(min(100%,360px),1fr))}figure{margin:0}figcaption{font-size:12px;color:#4b5563}
svg.chart{width:100%;height:auto;font-size:10px;fill:#4b5563}svg .grid{stroke:#e5e7eb}svg .bar{fill:#2563eb}
svg polyline{fill:none;stroke-width:2}svg .p50{stroke:#059669;fill:#059669}svg .p95{stroke:#dc2626;fill:#dc2626}svg polyline.p50,svg polyline.p95{fill:none}
.p50t{fill:#059669;color:#047857;font-weight:600}.p95t{fill:#dc2626;color:#b91c1c;font-weight:600}
.badge{display:inline-block;padding:0 6px;border-radius:8px;font-size:12px;color:#fff;background:#6b7280}.badge.ok{background:#047857}.badge.warn{background:#b45309}.badge.fail{background:#b91c1c}
.fail{color:#b91c1c}.muted{color:#6b7280}.stamp{margin:0 0 8px;color:#4b5563}
button{font:inherit;padding:4px 10px;border-radius:4px;border:1px solid #1d4ed8;background:#2563eb;color:#fff;cursor:pointer;min-height:32px}
button:focus-visible,input:focus-visible,a:focus-visible{outline:3px solid #f59e0b;outline-offset:1px}
input{font:inherit;padding:4px 6px;border:1px solid #9ca3af;border-radius:4px;min-height:32px;max-width:100%}#task-id{width:min(100%,24em)}
dl.facts{display:grid;grid-template-columns:repeat(auto-fill,minmax(220px,1fr));gap:2px 12px;margin:6px 0}dl.facts div{display:flex;gap:6px}dt{color:#4b5563}dd{margin:0;word-break:break-all}
#flash:empty{display:none}#flash{padding:8px 12px;border-radius:6px;background:#ecfdf5;border:1px solid #a7f3d0}#flash.error{background:#fef2f2;border-color:#fecaca}
footer{margin:12px 16px;color:#4b5563}main.login{max-width:380px;margin:10vh auto;background:#fff;padding:20px;border:1px solid #d8dde3;border-radius:6px}
main.login form{display:flex;flex-direction:column;gap:8px}main.login h1{font-size:20px}
`;

/** The page's script: refresh the live panels, show a timeline, redrive with a confirmation. No library. */
export const JS = `
(() => {
  const live = document.getElementById("live");
  const out = document.getElementById("timeline-out");
  const flash = document.getElementById("flash");
  const auto = document.getElementById("autorefresh");
  const state = document.getElementById("refresh-state");
  let shownTask = "";
  let shownFinal = false;
  let busy = false;
  const say = (text, error) => { flash.textContent = text; flash.className = error ? "error" : ""; };
  async function refresh() {
    if (busy) return;
    busy = true;
    try {
      const r = await fetch("/console/live", { headers: { accept: "text/html" }, cache: "no-store" });
      if (r.status === 401) { location.href = "/console/login"; return; }
      if (r.ok) { live.innerHTML = await r.text(); state.textContent = ""; }
      else state.textContent = "refresh failed (" + r.status + ")";
      // A timeline follows its task until it is final (each refresh reads its events again).
      if (shownTask && !shownFinal) await showTimeline(shownTask, false);
    } catch (e) { state.textContent = "refresh failed: " + e.message; }
    finally { busy = false; }
  }
  async function showTimeline(id, focus) {
    const r = await fetch("/console/timeline/" + encodeURIComponent(id), { cache: "no-store" });
    out.innerHTML = await r.text();
    shownTask = r.ok ? id : "";
    const st = out.querySelector('[data-figure="timeline.state"]');
    shownFinal = !!st && ${JSON.stringify(FINAL_STATUSES)}.includes(st.textContent);
    if (focus) out.scrollIntoView({ block: "start" });
  }
  document.getElementById("timeline-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const id = document.getElementById("task-id").value.trim();
    if (id) showTimeline(id, true);
  });
  document.getElementById("timeline-close").addEventListener("click", () => { shownTask = ""; out.innerHTML = ""; });
  document.addEventListener("click", async (e) => {
    const link = e.target.closest("a.tasklink");
    if (link) { e.preventDefault(); document.getElementById("task-id").value = link.dataset.task; showTimeline(link.dataset.task, true); return; }
    const b = e.target.closest("button[data-redrive]");
    if (!b) return;
    const id = b.dataset.redrive;
    if (!confirm("Redrive task " + id + "? It is queued again with a fresh deadline; this is audited.")) return;
    b.disabled = true;
    const r = await fetch("/console/api/tasks/" + encodeURIComponent(id) + "/redrive", { method: "POST", headers: { "x-console-action": "redrive" } });
    const body = await r.json().catch(() => ({}));
    say(r.ok ? "Task " + id + " redriven (redrive " + body.redrives + "); it is queued again." : "Redrive refused: " + (body.reason || r.status), !r.ok);
    document.getElementById("task-id").value = id;
    await showTimeline(id, false);
    refresh();
  });
  setInterval(() => { if (auto.checked && !document.hidden) refresh(); }, 2000);
})();
`;
