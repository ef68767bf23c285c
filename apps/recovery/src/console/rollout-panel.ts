// The console's rollouts panel: the region's shard assignment per solver version, and the rollout
// service's record (@pipeline/shared/rollout): every step of every region (pause steps shown), where
// it is and why, the last gate reading (canary against stable) with its verdict, the latest
// entries of its log, and for an operator the Pause / Resume / Promote / Abort buttons (a
// confirmation, then POST /console/api/rollout/<verb>: console/rollout.ts). The buttons a state
// allows are the ones `command` accepts there; the server checks again.
import { command, isEnded, PAUSE, percentAt, type Rollout } from "@pipeline/shared/rollout";
import { esc } from "./charts.ts";
import type { ConsoleState } from "./data.ts";
import type { Principal } from "./tokens.ts";

const fig = (name: string, value: unknown) => `<span data-figure="${esc(name)}">${esc(value)}</span>`;
const when = (at: string) => esc(at.replace("T", " ").slice(0, 19));

function table(caption: string, head: string[], rows: string[][], empty: string, id?: string): string {
  const body = rows.length
    ? rows.map((r) => `<tr>${r.map((c) => `<td>${c}</td>`).join("")}</tr>`).join("")
    : `<tr><td colspan="${head.length}" class="empty">${esc(empty)}</td></tr>`;
  return `<div class="scroll"><table${id ? ` id="${id}"` : ""}><caption>${esc(caption)}</caption><thead><tr>${head.map((h) => `<th scope="col">${esc(h)}</th>`).join("")}</tr></thead><tbody>${body}</tbody></table></div>`;
}

/** Every region's steps in order: done, current (aria-current) or to come; a pause step as "pause". */
function stepsOf(r: Rollout): string {
  const live = !isEnded(r);
  const regions = r.plan.regions.map((name, i) => {
    const items = r.plan.steps.map((s, j) => {
      const done = r.state === "promoted" || i < r.region || (i === r.region && j < r.step);
      const current = live && i === r.region && j === r.step;
      const cls = s === PAUSE ? "pause" : "";
      const mark = current ? "current" : done ? "done" : "todo";
      return `<li class="${cls} ${mark}"${current ? ` aria-current="step"` : ""}>${s === PAUSE ? "pause" : `${s}%`}</li>`;
    });
    return `<li><span class="muted">${esc(name)}</span> <ol class="rsteps" aria-label="steps in ${esc(name)}">${items.join("")}</ol></li>`;
  });
  return `<ol class="rregions" data-figure="rollout.steps">${regions.join("")}</ol>`;
}

type Figures = {
  tasks?: number;
  failed?: number;
  p95Ms?: number | null;
  extraPaid?: number;
  extraPaidMicros?: number;
  providerCalls?: number;
  providerErrors?: number;
};

/**
 * The newest log entry with gate figures: canary against stable over the window that led to that
 * decision, and the verdict's why (the live reading between decisions is the service's own status).
 */
function gateOf(r: Rollout): string {
  const e = [...r.log].reverse().find((x) => x.figures?.canary && x.figures?.stable);
  if (!e) return `<p class="muted" data-figure="rollout.gate">no gate reading yet</p>`;
  const row = (name: string, f: Figures) => [
    esc(name),
    fig(`rollout.gate.${name}.tasks`, f.tasks ?? "–"),
    fig(`rollout.gate.${name}.failed`, f.failed ?? "–"),
    fig(`rollout.gate.${name}.p95`, f.p95Ms === null || f.p95Ms === undefined ? "–" : `${f.p95Ms} ms`),
    fig(
      `rollout.gate.${name}.extraPaid`,
      `${f.extraPaid ?? 0}${f.extraPaidMicros ? ` ($${(f.extraPaidMicros / 1e6).toFixed(5)})` : ""}`,
    ),
    esc(`${f.providerErrors ?? 0} / ${f.providerCalls ?? 0}`),
  ];
  const what = `${e.action}${e.region ? ` ${e.region}` : ""}${e.percent ? ` ${e.percent}%` : ""}`;
  return `<h3>Last gate reading <span class="muted">behind the decision “${esc(what)}”, ${when(e.at)} UTC</span></h3>
<p>verdict: <span data-figure="rollout.gate.verdict">${esc(e.why)}</span></p>
${table("the gate's figures over the step's window (same traffic, cut by shard)", ["version", "tasks", "failed", "p95", "extra paid", "provider errors / calls"], [row("canary", e.figures!.canary as Figures), row("stable", e.figures!.stable as Figures)], "")}`;
}

