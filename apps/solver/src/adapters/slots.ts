import { sql } from "drizzle-orm";
import { groupCommit, isConnectionError, type Db } from "@pipeline/shared/db";

/** A slot as `acquire` took it. */
export interface TakenSlot {
  slot: number;
  /**
   * The task held this slot already (a redelivered or re-queued task: its provider task may be
   * running, started by a holder presumed dead). Until this delivery has claimed the task, the
   * slot is not this delivery's to free: `restore` gives it back as it was.
   */
  resumed: boolean;
  /** The slot's owner and lease before this acquire (what `restore` puts back). */
  previous: { owner: string | null; leaseUntil: string | null };
}

export interface ProviderSlots {
  /** Makes sure rows 0..threads-1 exist for the key (rows above are ignored, not deleted). */
  ensure(keyRef: string, threads: number): Promise<void>;
  /**
   * Takes a slot for the task: the one it already holds (a resumed task), else a free one. A
   * slot whose lease expired stays taken while its task still has a provider task in flight.
   * Returns the slot, or undefined when every slot is busy.
   */
  acquire(keyRef: string, threads: number, owner: string, taskId: string, leaseMs: number): Promise<TakenSlot | undefined>;
  release(keyRef: string, slot: number, taskId: string): Promise<void>;
  /**
   * Gives a resumed slot back as it was before `acquire` (owner and lease), for a delivery that
   * did not get the task (another worker's lease still runs, or it is final): the task keeps the
   * slot while its provider task may run, and a live holder keeps renewing it.
   */
  restore(keyRef: string, taken: TakenSlot, owner: string, taskId: string): Promise<void>;
  /** Leaves the slot to the task (its provider task is still in flight) but no longer to this worker. */
  park(keyRef: string, slot: number, taskId: string): Promise<void>;
  /** Extends the lease of the slots of the tasks this worker is handling right now. */
  renew(owner: string, taskIds: string[], leaseMs: number): Promise<void>;
  /** Slots held now, for metrics and tests. */
  held(keyRef: string): Promise<number>;
}

interface AcquireRequest {
  keyRef: string;
  threads: number;
  owner: string;
  taskId: string;
  leaseMs: number;
}

export function createProviderSlots(db: Db): ProviderSlots {
  // Releases are group-committed (one UPDATE … FROM unnest per batch): every finished task frees
  // its slot, so under load they are as many as the completions.
  const release = groupCommit(
    async (batch: Array<{ keyRef: string; slot: number; taskId: string }>) => {
      await db.$client`
        update provider_slots p set owner = null, task_id = null, lease_until = null
        from unnest(${batch.map((b) => b.keyRef)}::text[], ${batch.map((b) => String(b.slot))}::int[], ${batch.map((b) => b.taskId)}::uuid[])
             as v(key_ref, slot, task_id)
        where p.key_ref = v.key_ref and p.slot = v.slot and p.task_id = v.task_id`;
      return batch.map(() => undefined);
    },
    { batchWide: isConnectionError, key: (r) => `${r.keyRef}\u0000${r.slot}` },
  );
  // Acquisitions gathered while one batch runs go in one transaction, pipelined (one socket
  // write, one commit): each is still its own statement, run in order, so a later one sees the
  // slot an earlier one took and never takes it again. The row locks live until that commit, a
  // few milliseconds; another solver skips them (SKIP LOCKED) as it skips any taken slot.
  const acquire = groupCommit(
    async (batch: AcquireRequest[]) =>
      db.$client.begin((tx) => batch.map((r) => tx<{ slot: number; resumed: boolean; prev_owner: string | null; prev_lease: string | null }[]>`
        with mine as (
          select key_ref, slot, true as resumed, owner as prev_owner, lease_until as prev_lease from provider_slots
          where key_ref = ${r.keyRef} and task_id = ${r.taskId} and slot < ${r.threads}
          limit 1 for update skip locked
        ), free as (
          select key_ref, slot, false as resumed, owner as prev_owner, lease_until as prev_lease from provider_slots
          where key_ref = ${r.keyRef} and slot < ${r.threads} and task_id is null
          order by slot
          limit 1 for update skip locked
        ), reclaimable as (
          -- Only read when no slot is free (the append below stops at its first row): slots
          -- whose holder's lease ran out and whose task no longer has a provider task running.
          select s.key_ref, s.slot, false as resumed, s.owner as prev_owner, s.lease_until as prev_lease from provider_slots s
          left join tasks t on t.id = s.task_id
          where s.key_ref = ${r.keyRef} and s.slot < ${r.threads} and s.task_id is not null
            and s.lease_until < now()
            and (t.id is null or t.provider_id is null or t.state not in ('solving', 'retrying'))
          order by s.slot
          limit 1 for update of s skip locked
        ), pick as (
          select * from mine union all select * from free union all select * from reclaimable limit 1
        )
        update provider_slots p
        set owner = ${r.owner}, task_id = ${r.taskId}, lease_until = now() + ${`${r.leaseMs} milliseconds`}::interval
        from pick
        where p.key_ref = pick.key_ref and p.slot = pick.slot
        returning p.slot, pick.resumed, pick.prev_owner, pick.prev_lease::text as prev_lease`.then((rows): TakenSlot | undefined => {
        const row = rows[0];
        return row ? { slot: row.slot, resumed: row.resumed, previous: { owner: row.prev_owner, leaseUntil: row.prev_lease } } : undefined;
      }))),
    { batchWide: isConnectionError, key: (r) => r.taskId, maxBatch: 100 },
  );
  return {
    async ensure(keyRef, threads) {
      await db.execute(sql`
        insert into provider_slots (key_ref, slot)
        select ${keyRef}, g from generate_series(0, ${threads - 1}) g
        on conflict do nothing`);
    },
    acquire: (keyRef, threads, owner, taskId, leaseMs) => acquire({ keyRef, threads, owner, taskId, leaseMs }),
    release: (keyRef, slot, taskId) => release({ keyRef, slot, taskId }),
    async restore(keyRef, taken, owner, taskId) {
      await db.$client`
        update provider_slots set owner = ${taken.previous.owner}, lease_until = ${taken.previous.leaseUntil}::timestamptz
        where key_ref = ${keyRef} and slot = ${taken.slot} and task_id = ${taskId} and owner = ${owner}`;
    },
    async park(keyRef, slot, taskId) {
      await db.execute(sql`update provider_slots set owner = null, lease_until = now() where key_ref = ${keyRef} and slot = ${slot} and task_id = ${taskId}`);
    },
    async renew(owner, taskIds, leaseMs) {
      if (taskIds.length === 0) return;
      await db.$client`
        update provider_slots set lease_until = now() + ${`${leaseMs} milliseconds`}::interval
        where owner = ${owner} and task_id = any(${taskIds}::uuid[])`;
    },
    async held(keyRef) {
      const rows = await db.execute<{ n: number }>(sql`select count(*)::int as n from provider_slots where key_ref = ${keyRef} and task_id is not null`);
      return rows[0]?.n ?? 0;
    },
  };
}
