// The app roles against a real Postgres (issue 34): each app's login may run its own statements and
// is refused everything else; an owner that is no superuser migrates and grants (production's
// path); role creation is safe from many databases of one cluster at once.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { randomUUID } from "node:crypto";
import { createTestDatabase, type TestDatabase } from "@pipeline/devstack/testing";
import postgres from "postgres";
import { migrateDatabase } from "./migrations.ts";
import { APP_GRANTS, DB_ROLES, ensureGroupRole, SCHEMA_TABLES, urlWithLogin } from "./roles.ts";

let tdb: TestDatabase;
let admin: postgres.Sql;
const pools: postgres.Sql[] = [];
const cleanups: Array<() => Promise<unknown>> = [];
const open = (url: string) => {
  const p = postgres(url, { max: 1, onnotice: () => {} });
  pools.push(p);
  return p;
};

beforeAll(async () => {
  tdb = await createTestDatabase("roles");
  admin = open(tdb.url);
});
afterAll(async () => {
  for (const p of pools) await p.end({ timeout: 5 }).catch(() => {});
  for (const c of cleanups.reverse()) await c().catch(() => {});
  await tdb.drop();
});

/** SQLSTATE of a refused statement (42501 insufficient_privilege), or "ok". */
async function outcome(
  sql: postgres.Sql,
  statement: string,
  ...params: postgres.ParameterOrJSON<never>[]
): Promise<string> {
  try {
    await sql.unsafe(statement, params as never[]);
    return "ok";
  } catch (err) {
    return String((err as { code?: string }).code ?? (err as Error).message);
  }
}

async function seedTask(state = "queued", version = 0): Promise<string> {
  const id = randomUUID();
  await admin`insert into tasks (id, owner, request_hash, region, type, priority, params, state, version, callback_url)
              values (${id}, 'client-a', 'h', 'local', 'turnstile', 'normal', '{"sitekey":"x"}'::jsonb, ${state}, ${version}, 'https://example.com/hook')`;
  return id;
}

describe("pipeline_gateway", () => {
  test("runs the gateway's statements: insert a queued row, read, cancel, redrive, counts, delete its unpublished row", async () => {
    const gw = open(tdb.appUrls.gateway);
    const id = randomUUID();
    expect(
      await outcome(
        gw,
        `insert into tasks (id, owner, idempotency_key, request_hash, region, type, priority, params, callback_url, deadline_at, state)
         select v.id, v.owner, v.idem, v.hash, v.region, v.type, v.priority, v.params, v.cb, v.deadline, 'queued'
         from jsonb_to_recordset($1::text::jsonb) as v(id uuid, owner text, idem text, hash text, region text, type text, priority text, params jsonb, cb text, deadline timestamptz)
         on conflict (id) do nothing returning id, created_at`,
        JSON.stringify([
          {
            id,
            owner: "client-a",
            idem: "k1",
            hash: "h",
            region: "local",
            type: "turnstile",
            priority: "normal",
            params: { sitekey: "x" },
            cb: null,
            deadline: null,
          },
        ]) as never,
      ),
    ).toBe("ok");
    expect(await outcome(gw, "select * from tasks where id = $1", id as never)).toBe("ok");
    expect(await outcome(gw, "select state, type, count(*)::int from tasks group by state, type")).toBe("ok");
    expect(
      await outcome(
        gw,
        "select owner, count(*)::int from tasks where state in ('queued','solving','retrying') group by owner",
      ),
    ).toBe("ok");
    expect(
      await outcome(
        gw,
        "update tasks set state = 'cancelled', version = version + 1, lease_owner = null, lease_until = null, completed_at = now(), updated_at = now() where id = $1 returning *",
        id as never,
      ),
    ).toBe("ok");
    const failed = await seedTask("failed", 3);
    expect(
      await outcome(
        gw,
        "update tasks set state = 'queued', version = version + 1, attempts = 0, redrives = redrives + 1, provider_id = null, deadline_at = now() + interval '1 minute', completed_at = null, updated_at = now() where id = $1 and state = 'failed' returning *",
        failed as never,
      ),
    ).toBe("ok");
    // Its one DELETE, through the owner's function: only a queued row nobody touched.
    const fresh = await seedTask("queued", 0);
    const touched = await seedTask("queued", 1);
    await gw`select public.delete_unpublished_task(${fresh}::uuid)`;
    await gw`select public.delete_unpublished_task(${touched}::uuid)`;
    const left = await admin<{ id: string }[]>`select id from tasks where id in (${fresh}, ${touched})`;
    expect(left.map((r) => r.id)).toEqual([touched]);
  });

  test("is refused DROP, DELETE, TRUNCATE, the solver's columns, and every other table", async () => {
    const gw = open(tdb.appUrls.gateway);
    const id = await seedTask();
    expect(await outcome(gw, "drop table tasks")).toBe("42501");
    expect(await outcome(gw, "delete from tasks")).toBe("42501");
    expect(await outcome(gw, "truncate tasks")).toBe("42501");
    expect(await outcome(gw, "update tasks set token = 'forged' where id = $1", id as never)).toBe("42501");
    expect(await outcome(gw, "update tasks set owner = 'someone-else' where id = $1", id as never)).toBe("42501");
    expect(await outcome(gw, "update tasks set error_message = 'x', user_agent = 'x' where id = $1", id as never)).toBe(
      "42501",
    );
    // A row inserted with a token or a provider id of its own choosing: not its columns.
    expect(
      await outcome(
        gw,
        "insert into tasks (id, owner, request_hash, region, type, priority, params, state, token) values (gen_random_uuid(), 'o', 'h', 'local', 'turnstile', 'normal', '{}', 'completed', 't')",
      ),
    ).toBe("42501");
    expect(await outcome(gw, "select * from webhook_deliveries")).toBe("42501");
    expect(await outcome(gw, "select * from audit_log")).toBe("42501");
    expect(await outcome(gw, "select * from provider_slot_blocks")).toBe("42501");
    expect(await outcome(gw, "select * from drizzle.__drizzle_migrations")).toBe("42501");
    expect(await outcome(gw, "create table mine (x int)")).toBe("42501");
    expect(await outcome(gw, "create function mine() returns int language sql as 'select 1'")).toBe("42501");
    expect(
      (
        await admin<
          { n: number }[]
        >`select count(*)::int as n from tasks where id = ${id} and token is null and owner = 'client-a'`
      )[0]!.n,
    ).toBe(1);
  });
});

