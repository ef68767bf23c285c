// Two regions on one machine (tests/support/two-regions.ts): each its own nats-server (its own
// JetStream domain), database, gateway, solver and recovery service, joined by a leafnode link;
// a witness holds the region leases; one provider.
// Proves: a task's home region is in its id; each region's events are mirrored into the other
// and applied to its database; either gateway answers reads of both regions' tasks; a client
// that retries on the other region with the same Idempotency-Key gets the same task; changes go
// to the home region; the other region never queues or submits a task that is not its own.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { jetstreamManager } from "@nats-io/jetstream";
import { completedEventsCarryToken } from "@pipeline/devstack/stack";
import { eventually } from "@pipeline/devstack/testing";
import { connectNats } from "@pipeline/shared/nats";
import { homeRegionOf } from "@pipeline/shared/regions";
import type { TaskView } from "@pipeline/shared/schemas";
import { streams } from "@pipeline/shared/subjects";
import { call, REGIONS, type Region, startTwoRegions, type TwoRegions, turnstile } from "./support/two-regions.ts";

let two: TwoRegions;
let regions: Region[];
const sqlOf = (r: Region) => r.db.sql;

beforeAll(async () => {
  two = await startTwoRegions();
  regions = two.regions;
}, 60_000);

afterAll(() => two.stop());

test("each region's tasks carry their home in the id, complete at home, and read the same from the other region", async () => {
  const [fsn1, hel1] = regions as [Region, Region];
  const ids: Record<string, string[]> = { fsn1: [], hel1: [] };
  for (let i = 0; i < 20; i++) {
    for (const r of [fsn1, hel1]) {
      const sub = await call<{ id: string }>(r, "/v1/tasks", { method: "POST", body: turnstile(`${r.name}-${i}`) });
      expect(sub.status).toBe(202);
      expect(homeRegionOf(sub.body.id, REGIONS)).toBe(r.name);
      ids[r.name]!.push(sub.body.id);
    }
  }
  for (const r of [fsn1, hel1]) {
    // The solvers keep tokens out of EVENTS (`tokenStored`): the other region's replica row knows
    // the task completed but holds no token. Its gateway asks the home's gateways for it over the
    // leafnode link (apps/gateway/src/adapters/home-tokens.ts) and answers with the same token.
    const other = r === fsn1 ? hel1 : fsn1;
    for (const id of ids[r.name]!) {
      const home = await call<TaskView>(r, `/v1/tasks/${id}?wait=30`);
      expect(home.body.status).toBe("completed");
      if (id === ids[r.name]![0]) {
        // (Read once a task completed: the first lease of the plan's share takes a keeper round.)
        const nc = await connectNats(r.nats.url, "regions-event-format", r.nats.auth("admin"));
        const tokensInEvents = await jetstreamManager(nc)
          .then((jsm) => completedEventsCarryToken(jsm, r.name))
          .finally(() => nc.close());
        expect(tokensInEvents).toBe(false);
      }
      const away = await eventually(async () => {
        const v = await call<TaskView>(other, `/v1/tasks/${id}`);
        return v.status === 200 && v.body.completedAt ? v : undefined;
      }, 15_000);
      expect(away.body.status).toBe("completed");
      expect(away.body.result!.token).toBe(home.body.result!.token);
      const [replica] = await sqlOf(other)<{ token: string | null }[]>`select token from tasks where id = ${id}`;
      expect(replica!.token).toBeNull();
    }
  }
  // Each task was submitted to the provider once: the other region queued none of them.
  expect(two.emu.stats().submissions).toBe(40);
  expect(two.emu.stats().duplicateFingerprints).toBe(0);
  // Each region's rows: its own 20 plus the other's 20, the replicated ones keep their home.
  for (const r of [fsn1, hel1]) {
    const rows = await sqlOf(r)<
      { region: string; n: number }[]
    >`select region, count(*)::int as n from tasks group by region order by region`;
    expect([...rows]).toEqual([
      { region: "fsn1", n: 20 },
      { region: "hel1", n: 20 },
    ]);
  }
}, 90_000);

