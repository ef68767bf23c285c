import { progressBar } from "@pipeline/shared/progress";
import type postgres from "postgres";

/** Rows of `tasks` per state. */
export async function stateCounts(sql: postgres.Sql): Promise<Record<string, number>> {
  const rows = await sql<{ state: string; n: number }[]>`select state, count(*)::int as n from tasks group by state`;
  return Object.fromEntries(rows.map((r) => [r.state, r.n]));
}

/**
 * Polls `tasks` until `count` rows are `completed`; resolves with performance.now() of the poll
 * that saw it. Every system measured is timed this way: our pipeline and the baselines write the
 * same table. The count is a scan, so it polls every 250 ms while the end is far and every 10 ms
 * when it is near (a quarter of the time the current rate needs for what is left): it overstates
 * the end by about 10 ms plus one query, and costs Postgres little.
 */
export async function waitForCompleted(sql: postgres.Sql, count: number, timeoutMs: number): Promise<number> {
  const until = performance.now() + timeoutMs;
  let last: { n: number; at: number } | undefined;
  // On a terminal: completed of `count`, with an estimate (quiet when piped; the bar costs no query).
  const bar = progressBar("bench: completed", count, { unit: "tasks" });
  try {
    for (;;) {
      const [row] = await sql<{ n: number }[]>`select count(*)::int as n from tasks where state = 'completed'`;
      const n = row?.n ?? 0;
      const now = performance.now();
      bar.update(Math.min(n, count));
      if (n >= count) return now;
      if (now > until)
        throw new Error(
          `only ${n} of ${count} tasks completed after ${Math.round(timeoutMs / 1000)} s: ${JSON.stringify(await stateCounts(sql))}`,
        );
      const perMs = last && n > last.n ? (n - last.n) / (now - last.at) : 0;
      last = { n, at: now };
      const wait = perMs > 0 ? Math.min(250, Math.max(10, (count - n) / perMs / 4)) : 250;
      await Bun.sleep(wait);
    }
  } finally {
    bar.done();
  }
}