describe("pipeline_solver", () => {
  test("runs the solver's statements: claim, checkpoint, complete, deliveries, slot blocks", async () => {
    const sv = open(tdb.appUrls.solver);
    const id = await seedTask();
    expect(
      await outcome(
        sv,
        "update tasks t set state = 'solving', version = t.version + 1, attempts = t.attempts + 1, lease_owner = 'w1', lease_until = now() + interval '1 minute', started_at = coalesce(t.started_at, now()), updated_at = now(), submit_started_at = now(), submit_owner = 'w1', claimed_at = now() where t.id = $1 returning t.*",
        id as never,
      ),
    ).toBe("ok");
    expect(
      await outcome(
        sv,
        "update tasks set provider_id = 'p1', provider_key_ref = 'k', provider_submissions = provider_submissions + 1, submit_started_at = null, submit_owner = null where id = $1 returning id, lease_owner, state",
        id as never,
      ),
    ).toBe("ok");
    expect(
      await outcome(
        sv,
        "update tasks set state = 'completed', version = version + 1, token = 'tok', user_agent = 'ua', token_expires_at = now(), provider_polls = provider_polls + 1, lease_owner = null, lease_until = null, error_code = null, error_message = null, completed_at = now(), updated_at = now() where id = $1 returning id, version, created_at, completed_at, provider_id, callback_url is not null",
        id as never,
      ),
    ).toBe("ok");
    expect(
      await outcome(
        sv,
        "insert into webhook_deliveries (delivery_id, task_id, state, owner, host) values ($1, $2, 'completed', 'client-a', 'example.com') on conflict do nothing",
        `${id}:completed`,
        id as never,
      ),
    ).toBe("ok");
    expect(
      await outcome(
        sv,
        "update webhook_deliveries set status = 'delivered', delivered_at = now(), attempts = attempts + 1 where delivery_id = $1",
        `${id}:completed`,
      ),
    ).toBe("ok");
    expect(
      await outcome(
        sv,
        "insert into provider_slot_blocks (key_ref, owner, size, threads, wanted, lease_until) values ('k', 'w1', 1, 1, 1, now()) on conflict (key_ref, owner) do update set size = excluded.size, updated_at = now()",
      ),
    ).toBe("ok");
    expect(await outcome(sv, "delete from provider_slot_blocks where owner = 'w1'")).toBe("ok");
    expect(
      await outcome(sv, "select distinct application_name from pg_stat_activity where datname = current_database()"),
    ).toBe("ok");
    expect(await outcome(sv, "select pg_notify('provider_slot_blocks', 'k w1 freed')")).toBe("ok");
  });

  test("is refused DROP, CREATE, TRUNCATE, DELETE and INSERT of tasks, a client's columns, the audit log", async () => {
    const sv = open(tdb.appUrls.solver);
    const id = await seedTask();
    expect(await outcome(sv, "drop table tasks")).toBe("42501");
    expect(await outcome(sv, "create table mine (x int)")).toBe("42501");
    expect(await outcome(sv, "truncate tasks")).toBe("42501");
    expect(await outcome(sv, "truncate webhook_deliveries")).toBe("42501");
    expect(await outcome(sv, "delete from tasks")).toBe("42501");
    expect(await outcome(sv, "delete from webhook_deliveries")).toBe("42501");
    expect(
      await outcome(
        sv,
        "insert into tasks (id, owner, request_hash, region, type, priority, params, state) values (gen_random_uuid(), 'o', 'h', 'local', 'turnstile', 'normal', '{}', 'queued')",
      ),
    ).toBe("42501");
    expect(await outcome(sv, "update tasks set owner = 'x' where id = $1", id as never)).toBe("42501");
    expect(
      await outcome(sv, "update tasks set callback_url = 'https://evil.example/' where id = $1", id as never),
    ).toBe("42501");
    expect(await outcome(sv, "update tasks set params = '{}' where id = $1", id as never)).toBe("42501");
    expect(await outcome(sv, "select * from audit_log")).toBe("42501");
    expect(await outcome(sv, "insert into audit_log (actor, action, detail) values ('x', 'y', '{}')")).toBe("42501");
    expect(await outcome(sv, "select public.delete_unpublished_task($1::uuid)", id as never)).toBe("42501");
    expect(await outcome(sv, "alter table tasks add column x int")).toBe("42501");
  });
});

