// The region's share of each provider account's thread plan (decisions: @pipeline/shared/regions
// plan.ts). Run by the lease keeper after each round in which this region holds its lease: per
// account, it reads the plan record at the witness and what the region holds and asks (its own
// Postgres), lowers the solvers' cap (provider_plan_shares) before it shows a smaller share, and
// raises it only after the record took the larger one. The cap is valid until the region lease's
// own end: a keeper that stops writing (cut off, stopped) leaves its solvers no threads at all.
import type { KV } from "@nats-io/kv";
import type { Logger } from "@pipeline/shared/log";
import {
  entryChanged,
  type PlanDecision,
  type PlanEntry,
  PlanRecord,
  planKey,
  planShare,
  type RegionUse,
  withEntry,
} from "@pipeline/shared/regions";
import type postgres from "postgres";

export interface PlanKeeperDeps {
  /** This region's Postgres (owner role: it writes provider_plan_shares). */
  sql: postgres.Sql;
  /** The witness's `leases` bucket. */
  witness: KV;
  region: string;
  /** A submit marker this recent counts as a provider task (at least the solvers' PROVIDER_TIMEOUT_MS + 5 s). */
  markerMs: number;
  log: Logger;
  wall?: () => number;
}

/** One account's outcome of a round, for assess, the console and the metrics. */
export interface PlanShareView extends PlanDecision {
  keyRef: string;
  used: number;
  want: number;
  /** The cap the solvers lease against now. */
  cap: number;
  /** The record was written this round (false: unchanged, or another region wrote first: next round). */
  written: boolean;
}

export interface PlanKeeper {
  /** One round for every account this region has leased blocks of or holds a share in. */
  round(validUntil: number, isReleased: (remote: string) => boolean): Promise<PlanShareView[]>;
  /** The last round's views. */
  shares(): PlanShareView[];
}

interface Read {
  record: PlanRecord;
  /** 0: no record yet (create). */
  revision: number;
}

async function readRecord(witness: KV, keyRef: string): Promise<Read> {
  const e = await witness.get(planKey(keyRef));
  if (!e || e.operation !== "PUT") return { record: { regions: {} }, revision: 0 };
  let raw: unknown;
  try {
    raw = e.json();
  } catch {
    raw = undefined;
  }
  const parsed = PlanRecord.safeParse(raw);
  // Unreadable: nothing is grown on it; the cap lapses with the lease until someone repairs it.
  if (!parsed.success)
    throw new Error(
      `plan record ${planKey(keyRef)} unreadable: ${parsed.error.issues[0]?.path.join(".") || "not JSON"}`,
    );
  return { record: parsed.data, revision: e.revision };
}

const lock = (tx: postgres.TransactionSql, keyRef: string) =>
  tx`select pg_advisory_xact_lock(hashtextextended(${`provider_slot_blocks:${keyRef}`}, 0))`;

/** What the region holds and asks of one account, read under the key's lock (the solvers' leases take it too). */
async function regionUse(tx: postgres.TransactionSql, d: PlanKeeperDeps, keyRef: string): Promise<RegionUse> {
  const [u] = await tx<{ in_flight: number; reserved: number; wanted: number; plan: number }[]>`
    select
      (select count(*)::int from tasks t
        where t.region = ${d.region} and t.state in ('solving', 'retrying')
          and ((t.provider_id is not null and t.provider_key_ref = ${keyRef})
               or (t.provider_id is null and t.submit_started_at > now() - ${`${d.markerMs} milliseconds`}::interval))) as in_flight,
      (select coalesce(sum(size), 0)::int from provider_slot_blocks where key_ref = ${keyRef} and lease_until > now()) as reserved,
      (select coalesce(sum(wanted), 0)::int from provider_slot_blocks where key_ref = ${keyRef} and lease_until > now()) as wanted,
      (select coalesce(max(threads), 0)::int from provider_slot_blocks where key_ref = ${keyRef}) as plan`;
  return { plan: u!.plan, used: u!.in_flight + u!.reserved, want: Math.min(u!.plan, u!.in_flight + u!.wanted) };
}

