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
}

/**
 * Group commit for provider-id checkpoints: while one batch is being written, the next ones
 * gather, and go in one UPDATE … FROM unnest(…) statement. When it is quiet a checkpoint is
 * written at once (no linger); under a burst (hundreds of in.php answers together) the window
 * between the provider's OK and the commit, where a crash costs a second paid submission, stays
 * about one statement long instead of growing with the queue in front of a small pool.
 */
export function createCheckpointWriter(sql: postgres.Sql, o: { maxBatch?: number; maxInFlight?: number } = {}) {
  const maxBatch = o.maxBatch ?? 500;
  const maxInFlight = o.maxInFlight ?? 2;
  let waiting: Array<{ req: CheckpointRequest; resolve(r: CheckpointResult): void; reject(e: unknown): void }> = [];
  let inFlight = 0;

  async function write(batch: typeof waiting): Promise<void> {
    const ids = batch.map((b) => b.req.id);
    const rows = await sql<{ id: string; worker: string; lease_owner: string | null; state: string }[]>`
      update tasks t
      set provider_id = v.pid, provider_key_ref = v.kref, provider_submissions = t.provider_submissions + 1,
          submit_started_at = null, submit_owner = null, updated_at = now()
      from unnest(${ids}::uuid[], ${batch.map((b) => b.req.worker)}::text[], ${batch.map((b) => b.req.providerId)}::text[], ${batch.map((b) => b.req.keyRef)}::text[])
           as v(id, worker, pid, kref)
      where t.id = v.id and t.provider_id is null and t.submit_owner = v.worker and t.state in ('solving', 'retrying')
      returning t.id, v.worker, t.lease_owner, t.state`;
    const byId = new Map(rows.map((r) => [r.id, r]));
    for (const b of batch) {
      const r = byId.get(b.req.id);
      b.resolve({ written: r !== undefined, stillOwner: r !== undefined && r.lease_owner === b.req.worker && r.state === "solving" });
    }
  }

  function pump(): void {
    while (inFlight < maxInFlight && waiting.length > 0) {
      const batch = waiting.slice(0, maxBatch);
      waiting = waiting.slice(batch.length);
      inFlight++;
      write(batch)
        .catch((err) => {
          for (const b of batch) b.reject(err);
        })
        .finally(() => {
          inFlight--;
          pump();
        });
    }
  }

  return {
    write(req: CheckpointRequest): Promise<CheckpointResult> {
      return new Promise((resolve, reject) => {
        waiting.push({ req, resolve, reject });
        pump();
      });
    },
  };
}