test("while the home's gateway does not answer, the other region says come back (503, Retry-After), never expired; then hands out the token", async () => {
  const [fsn1, hel1] = regions as [Region, Region];
  const sub = await call<{ id: string }>(hel1, "/v1/tasks", { method: "POST", body: turnstile("home-silent") });
  expect(sub.status).toBe(202);
  const home = await call<TaskView>(hel1, `/v1/tasks/${sub.body.id}?wait=30`);
  expect(home.body.status).toBe("completed");
  await eventually(async () => {
    const v = await call<TaskView>(fsn1, `/v1/tasks/${sub.body.id}`);
    return v.body?.result?.token === home.body.result!.token ? true : undefined;
  }, 15_000);
  const gateway = hel1.procs.find((p) => p.name.includes("gateway"))!;
  process.kill(gateway.pid, "SIGSTOP");
  try {
    const t0 = Date.now();
    const silent = await call<{ title: string }>(fsn1, `/v1/tasks/${sub.body.id}`);
    expect({ status: silent.status, title: silent.body.title }).toEqual({
      status: 503,
      title: "Result Held By Home Region",
    });
    expect(silent.headers.get("retry-after")).toBe("1");
    expect(silent.headers.get("x-home-region")).toBe("hel1");
    expect(Date.now() - t0).toBeLessThan(5_000);
  } finally {
    process.kill(gateway.pid, "SIGCONT");
  }
  const back = await call<TaskView>(fsn1, `/v1/tasks/${sub.body.id}`);
  expect(back.body.result!.token).toBe(home.body.result!.token);
}, 60_000);

test("a client that loses its region retries on the other with the same Idempotency-Key and gets the same task", async () => {
  const [fsn1, hel1] = regions as [Region, Region];
  const body = turnstile(1000);
  const first = await call<{ id: string }>(fsn1, "/v1/tasks", {
    method: "POST",
    body,
    headers: { "idempotency-key": "order-77" },
  });
  expect(first.status).toBe(202);
  // Once the accepted event has reached hel1 (the replication lag), hel1 answers with fsn1's task.
  await eventually(async () => (await call(hel1, `/v1/tasks/${first.body.id}`)).status === 200, 15_000);
  const again = await call<{ id: string; status: string }>(hel1, "/v1/tasks", {
    method: "POST",
    body,
    headers: { "idempotency-key": "order-77" },
  });
  expect(again.status).toBe(202);
  expect(again.headers.get("idempotent-replayed")).toBe("true");
  expect(again.body.id).toBe(first.body.id);
  // Another body under the same key is refused there too.
  const other = await call(hel1, "/v1/tasks", {
    method: "POST",
    body: turnstile(1001),
    headers: { "idempotency-key": "order-77" },
  });
  expect(other.status).toBe(422);
  const done = await call<TaskView>(fsn1, `/v1/tasks/${first.body.id}?wait=30`);
  expect(done.body.status).toBe("completed");
  const [row] = await sqlOf(hel1)<
    { n: number }[]
  >`select count(*)::int as n from tasks where idempotency_key = 'order-77'`;
  expect(row!.n).toBe(1);
}, 60_000);

test("a change to a task goes to its home region: the other one answers 409 naming it", async () => {
  const [fsn1, hel1] = regions as [Region, Region];
  const sub = await call<{ id: string }>(fsn1, "/v1/tasks", { method: "POST", body: turnstile(2000) });
  await eventually(async () => (await call(hel1, `/v1/tasks/${sub.body.id}`)).status === 200, 15_000);
  const cancel = await call<{ detail: string }>(hel1, `/v1/tasks/${sub.body.id}`, { method: "DELETE" });
  expect(cancel.status).toBe(409);
  expect(cancel.headers.get("x-home-region")).toBe("fsn1");
});

test("the mirrors are live in both directions and no region holds another's TASKS", async () => {
  for (const r of regions) {
    const nc = await connectNats(r.nats.url, "regions-check", r.nats.auth("admin"));
    try {
      const jsm = await jetstreamManager(nc);
      const other = r.name === "fsn1" ? "hel1" : "fsn1";
      const mirror = await jsm.streams.info(streams.events(other));
      expect((mirror.config.mirror as { external?: { api?: string } } | undefined)?.external?.api).toBe(
        `$JS.${other}.API`,
      );
      expect(mirror.mirror?.lag).toBe(0);
      await expect(jsm.streams.info(streams.tasks(other))).rejects.toThrow();
    } finally {
      await nc.close();
    }
  }
});
