/**
 * Group commit: calls made while a batch is being written gather and go as the next batch, one
 * statement (one commit, one WAL flush) for all of them. When it is quiet a call is written at
 * once (no linger, so no added latency), or with `turn` at the end of its event-loop turn; under
 * load the batches grow by themselves. This is what lifts a writer from ~2,500 single-row commits
 * per second to tens of thousands of rows.
 *
 * `write` gets the batch and returns one result per request, in order.
 */
export interface GroupCommitOptions<Req = never> {
  /** Requests per statement (default 500). */
  maxBatch?: number;
  /**
   * Statements on the wire at once (default 1): the next batch gathers while it runs. 1, not 2
   * (issue 13, bench/profile.ts): with 2, each batch was half the size and Postgres spent ~20% more
   * CPU per task (0.25 -> 0.20 ms), the apps ~8% more, for no throughput; a call waits at most
   * for the one statement ahead of it.
   */
  maxInFlight?: number;
  /**
   * When a batch of several fails, each request is written again alone, so one bad row fails
   * only its own caller. This predicate names the errors that are about the batch as a whole (a
   * lost connection: `isConnectionError`): those fail every caller at once, without the retries.
   */
  batchWide?: (err: unknown) => boolean;
  /**
   * The row a request writes: two requests for the same row never share a statement (an
   * UPDATE … FROM unnest would apply only one of them yet report both); the later one waits for
   * the next batch, so they apply in call order.
   */
  key?: (req: Req) => string;
  /**
   * A call that finds a statement slot free starts it at the end of the current event-loop turn
   * (`setImmediate`) instead of at once, so the calls made in the same turn share it. For callers
   * whose calls come in bursts (the gateway: clients answered together send again together).
   * Started at once, the first of a burst went alone and the rest waited a whole statement for the
   * next: issue 13 measured half the gateway's inserts at one row, and with `turn` 10% more
   * submissions per second at 20% less Postgres CPU per submission.
   */
  turn?: boolean;
}

export type GroupCommit<Req, Res> = (req: Req) => Promise<Res>;

export function groupCommit<Req, Res>(
  write: (batch: Req[]) => Promise<Res[]>,
  o: GroupCommitOptions<Req> = {},
): GroupCommit<Req, Res> {
  const maxBatch = o.maxBatch ?? 500;
  const maxInFlight = o.maxInFlight ?? 1;
  type Waiter = { req: Req; resolve(r: Res): void; reject(e: unknown): void };
  let waiting: Waiter[] = [];
  let inFlight = 0;

  async function run(batch: Waiter[]): Promise<void> {
    let results: Res[];
    try {
      results = await write(batch.map((b) => b.req));
    } catch (err) {
      if (batch.length === 1 || o.batchWide?.(err)) {
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

  /** The next batch off the front of the queue: up to maxBatch, one request per key. */
  function take(): Waiter[] {
    if (!o.key) {
      const batch = waiting.length <= maxBatch ? waiting : waiting.slice(0, maxBatch);
      waiting = waiting.length <= maxBatch ? [] : waiting.slice(maxBatch);
      return batch;
    }
    const batch: Waiter[] = [];
    const later: Waiter[] = [];
    const keys = new Set<string>();
    let i = 0;
    for (; i < waiting.length && batch.length < maxBatch; i++) {
      const w = waiting[i]!;
      const k = o.key(w.req);
      if (keys.has(k)) later.push(w);
      else keys.add(k), batch.push(w);
    }
    waiting = later.concat(waiting.slice(i));
    return batch;
  }

  function pump(): void {
    while (inFlight < maxInFlight && waiting.length > 0) {
      const batch = take();
      inFlight++;
      run(batch).finally(() => {
        inFlight--;
        pump();
      });
    }
  }

  let scheduled = false;
  const endOfTurn = () => {
    scheduled = false;
    pump();
  };
  return (req) =>
    new Promise<Res>((resolve, reject) => {
      waiting.push({ req, resolve, reject });
      if (!o.turn) pump();
      else if (inFlight < maxInFlight && !scheduled) {
        scheduled = true;
        setImmediate(endOfTurn);
      }
    });
}
