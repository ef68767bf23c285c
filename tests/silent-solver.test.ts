// The silent solver: alive but cut off (its host's network down, the process still running, its
// TCP connections stalled, nothing closed, its Postgres sessions still open), at the default
// lease, heartbeat and reaper timings. One solver of three runs in a network namespace of its own
// (tests/support/netns-solver.ts); once it holds tasks at the provider, its link is cut. Its peers
// must find it by its silence (DEAD_AFTER_MS) and take its tasks up within 10 s, resuming their
// provider ids; when the link comes back, the solver reconnects and writes nothing over what its
// peers did: every task completed once with the token the provider issued, nothing paid twice.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Kvm } from "@nats-io/kv";
import type { NatsConnection } from "@nats-io/transport-node";
import { type RegionStack, type StackHandle, startStack, testServers } from "@pipeline/devstack/stack";
import { eventually, readTaskEvents } from "@pipeline/devstack/testing";
import { Heartbeat } from "@pipeline/shared/kv";
import { connectNats } from "@pipeline/shared/nats";
import { buckets } from "@pipeline/shared/subjects";
import type { Proc } from "./harness.ts";
import { type NetnsSolverLink, startNetnsSolverLink } from "./support/netns-solver.ts";

const REGION = "silent";
const API_KEY = "e2e-client-key-0001";
const VICTIM = `ss${process.pid}-victim`;
const PEER = (n: number) => `ss${process.pid}-peer-${n}`;
// Default LEASE_MS, ACK_WAIT_MS, DEAD_AFTER_MS, REAP_INTERVAL_MS; the provider takes 10 s per
// task, so the victim's tasks are still at the provider when its link is cut.
const SOLVER_ENV = { PROVIDER_THREADS: "1000", FIRST_POLL_MS: "1000", POLL_INTERVAL_MS: "1000" };

let stack: StackHandle;
let r: RegionStack;
let link: NetnsSolverLink;
let victim: Proc;
let nc: NatsConnection;
beforeAll(async () => {
  link = startNetnsSolverLink();
  stack = await startStack({
    regions: [REGION],
    servers: testServers({ dbPrefix: () => "silent" }),
    emulator: { latencyMs: 10_000 },
    apps: { solvers: 2, recovery: true },
    apiKeys: API_KEY,
    env: { solver: SOLVER_ENV },
    workerId: (_, n) => PEER(n),
  });
  r = stack.regions[0]!;
  victim = await link.spawnSolver(r, { workerId: VICTIM, logDir: stack.logDir, env: SOLVER_ENV });
  await eventually(() => stack.logs().split("solver started").length - 1 >= 3, 30_000, 100);
  nc = await connectNats(r.nats.url, "silent-solver-test", r.nats.auth("admin"));
}, 60_000);
afterAll(async () => {
  await nc?.close();
  await stack?.stop();
  await link?.stop();
});

/** A lease owner is a process's when it is its WORKER_ID, or that name with an incarnation. */
const isOf = (name: string) => (owner: string | null) => owner === name || !!owner?.startsWith(`${name}.`);

