// The plan keeper against a real witness KV (nats-server, JetStream) and two regions' real
// Postgres: each region's solvers' blocks are rows in provider_slot_blocks (what they ask and
// hold), the keeper writes the region's cap (provider_plan_shares) and its entry in the plan
// record. Proves: two regions asking for more than the plan split it and never claim more than it
// together; one region alone grows into the whole plan; a lost region's share is released only
// once the caller says so; the cap lapses with the lease's end; an unreadable record grows nothing.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { jetstream } from "@nats-io/jetstream";
import { type KV, Kvm } from "@nats-io/kv";
import { createTestDatabase, startTestNats, type TestDatabase, type TestNats } from "@pipeline/devstack/testing";
import { createLogger } from "@pipeline/shared/log";
import { connectNats, type NatsConnection } from "@pipeline/shared/nats";
import { PlanRecord, planKey } from "@pipeline/shared/regions";
import postgres from "postgres";
import { createPlanKeeper, type PlanKeeper } from "./plan-keeper.ts";

const log = createLogger("plan-keeper-test", { level: "silent" });
const KEY = "key_0123456789ab";
const PLAN = 6;
let nats: TestNats;
let nc: NatsConnection;
let witness: KV;
const dbs: TestDatabase[] = [];
const sqls: postgres.Sql[] = [];
const keepers: Record<string, PlanKeeper> = {};

beforeAll(async () => {
  nats = await startTestNats();
  nc = await connectNats(nats.url, "plan-keeper-test", nats.auth("admin"));
  witness = await new Kvm(jetstream(nc)).create("plan_keeper_test", { history: 1 });
  for (const region of ["fsn1", "hel1"]) {
    const db = await createTestDatabase(`plan_${region}`);
    const sql = postgres(db.url, { max: 2, onnotice: () => {} });
    dbs.push(db);
    sqls.push(sql);
    keepers[region] = createPlanKeeper({ sql, witness, region, markerMs: 60_000, log });
  }
}, 60_000);

afterAll(async () => {
  for (const s of sqls) await s.end({ timeout: 5 });
  for (const d of dbs) await d.drop();
  await nc?.close();
  await nats?.dispose();
});

const sqlOf = (region: string) => sqls[region === "fsn1" ? 0 : 1]!;
/** A solver's block of the key in a region: what it holds (size) and asks (wanted). */
const block = (region: string, owner: string, size: number, wanted: number) => sqlOf(region)`
  insert into provider_slot_blocks (key_ref, owner, size, threads, wanted, lease_until, updated_at)
  values (${KEY}, ${owner}, ${size}, ${PLAN}, ${wanted}, now() + interval '1 minute', now())
  on conflict (key_ref, owner) do update set size = excluded.size, wanted = excluded.wanted, lease_until = excluded.lease_until`;
const cap = async (region: string) => {
  const [r] = await sqlOf(region)<{ threads: number; valid: boolean }[]>`
    select threads, valid_until > now() as valid from provider_plan_shares where key_ref = ${KEY}`;
  return r?.valid ? r.threads : 0;
};
const record = async () => PlanRecord.parse((await witness.get(planKey(KEY)))!.json());
const round = (region: string, released: (r: string) => boolean = () => false) =>
  keepers[region]!.round(Date.now() + 5000, released);

test("two regions asking for more than the plan split it, and their claims never exceed it", async () => {
  await block("fsn1", "solver-a", 0, 10);
  await block("hel1", "solver-b", 0, 10);
  for (let i = 0; i < 6; i++) {
    for (const r of ["fsn1", "hel1"]) {
      await round(r);
      // A solver leases up to its region's cap (what the blocks hold follows the cap).
      const c = await cap(r);
      await block(r, r === "fsn1" ? "solver-a" : "solver-b", c, 10);
      const rec = await record();
      const claimed = Object.values(rec.regions).reduce((n, e) => n + Math.max(e.share, e.used), 0);
      expect(claimed).toBeLessThanOrEqual(PLAN);
      expect((await cap("fsn1")) + (await cap("hel1"))).toBeLessThanOrEqual(PLAN);
    }
  }
  expect([await cap("fsn1"), await cap("hel1")]).toEqual([3, 3]);
});

test("a lost region counts until released; then the survivor grows into the whole plan and drops its entry", async () => {
  // hel1 stops (its keeper no longer runs): fsn1 still sees hel1's share...
  await round("fsn1");
  expect(await cap("fsn1")).toBe(3);
  // ...until the caller says hel1's lease was taken over long enough ago.
  const views = await round("fsn1", (r) => r === "hel1");
  expect(views[0]!.drop).toEqual(["hel1"]);
  await round("fsn1");
  expect(await cap("fsn1")).toBe(PLAN);
  expect(Object.keys((await record()).regions)).toEqual(["fsn1"]);
});

test("the cap is valid only until the lease's end it was written with", async () => {
  await keepers.fsn1!.round(Date.now() - 1000, () => false);
  expect(await cap("fsn1")).toBe(0);
  await round("fsn1");
  expect(await cap("fsn1")).toBe(PLAN);
});

test("an unreadable plan record grows nothing: the round fails for the key and the cap stays as it was", async () => {
  await witness.put(planKey(KEY), "not json");
  const views = await round("hel1");
  expect(views).toEqual([]);
  await witness.delete(planKey(KEY));
});
