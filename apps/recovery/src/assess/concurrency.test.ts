import { describe, expect, test } from "bun:test";
import type { Heartbeat } from "@pipeline/shared/kv";
import { concurrencyChecks } from "./concurrency.ts";

const beat = (workerId: string, concurrencyLimits?: Heartbeat["concurrencyLimits"]): Heartbeat => ({
  workerId,
  pid: 1,
  host: "h",
  version: "v1",
  startedAt: "2026-12-06T00:00:00Z",
  at: "2026-12-06T00:00:01Z",
  inFlight: 0,
  keyName: "default",
  keyRef: "key_1",
  breaker: "closed",
  configRevision: null,
  configRejected: null,
  ...(concurrencyLimits ? { concurrencyLimits } : {}),
});

describe("assess: limits", () => {
  test("no line when no solver adapts", () => {
    expect(concurrencyChecks([beat("s1.a")])).toEqual([]);
  });

  test("each solver's limit over its plan; a limit down to 1 warns", () => {
    const [ok] = concurrencyChecks([beat("s1.a", { key_1: { limit: 12, plan: 40, held: 11 } }), beat("s2.b")]);
    expect(ok).toMatchObject({ name: "limits", level: "ok" });
    expect(ok!.summary).toContain("s1.a key_1 12/40 (11 held)");
    const [warn] = concurrencyChecks([beat("s1.a", { key_1: { limit: 1, plan: 40, held: 1 } })]);
    expect(warn).toMatchObject({ name: "limits", level: "warn" });
    expect(warn!.hint).toContain("refuses");
  });
});