/** The buttons `command` allows in this state (an operator's; the server checks again). */
function buttons(r: Rollout, who: Principal): string {
  if (isEnded(r)) return "";
  if (who.role !== "operator") return `<p class="muted">the operator role is needed to change the rollout</p>`;
  const region = r.plan.regions[r.region] ?? "?";
  const atPause = r.awaiting === "promotion";
  const label = {
    pause: "Pause",
    resume: "Resume",
    promote: atPause ? `Promote (go on to ${percentAt(r.plan.steps, r.step + 1)}%)` : `Promote (100% in ${region})`,
    abort: "Abort",
  } as const;
  const shown = (["pause", "resume", "promote", "abort"] as const).filter(
    (v) => !("refused" in command(r, v, 0, "console")),
  );
  return `<p class="rbuttons">${shown
    .map(
      (v) =>
        `<button type="button" data-rollout-verb="${v}" data-rollout-id="${esc(r.id)}" data-rollout-label="${esc(label[v])}"${v === "abort" ? ` class="danger"` : ""} aria-label="${esc(`${label[v]} rollout ${r.id}`)}">${esc(label[v])}</button>`,
    )
    .join(" ")}</p>`;
}

/** The record: where it is, why, its steps, the last gate, its log and the buttons. */
function recordOf(s: ConsoleState, who: Principal): string {
  const v = s.rollout;
  if (!v) return `<p class="muted">no rollout has run (<code>npm run rollout -- start &lt;version&gt;</code>)</p>`;
  if ("error" in v) return `<p class="fail">rollout record unreadable: ${esc(v.error)}</p>`;
  const r = v.record;
  const live = !isEnded(r);
  const where = live
    ? ` at ${fig("rollout.percent", `${percentAt(r.plan.steps, r.step)}%`)} in ${esc(r.plan.regions[r.region])}${r.applied ? "" : " (moving shards)"}`
    : "";
  const cls = r.state === "rolledBack" || r.state === "aborted" ? "fail" : r.state === "promoted" ? "ok" : "";
  const waits =
    r.awaiting === "promotion"
      ? ` <span class="badge warn" data-figure="rollout.awaiting">waiting for promotion</span>`
      : r.awaiting === "decision"
        ? ` <span class="badge warn" data-figure="rollout.awaiting">inconclusive: decide</span>`
        : "";
  const log = [...r.log]
    .reverse()
    .slice(0, 8)
    .map((e) => [
      when(e.at),
      esc(e.action),
      esc(e.region ?? ""),
      esc(e.percent ? `${e.percent}%` : ""),
      `<span class="why">${esc(e.why)}</span>`,
    ]);
  return `<p>rollout ${fig("rollout.id", r.id)}: ${esc(r.plan.version)} replacing ${esc(r.plan.stable)}, <span class="${cls}" data-figure="rollout.state">${esc(r.state)}</span>${where}${waits}</p>
${r.reason ? `<p>${fig("rollout.reason", r.reason)}</p>` : ""}${stepsOf(r)}${buttons(r, who)}${gateOf(r)}
${table("the rollout's latest decisions and commands, newest first", ["at (UTC)", "action", "region", "percent", "why"], log, "no entry", "rollout-log")}`;
}

