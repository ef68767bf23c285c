/**
 * Group commit: calls made while a batch is being written gather and go as the next batch, one
 * statement (one commit, one WAL flush) for all of them. When it is quiet a call is written at
 * once (no linger, so no added latency); under load the batches grow by themselves. This is what
 * lifts a writer from ~2,500 single-row commits per second to tens of thousands of rows.
 *
 * `write` gets the batch and returns one result per request, in order.
 */
export interface GroupCommitOptions {
  /** Requests per statement (default 500). */
  maxBatch?: number;
  /** Statements on the wire at once (default 2): the next batch gathers while they run. */
  maxInFlight?: number;
  /**
   * When a batch of several fails, write each request alone, so one bad row fails only its own
   * caller. Give the predicate that says an error is about the batch as a whole (a lost
   * connection): those fail every caller at once, without the retries.
   */
  isolateFailures?: (err: unknown) => boolean;
}

export type GroupCommit<Req, Res> = (req: Req) => Promise<Res>;

export function groupCommit<Req, Res>(write: (batch: Req[]) => Promise<Res[]>, o: GroupCommitOptions = {}): GroupCommit<Req, Res> {
  const maxBatch = o.maxBatch ?? 500;
  const maxInFlight = o.maxInFlight ?? 2;
  type Waiter = { req: Req; resolve(r: Res): void; reject(e: unknown): void };
  let waiting: Waiter[] = [];
  let inFlight = 0;

  async function run(batch: Waiter[]): Promise<void> {
    let results: Res[];
    try {
      results = await write(batch.map((b) => b.req));
    } catch (err) {
      if (batch.length === 1 || !o.isolateFailures || o.isolateFailures(err)) {
        for (const b of batch) b.reject(err);
        return;
      }
      await Promise.all(batch.map((b) => run([b])));
      return;
    }
    if (results.length !== batch.length) {
      const err = new Error(`group commit: ${results.length} results for ${batch.length} requests`);
      for (const b of batch) b.reject(err);
      return;
    }
    for (let i = 0; i < batch.length; i++) batch[i]!.resolve(results[i]!);
  }

  function pump(): void {
    while (inFlight < maxInFlight && waiting.length > 0) {
      const batch = waiting.length <= maxBatch ? waiting : waiting.slice(0, maxBatch);
      waiting = waiting.length <= maxBatch ? [] : waiting.slice(maxBatch);
      inFlight++;
      run(batch).finally(() => {
        inFlight--;
        pump();
      });
    }
  }

  return (req) =>
    new Promise<Res>((resolve, reject) => {
      waiting.push({ req, resolve, reject });
      pump();
    });
}
