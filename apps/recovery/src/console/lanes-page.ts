// The console's Lanes panel: each lane of the region, paused or running, by whom and since when,
// with Pause/Resume for operators (a confirmation first). The rows come from /console/lanes, the
// actions go to /console/api/lanes/:lane/{pause,resume} with `x-console-action: lane` (lanes.ts).
import type { LaneState } from "../lanes/model.ts";
import { whoOf } from "../lanes/model.ts";
import { esc } from "./charts.ts";

export const LANES_PANEL = `<section id="lanes" aria-labelledby="h-lanes" class="card"><h2 id="h-lanes">Lanes</h2>
<div id="lanes-out" aria-live="polite"><p class="muted">loading…</p></div><p class="muted">A paused lane starts no task: its tasks wait queued (not lost, not failed) until it is resumed; tasks already started finish. CLI: <code>bun run recovery lanes</code></p></section>
<link rel="stylesheet" href="/console/lanes.css"><script src="/console/lanes.js" defer></script>`;

/** The panel sits outside the live part: the same margins as its neighbours; the "who" column may wrap. */
export const LANES_CSS = `#lanes{margin:12px 16px}#lanes td[data-figure]{white-space:normal;min-width:16em}`;

const utc = (iso: string) => `${iso.replace("T", " ").slice(0, 19)} UTC`;
const FOR = [
  ["", "until resumed"],
  ["15m", "15 minutes"],
  ["30m", "30 minutes"],
  ["1h", "1 hour"],
  ["4h", "4 hours"],
] as const;

function controls(l: LaneState): string {
  if (l.state === "paused")
    return `<button type="button" data-lane-action="resume" data-lane="${l.lane}" aria-label="Resume lane ${l.lane}">Resume</button>`;
  return `<input id="lane-reason-${l.lane}" maxlength="200" size="12" autocomplete="off" placeholder="reason" aria-label="Reason for pausing lane ${l.lane}"> <select id="lane-for-${l.lane}" aria-label="How long to pause lane ${l.lane}">${FOR.map(([v, t]) => `<option value="${v}">${t}</option>`).join("")}</select> <button type="button" data-lane-action="pause" data-lane="${l.lane}" aria-label="Pause lane ${l.lane}">Pause</button>`;
}

function who(l: LaneState): string {
  const r = l.record;
  if (l.error) return `<span class="fail">record unreadable: ${esc(l.error)}</span>`;
  if (l.state === "paused" && r)
    return `paused by ${esc(whoOf(r.by))} since ${esc(utc(r.at))}${r.until ? `, until ${esc(utc(r.until))}` : ", until resumed"}${r.reason ? `: ${esc(r.reason)}` : ""}`;
  if (r && !r.paused) return `resumed by ${esc(whoOf(r.by))} at ${esc(utc(r.at))}`;
  if (r) return `a pause by ${esc(whoOf(r.by))} ended at ${esc(utc(r.until ?? r.at))}`;
  return `<span class="muted">never paused</span>`;
}

/** The panel's rows; `operator`: with the buttons. */
export function renderLaneRows(lanes: LaneState[], operator: boolean): string {
  const rows = lanes.map(
    (l) =>
      `<tr><td>${esc(l.lane)}</td><td><span class="badge ${l.state === "paused" ? "warn" : "ok"}" data-figure="lane.${l.lane}.state">${l.state}</span></td><td data-figure="lane.${l.lane}.who">${who(l)}</td><td>${esc(l.consumers.length)}${l.disagree.length ? ` <span class="fail">(${esc(l.disagree.length)} not yet enforced)</span>` : ""}</td><td>${operator ? controls(l) : `<span class="muted">operator role needed</span>`}</td></tr>`,
  );
  return `<div class="scroll"><table id="lanes-table"><caption>lanes of this region: paused or running (the record in the region bucket; every solver version's consumer of the lane follows it)</caption><thead><tr><th scope="col">lane</th><th scope="col">state</th><th scope="col">by whom, since when</th><th scope="col">consumers</th><th scope="col">action</th></tr></thead><tbody>${rows.join("")}</tbody></table></div>`;
}

/** Loads the rows now and every 5 s (not while a field of the panel has the focus); pause/resume with a confirmation. */
export const LANES_JS = `(() => {
  const out = document.getElementById("lanes-out");
  if (!out) return;
  const flash = document.getElementById("flash");
  const say = (text, error) => { if (flash) { flash.textContent = text; flash.className = error ? "error" : ""; } };
  async function load() {
    try {
      const r = await fetch("/console/lanes", { cache: "no-store" });
      if (r.ok) out.innerHTML = await r.text();
    } catch {}
  }
  out.addEventListener("click", async (e) => {
    const b = e.target.closest("button[data-lane-action]");
    if (!b) return;
    const lane = b.dataset.lane, act = b.dataset.laneAction;
    const body = {};
    if (act === "pause") {
      const reason = document.getElementById("lane-reason-" + lane).value.trim();
      const dur = document.getElementById("lane-for-" + lane).value;
      if (reason) body.reason = reason;
      if (dur) body.for = dur;
      if (!confirm("Pause lane " + lane + (dur ? " for " + dur : " until resumed") + "? No task of it starts meanwhile: they wait queued (tasks already started finish). This is audited.")) return;
    } else if (!confirm("Resume lane " + lane + "? Its queued tasks start again. This is audited.")) return;
    b.disabled = true;
    const r = await fetch("/console/api/lanes/" + encodeURIComponent(lane) + "/" + act, { method: "POST", headers: { "x-console-action": "lane", "content-type": "application/json" }, body: JSON.stringify(body) });
    const res = await r.json().catch(() => ({}));
    say(r.ok ? "Lane " + lane + (act === "pause" ? " paused" : " resumed") + " (" + (res.applied || []).length + " consumer" + ((res.applied || []).length === 1 ? "" : "s") + ")" + ((res.failed || []).length ? "; not yet on " + res.failed.map((f) => f.name).join(", ") : "") : "Refused: " + (res.reason || r.status), !r.ok);
    await load();
  });
  load();
  setInterval(() => { if (!document.hidden && !out.contains(document.activeElement)) load(); }, 5000);
})();
`;
