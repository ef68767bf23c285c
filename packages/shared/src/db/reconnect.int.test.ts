// An app's pool through the loss of its database under load (dropped, then restored under its
// name, as the database-loss runbook does): once the database is back, every query is answered in
// about the outage's length. Before the postgres.js patch and RECONNECT (index.ts), a connection
// closed with a write pending sent its next StartupMessage nowhere and hung until connect_timeout
// (30 s), one closed during its startup kept waiting for answers to queries of the dead socket,
// and the pool's backoff after dozens of failed attempts held queries for up to 20 s.
import { expect, test } from "bun:test";
import { startRelay } from "@pipeline/devstack/stack";
import { createTestDatabase } from "@pipeline/devstack/testing";
import postgres from "postgres";
import { openDatabase } from "./index.ts";

const ROUNDS = 4;
const WORKERS = 20;

async function outageRound(): Promise<{ slowestMs: number; hung: number; backMs: number }> {
  const tdb = await createTestDatabase("reconnect");
  const admin = postgres(tdb.url.replace(/\/[^/]*$/, "/postgres"), { max: 1, onnotice: () => {} });
  // The solver's own login, as the apps run.
  const db = openDatabase(tdb.appUrls.solver, { max: 10, appName: "reconnect-test" });
  try {
    await db.sql`select 1`;
    let stop = false;
    const tookMs: number[] = [];
    const workers = Promise.all(
      Array.from({ length: WORKERS }, async () => {
        while (!stop) {
          const t0 = Date.now();
          await db.sql`select pg_sleep(0.005)`.catch(() => {});
          tookMs.push(Date.now() - t0);
          await Bun.sleep(Math.random() * 10);
        }
      }),
    );
    await Bun.sleep(250);
    const fault = Date.now();
    await admin.unsafe(`drop database "${tdb.name}" with (force)`);
    await admin.unsafe(`create database "${tdb.name}_r"`);
    await Bun.sleep(300 + Math.random() * 400);
    await admin.unsafe(`alter database "${tdb.name}_r" rename to "${tdb.name}"`);
    const backMs = Date.now() - fault;
    await Bun.sleep(3000);
    stop = true;
    // A query still waiting 15 s after the load stopped is hung.
    const ended = await Promise.race([workers.then(() => true), Bun.sleep(15_000).then(() => false)]);
    return { slowestMs: Math.max(...tookMs), hung: ended ? 0 : 1, backMs };
  } finally {
    await db.close().catch(() => {});
    await admin.unsafe(`drop database if exists "${tdb.name}" with (force)`).catch(() => {});
    await admin.end({ timeout: 5 });
    await tdb.drop();
  }
}

test("a pool answers again within seconds of its database coming back, with no query left hanging", async () => {
  const rounds = [];
  for (let i = 0; i < ROUNDS; i++) rounds.push(await outageRound());
  console.log(
    `[db-reconnect] ${ROUNDS} outages under ${WORKERS} concurrent queries: database back after ${rounds.map((r) => r.backMs).join("/")} ms; ` +
      `slowest query ${rounds.map((r) => r.slowestMs).join("/")} ms; hung ${rounds.reduce((n, r) => n + r.hung, 0)}`,
  );
  expect(rounds.map((r) => r.hung)).toEqual(rounds.map(() => 0));
  // The outage itself is about a second; 8 s leaves a loaded machine room, and is well under the
  // 20-30 s waits this test found before.
  for (const r of rounds) expect(r.slowestMs).toBeLessThan(8000);
}, 180_000);

/**
 * A transaction's connection cut mid-statement (the TCP link lost, no error from the server):
 * the statement fails with a connection error, and so does the ROLLBACK postgres.js then sends on
 * that connection. Before the second half of the patch, that ROLLBACK was written to a socket
 * already gone, and the process died of an uncaught TypeError (`socket.write` of null): a solver
 * crashed in a Postgres restart this way (tests/restarts.test.ts found it).
 */
test("a transaction cut mid-statement fails with a connection error, and nothing crashes", async () => {
  const uncaught: unknown[] = [];
  const onUncaught = (e: unknown) => uncaught.push(e);
  process.on("uncaughtException", onUncaught);
  const tdb = await createTestDatabase("txcut");
  const url = new URL(tdb.appUrls.solver);
  const relay = await startRelay({ host: url.hostname, port: Number(url.port) });
  url.port = String(relay.port);
  const db = openDatabase(url.toString(), { max: 2, appName: "txcut-test" });
  try {
    await db.sql`select 1`;
    const tx = db.sql
      .begin(async (t) => {
        await t`select pg_sleep(2)`;
      })
      .then(
        () => "committed",
        (e: { code?: string }) => e.code ?? "no code",
      );
    await Bun.sleep(200);
    relay.cut();
    expect(await Promise.race([tx, Bun.sleep(5000).then(() => "hung")])).toBe("CONNECTION_CLOSED");
    await Bun.sleep(300);
    relay.heal();
    const [row] = await db.sql<{ x: number }[]>`select 1 as x`;
    expect(row?.x).toBe(1);
    expect(uncaught.map((e) => (e as Error).message)).toEqual([]);
  } finally {
    process.off("uncaughtException", onUncaught);
    await db.close().catch(() => {});
    await relay.stop();
    await tdb.drop();
  }
}, 60_000);
