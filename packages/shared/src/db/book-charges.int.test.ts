// bookCharges against a real Postgres, as the solver's role: a charge goes on the task's row or,
// when the row holds another, into the ledger table; never twice, even beside a writer in flight.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { randomUUID } from "node:crypto";
import { createTestDatabase, type TestDatabase } from "@pipeline/devstack/testing";
import postgres from "postgres";
import { bookCharges, type ChargeEntry } from "./book-charges.ts";

let tdb: TestDatabase;
let admin: postgres.Sql;
let solver: postgres.Sql;
beforeAll(async () => {
  tdb = await createTestDatabase("book_charges");
  admin = postgres(tdb.url, { max: 2, onnotice: () => {} });
  solver = postgres(tdb.appUrls.solver, { max: 2, onnotice: () => {} });
});
afterAll(async () => {
  await solver.end();
  await admin.end();
  await tdb.drop();
});

const newTask = async (): Promise<string> => {
  const id = randomUUID();
  await admin`insert into tasks (id, owner, request_hash, region, type, priority, params, state)
    values (${id}, 'client-1', 'h', 'bc', 'turnstile', 'normal', '{}'::jsonb, 'completed')`;
  return id;
};
const charge = (taskId: string, providerTaskId: string, amountMicros = 1450): ChargeEntry => ({
  taskId,
  providerTaskId,
  provider: "127.0.0.1:18090/key_abc",
  region: "bc",
  solverVersion: "v1",
  amountMicros,
  priceSource: "provider",
});
const entries = async (id: string) =>
  admin<{ provider_task_id: string; amount_micros: string; owner: string }[]>`
    select provider_task_id, amount_micros::text, owner from ledger_all where task_id = ${id} order by provider_task_id`.then(
    (r) => [...r],
  );
const tableRows = async (id: string) =>
  (await admin<{ n: number }[]>`select count(*)::int as n from ledger where task_id = ${id}`)[0]!.n;

test("the first charge goes on the row, a second provider task's into the ledger table, a repeat nowhere", async () => {
  const id = await newTask();
  await bookCharges(solver, [charge(id, "p1")]);
  expect(await tableRows(id)).toBe(0);
  await bookCharges(solver, [charge(id, "p2", 2990)]);
  await bookCharges(solver, [charge(id, "p1"), charge(randomUUID(), "p-no-row")]);
  await bookCharges(solver, [charge(id, "p2", 2990)]);
  expect(await entries(id)).toEqual([
    { provider_task_id: "p1", amount_micros: "1450", owner: "client-1" },
    { provider_task_id: "p2", amount_micros: "2990", owner: "client-1" },
  ]);
  expect(await tableRows(id)).toBe(1);
});

test("a charge booked while another writer's charge of the task is in flight: both kept, neither twice", async () => {
  const id = await newTask();
  // A completion in flight: it has set the row's charge and not committed yet.
  const inFlight = admin.reserve();
  const tx = await inFlight;
  await tx`begin`;
  await tx`update tasks set charge_provider_task_id = 'p1', charge_provider = 'h/k', charge_region = 'bc',
    charge_solver_version = 'v1', charge_micros = 1450, charge_price_source = 'provider', charged_at = now() where id = ${id}`;
  const same = bookCharges(solver, [charge(id, "p1")]);
  const other = bookCharges(solver, [charge(id, "p2", 2990)]);
  await Bun.sleep(200);
  await tx`commit`;
  tx.release();
  await Promise.all([same, other]);
  // The row keeps the first (the writer's); the other goes to the table; the same one is not repeated.
  expect((await entries(id)).map((e) => e.provider_task_id)).toEqual(["p1", "p2"]);
  expect(await tableRows(id)).toBe(1);
});
