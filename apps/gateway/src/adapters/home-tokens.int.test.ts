// A replica row's token asked of its home region's gateways on a real nats-server, each side as
// the gateway's NATS user (so the permissions of permissions.ts allow exactly this): the home
// answers its own valid token to the task's client only; a home that does not answer leaves the
// read waiting (HomeUnreachableError, a 503 with Retry-After), never `expired`, after the timeout.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { NO_CHARGE, startTestNats, type TestNats } from "@pipeline/devstack/testing";
import type { TaskRow } from "@pipeline/shared/db";
import { createLogger } from "@pipeline/shared/log";
import { connectNats, type NatsConnection } from "@pipeline/shared/nats";
import { answerOf, asksHome, HomeUnreachableError, serveHomeTokens, withHomeTokens } from "./home-tokens.ts";

let nats: TestNats;
let away: NatsConnection;
let home: NatsConnection;
const log = createLogger("home-tokens-test", { level: "silent" });
const now = new Date("2026-01-01T00:01:00Z");

const row = (o: Partial<TaskRow> = {}): TaskRow => ({
  id: "0190a000-0000-7000-8000-000000000001",
  owner: "client-1",
  idempotencyKey: null,
  requestHash: "h",
  region: "tkhome",
  type: "turnstile",
  priority: "normal",
  params: {},
  state: "completed",
  version: 3,
  attempts: 1,
  providerId: "123",
  providerKeyRef: null,
  providerSubmissions: 1,
  providerPolls: 2,
  submitStartedAt: null,
  submitOwner: null,
  claimedAt: null,
  leaseOwner: null,
  leaseUntil: null,
  token: "TOKEN-1",
  userAgent: "UA-1",
  tokenExpiresAt: new Date("2026-01-01T00:02:00Z"),
  deadlineAt: null,
  notBefore: null,
  needBy: null,
  startAt: null,
  poolId: null,
  poolTakenAt: null,
  poolWastedAt: null,
  poolTakeKey: null,
  callbackUrl: null,
  redrives: 0,
  errorCode: null,
  errorMessage: null,
  createdAt: new Date("2026-01-01T00:00:00Z"),
  updatedAt: new Date("2026-01-01T00:00:05Z"),
  startedAt: new Date("2026-01-01T00:00:01Z"),
  completedAt: new Date("2026-01-01T00:00:05Z"),
  ...NO_CHARGE,
  ...o,
});

/** A store of fixed rows (the Postgres adapter is tested on its own: adapters/pg.int.test.ts). */
const storeOf = (...rows: TaskRow[]) => {
  const byId = new Map(rows.map((r) => [r.id, r]));
  return {
    get: async (id: string) => byId.get(id),
    getMany: async (ids: readonly string[]) => ids.flatMap((id) => (byId.has(id) ? [byId.get(id)!] : [])),
  };
};

beforeAll(async () => {
  nats = await startTestNats({ regions: ["tkaway", "tkhome"] });
  away = await connectNats(nats.url, "home-tokens-away", nats.auth("gateway"));
  home = await connectNats(nats.url, "home-tokens-home", nats.auth("gateway"));
}, 30_000);
afterAll(async () => {
  await away?.close();
  await home?.close();
  await nats?.dispose();
});

const ids = {
  valid: "0190a000-0000-7000-8000-000000000001",
  otherClient: "0190a000-0000-7000-8000-000000000002",
  expiredAtHome: "0190a000-0000-7000-8000-000000000003",
};
const replica = (id: string) => row({ id, token: null, userAgent: null, tokenExpiresAt: null });

