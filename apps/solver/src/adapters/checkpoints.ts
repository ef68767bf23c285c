import { groupCommit, isConnectionError } from "@pipeline/shared/db";
import type postgres from "postgres";

export interface CheckpointRequest {
  id: string;
  worker: string;
  providerId: string;
  keyRef: string;
}
export interface CheckpointResult {
  written: boolean;
  stillOwner: boolean;
  /**
   * Written on a row no worker holds (not `solving`, or no lease owner): a row that came back
   * from a snapshot without this worker's claim. Its next delivery claims it and polls at once.
   */
  unheld?: boolean;
}

/** What a checkpoint's returned row (undefined: not written) tells its worker. */
export function checkpointResult(
  worker: string,
  r: { lease_owner: string | null; state: string } | undefined,
): CheckpointResult {
  if (!r) return { written: false, stillOwner: false };
  const stillOwner = r.lease_owner === worker && r.state === "solving";
  return {
    written: true,
    stillOwner,
    ...(!stillOwner && (r.state !== "solving" || !r.lease_owner) ? { unheld: true } : {}),
  };
}

/**
 * Group commit for provider-id checkpoints: one UPDATE … FROM unnest(…) per batch. Under a burst
 * (hundreds of in.php answers together) the window between the provider's OK and the commit,
 * where a crash costs a second paid submission, stays about one statement long instead of
 * growing with the queue in front of a small pool. `(t.state || '')`: the row found by its
 * primary key, not through the state index (batched-writes.ts says why). No `updated_at`: every
 * column this writes is outside the table's indexes, so Postgres can update the row in place (a
 * HOT update, no index entries written); the claim just before set `updated_at`. Two statements
 * on the wire (the group-commit default is one): a provider id that arrives while one runs is
 * written by the next at once, not after it.
 */
export function createCheckpointWriter(sql: postgres.Sql, o: { maxBatch?: number; maxInFlight?: number } = {}) {
  const write = groupCommit<CheckpointRequest, CheckpointResult>(
    async (batch) => {
      const rows = await sql<{ id: string; lease_owner: string | null; state: string }[]>`
      update tasks t
      set provider_id = v.pid, provider_key_ref = v.kref, provider_submissions = t.provider_submissions + 1,
          submit_started_at = null, submit_owner = null
      from unnest(${batch.map((b) => b.id)}::uuid[], ${batch.map((b) => b.worker)}::text[], ${batch.map((b) => b.providerId)}::text[], ${batch.map((b) => b.keyRef)}::text[])
           as v(id, worker, pid, kref)
      -- The row has no provider id and is not final; the submit marker is this worker's, or
      -- nobody's: a row restored from a snapshot taken before the claim. The provider task exists
      -- and is paid for (forgetting it pays again), and no other worker is submitting (its marker
      -- would be there).
      where t.id = v.id and t.provider_id is null
        and (t.submit_owner = v.worker or (t.submit_owner is null and t.submit_started_at is null))
        and (t.state || '') in ('queued', 'solving', 'retrying')
      returning t.id, t.lease_owner, t.state`;
      const byId = new Map(rows.map((r) => [r.id, r]));
      return batch.map((b) => checkpointResult(b.worker, byId.get(b.id)));
    },
    { maxInFlight: 2, ...o, batchWide: isConnectionError, key: (r) => r.id },
  );
  return { write };
}
