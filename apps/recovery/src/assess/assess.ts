import type { JetStreamManager } from "@nats-io/jetstream";
import type postgres from "postgres";
import { parseProviderReply } from "@pipeline/shared/provider";
import { eventSubject, streams } from "@pipeline/shared/subjects";
import type { Heartbeat } from "@pipeline/shared/runtime";
import { MIN_NATS_SERVER, versionAtLeast } from "@pipeline/shared/localstack";
import { listSnapshots } from "../snapshot/manifest.ts";
import { offHostRecord } from "../snapshot/offhost.ts";

export type Level = "ok" | "warn" | "fail";

export interface Check {
  name: string;
  level: Level;
  summary: string;
  /** What to do about it, when something is wrong. */
  hint?: string;
}

export interface LaneInfo {
  consumer: string;
  filter: string;
  /** Messages not yet delivered (the lag). */
  pending: number;
  /** Delivered, not yet acked (in flight). */
  ackPending: number;
  redelivered: number;
  waitingPulls: number;
}

export interface Assessment {
  at: string;
  region: string;
  level: Level;
  checks: Check[];
  queue: { stream: string; exists: boolean; messages: number; lanes: LaneInfo[] } | null;
  dlq: { stream: string; messages: number } | null;
  tasks: {
    byState: Record<string, number>;
    stuckSolving: number;
    oldestStuckSolvingSec: number | null;
    staleQueued: number;
    oldestQueuedSec: number | null;
  } | null;
  snapshot: { name: string; ageSec: number } | null;
  provider: { url: string; reachable: boolean; balance: string | null; error: string | null } | null;
  breaker: { state: string; reason: string | null; worker: string | null; at: string } | null;
  workers: Heartbeat[] | null;
}

export interface AssessDeps {
  region: string;
  jsm: JetStreamManager | Error;
  sql: postgres.Sql | Error;
  snapshotDir: string;
  snapshotMaxAgeMs: number;
  staleAfterMs: number;
  provider: { url: string; key: string | undefined; timeoutMs: number };
  /** The NATS server the CLI is connected to (its version from the INFO it sent). */
  natsServer?: { version: string; url: string };
  /** Two regions: the lease and mirror checks (regions.ts). */
  regionChecks?: Check[];
  /** Live solvers from their heartbeats (an Error when the bucket cannot be read). */
  workers?: Heartbeat[] | Error;
  /** Where snapshots are copied off the host (SNAPSHOT_OFFHOST); undefined = copies are off. */
  offHostDomain?: string;
}

/** Asks the provider for the balance (`res.php`, action=getbalance, key in the POST body). */
export async function providerBalance(url: string, key: string, timeoutMs: number): Promise<{ reachable: boolean; balance: string | null; error: string | null }> {
  try {
    const res = await fetch(`${url.replace(/\/+$/, "")}/res.php`, {
      method: "POST",
      body: new URLSearchParams({ key, action: "getbalance", json: "1" }),
      headers: { "content-type": "application/x-www-form-urlencoded" },
      signal: AbortSignal.timeout(timeoutMs),
    });
    const r = parseProviderReply(res.status, await res.text());
    if (r.kind === "ok") return { reachable: true, balance: r.value, error: null };
    if (r.kind === "error") return { reachable: true, balance: null, error: r.code };
    return { reachable: r.kind !== "transport", balance: null, error: r.kind === "transport" ? r.reason : "unexpected reply" };
  } catch (err) {
    return { reachable: false, balance: null, error: (err as Error).name === "TimeoutError" ? "timeout" : `network: ${(err as Error).message}` };
  }
}

const worst = (a: Level, b: Level): Level => (a === "fail" || b === "fail" ? "fail" : a === "warn" || b === "warn" ? "warn" : "ok");

/**
 * One look at everything an operator needs at 3 a.m. Each probe is independent: NATS down still
 * shows the database, and the other way round. `level` is `fail` when something needs a human.
 */