describe("pipeline_rollout", () => {
  test("reads the gate's figures and appends to the audit log", async () => {
    const ro = open(tdb.appUrls.rollout);
    await seedTask("completed", 2);
    expect(
      await outcome(
        ro,
        `select id, state, attempts, error_code as "errorCode", provider_submissions as "providerSubmissions", (extract(epoch from created_at) * 1000)::float8, (extract(epoch from completed_at) * 1000)::float8 from tasks where region = 'local' and created_at >= now() - interval '1 hour'`,
      ),
    ).toBe("ok");
    expect(
      await outcome(
        ro,
        `insert into audit_log (id, at, actor, action, detail) values (default, default, 'rollout', 'rollout.step', '{}')`,
      ),
    ).toBe("ok");
  });

  test("is refused every write of tasks, and what a client sent or got (params, token, callback)", async () => {
    const ro = open(tdb.appUrls.rollout);
    const id = await seedTask();
    expect(await outcome(ro, "update tasks set state = 'failed' where id = $1", id as never)).toBe("42501");
    expect(await outcome(ro, "delete from tasks where id = $1", id as never)).toBe("42501");
    expect(
      await outcome(
        ro,
        "insert into tasks (id, owner, request_hash, region, type, priority, params, state) values (gen_random_uuid(), 'o', 'h', 'local', 'turnstile', 'normal', '{}', 'queued')",
      ),
    ).toBe("42501");
    expect(await outcome(ro, "truncate tasks")).toBe("42501");
    expect(await outcome(ro, "drop table audit_log")).toBe("42501");
    expect(await outcome(ro, "update audit_log set actor = 'x'")).toBe("42501");
    expect(await outcome(ro, "delete from audit_log")).toBe("42501");
    expect(await outcome(ro, "select token from tasks")).toBe("42501");
    expect(await outcome(ro, "select params from tasks")).toBe("42501");
    expect(await outcome(ro, "select callback_url from tasks")).toBe("42501");
    expect(await outcome(ro, "select * from audit_log")).toBe("42501");
    expect(
      await outcome(
        ro,
        "insert into webhook_deliveries (delivery_id, task_id, state) values ('x', $1, 'x')",
        id as never,
      ),
    ).toBe("42501");
    expect(await outcome(ro, "delete from provider_slot_blocks")).toBe("42501");
  });
});

