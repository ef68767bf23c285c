// The console's incidents, as HTML (pure; incidents-page.test.ts): the panel on the main page (its
// rows fetched by /console/incidents.js, so the page's own refresh is untouched), the list page, and
// a page per incident with its figures and timeline. Every figure carries a `data-figure` name.
import { impactFigures } from "../incidents/markdown.ts";
import { fmtDuration, fmtTime, type Incident } from "../incidents/model.ts";
import { esc } from "./charts.ts";

const fig = (name: string, value: unknown) => `<span data-figure="${esc(name)}">${esc(value)}</span>`;
const state = (i: Incident) =>
  i.open ? `<span class="badge fail">open</span>` : `<span class="badge ok">closed</span>`;

/** The incidents as table rows, newest first (the panel and the list page). */
export function renderIncidentRows(rows: Incident[]): string {
  const body = rows.length
    ? rows
        .map(
          (i) =>
            `<tr data-incident="${i.id}"><td><a href="/console/incidents/${i.id}">${fig(`incident.${i.id}.id`, i.id)}</a></td><td>${fig(`incident.${i.id}.kind`, i.kind)}</td><td>${esc(i.region)}</td><td>${esc(fmtTime(i.startedAt))}</td><td>${fig(`incident.${i.id}.mttr`, i.open ? `open for ${fmtDuration(Date.now() - Date.parse(i.startedAt))}` : fmtDuration(i.mttrMs))}</td><td>${state(i)} ${fig(`incident.${i.id}.state`, i.open ? "open" : "closed")}</td><td class="wrap">${esc(i.summary)}</td></tr>`,
        )
        .join("")
    : `<tr><td colspan="7" class="empty">no incident recorded</td></tr>`;
  return `<div class="scroll"><table id="incidents-table"><caption>failovers, rollbacks, restores, breaker storms and drills, newest first (incidents table)</caption><thead><tr><th scope="col">id</th><th scope="col">kind</th><th scope="col">region</th><th scope="col">start (UTC)</th><th scope="col">duration / MTTR</th><th scope="col">state</th><th scope="col">summary</th></tr></thead><tbody>${body}</tbody></table></div>`;
}

/** The panel of the main page: filled and refreshed by /console/incidents.js; without script, a link. */
export const INCIDENTS_PANEL = `<section id="incidents" aria-labelledby="h-incidents" class="card"><h2 id="h-incidents">Incidents</h2>
<div id="incidents-out" aria-live="polite"><p class="muted">loading…</p></div><p><a href="/console/incidents">all incidents</a> · post-mortem: <code>bun run recovery incident &lt;id&gt; --markdown</code></p></section>
<script src="/console/incidents.js" defer></script>`;

/** Fetches the panel's rows now and every 10 s (the page's CSP allows only its own scripts). */
export const INCIDENTS_JS = `(() => {
  const out = document.getElementById("incidents-out");
  if (!out) return;
  const load = async () => {
    if (document.hidden) return;
    try {
      const r = await fetch("/console/incident-rows", { cache: "no-store" });
      if (r.ok) out.innerHTML = await r.text();
    } catch (e) { /* the next round tries again */ }
  };
  load();
  setInterval(load, 10000);
})();
`;

function shell(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${esc(title)}</title><link rel="stylesheet" href="/console/app.css"></head>
<body><header><h1>${esc(title)}</h1><div class="who"><a href="/console" class="muted">back to the console</a></div></header><main id="incident-page" class="card">${body}</main></body></html>`;
}

export function renderIncidentList(rows: Incident[], region: string): string {
  return shell(`Incidents · region ${region}`, renderIncidentRows(rows));
}

/** One incident: its times, figures, detail and timeline. */
export function renderIncidentPage(i: Incident): string {
  const times: Array<[string, string | null]> = [
    ["start", i.startedAt],
    ["detection", i.detectedAt],
    ["recovery", i.recoveredAt],
    ["end", i.endedAt],
  ];
  const facts = [...times.map(([a, b]) => [a, b ? `${fmtTime(b)} UTC` : "–"] as [string, string]), ...impactFigures(i)];
  const timeline = i.timeline.length
    ? i.timeline
        .map(
          (e) => `<tr><td>${esc(fmtTime(e.at))}</td><td>${esc(e.source)}</td><td class="wrap">${esc(e.what)}</td></tr>`,
        )
        .join("")
    : `<tr><td colspan="3" class="empty">no event recorded</td></tr>`;
  return shell(
    `Incident ${i.id}: ${i.kind} in ${i.region}`,
    `<h2>${fig("incident.summary", i.summary)}</h2><p>${state(i)} ${fig("incident.state", i.open ? "open" : "closed")} · key <code>${esc(i.key)}</code></p>
<dl class="facts">${facts.map(([a, b]) => `<div><dt>${esc(a)}</dt><dd data-figure="incident.${esc(a.replace(/[^A-Za-z]+/g, "-").replace(/-+$/, ""))}">${esc(b)}</dd></div>`).join("")}</dl>
<div class="scroll"><table id="incident-timeline"><caption>timeline (UTC): EVENTS, audit_log, rollout_control, the lease keeper, the drill or restore</caption><thead><tr><th scope="col">at</th><th scope="col">source</th><th scope="col">what</th></tr></thead><tbody>${timeline}</tbody></table></div>
<p class="muted">post-mortem skeleton: <code>bun run recovery incident ${i.id} --markdown</code> · JSON: <a href="/console/api/incidents/${i.id}">/console/api/incidents/${i.id}</a></p>`,
  );
}

export const incidentMissing = (id: string) =>
  shell("Incident", `<p class="fail" data-figure="incident.missing">no incident ${esc(id)}</p>`);
