import { expect, test } from "bun:test";
import { NO_CHARGE } from "@pipeline/devstack/testing";
import type { TaskRow } from "../db/schema/tasks.ts";
import { toTaskView } from "./view.ts";

const base: TaskRow = {
  id: "0190a000-0000-7000-8000-000000000001",
  owner: "o",
  idempotencyKey: null,
  requestHash: "h",
  region: "local",
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
  userAgent: null,
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
};

test("a completed task within its token lifetime carries the token", () => {
  const v = toTaskView(base, new Date("2026-01-01T00:01:00Z"));
  expect(v.status).toBe("completed");
  expect(v.result).toEqual({ token: "TOKEN-1", expiresAt: "2026-01-01T00:02:00.000Z" });
});

test("a token past expiresAt is reported as expired and never handed out", () => {
  const v = toTaskView(base, new Date("2026-01-01T00:02:00Z"));
  expect(v.status).toBe("expired");
  expect(v.result).toBeUndefined();
  expect(JSON.stringify(v)).not.toContain("TOKEN-1");
});

test("a failed task carries its error code", () => {
  const v = toTaskView({ ...base, state: "failed", token: null, errorCode: "ERROR_PAGEURL" }, new Date());
  expect(v.status).toBe("failed");
  expect(v.error).toEqual({ code: "ERROR_PAGEURL" });
});

test("a completed row without a token (erased by retention, or rebuilt from events) is expired: TOKEN_UNAVAILABLE, never completed without a result", () => {
  const v = toTaskView({ ...base, token: null }, new Date("2026-01-01T00:01:00Z"));
  expect(v.status).toBe("expired");
  expect(v.result).toBeUndefined();
  expect(v.error?.code).toBe("TOKEN_UNAVAILABLE");
  // An image answer (no expiry) erased by retention reads the same way.
  expect(
    toTaskView({ ...base, type: "image", token: null, tokenExpiresAt: null }, new Date("2026-02-01T00:00:00Z")).status,
  ).toBe("expired");
  // Past its expiry it is the ordinary TOKEN_EXPIRED.
  expect(toTaskView({ ...base, token: null }, new Date("2026-01-01T00:03:00Z")).error?.code).toBe("TOKEN_EXPIRED");
});

test("a scheduled task's view shows what the client asked and when it starts; an unscheduled one shows none of it", () => {
  const queued = { ...base, state: "queued" as const, token: null, completedAt: null };
  const v = toTaskView(
    {
      ...queued,
      notBefore: new Date("2026-01-01T09:00:00Z"),
      needBy: new Date("2026-01-01T09:05:00Z"),
      startAt: new Date("2026-01-01T09:04:30Z"),
    },
    new Date("2026-01-01T00:00:00Z"),
  );
  expect(v).toMatchObject({
    status: "queued",
    notBefore: "2026-01-01T09:00:00.000Z",
    needBy: "2026-01-01T09:05:00.000Z",
    startAt: "2026-01-01T09:04:30.000Z",
  });
  const plain = toTaskView(queued, new Date("2026-01-01T00:00:00Z"));
  expect(Object.keys(plain)).not.toContain("needBy");
  expect(Object.keys(plain)).not.toContain("startAt");
});
