// The region's fair-share groups (docs/fair-share.md): shown with each group's queued tasks, and
// set (validated, a group with queued tasks never dropped, written to the region bucket, audited).
// The gateways and solvers read the record every 5 s (@pipeline/shared/fair-share).
import type { JetStreamManager } from "@nats-io/jetstream";
import type { KV } from "@nats-io/kv";
import type { Db } from "@pipeline/shared/db";
import { FAIR_SHARE_KEY, FairShare, type FairShareRead, readFairShare } from "@pipeline/shared/fair-share";
import { isNotFound } from "@pipeline/shared/nats";
import { LANES, laneConsumer, streams, versionOfConsumer } from "@pipeline/shared/subjects";
import { z } from "zod";
import { recordAudit } from "../fleet/audit.ts";

/** What an operator writes: the record without `by` and `at` (the command fills them in). */
export const FairShareInput = z
  .object({
    groups: z.record(z.string(), z.unknown()),
    defaultWeight: z.unknown().optional(),
  })
  .strict();

export interface FairShareStatus {
  region: string;
  read: FairShareRead;
  /** Tasks waiting in each group's lane consumers (`default`: the lanes' own), summed over versions. */
  pending: Record<string, number>;
}

/** Queued messages per group (its consumers' num_pending over every lane and version). */
export async function pendingByGroup(jsm: JetStreamManager, region: string): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  const prefixes = LANES.map((lane) => laneConsumer(region, lane, ""));
  try {
    for await (const c of jsm.consumers.list(streams.tasks(region))) {
      const p = prefixes.find((x) => c.name.startsWith(x));
      if (!p) continue;
      const g = versionOfConsumer(c.name.slice(p.length)).group ?? "default";
      out[g] = (out[g] ?? 0) + c.num_pending + c.num_ack_pending;
    }
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  return out;
}

export async function fairShareStatus(jsm: JetStreamManager, region: string): Promise<FairShareStatus> {
  const [read, pending] = await Promise.all([readFairShare(jsm, region), pendingByGroup(jsm, region)]);
  return { region, read, pending };
}

/** The status for people: one line per group. */
export function describeFairShare(s: FairShareStatus): string {
  if ("error" in s.read) return `fair share of region ${s.region}: the stored record is refused: ${s.read.error}`;
  const r = s.read.record;
  if (!r || Object.keys(r.groups).length === 0)
    return `fair share of region ${s.region}: no groups (first come, first served within each lane)`;
  const lines = [`fair share of region ${s.region} (set by ${r.by} at ${r.at}):`];
  lines.push(`  default  weight ${r.defaultWeight}  queued ${s.pending.default ?? 0}  (clients in no group)`);
  for (const [name, g] of Object.entries(r.groups).sort(([a], [b]) => a.localeCompare(b)))
    lines.push(`  ${name}  weight ${g.weight}  queued ${s.pending[name] ?? 0}  clients ${g.clients.length}`);
  return lines.join("\n");
}

/** Why `next` may not replace the record: a group dropped while tasks wait on its subjects. */
export function refusalOf(next: FairShare, pending: Record<string, number>): string | undefined {
  const dropped = Object.entries(pending).filter(([g, n]) => g !== "default" && n > 0 && !(g in next.groups));
  if (dropped.length === 0) return undefined;
  return `groups: ${dropped.map(([g, n]) => `${g} (${n} queued)`).join(", ")} still have queued tasks; keep them until their queues are empty`;
}

/** Validates, checks no group with queued tasks is dropped, writes the record, audits `fair_share.set`. */
export async function setFairShare(
  d: { jsm: JetStreamManager; kv: KV; db: Db; region: string },
  input: unknown,
  actor: string,
  now = new Date(),
): Promise<{ ok: true; record: FairShare } | { ok: false; error: string }> {
  const shaped = FairShareInput.safeParse(input);
  if (!shaped.success)
    return {
      ok: false,
      error: shaped.error.issues.map((i) => `${i.path.join(".") || "record"}: ${i.message}`).join("; "),
    };
  const parsed = FairShare.safeParse({ ...shaped.data, by: actor.slice(0, 128), at: now.toISOString() });
  if (!parsed.success)
    return {
      ok: false,
      error: parsed.error.issues.map((i) => `${i.path.join(".") || "record"}: ${i.message}`).join("; "),
    };
  const refused = refusalOf(parsed.data, await pendingByGroup(d.jsm, d.region));
  if (refused) return { ok: false, error: refused };
  await d.kv.put(FAIR_SHARE_KEY, JSON.stringify(parsed.data));
  await recordAudit(d.db, {
    actor,
    action: "fair_share.set",
    detail: {
      region: d.region,
      groups: Object.fromEntries(
        Object.entries(parsed.data.groups).map(([n, g]) => [n, { weight: g.weight, clients: g.clients.length }]),
      ),
      defaultWeight: parsed.data.defaultWeight,
    },
  });
  return { ok: true, record: parsed.data };
}
