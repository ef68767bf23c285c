// What the soak prints: a table per sample (each live process's RSS, fds and Postgres connections, the globals), the
// growth table at the end, and the one `soak:` line (the figures and the verdict) CI looks for.
import { RSS_GROWTH_MAX_PCT, SETTLE_MS } from "./growth.ts";
import type { Sample } from "./sample.ts";
import type { SoakResult } from "./soak.ts";

/** m:ss since the soak began. */
export const clockOf = (ms: number) =>
  `${Math.floor(ms / 60_000)}:${String(Math.floor((ms % 60_000) / 1000)).padStart(2, "0")}`;
const pad = (v: string | number, n: number) => String(v).padStart(n);

export function printSample(s: Sample): void {
  const tasks = s.tasks ?? { offered: 0, accepted: 0, completed: 0 };
  const lines = [
    `[soak] ${clockOf(s.at)}  tasks offered ${tasks.offered}, accepted ${tasks.accepted}, completed ${tasks.completed}; NATS consumers ${s.consumers} (${Object.entries(
      s.consumersByStream,
    )
      .map(([k, n]) => `${k} ${n}`)
      .join(
        ", ",
      )}) + ${s.expiringConsumers} expiring; Postgres connections ${s.pgConnections}${s.pgOrphans ? ` (${s.pgOrphans} of processes gone)` : ""}`,
    ...Object.entries(s.procs).map(
      ([label, f]) =>
        `         ${label.padEnd(26)} ${pad(f.rssMb.toFixed(1), 7)} MB ${pad(f.fds, 5)} fds (+${pad(f.pooled, 3)} keep-alive) ${pad(f.pg, 4)} Postgres connections`,
    ),
  ];
  console.log(lines.join("\n"));
}

export function printGrowth(r: SoakResult): void {
  const rows = [
    `[soak] growth from each process's warm-up to its last sample, summed over the quiet stretches (a stretch starts ${SETTLE_MS / 1000} s after a kill or restart and ends at the next; each end the median of up to 3 samples):`,
  ];
  const signed = (n: number) => `${n >= 0 ? "+" : ""}${Math.round(n * 10) / 10}`;
  for (const p of r.procs) {
    if (!p.judged || !p.rss || !p.fds || !p.pg) {
      rows.push(`         ${p.label.padEnd(26)} not judged: ${p.note}`);
      continue;
    }
    const tol = p.fds.tolerance ? ` (tolerance ${p.fds.tolerance})` : "";
    rows.push(
      `         ${p.label.padEnd(26)} ${clockOf(p.from!)}-${clockOf(p.to!)} (${p.samples} samples, ${p.stretches} stretches)  RSS ${p.rss.from.toFixed(1)} -> ${p.rss.to.toFixed(1)} MB (${signed(p.rss.pct)}%)  fds ${p.fds.from} -> ${p.fds.to} (${signed(p.fds.delta)}${tol})  Postgres ${p.pg.from} -> ${p.pg.to} (${signed(p.pg.delta)})  keep-alive ${p.pooled!.from} -> ${p.pooled!.to}  ${p.ok ? "ok" : "FAIL"}`,
    );
  }
  if (r.global) {
    const g = r.global;
    rows.push(
      `         globals ${clockOf(g.from)}-${clockOf(g.to)}: NATS consumers ${g.consumers.from} -> ${g.consumers.to} (and expiring on their own ${g.expiringConsumers.from} -> ${g.expiringConsumers.to}), Postgres connections in all ${g.pgConnections.from} -> ${g.pgConnections.to}, of processes gone at the end ${g.pgOrphans}`,
    );
  }
  for (const e of r.events) rows.push(`         ${clockOf(e.at)}-${clockOf(e.until)} ${e.what}`);
  console.log(rows.join("\n"));
}

/** The one line: length, load, disturbances, the worst growth, the tasks; then PASS or what failed. */
export function soakLine(r: SoakResult, failed: string[]): string {
  const s = r.settings;
  const judged = r.procs.filter((p) => p.judged && p.rss && p.fds);
  const worst = judged.reduce((w, p) => (!w || p.rss!.pct > w.rss!.pct ? p : w), judged[0]);
  const maxFd = judged.reduce((m, p) => Math.max(m, p.fds!.delta), Number.NEGATIVE_INFINITY);
  const pgMax = judged.length ? Math.max(...judged.map((p) => p.pg!.delta)) : undefined;
  const signed = (n: number) => `${n >= 0 ? "+" : ""}${Math.round(n * 10) / 10}`;
  const kills = r.events.filter((e) => e.what.startsWith("kill -9")).length;
  const o = r.outcome;
  const g = r.global;
  const extra = o.providerSubmissions - o.tasks;
  // The largest gap between accepted and completed at a sample: a stall shows here.
  const backlog = r.samples.reduce(
    (m, x) =>
      x.tasks && x.tasks.accepted - x.tasks.completed > m.n ? { n: x.tasks.accepted - x.tasks.completed, at: x.at } : m,
    { n: 0, at: 0 },
  );
  const errors =
    Object.entries(o.clientErrors)
      .map(([k, n]) => `${k} ${n}`)
      .join(", ") || "none";
  return [
    `soak: ${+(s.durationMs / 60_000).toFixed(2)} min at ${s.rate} tasks/s, ${kills} solver kill -9s, ${r.events.length - kills} gateway restart;`,
    `RSS growth max ${worst ? `${signed(worst.rss!.pct)}% (${worst.label})` : "n/a"} (goal < ${RSS_GROWTH_MAX_PCT}%),`,
    `fd growth max ${Number.isFinite(maxFd) ? signed(maxFd) : "n/a"},`,
    g
      ? `NATS consumers ${g.consumers.from} -> ${g.consumers.to} (+ expiring ${g.expiringConsumers.from} -> ${g.expiringConsumers.to}), Postgres connections growth max ${pgMax === undefined ? "n/a" : signed(pgMax)} (in all ${g.pgConnections.from} -> ${g.pgConnections.to}, ${g.pgOrphans} left by processes gone);`
      : "no globals;",
    `${o.offered} offered, ${o.accepted} accepted (backlog at most ${backlog.n}, at ${clockOf(backlog.at)}), ${o.lost} lost, ${extra} extra paid (${o.explainedExtra} explained by kills), client errors: ${errors};`,
    failed.length ? `FAIL: ${failed.join("; ")}` : "PASS",
  ].join(" ");
}