export async function assess(d: AssessDeps): Promise<Assessment> {
  const checks: Check[] = [];
  const add = (c: Check) => checks.push(c);
  const out: Assessment = { at: new Date().toISOString(), region: d.region, level: "ok", checks, queue: null, dlq: null, tasks: null, snapshot: null, provider: null, breaker: null, workers: null };

  if (d.jsm instanceof Error) add({ name: "nats", level: "fail", summary: `NATS unreachable: ${d.jsm.message}`, hint: "start nats-server; the apps reconnect by themselves" });
  else {
    const jsm = d.jsm;
    if (d.natsServer) {
      const old = !versionAtLeast(d.natsServer.version, MIN_NATS_SERVER);
      add(
        old
          ? { name: "nats", level: "warn", summary: `nats-server ${d.natsServer.version} at ${d.natsServer.url}: older than ${MIN_NATS_SERVER}`, hint: "upgrade the server (docs/nats.md): the project relies on 2.14's WorkQueue sourcing and +TERM reasons" }
          : { name: "nats", level: "ok", summary: `nats-server ${d.natsServer.version} at ${d.natsServer.url}` },
      );
    }
    const name = streams.tasks(d.region);
    try {
      const info = await jsm.streams.info(name).catch((err: Error) => {
        if (/not found/i.test(err.message)) return undefined;
        throw err;
      });
      if (!info) {
        out.queue = { stream: name, exists: false, messages: 0, lanes: [] };
        add({ name: "queue", level: "fail", summary: `${name} does not exist: queue lost`, hint: "bun run recovery rebuild-queue, then restart the solvers (they recreate their consumers)" });
      } else {
        const lanes: LaneInfo[] = [];
        for await (const c of jsm.consumers.list(name)) {
          lanes.push({ consumer: c.name, filter: c.config.filter_subject ?? "", pending: c.num_pending, ackPending: c.num_ack_pending, redelivered: c.num_redelivered, waitingPulls: c.num_waiting });
        }
        lanes.sort((a, b) => a.consumer.localeCompare(b.consumer));
        out.queue = { stream: name, exists: true, messages: info.state.messages, lanes };
        const idle = lanes.filter((l) => l.pending > 0 && l.ackPending === 0 && l.waitingPulls === 0);
        if (lanes.length === 0) add({ name: "queue", level: info.state.messages > 0 ? "fail" : "warn", summary: `${name}: ${info.state.messages} messages, no consumer`, hint: "start a solver" });
        else if (idle.length) add({ name: "queue", level: "fail", summary: `nobody pulls ${idle.map((l) => `${l.consumer} (${l.pending} waiting)`).join(", ")}`, hint: "start or restart a solver; check its log" });
        else add({ name: "queue", level: "ok", summary: `${info.state.messages} messages; lag ${lanes.map((l) => `${l.consumer.split("_")[2] ?? l.consumer}=${l.pending}`).join(" ")}` });
      }
      const dlq = await jsm.streams.info(streams.dlq(d.region)).catch(() => undefined);
      out.dlq = { stream: streams.dlq(d.region), messages: dlq?.state.messages ?? 0 };
      add(
        out.dlq.messages > 0
          ? { name: "dlq", level: "warn", summary: `${out.dlq.messages} dead-lettered`, hint: `nats stream view ${out.dlq.stream}; fix the cause, then POST /v1/tasks/:id/retry` }
          : { name: "dlq", level: "ok", summary: "empty" },
      );
      const last = await jsm.streams.getMessage(streams.events(d.region), { last_by_subj: eventSubject(d.region, "breaker") }).catch(() => null);
      if (last) {
        const b = last.json() as { at?: string; data?: { state?: string; reason?: string | null; worker?: string } };
        out.breaker = { state: b.data?.state ?? "unknown", reason: b.data?.reason ?? null, worker: b.data?.worker ?? null, at: b.at ?? last.time.toISOString() };
        if (out.breaker.state === "open") add({ name: "breaker", level: "warn", summary: `last breaker event: open (${out.breaker.reason ?? "?"}) on ${out.breaker.worker ?? "?"} at ${out.breaker.at}`, hint: "key-level code: fix the key or account; error rate: the provider is down" });
      }
    } catch (err) {
      add({ name: "queue", level: "fail", summary: `JetStream error: ${(err as Error).message}` });
    }
  }

  for (const c of d.regionChecks ?? []) add(c);

  if (d.sql instanceof Error) add({ name: "postgres", level: "fail", summary: `Postgres unreachable: ${d.sql.message}`, hint: "start Postgres, or restore the newest snapshot (docs/runbook.md)" });
  else {
    const sql = d.sql;
    try {
      const [v] = await sql<{ v: string }[]>`select current_setting('server_version') as v`;
      add({ name: "postgres", level: "ok", summary: `PostgreSQL ${v?.v ?? "?"} reachable` });
      const states = await sql<{ state: string; n: number }[]>`select state, count(*)::int as n from tasks group by state`;
      const stale = `${d.staleAfterMs} milliseconds`;
      const [s] = await sql<{ stuck: number; stuck_old: number; oldest_stuck: number | null; stale_queued: number; oldest_queued: number | null }[]>`
        select
          count(*) filter (where state = 'solving' and (lease_until is null or lease_until < now()))::int as stuck,
          count(*) filter (where state = 'solving' and (lease_until is null or lease_until < now() - ${stale}::interval))::int as stuck_old,
          extract(epoch from now() - min(updated_at) filter (where state = 'solving' and (lease_until is null or lease_until < now())))::float8 as oldest_stuck,
          count(*) filter (where state in ('queued', 'retrying') and updated_at < now() - ${stale}::interval)::int as stale_queued,
          extract(epoch from now() - min(created_at) filter (where state = 'queued'))::float8 as oldest_queued
        from tasks where state in ('queued', 'solving', 'retrying')`;
      out.tasks = {
        byState: Object.fromEntries(states.map((r) => [r.state, r.n])),
        stuckSolving: s?.stuck ?? 0,
        oldestStuckSolvingSec: s?.oldest_stuck ?? null,
        staleQueued: s?.stale_queued ?? 0,
        oldestQueuedSec: s?.oldest_queued ?? null,
      };
      const t = out.tasks;
      add({ name: "tasks", level: "ok", summary: Object.entries(t.byState).map(([k, v]) => `${k}=${v}`).join(" ") || "none" });
      if (t.stuckSolving > 0)
        add({
          name: "stuck",
          level: (s?.stuck_old ?? 0) > 0 ? "fail" : "warn",
          summary: `${t.stuckSolving} solving with an expired lease (oldest updated ${Math.round(t.oldestStuckSolvingSec ?? 0)} s ago)`,
          hint: "their messages are redelivered after AckWait; if they stay: bun run recovery recover-stale",
        });
      if (t.staleQueued > 0)
        add({ name: "stale", level: "warn", summary: `${t.staleQueued} queued/retrying not updated for ${Math.round(d.staleAfterMs / 1000)} s (oldest queued ${Math.round(t.oldestQueuedSec ?? 0)} s)`, hint: "a backlog, or lost messages: bun run recovery recover-stale re-publishes only those without a message" });
    } catch (err) {
      add({ name: "postgres", level: "fail", summary: `query failed: ${(err as Error).message}`, hint: "a missing tasks table means database loss: restore the newest snapshot" });
    }
  }

  const snap = listSnapshots(d.snapshotDir)[0];
  if (!snap) add({ name: "snapshot", level: "warn", summary: `no snapshot in ${d.snapshotDir}`, hint: "bun run recovery snapshot (the recovery service takes them on a timer)" });
  else {
    const ageMs = Date.now() - Date.parse(snap.manifest.createdAt);
    out.snapshot = { name: snap.manifest.name, ageSec: Math.round(ageMs / 1000) };
    add(
      ageMs > d.snapshotMaxAgeMs
        ? { name: "snapshot", level: "fail", summary: `newest snapshot is ${Math.round(ageMs / 60_000)} min old (${snap.manifest.name})`, hint: "is the recovery service running? bun run recovery snapshot" }
        : { name: "snapshot", level: "ok", summary: `${snap.manifest.name}, ${Math.round(ageMs / 1000)} s old` },
    );
  }
  // A snapshot only on this host dies with the database it would restore (issue 16.4).
  const snaps = listSnapshots(d.snapshotDir);
  if (!d.offHostDomain) {
    if (snaps.length) add({ name: "offhost", level: "warn", summary: "snapshots have no off-host copy (SNAPSHOT_OFFHOST is none): losing this host loses them", hint: "set SNAPSHOT_OFFHOST to another region (docs/runbook.md)" });
  } else if (snaps.length) {
    const copied = snaps.find((s) => offHostRecord(s));
    const newest = snaps[0]!;
    const copiedAgeMs = copied ? Date.now() - Date.parse(copied.manifest.createdAt) : Infinity;
    if (!copied || copiedAgeMs > d.snapshotMaxAgeMs)
      add({ name: "offhost", level: "fail", summary: copied ? `newest snapshot with a verified copy in ${d.offHostDomain} is ${Math.round(copiedAgeMs / 60_000)} min old (${copied.manifest.name})` : `no snapshot has a verified copy in ${d.offHostDomain}`, hint: "recovery log 'off-host snapshot copy failed'; the leafnode link (assess replica line); bun run recovery snapshot" });
    else if (copied !== newest) add({ name: "offhost", level: "warn", summary: `newest snapshot ${newest.manifest.name} has no verified off-host copy yet (last copied: ${copied.manifest.name})` });
    else add({ name: "offhost", level: "ok", summary: `${newest.manifest.name} copied to ${d.offHostDomain} and verified` });
  }

  if (!d.provider.key) add({ name: "provider", level: "warn", summary: "not checked (PROVIDER_KEY unset)" });
  else {
    const p = await providerBalance(d.provider.url, d.provider.key, d.provider.timeoutMs);
    out.provider = { url: d.provider.url, ...p };
    const bal = p.balance === null ? NaN : Number(p.balance);
    if (!p.reachable) add({ name: "provider", level: "fail", summary: `${d.provider.url} unreachable: ${p.error}`, hint: "tasks wait (breaker); check the network or the provider's status page" });
    else if (p.error) add({ name: "provider", level: "fail", summary: `provider answered ${p.error}`, hint: "fix the key or account (PROVIDER_KEY)" });
    else if (!(bal > 0)) add({ name: "provider", level: "fail", summary: `balance ${p.balance}`, hint: "top up the provider account" });
    else add({ name: "provider", level: "ok", summary: `reachable, balance ${p.balance}` });
  }
  if (d.workers instanceof Error) add({ name: "workers", level: "warn", summary: `heartbeats unreadable: ${d.workers.message}` });
  else if (d.workers) {
    const ws = (out.workers = d.workers);
    if (ws.length === 0) add({ name: "workers", level: "fail", summary: "no live solver (no heartbeat in 10 s): nothing is being solved", hint: "start a solver; check its log (systemctl status / journalctl)" });
    else {
      add({ name: "workers", level: "ok", summary: `${ws.length} alive: ${ws.map((w) => `${w.workerId} (${w.inFlight} in flight, breaker ${w.breaker})`).join(", ")}` });
      const refusing = ws.filter((w) => w.configRejected);
      if (refusing.length) add({ name: "config", level: "warn", summary: `${refusing.map((w) => `${w.workerId} refuses config rev ${w.configRejected!.revision} (${w.configRejected!.error})`).join("; ")}; they keep rev ${refusing[0]!.configRevision ?? "env"}`, hint: "bun run recovery config rollback (or config set a fixed one)" });
      const keys = [...new Set(ws.map((w) => w.keyName))];
      const revs = [...new Set(ws.map((w) => String(w.configRevision ?? "env")))];
      if (keys.length > 1 || revs.length > 1) add({ name: "config", level: "warn", summary: `solvers disagree: keys ${keys.join(", ")}; config revisions ${revs.join(", ")}`, hint: "bun run recovery workers; a refusing solver lacks the key in its key file" });
      else if (!refusing.length) add({ name: "config", level: "ok", summary: `every solver on config rev ${revs[0]}, key ${keys[0]}` });
    }
  }
  out.level = checks.reduce<Level>((l, c) => worst(l, c.level), "ok");
  return out;
}

/** The screen: one line per check, worst first, then the lanes. */
export function renderAssessment(a: Assessment): string {
  const mark = { ok: "ok  ", warn: "WARN", fail: "FAIL" } as const;
  const order = { fail: 0, warn: 1, ok: 2 } as const;
  const lines = [`recovery assess: region ${a.region} at ${a.at}: ${a.level === "ok" ? "all good" : a.level === "warn" ? "look when you can" : "NEEDS A HUMAN"}`, ""];
  for (const c of [...a.checks].sort((x, y) => order[x.level] - order[y.level])) {
    lines.push(`  ${mark[c.level]}  ${c.name.padEnd(9)} ${c.summary}`);
    if (c.hint && c.level !== "ok") lines.push(`        ${"".padEnd(9)} -> ${c.hint}`);
  }
  if (a.queue?.lanes.length) {
    lines.push("", "  lane consumer                     lag(pending)  in-flight  redelivered  waiting-pulls");
    for (const l of a.queue.lanes) lines.push(`  ${l.consumer.padEnd(34)}${String(l.pending).padStart(12)}${String(l.ackPending).padStart(11)}${String(l.redelivered).padStart(13)}${String(l.waitingPulls).padStart(15)}`);
  }
  return lines.join("\n");
}
