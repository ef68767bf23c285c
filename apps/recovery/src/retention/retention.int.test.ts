// Retention against real Postgres: rows of every age and state; only what the policy names goes,
// in batches, and the metrics count it.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createTestDatabase, type TestDatabase } from "@pipeline/devstack/testing";
import postgres from "postgres";
import { createRecoveryMetrics } from "../metrics/registry.ts";
import { runRetention } from "./retention.ts";

let tdb: TestDatabase;
let sql: postgres.Sql;
beforeAll(async () => {
  tdb = await createTestDatabase("retention");
  sql = postgres(tdb.url, { max: 2, onnotice: () => {} });
});
afterAll(async () => {
  await sql?.end({ timeout: 5 });
  await tdb?.drop();
});

const HOUR = 3600_000;
const DAY = 24 * HOUR;
const params = { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com/login", body: "aW1hZ2U=" };

interface Row {
  state: string;
  /** When it finished (ms ago); null for an unfinished row. */
  finishedAgo: number | null;
  /** Token expiry relative to now (ms, negative = past); null = no expiry (image). */
  expiresIn?: number | null;
  token?: boolean;
  callback?: boolean;
  type?: string;
  region?: string;
  delivery?: "pending" | "delivered" | "failed";
}

async function insert(name: string, r: Row): Promise<string> {
  const id = crypto.randomUUID();
  const now = Date.now();
  const finished = r.finishedAgo === null ? null : new Date(now - r.finishedAgo);
  const created = new Date(now - (r.finishedAgo ?? 40 * DAY) - 60_000);
  await sql`
    insert into tasks (id, owner, request_hash, region, type, priority, params, state, version, token, token_expires_at, callback_url, created_at, updated_at, completed_at)
    values (${id}, ${name}, 'h', ${r.region ?? "local"}, ${r.type ?? "turnstile"}, 'normal', ${JSON.stringify(params)}::text::jsonb, ${r.state}, 3,
            ${r.token ? `TOKEN-${name}` : null}, ${r.expiresIn === undefined || r.expiresIn === null ? null : new Date(now + r.expiresIn)},
            ${r.callback ? "https://hooks.example.com/cb?secret=1" : null}, ${created}, ${finished ?? created}, ${finished})`;
  if (r.delivery)
    await sql`insert into webhook_deliveries (delivery_id, task_id, state, status, owner, host) values (${`${id}:${r.state}:0`}, ${id}, ${r.state}, ${r.delivery}, ${name}, 'hooks.example.com')`;
  return id;
}

test("retention erases expired tokens after the grace, params and callback URLs after TASK_RETENTION_DAYS, rows after ROW_RETENTION_DAYS; nothing else; counted", async () => {
  const ids = {
    expiredPastGrace: await insert("expiredPastGrace", {
      state: "completed",
      finishedAgo: 3 * HOUR,
      token: true,
      expiresIn: -2 * HOUR,
      callback: true,
    }),
    expiredInGrace: await insert("expiredInGrace", {
      state: "completed",
      finishedAgo: HOUR,
      token: true,
      expiresIn: -30 * 60_000,
    }),
    valid: await insert("valid", {
      state: "completed",
      finishedAgo: 60_000,
      token: true,
      expiresIn: 60_000,
      callback: true,
      delivery: "pending",
    }),
    imageOld: await insert("imageOld", {
      state: "completed",
      finishedAgo: 8 * DAY,
      token: true,
      expiresIn: null,
      type: "image",
    }),
    imageYoung: await insert("imageYoung", {
      state: "completed",
      finishedAgo: 6 * DAY,
      token: true,
      expiresIn: null,
      type: "image",
    }),
    failedOld: await insert("failedOld", { state: "failed", finishedAgo: 8 * DAY, callback: true, delivery: "failed" }),
    replicaOld: await insert("replicaOld", {
      state: "cancelled",
      finishedAgo: 8 * DAY,
      callback: true,
      region: "other",
    }),
    pendingOld: await insert("pendingOld", {
      state: "completed",
      finishedAgo: 8 * DAY,
      token: true,
      expiresIn: -8 * DAY,
      callback: true,
      delivery: "pending",
    }),
    cancelledAncient: await insert("cancelledAncient", {
      state: "cancelled",
      finishedAgo: 31 * DAY,
      callback: true,
      delivery: "delivered",
    }),
    failedAncient: await insert("failedAncient", { state: "failed", finishedAgo: 40 * DAY }),
    completedAncient: await insert("completedAncient", {
      state: "completed",
      finishedAgo: 35 * DAY,
      token: true,
      expiresIn: -35 * DAY,
      delivery: "delivered",
    }),
    pendingAncient: await insert("pendingAncient", { state: "completed", finishedAgo: 31 * DAY, delivery: "pending" }),
    young29: await insert("young29", { state: "failed", finishedAgo: 29 * DAY }),
    unfinishedAncient: await insert("unfinishedAncient", { state: "queued", finishedAgo: null, callback: true }),
    solvingAncient: await insert("solvingAncient", { state: "solving", finishedAgo: null }),
  };
  // Four more ancient rows, so the deletes take several batches of 2.
  for (let i = 0; i < 4; i++)
    await insert(`bulk${i}`, { state: "completed", finishedAgo: 50 * DAY, delivery: "delivered" });
  const m = createRecoveryMetrics();
  const r = await runRetention(
    sql,
    { tokenGraceMs: HOUR, taskRetentionDays: 7, rowRetentionDays: 30, batch: 2 },
    m.retention,
  );

  const rows = new Map(
    (
      await sql<
        {
          id: string;
          token: string | null;
          params: Record<string, unknown>;
          callback_url: string | null;
          state: string;
          version: number;
        }[]
      >`select id, token, params, callback_url, state, version from tasks`
    ).map((x) => [x.id, x]),
  );
  const get = (k: keyof typeof ids) => rows.get(ids[k]);
  const kept = (k: keyof typeof ids) => Object.keys(get(k)!.params).length > 0;
  // Tokens
  expect(get("expiredPastGrace")!.token).toBeNull();
  expect(get("expiredInGrace")!.token).toBe("TOKEN-expiredInGrace");
  expect(get("valid")!.token).toBe("TOKEN-valid");
  expect(get("imageOld")!.token).toBeNull();
  expect(get("imageYoung")!.token).toBe("TOKEN-imageYoung");
  expect(get("pendingOld")!.token).toBeNull(); // a pending callback keeps params, not an expired token
  // Params and callback URLs
  expect(kept("expiredPastGrace") && get("expiredPastGrace")!.callback_url !== null).toBe(true);
  expect(kept("valid")).toBe(true);
  expect(kept("imageYoung")).toBe(true);
  for (const k of ["imageOld", "failedOld", "replicaOld", "young29"] as const) {
    expect(get(k)!.params).toEqual({});
    expect(get(k)!.callback_url).toBeNull();
  }
  expect(kept("pendingOld") && get("pendingOld")!.callback_url !== null).toBe(true);
  expect(kept("unfinishedAncient") && get("unfinishedAncient")!.callback_url !== null).toBe(true);
  expect(kept("solvingAncient")).toBe(true);
  // Rows
  for (const k of ["cancelledAncient", "failedAncient", "completedAncient"] as const) expect(get(k)).toBeUndefined();
  for (const k of ["pendingAncient", "young29", "unfinishedAncient", "solvingAncient"] as const)
    expect(get(k)).toBeDefined();
  expect(rows.size).toBe(Object.keys(ids).length - 3);
  // No state or version moved.
  expect(get("failedOld")!.state).toBe("failed");
  expect(get("failedOld")!.version).toBe(3);
  // The deleted tasks' callback records went with them; the others stayed.
  const deliveries = await sql<{ task_id: string; status: string }[]>`select task_id, status from webhook_deliveries`;
  expect(deliveries.some((d) => d.task_id === ids.cancelledAncient || d.task_id === ids.completedAncient)).toBe(false);
  expect(
    deliveries.filter((d) => d.task_id === ids.pendingAncient || d.task_id === ids.failedOld || d.task_id === ids.valid)
      .length,
  ).toBe(3);

  expect(r).toMatchObject({ tokensErased: 3, paramsPurged: 4, rowsDeleted: 7, deliveriesDeleted: 6 });
  expect(r.batches).toBeGreaterThan(6); // 7 rows in batches of 2: 4 delete batches alone
  const text = await m.registry.metrics();
  expect(text).toContain('recovery_retention_rows_total{action="token_erased",app="recovery"} 3');
  expect(text).toContain('recovery_retention_rows_total{action="params_purged",app="recovery"} 4');
  expect(text).toContain('recovery_retention_rows_total{action="row_deleted",app="recovery"} 7');
  expect(text).toContain('recovery_retention_rows_total{action="delivery_deleted",app="recovery"} 6');
  expect(text).toContain('recovery_retention_runs_total{result="ok",app="recovery"} 1');

  // A second run finds nothing left to do.
  const again = await runRetention(
    sql,
    { tokenGraceMs: HOUR, taskRetentionDays: 7, rowRetentionDays: 30, batch: 2 },
    m.retention,
  );
  expect(again).toMatchObject({ tokensErased: 0, paramsPurged: 0, rowsDeleted: 0, deliveriesDeleted: 0 });
  expect(await m.registry.metrics()).toContain('recovery_retention_runs_total{result="ok",app="recovery"} 2');
});

test("a batch waits for no locked row: a row a writer holds is skipped this run and taken by the next", async () => {
  const id = await insert("locked", { state: "failed", finishedAgo: 45 * DAY });
  const other = postgres(tdb.url, { max: 1, onnotice: () => {} });
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  try {
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const tx = other.begin(async (t) => {
      await t`select id from tasks where id = ${id} for update`;
      locked();
      await held;
    });
    // Not a fixed sleep: on a loaded machine the other connection's lock came after the run.
    tx.catch(() => {}); // awaited below; a failed assertion first must not leave it unhandled
    await isLocked;
    const started = Date.now();
    const r = await runRetention(sql, { tokenGraceMs: HOUR, taskRetentionDays: 7, rowRetentionDays: 30, batch: 10 });
    expect(Date.now() - started).toBeLessThan(5000);
    expect(r.rowsDeleted).toBe(0);
    release();
    await tx;
    expect(
      (await runRetention(sql, { tokenGraceMs: HOUR, taskRetentionDays: 7, rowRetentionDays: 30, batch: 10 }))
        .rowsDeleted,
    ).toBe(1);
  } finally {
    release();
    await other.end({ timeout: 5 });
  }
});

test("a deleted row's charge stays in the ledger (moved from the row to the ledger table), counted once", async () => {
  const id = await insert("charged", { state: "completed", finishedAgo: 40 * DAY, token: true });
  await sql`update tasks set charge_provider_task_id = 'p-1', charge_provider = 'h/key_a', charge_region = 'local',
    charge_solver_version = 'v1', charge_micros = 1450, charge_price_source = 'provider', charged_at = now() - interval '40 days'
    where id = ${id}`;
  const before =
    await sql`select task_id, kind, provider_task_id, owner, task_type, provider, region, solver_version, amount_micros, price_source, created_at
    from ledger_all where task_id = ${id}`;
  expect(before.length).toBe(1);
  const r = await runRetention(
    sql,
    { tokenGraceMs: HOUR, taskRetentionDays: 7, rowRetentionDays: 30, batch: 10 },
    createRecoveryMetrics().retention,
  );
  expect(r.rowsDeleted).toBe(1);
  const after =
    await sql`select task_id, kind, provider_task_id, owner, task_type, provider, region, solver_version, amount_micros, price_source, created_at
    from ledger_all where task_id = ${id}`;
  expect(after).toEqual(before);
  expect((await sql`select 1 from ledger where task_id = ${id}`).length).toBe(1);
});
