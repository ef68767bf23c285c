import { expect, test } from "bun:test";
import { breakerStormNotification, dlqGrowthNotification, leaseNotification } from "./messages.ts";

test("each event has its own key: a fence by its epoch, a failover by the remote and epoch, a storm by its start", () => {
  const fenced = leaseNotification({ kind: "fenced", region: "fsn1", epoch: 4, at: Date.UTC(2026, 11, 6, 3) });
  expect(fenced).toMatchObject({ key: "fence:fsn1:4", kind: "fenced", severity: "critical", region: "fsn1" });
  expect(fenced.text).toContain("2026-12-06T03:00:00.000Z");
  const over = leaseNotification({
    kind: "takeover",
    region: "hel1",
    remote: "fsn1",
    epoch: 5,
    at: 0,
    stillForMs: 9200,
  });
  expect(over).toMatchObject({
    key: "failover:fsn1:5",
    kind: "failover",
    title: "failover: region fsn1 taken over by hel1",
  });
  expect(over.text).toContain("9.2 s");
  const back = leaseNotification({ kind: "unfenced", region: "fsn1", epoch: 6, at: 7, fencedForMs: 3500 });
  expect(back).toMatchObject({ severity: "info", title: "region fsn1 serves again" });
  const storm = breakerStormNotification(
    {
      key: "breaker:acct1:17",
      region: "fsn1",
      summary: "provider account acct1: breaker open for more than 60 s",
      startedAt: "2026-12-06T03:00:00.000Z",
      detail: { keyRef: "acct1", workers: 2 },
    },
    9,
  );
  expect(storm).toMatchObject({ key: "storm:fsn1:breaker:acct1:17", path: "/console/incidents/9" });
  expect(storm.text).toContain("since 2026-12-06T03:00:00.000Z (2 solver(s))");
  expect(dlqGrowthNotification("fsn1", { fromSeq: 101, grew: 50, windowMs: 600_000 })).toMatchObject({
    key: "dlq:fsn1:101",
    title: "dead letters growing: 50 new in 10 min",
  });
});
