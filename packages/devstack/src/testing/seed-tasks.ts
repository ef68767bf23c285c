// Many task rows at once for the task explorer's test and bench (bench/explorer.ts): one
// INSERT ... SELECT over generate_series, a mix of states, clients, types, priorities and regions,
// params with sitekey and pageurl (a tenth erased, as retention leaves them; image tasks carry a
// body), pairs of rows sharing a created_at (so paging must break ties by id), and a ledger charge
// by solver `v1` or `v2` for each completed task.
import type postgres from "postgres";

export interface SeedOptions {
  rows: number;
  /** The newest row's created_at (ms); rows go back one `stepMs` per pair. */
  newest: number;
  stepMs: number;
}

export const SEED_REGIONS = ["fsn1", "hel1", "nbg1"] as const;
export const SEED_CLIENTS = 50;
export const SEED_SITEKEYS = 1000;
export const SEED_SITES = 500;

/** Inserts `rows` tasks (and the ledger charges of the completed ones); returns the time it took. */
export async function seedTasks(sql: postgres.Sql, o: SeedOptions): Promise<{ ms: number }> {
  const t0 = performance.now();
  await sql`
    insert into tasks (id, owner, idempotency_key, request_hash, region, type, priority, params, state, version,
                       attempts, created_at, updated_at, completed_at)
    select gen_random_uuid(), 'client-' || (i % ${SEED_CLIENTS}),
           case when i % 4 = 0 then 'idem-' || i end, 'h',
           (array['fsn1','hel1','nbg1'])[1 + i % 3],
           (array['recaptcha_v2','recaptcha_v3','turnstile','geetest','image'])[1 + (i / 3) % 5],
           (array['high','normal','normal','low'])[1 + (i / 7) % 4],
           case when i % 10 = 0 then '{}'::jsonb
                when (i / 3) % 5 = 4 then '{"body":"aW1hZ2U="}'::jsonb
                else jsonb_build_object('sitekey', 'sk-' || (i % ${SEED_SITEKEYS}),
                                        'pageurl', 'https://site' || (i % ${SEED_SITES}) || '.example.com/p/' || i) end,
           s.state, 3, 1, c.at, c.at,
           case when s.state in ('completed','failed','cancelled') then c.at + interval '10 seconds' end
    from generate_series(0, ${o.rows - 1}) as i,
         lateral (select to_timestamp(${o.newest / 1000}) - (i / 2) * ${o.stepMs} * interval '1 millisecond' as at) c,
         lateral (select case when i % 100 < 85 then 'completed' when i % 100 < 92 then 'failed'
                              when i % 100 < 95 then 'queued' when i % 100 < 97 then 'solving'
                              when i % 100 < 98 then 'retrying' else 'cancelled' end as state) s`;
  await sql`
    insert into ledger (task_id, kind, provider_task_id, owner, task_type, provider, region, solver_version,
                        amount_micros, price_source, created_at)
    select id, 'charge', 'p-' || id, owner, type, 'emulator/key_seed', region,
           case when get_byte(uuid_send(id), 0) % 2 = 0 then 'v1' else 'v2' end, 2990, 'estimate', completed_at
    from tasks where state = 'completed'`;
  await sql`analyze tasks`;
  await sql`analyze ledger`;
  return { ms: performance.now() - t0 };
}
