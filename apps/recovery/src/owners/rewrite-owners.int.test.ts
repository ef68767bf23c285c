// `recovery rewrite-owners` against real Postgres (issue 14.8): the dry run changes nothing, --yes
// rewrites every legacy owner of the configured keys (and nothing else), a second run changes 0.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createTestDatabase, type TestDatabase } from "@pipeline/devstack/testing";
import { legacyClientId, ownerRewrites, pepperedClientId } from "@pipeline/shared/client-ids";
import postgres from "postgres";
import { rewriteOwners } from "./rewrite-owners.ts";

const PEPPER = "rewrite-pepper-0123456789abcdef0123456789";
const KA = "rewrite-a-key-0123456789abcdef0123456789";
const KB = "rewrite-b-key-0123456789abcdef0123456789";
const STRANGER = legacyClientId("a key not in API_KEYS 0123456789abcdef");
let tdb: TestDatabase;
let sql: postgres.Sql;
const dir = mkdtempSync(join(tmpdir(), "recovery-rewrite-"));
beforeAll(async () => {
  tdb = await createTestDatabase("rewrite_owners");
  sql = postgres(tdb.url, { max: 2, onnotice: () => {} });
});
afterAll(async () => {
  await sql?.end({ timeout: 5 });
  await tdb?.drop();
  rmSync(dir, { recursive: true, force: true });
});

async function task(owner: string, delivery = false): Promise<string> {
  const id = crypto.randomUUID();
  await sql`insert into tasks (id, owner, request_hash, region, type, priority, params, state) values (${id}, ${owner}, 'h', 'local', 'turnstile', 'normal', '{}'::jsonb, 'queued')`;
  if (delivery)
    await sql`insert into webhook_deliveries (delivery_id, task_id, state, owner, host) values (${`${id}:completed:0`}, ${id}, 'completed', ${owner}, 'hooks.example.com')`;
  return id;
}
const owners = async () =>
  Object.fromEntries(
    (await sql<{ id: string; owner: string }[]>`select id, owner from tasks`).map((r) => [r.id, r.owner]),
  );
const deliveryOwners = async () =>
  (await sql<{ owner: string }[]>`select owner from webhook_deliveries order by delivery_id`)
    .map((r) => r.owner)
    .sort();

test("rewrite-owners: a dry run counts and changes nothing; --yes rewrites tasks, webhook_deliveries and audit_log in one go; a second run changes 0 rows", async () => {
  const a = [await task(legacyClientId(KA), true), await task(legacyClientId(KA))];
  const b = await task(legacyClientId(KB), true);
  const stranger = await task(STRANGER, true);
  const already = await task(pepperedClientId(PEPPER, KA));
  await sql`insert into audit_log (actor, action, detail) values ('ops', 'test.entry', ${JSON.stringify({ owner: legacyClientId(KB) })}::text::jsonb)`;
  const rewrites = ownerRewrites([KA, KB], PEPPER);
  const before = await owners();

  const dry = await rewriteOwners(sql, rewrites, { apply: false });
  expect(dry).toEqual({ applied: false, clients: 2, counts: { tasks: 3, webhook_deliveries: 2, audit_log: 1 } });
  expect(await owners()).toEqual(before);

  const done = await rewriteOwners(sql, rewrites, { apply: true, actor: "ops@test" });
  expect(done).toEqual({ applied: true, clients: 2, counts: { tasks: 3, webhook_deliveries: 2, audit_log: 1 } });
  const now = await owners();
  for (const id of [...a, already]) expect(now[id]).toBe(pepperedClientId(PEPPER, KA));
  expect(now[b]).toBe(pepperedClientId(PEPPER, KB));
  expect(now[stranger]).toBe(STRANGER);
  expect(await deliveryOwners()).toEqual([pepperedClientId(PEPPER, KA), pepperedClientId(PEPPER, KB), STRANGER].sort());
  const audit = await sql<
    { action: string; actor: string; detail: Record<string, unknown> }[]
  >`select action, actor, detail from audit_log order by id`;
  expect(audit[0]!.detail).toEqual({ owner: pepperedClientId(PEPPER, KB) });
  expect(audit[1]).toMatchObject({
    action: "owners.rewrite",
    actor: "ops@test",
    detail: { tasks: 3, webhook_deliveries: 2, audit_log: 1, clients: 2 },
  });

  const again = await rewriteOwners(sql, rewrites, { apply: true });
  expect(again.counts).toEqual({ tasks: 0, webhook_deliveries: 0, audit_log: 0 });
  expect(await sql`select 1 from audit_log`).toHaveLength(2);
});

test("the CLI: without --yes a dry run (nothing changed), with --yes the counts per table; never a key nor the pepper; missing API_KEY_PEPPER is a usage error", async () => {
  const id = await task(legacyClientId(KB));
  const cli = join(import.meta.dir, "..", "cli.ts");
  const env = {
    PATH: process.env.PATH ?? "",
    HOME: dir,
    DATABASE_URL: tdb.url,
    NATS_URL: "nats://127.0.0.1:1",
    SNAPSHOT_DIR: dir,
    LOG_LEVEL: "silent",
    API_KEYS: `${KA},${KB}`,
    API_KEY_PEPPER: PEPPER,
  };
  const run = (e: Record<string, string>, ...args: string[]) => {
    const r = spawnSync(process.execPath, [cli, "rewrite-owners", ...args], {
      env: e,
      encoding: "utf8",
      timeout: 30_000,
    });
    return { code: r.status, out: `${r.stdout}${r.stderr}` };
  };
  const dry = run(env);
  expect(dry.code).toBe(0);
  expect(dry.out).toContain("dry run, nothing changed");
  expect(dry.out).toContain("tasks 1, webhook_deliveries 0, audit_log 0");
  expect((await owners())[id]).toBe(legacyClientId(KB));
  const yes = run(env, "--yes");
  expect(yes.code).toBe(0);
  expect(yes.out).toContain("rewritten: tasks 1, webhook_deliveries 0, audit_log 0");
  expect((await owners())[id]).toBe(pepperedClientId(PEPPER, KB));
  const json = JSON.parse(run(env, "--yes", "--json").out) as { counts: { tasks: number }; ids: unknown };
  expect(json.counts.tasks).toBe(0);
  expect(json.ids).toEqual(ownerRewrites([KA, KB], PEPPER));
  for (const out of [dry.out, yes.out]) for (const secret of [KA, KB, PEPPER]) expect(out).not.toContain(secret);
  const { API_KEY_PEPPER: _, ...noPepper } = env;
  const refused = run(noPepper, "--yes");
  expect(refused.code).toBe(2);
  expect(refused.out).toContain("API_KEY_PEPPER");
}, 60_000);