describe("grants", () => {
  test("every table and view of the schema is listed, and APP_GRANTS names only tables that exist", async () => {
    const rows = await admin<{ t: string }[]>`select tablename as t from pg_tables where schemaname = 'public'
                                             union all select viewname from pg_views where schemaname = 'public'`;
    expect(rows.map((r) => r.t).sort()).toEqual([...SCHEMA_TABLES].sort());
    for (const g of Object.values(APP_GRANTS))
      for (const t of g.tables) expect(SCHEMA_TABLES as readonly string[]).toContain(t.table);
  });

  test("a second migrate takes back a privilege granted by hand (grants are exactly APP_GRANTS)", async () => {
    await admin.unsafe(`grant delete on tasks to ${DB_ROLES.gateway}`);
    const gw = open(tdb.appUrls.gateway);
    expect(await outcome(gw, "delete from tasks where false")).toBe("ok");
    await migrateDatabase(tdb.url);
    expect(await outcome(gw, "delete from tasks where false")).toBe("42501");
  });

  test("PUBLIC has nothing: a login in no app role connects to no table", async () => {
    const name = `${tdb.name}_nobody`;
    await admin.unsafe(`create role "${name}" login password 'nobody-pw-123'`);
    cleanups.push(() => admin.unsafe(`drop role if exists "${name}"`));
    const nobody = postgres(urlWithLogin(tdb.url, { user: name, password: "nobody-pw-123" }), {
      max: 1,
      onnotice: () => {},
    });
    try {
      // CONNECT on the database is the app roles' only.
      expect(await outcome(nobody, "select 1")).toBe("42501");
    } finally {
      await nobody.end({ timeout: 5 });
    }
  });
});

describe("production's path: the owner is no superuser", () => {
  test("an owner with neither SUPERUSER nor CREATEROLE migrates its database and grants the app roles", async () => {
    const owner = `${tdb.name}_owner`;
    const db = `${tdb.name}_owned`;
    await admin.unsafe(`create role "${owner}" login password 'owner-pw-123' nosuperuser nocreaterole nocreatedb`);
    await admin.unsafe(`create database "${db}" owner "${owner}"`);
    cleanups.push(async () => {
      await admin.unsafe(`drop database if exists "${db}" with (force)`);
      await admin.unsafe(`drop role if exists "${owner}"`);
    });
    const ownerUrl = urlWithLogin(tdb.url.replace(/\/[^/]*$/, `/${db}`), { user: owner, password: "owner-pw-123" });
    const r = await migrateDatabase(ownerUrl);
    expect(r.total).toBeGreaterThan(0);
    // The gateway's login may use this database's tables too, as granted, and the tables are the owner's.
    const gw = open(tdb.appUrls.gateway.replace(/\/[^/?]*(\?|$)/, `/${db}$1`));
    expect(await outcome(gw, "select count(*) from tasks")).toBe("ok");
    expect(await outcome(gw, "delete from tasks")).toBe("42501");
    const own = open(ownerUrl);
    const [o] = await own<
      { o: string }[]
    >`select tableowner as o from pg_tables where schemaname = 'public' and tablename = 'tasks'`;
    expect(o!.o).toBe(owner);
  });

  test("a missing app role it may not create is an error naming the role and what to run", async () => {
    const owner = `${tdb.name}_weak`;
    await admin.unsafe(`create role "${owner}" login password 'weak-pw-123' nocreaterole`);
    cleanups.push(() => admin.unsafe(`drop role if exists "${owner}"`));
    const weak = open(urlWithLogin(tdb.url.replace(/\/[^/]*$/, "/postgres"), { user: owner, password: "weak-pw-123" }));
    const missing = `${tdb.name}_missing_role`;
    const err = await ensureGroupRole(weak, missing).then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toContain(`database role ${missing} is missing`);
    expect(err?.message).toContain(`CREATE ROLE ${missing}`);
  });
});

describe("creating the group roles", () => {
  test("twelve sessions create the same missing role at once: all succeed, one role", async () => {
    const role = `${tdb.name}_race`;
    cleanups.push(() => admin.unsafe(`drop role if exists "${role}"`));
    const sessions = Array.from({ length: 12 }, () => open(tdb.url));
    await Promise.all(sessions.map((s) => s`select 1`));
    const results = await Promise.allSettled(sessions.map((s) => ensureGroupRole(s, role)));
    expect(
      results.filter((r) => r.status === "rejected").map((r) => String((r as PromiseRejectedResult).reason)),
    ).toEqual([]);
    const [n] = await admin<
      { n: number; login: boolean }[]
    >`select count(*)::int as n, bool_or(rolcanlogin) as login from pg_roles where rolname = ${role}`;
    expect(n).toEqual({ n: 1, login: false });
  });
});