async function submit(prefix: string, n: number): Promise<string[]> {
  return Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const res = await fetch(`${r.gatewayUrl}/v1/tasks`, {
        method: "POST",
        headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
        body: JSON.stringify({
          type: "turnstile",
          params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/silent/${prefix}-${i}` },
        }),
      });
      if (res.status !== 202) throw new Error(`POST /v1/tasks: ${res.status} ${await res.text()}`);
      return ((await res.json()) as { id: string }).id;
    }),
  );
}

type Row = {
  id: string;
  state: string;
  lease_owner: string | null;
  live: boolean;
  provider_id: string | null;
  token: string | null;
  version: number;
  completed_at: Date | null;
};
const rows = (ids: string[]) =>
  r.db.sql<Row[]>`
    select id::text, state, lease_owner, lease_until > now() as live, provider_id, token, version, completed_at
    from tasks where id = any(${ids}::uuid[]) order by id`;

/** Submits rounds of tasks until each is at the provider (provider id stored) and the victim holds some of them. */
async function victimHoldsProviderTasks(): Promise<{ ids: string[]; held: string[] }> {
  const ids: string[] = [];
  for (let round = 0; round < 4; round++) {
    ids.push(...(await submit(`r${round}`, 15)));
    await eventually(
      async () => (await rows(ids)).every((t) => t.state === "solving" && t.provider_id !== null),
      30_000,
      50,
    );
    const held = (await rows(ids)).filter((t) => isOf(VICTIM)(t.lease_owner)).map((t) => t.id);
    if (held.length >= 3) return { ids, held };
  }
  throw new Error(`${VICTIM} never held 3 provider tasks of ${ids.length}`);
}

/** From the region's EVENTS: completed events per task id, and the victim's claims (its `submitted` events: a claim says `solving` with it) with their times. */
async function eventsOf(ids: string[]): Promise<{ completed: Map<string, number>; victimClaims: Map<string, number> }> {
  const completed = new Map<string, number>();
  const victimClaims = new Map<string, number>();
  for (const e of await readTaskEvents(nc, REGION, ids, ["completed", "submitted"])) {
    if (e.kind === "completed") completed.set(e.taskId, (completed.get(e.taskId) ?? 0) + 1);
    else if (isOf(VICTIM)(String(e.data?.worker))) victimClaims.set(e.taskId, e.storedAtMs);
  }
  return { completed, victimClaims };
}

/** The victim's heartbeat, when its entry in the workers bucket parses. */
async function victimBeat(): Promise<Heartbeat | undefined> {
  const kv = await new Kvm(nc).open(buckets.workers(REGION));
  for await (const k of await kv.keys()) {
    if (!isOf(VICTIM)(k)) continue;
    const e = await kv.get(k);
    if (e?.operation === "PUT") return Heartbeat.parse(e.json());
  }
  return undefined;
}

/** When a peer's reaper first declared the victim dead (its log line's time), epoch ms. */
function declaredDeadAt(): number | undefined {
  const times = r.procs
    .filter((p) => p !== victim)
    .flatMap((p) => p.log().split("\n"))
    .filter((l) => l.includes("dead solvers") && l.includes(VICTIM))
    .map((l) => Date.parse((JSON.parse(l) as { time: string }).time));
  return times.length ? Math.min(...times) : undefined;
}

/** Cuts the victim's link; seconds until every task it held is leased by a peer (a live lease not its own) or done. */
async function cutAndMeasure(held: string[]): Promise<{ takeoverS: number; deadS: number }> {
  const cutAt = Date.now();
  await link.cut();
  const takenAt = await eventually(
    async () =>
      (await rows(held)).every((t) => t.state === "completed" || (t.live && !isOf(VICTIM)(t.lease_owner)))
        ? Date.now()
        : undefined,
    45_000,
    100,
  ).catch(() => undefined);
  const deadAt = declaredDeadAt();
  return {
    takeoverS: takenAt ? (takenAt - cutAt) / 1000 : Number.POSITIVE_INFINITY,
    deadS: deadAt ? (deadAt - cutAt) / 1000 : Number.POSITIVE_INFINITY,
  };
}

/**
 * Sets the link up again and lets the victim run for 15 s: when its heartbeat is back, how many of
 * its old tasks it polled again at the provider (what it still had in flight); new tasks arrive
 * meanwhile (two a second for 8 s), to see when it takes work again.
 */
async function healAndRun(held: string[], providerIds: Map<string, string>) {
  const pollsBefore = { ...stack.emu!.stats().pollsByProviderId };
  const healAt = Date.now();
  await link.heal();
  const beat = eventually(
    async () => {
      const b = await victimBeat();
      return b && Date.parse(b.at) > healAt ? Date.now() : undefined;
    },
    15_000,
    200,
  ).catch(() => undefined);
  const fresh: string[] = [];
  for (let i = 0; i < 8; i++) {
    fresh.push(...(await submit(`after${i}`, 2)));
    await Bun.sleep(Math.max(0, healAt + (i + 1) * 1000 - Date.now()));
  }
  const beatAt = await beat;
  await eventually(async () => (await rows(fresh)).every((t) => t.state === "completed"), 30_000, 200);
  await Bun.sleep(Math.max(0, healAt + 15_000 - Date.now()));
  const polls = stack.emu!.stats().pollsByProviderId;
  const polledAgain = held.filter((id) => {
    const pid = providerIds.get(id)!;
    return (polls[pid] ?? 0) > (pollsBefore[pid] ?? 0);
  }).length;
  return { healAt, beatS: beatAt ? (beatAt - healAt) / 1000 : undefined, polledAgain, fresh };
}

test("a solver cut off from the network, still running: its provider tasks taken up by a peer within 10 s at default timings, nothing paid twice, nothing overwritten after it reconnects", async () => {
  const before = stack.emu!.stats();
  const { ids, held } = await victimHoldsProviderTasks();
  const { takeoverS, deadS } = await cutAndMeasure(held);
  await eventually(async () => (await rows(ids)).every((t) => t.state === "completed"), 60_000, 200);
  const done = await rows(ids);
  const back = await healAndRun(held, new Map(done.map((t) => [t.id, t.provider_id!])));

  const after = await rows(ids);
  const all = [...ids, ...back.fresh];
  const written = (ts: Row[]) => ts.map(({ live: _, ...t }) => t);
  const overwritten = written(after).filter((t, i) => !Bun.deepEquals(t, written(done)[i])).length;
  const events = await eventsOf(all);
  const solvedFresh = back.fresh.filter((id) => events.victimClaims.has(id));
  const firstClaim = Math.min(...solvedFresh.map((id) => events.victimClaims.get(id)!));
  const stats = stack.emu!.stats();
  const submissions = stats.submissions - before.submissions;
  console.log(
    `[silent-solver] ${VICTIM} cut off holding ${held.length} of ${ids.length} tasks at the provider (DEAD_AFTER_MS 6 s, REAP_INTERVAL_MS 2 s, LEASE_MS and ACK_WAIT_MS 30 s): declared dead after ${deadS.toFixed(1)} s, its tasks taken up by a peer after ${takeoverS.toFixed(1)} s; link back: heartbeat again after ${back.beatS?.toFixed(1) ?? "never"} s, ${back.polledAgain} of its old tasks polled again, ${overwritten} rows written over, ${solvedFresh.length} of ${back.fresh.length} new tasks solved by it (the first claimed ${solvedFresh.length ? `${((firstClaim - back.healAt) / 1000).toFixed(1)} s after` : "never"}), ${victim.exitCode() === undefined ? "still running" : `exited ${victim.exitCode()}`}; provider submissions ${submissions} for ${all.length} tasks`,
  );

  expect(held.length).toBeGreaterThan(0);
  expect(takeoverS).toBeLessThanOrEqual(10);
  // Exactly once, with the provider's token; the victim's tasks untouched after it came back.
  for (const t of await rows(all)) {
    expect(t.state).toBe("completed");
    expect(t.token).toBe(stack.emu!.task(t.provider_id!)?.answer ?? "no answer");
  }
  expect(written(after)).toEqual(written(done));
  expect(all.filter((id) => events.completed.get(id) !== 1)).toEqual([]);
  // Nothing paid twice.
  expect(submissions).toBe(all.length);
  expect(stats.duplicateFingerprints).toBe(before.duplicateFingerprints);
  // Alive and back among its peers.
  expect(victim.exitCode()).toBeUndefined();
  expect(back.beatS).toBeDefined();
}, 120_000);
