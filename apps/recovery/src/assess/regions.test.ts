import { expect, test } from "bun:test";
import { regionChecks } from "./regions.ts";

const now = 1_000_000;

test("a held lease and an active mirror are ok", () => {
  const c = regionChecks({
    local: "fsn1",
    now,
    lease: { holder: "fsn1", epoch: 3, validUntil: now + 5000 },
    mirrors: [{ remote: "hel1", lag: 0, activeMs: 200, replicaPending: 0 }],
  });
  expect(c.map((x) => [x.name, x.level])).toEqual([
    ["lease", "ok"],
    ["replica", "ok"],
  ]);
});

test("a lapsed lease fails, a lease taken by the other region warns, a stalled mirror warns even without an error", () => {
  expect(
    regionChecks({ local: "fsn1", now, lease: { holder: "fsn1", epoch: 3, validUntil: now - 4000 }, mirrors: [] })[0],
  ).toMatchObject({ level: "fail", summary: expect.stringContaining("lapsed 4 s ago") });
  expect(
    regionChecks({ local: "fsn1", now, lease: { holder: "hel1", epoch: 4, validUntil: 0 }, mirrors: [] })[0],
  ).toMatchObject({ level: "warn", summary: expect.stringContaining("held by hel1") });
  expect(
    regionChecks({
      local: "fsn1",
      now,
      lease: undefined,
      mirrors: [{ remote: "hel1", lag: 12, activeMs: 60_000, replicaPending: 3 }],
    }).map((x) => x.level),
  ).toEqual(["fail", "warn"]);
});

test("plan shares: held while the lease is; a lapsed share under a held lease fails (the keeper cannot write it), under a lapsed lease warns", () => {
  const base = { local: "fsn1", now, mirrors: [] };
  const held = { holder: "fsn1", epoch: 3, validUntil: now + 5000 };
  const ok = regionChecks({ ...base, lease: held, shares: [{ keyRef: "key_a", threads: 4, validS: 3 }] });
  expect(ok.find((c) => c.name === "plan")).toMatchObject({
    level: "ok",
    summary: expect.stringContaining("4 threads"),
  });
  const stuck = regionChecks({ ...base, lease: held, shares: [{ keyRef: "key_a", threads: 4, validS: -12 }] });
  expect(stuck.find((c) => c.name === "plan")).toMatchObject({
    level: "fail",
    summary: expect.stringContaining("lapsed 12 s ago"),
  });
  const fenced = regionChecks({
    ...base,
    lease: { ...held, validUntil: now - 1 },
    shares: [{ keyRef: "key_a", threads: 4, validS: -12 }],
  });
  expect(fenced.find((c) => c.name === "plan")!.level).toBe("warn");
});
