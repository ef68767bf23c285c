// Group-committed provider-id checkpoints against a real Postgres.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomUUID } from "node:crypto";
import { createTestDatabase, type TestDatabase } from "@pipeline/devstack/testing";
import { type Database, openDatabase, tasks } from "@pipeline/shared/db";
import { createCheckpointWriter } from "./checkpoints.ts";

let tdb: TestDatabase;
let database: Database;
/** The adapter's own connection: the solver's role (issue 34), not the admin's. */
let solver: Database;
beforeAll(async () => {
  tdb = await createTestDatabase("ckpt");
  database = openDatabase(tdb.url, { max: 4 });
  solver = openDatabase(tdb.appUrls.solver, { max: 4 });
});
afterAll(async () => {
  await solver.close();
  await database.close();
  await tdb.drop();
});

const row = (id: string, extra: Partial<typeof tasks.$inferInsert>): typeof tasks.$inferInsert => ({
  id,
  owner: "o",
  requestHash: "h",
  region: "ck",
  type: "turnstile",
  priority: "normal",
  params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: "https://example.com" },
  state: "solving",
  leaseOwner: "w1",
  submitOwner: "w1",
  submitStartedAt: new Date(),
  ...extra,
});

test("a burst of 205 checkpoints at once: each is answered for its own row and guard", async () => {
  const ok = Array.from({ length: 200 }, () => randomUUID());
  const takenOver = randomUUID(); // lease now held by w2: written, but w1 may not go on polling
  const otherSubmitter = randomUUID(); // submit marker of w2: not written
  const alreadySet = randomUUID(); // provider id already there: not written
  const finished = randomUUID(); // completed meanwhile: not written
  // Back from a snapshot taken before the claim: queued, no lease, no marker. Written (the provider
  // task is paid for), held by nobody: the next delivery claims it and polls.
  const restored = randomUUID();
  await database.db
    .insert(tasks)
    .values([
      ...ok.map((id) => row(id, {})),
      row(takenOver, { leaseOwner: "w2" }),
      row(otherSubmitter, { submitOwner: "w2" }),
      row(alreadySet, { providerId: "111" }),
      row(finished, { state: "completed" }),
      row(restored, { state: "queued", leaseOwner: null, submitOwner: null, submitStartedAt: null }),
    ]);
  const writer = createCheckpointWriter(solver.sql, { maxInFlight: 1 });
  const all = [...ok, takenOver, otherSubmitter, alreadySet, finished, restored];
  const results = await Promise.all(
    all.map((id, i) => writer.write({ id, worker: "w1", providerId: String(7_000_000 + i), keyRef: "key_abc" })),
  );
  expect(results.slice(0, 200).every((r) => r.written && r.stillOwner)).toBe(true);
  expect(results.slice(200)).toEqual([
    { written: true, stillOwner: false },
    { written: false, stillOwner: false },
    { written: false, stillOwner: false },
    { written: false, stillOwner: false },
    { written: true, stillOwner: false, unheld: true },
  ]);
  const rows = await database.sql<
    {
      id: string;
      provider_id: string | null;
      provider_key_ref: string | null;
      provider_submissions: number;
      submit_owner: string | null;
    }[]
  >`
    select id, provider_id, provider_key_ref, provider_submissions, submit_owner from tasks where id = any(${all}::uuid[])`;
  const byId = new Map(rows.map((r) => [r.id, r]));
  for (const [i, id] of ok.entries())
    expect(byId.get(id)).toMatchObject({
      provider_id: String(7_000_000 + i),
      provider_key_ref: "key_abc",
      provider_submissions: 1,
      submit_owner: null,
    });
  expect(byId.get(otherSubmitter)).toMatchObject({ provider_id: null, submit_owner: "w2" });
  expect(byId.get(alreadySet)).toMatchObject({ provider_id: "111", provider_submissions: 0 });
  expect(byId.get(restored)).toMatchObject({ provider_id: String(7_000_000 + 204), provider_submissions: 1 });
});

test("a failed batch rejects each of its writes (the caller retries them)", async () => {
  const broken = openDatabase(tdb.url.replace(/\/[^/]*$/, "/no_such_database_xyz"), { max: 1 });
  const writer = createCheckpointWriter(broken.sql);
  const r = await Promise.allSettled(
    [1, 2, 3].map((i) => writer.write({ id: randomUUID(), worker: "w1", providerId: String(i), keyRef: "k" })),
  );
  expect(r.every((x) => x.status === "rejected")).toBe(true);
  await broken.close().catch(() => {});
});