const writeCap = (tx: postgres.TransactionSql, keyRef: string, threads: number, validUntil: number) => tx`
  insert into provider_plan_shares (key_ref, threads, valid_until, updated_at)
  values (${keyRef}, ${threads}, to_timestamp(${validUntil / 1000}), now())
  on conflict (key_ref) do update set threads = excluded.threads, valid_until = excluded.valid_until, updated_at = now()`;

/** One account: lower the cap (now), show the share (compare-and-set), raise the cap (after). */
async function keyRound(
  d: PlanKeeperDeps,
  keyRef: string,
  validUntil: number,
  isReleased: (remote: string) => boolean,
): Promise<PlanShareView> {
  const { record, revision } = await readRecord(d.witness, keyRef);
  const first = await d.sql.begin(async (tx) => {
    await lock(tx, keyRef);
    const use = await regionUse(tx, d, keyRef);
    const [row] = await tx<{ threads: number; valid: boolean }[]>`
      select threads, valid_until > now() as valid from provider_plan_shares where key_ref = ${keyRef}`;
    const decision = planShare(d.region, record, use, isReleased);
    // Never above what the record already gives this region: a larger cap waits for the write.
    const shown = record.regions[d.region];
    const cap = Math.min(row?.valid ? row.threads : 0, shown?.share ?? 0, decision.target);
    await writeCap(tx, keyRef, cap, validUntil);
    return { use, decision, cap };
  });
  const { use, decision } = first;
  const entry: PlanEntry = {
    plan: use.plan,
    share: decision.share,
    want: use.want,
    used: use.used,
    at: (d.wall ?? Date.now)(),
  };
  let written = false;
  if (entryChanged(record.regions[d.region], entry) || decision.drop.length > 0) {
    const value = JSON.stringify(withEntry(record, d.region, entry, decision.drop));
    try {
      if (revision === 0) await d.witness.create(planKey(keyRef), value);
      else await d.witness.update(planKey(keyRef), value, revision);
      written = true;
      if (decision.drop.length > 0)
        d.log.warn(
          { keyRef, released: decision.drop, share: decision.share },
          "a lost region's share of the plan released",
        );
    } catch (err) {
      // Another region wrote first: the next round reads its write and decides again.
      d.log.debug({ keyRef, err: (err as Error).message }, "plan record changed meanwhile");
    }
  }
  let cap = first.cap;
  const granted = written ? entry.share : (record.regions[d.region]?.share ?? 0);
  const raised = Math.min(decision.target, granted);
  if (raised > cap) {
    await d.sql.begin(async (tx) => {
      await lock(tx, keyRef);
      await writeCap(tx, keyRef, raised, validUntil);
    });
    cap = raised;
  }
  return { keyRef, ...decision, used: use.used, want: use.want, cap, written };
}

export function createPlanKeeper(d: PlanKeeperDeps): PlanKeeper {
  let last: PlanShareView[] = [];
  const failing = new Map<string, string>();
  return {
    shares: () => last,
    async round(validUntil, isReleased) {
      const keys = await d.sql<{ key_ref: string }[]>`
        select key_ref from provider_slot_blocks union select key_ref from provider_plan_shares`;
      const views: PlanShareView[] = [];
      for (const { key_ref: keyRef } of keys) {
        try {
          views.push(await keyRound(d, keyRef, validUntil, isReleased));
          if (failing.delete(keyRef)) d.log.info({ keyRef }, "plan share round works again");
        } catch (err) {
          const msg = (err as Error).message;
          if (failing.get(keyRef) !== msg)
            d.log.error(
              { keyRef, err: msg },
              "plan share round failed: this region's cap lapses with its lease unless a later round works",
            );
          failing.set(keyRef, msg);
        }
      }
      last = views;
      return views;
    },
  };
}