/** The rollouts panel: the shard shares of this region, then the rollout service's record. */
export function rolloutPanel(s: ConsoleState, who: Principal): string {
  const a = s.rollouts;
  const head = `<section aria-labelledby="h-rollouts" class="card wide" id="rollouts"><h2 id="h-rollouts">Rollouts</h2>`;
  const record = recordOf(s, who);
  if (a === null)
    return `${head}<p>no shard assignment yet (the first solver of the region writes it)</p>${record}</section>`;
  if ("error" in a) return `${head}<p class="fail">shard assignment unreadable: ${esc(a.error)}</p>${record}</section>`;
  const rows = Object.entries(a.share)
    .sort(([x], [y]) => x.localeCompare(y))
    .map(([v, n]) => [
      esc(v),
      fig(`rollout.${v}.shards`, n),
      `<meter min="0" max="${a.shards}" value="${n}" aria-label="share of version ${esc(v)}">${n}/${a.shards}</meter> ${fig(`rollout.${v}.percent`, `${Math.round((n / a.shards) * 100)}%`)}`,
    ]);
  return `${head}${table(`shards of TASKS_${s.region.toUpperCase()} per solver version (rollout_${s.region}, revision ${a.revision}, ${a.updatedAt.replace("T", " ").slice(0, 19)} by ${a.by})`, ["version", "shards", "share"], rows, "no version")}${record}</section>`;
}

export const ROLLOUT_CSS = `
ol.rregions{list-style:none;padding:0;margin:6px 0}ol.rregions>li{margin:2px 0}
ol.rsteps{display:inline-flex;flex-wrap:wrap;gap:4px;list-style:none;padding:0;margin:0}
ol.rsteps li{padding:0 8px;border-radius:10px;border:1px solid #9ca3af;font-size:12px}
ol.rsteps li.done{background:#d1fae5;border-color:#047857}ol.rsteps li.current{background:#2563eb;color:#fff;border-color:#1d4ed8;font-weight:600}
ol.rsteps li.pause{border-style:dashed}ol.rsteps li.pause.current{background:#b45309;border-color:#92400e}
.rbuttons{display:flex;flex-wrap:wrap;gap:8px}button.danger{background:#b91c1c;border-color:#991b1b}
#rollout-log td .why{white-space:normal}
`;

/** The buttons: confirm, POST the command with the rollout's id, say what happened, refresh the panels. */
export const ROLLOUT_JS = `
(() => {
  const flash = document.getElementById("flash");
  const say = (text, error) => { if (flash) { flash.textContent = text; flash.className = error ? "error" : ""; } };
  const WHAT = {
    pause: "The step holds where it is; no decision is taken until it is resumed.",
    resume: "Decisions again; the step's bake starts over.",
    promote: "The rollout goes on as the button says; the next step is judged like any other.",
    abort: "Every region goes back to the stable version.",
  };
  document.addEventListener("click", async (e) => {
    const b = e.target.closest("button[data-rollout-verb]");
    if (!b) return;
    const verb = b.dataset.rolloutVerb;
    const id = b.dataset.rolloutId;
    if (!confirm(b.dataset.rolloutLabel + " rollout " + id + "? " + WHAT[verb] + " This is audited.")) return;
    b.disabled = true;
    const r = await fetch("/console/api/rollout/" + encodeURIComponent(verb), {
      method: "POST",
      headers: { "x-console-action": "rollout", "content-type": "application/json" },
      body: JSON.stringify({ id }),
    });
    const body = await r.json().catch(() => ({}));
    say(r.ok ? "Rollout " + id + ": " + verb + " done, now " + body.state + (body.applied ? "" : " (the rollout service moves the shards)") + "." : "Rollout " + verb + " refused: " + (body.reason || r.status), !r.ok);
    const live = await fetch("/console/live", { headers: { accept: "text/html" }, cache: "no-store" });
    if (live.ok) document.getElementById("live").innerHTML = await live.text();
  });
})();
`;