test("the home's gateway answers its valid token to the task's own client; the replica row is completed with it", async () => {
  const homeStore = storeOf(
    row({ id: ids.valid }),
    row({ id: ids.otherClient, owner: "client-2" }),
    row({ id: ids.expiredAtHome, tokenExpiresAt: new Date("2026-01-01T00:00:30Z") }),
  );
  const sub = serveHomeTokens({ nc: home, region: "tkhome", store: homeStore, log, now: () => now });
  try {
    await home.flush();
    const store = withHomeTokens(
      storeOf(replica(ids.valid), { ...replica(ids.otherClient), owner: "client-1" }, replica(ids.expiredAtHome)),
      { nc: away, region: "tkaway", log, now: () => now },
    );
    const got = await store.get(ids.valid);
    expect(got).toMatchObject({ token: "TOKEN-1", userAgent: "UA-1" });
    expect(got!.tokenExpiresAt!.toISOString()).toBe("2026-01-01T00:02:00.000Z");
    // Another client's task of the same id, and a token past its expiry at home: nothing handed out.
    expect((await store.get(ids.otherClient))!.token).toBeNull();
    expect((await store.get(ids.expiredAtHome))!.token).toBeNull();
    const many = await store.getMany([ids.valid, ids.otherClient]);
    expect(many.map((r) => r.token)).toEqual(["TOKEN-1", null]);
  } finally {
    sub.unsubscribe();
  }
});

test("a home that does not answer: a read is told to come back (HomeUnreachableError), never `expired`; the bulk read keeps the row", async () => {
  const store = withHomeTokens(storeOf(replica(ids.valid)), {
    nc: away,
    region: "tkaway",
    log,
    now: () => now,
    timeoutMs: 300,
  });
  const t0 = performance.now();
  const err = await store.get(ids.valid).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(HomeUnreachableError);
  expect((err as HomeUnreachableError).row.region).toBe("tkhome");
  expect(performance.now() - t0).toBeLessThan(2_000);
  expect((await store.getMany([ids.valid])).map((r) => r.token)).toEqual([null]);
});

test("a token held here (completed while cut off) and the home's own: the home's wins; the home silent: the one held here", async () => {
  const here = storeOf(row({ id: ids.valid, token: "TOKEN-HERE" }));
  const store = withHomeTokens(here, { nc: away, region: "tkaway", log, now: () => now, timeoutMs: 300 });
  const sub = serveHomeTokens({
    nc: home,
    region: "tkhome",
    store: storeOf(row({ id: ids.valid })),
    log,
    now: () => now,
  });
  try {
    await home.flush();
    expect((await store.get(ids.valid))!.token).toBe("TOKEN-1");
  } finally {
    sub.unsubscribe();
  }
  await home.flush();
  expect((await store.get(ids.valid))!.token).toBe("TOKEN-HERE");
});

test("only another region's completed, unexpired row is asked about; the home answers only its own completed task", () => {
  expect(asksHome(replica(ids.valid), "tkaway", now)).toBe(true);
  expect(asksHome(replica(ids.valid), "tkhome", now)).toBe(false);
  // A token held here too: the home's is asked for all the same (it wins).
  expect(asksHome(row(), "tkaway", now)).toBe(true);
  expect(asksHome({ ...replica(ids.valid), state: "solving" }, "tkaway", now)).toBe(false);
  expect(asksHome({ ...replica(ids.valid), tokenExpiresAt: new Date("2026-01-01T00:00:30Z") }, "tkaway", now)).toBe(
    false,
  );
  expect(answerOf(undefined, { id: ids.valid, owner: "client-1" }, "tkhome", now)).toEqual({ token: null });
  expect(answerOf(row({ state: "solving", token: null }), { id: ids.valid, owner: "client-1" }, "tkhome", now)).toEqual(
    { token: null },
  );
  // The home answers only for its own tasks (a replica of a third region's task is not its to answer).
  expect(answerOf(row({ region: "tkaway" }), { id: ids.valid, owner: "client-1" }, "tkhome", now)).toEqual({
    token: null,
  });
  expect(answerOf(row(), { id: ids.valid, owner: "client-1" }, "tkhome", now)).toEqual({
    token: "TOKEN-1",
    expiresAt: "2026-01-01T00:02:00.000Z",
    userAgent: "UA-1",
  });
});
