import postgres from "postgres";

/**
 * Flushes the run's Postgres cluster (`CHECKPOINT`) before a timed phase. The run shares one
 * cluster: without this, the dirty pages of the warm-up and of the side measured before (tens of
 * thousands of rows) are written out by a background checkpoint that may land in any side's timed
 * seconds, the ceiling's included. With it every side (ours, the fair peer, the ceiling, the
 * context baselines) starts its timed phase from a flushed cluster. Hygiene, not a cure for the
 * noise: ours' first end-to-end round after the ingest benchmark was the slow one in two runs
 * (862 and 906/s against 1,093-1,317/s), and with the checkpoint the next run's slow round was
 * another (1,017 then 858/s).
 */
export async function checkpoint(adminUrl: string): Promise<void> {
  const sql = postgres(adminUrl, { max: 1, onnotice: () => {} });
  try {
    await sql`checkpoint`;
  } finally {
    await sql.end({ timeout: 5 });
  }
}
