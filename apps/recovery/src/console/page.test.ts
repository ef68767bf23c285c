// The console's rendering without a server: what each role sees, escaping, labels, event data
// filtering and the two-region view (the browser test covers the live page).
import { expect, test } from "bun:test";
import { newRollout, RolloutPlan, withLog } from "@pipeline/shared/rollout";
import { fillBuckets } from "./charts.ts";
import { type ConsoleState, regionsViewOf, safeEventData } from "./data.ts";
import { renderLive, renderLogin, renderPage, renderTimeline } from "./page.ts";

const now = Date.UTC(2026, 11, 4, 5, 0, 0);
const hostile = `<script>alert(1)</script>`;
const state = (over: Partial<ConsoleState> = {}): ConsoleState => ({
  at: new Date(now).toISOString(),
  region: "fsn1",
  regions: ["fsn1"],
  tasks: [
    { region: "fsn1", state: "completed", type: "turnstile", n: 7 },
    { region: "fsn1", state: "failed", type: "image", n: 1 },
    { region: "hel1", state: "completed", type: "turnstile", n: 2 },
  ],
  window: { minutes: 15, buckets: fillBuckets([], now), completed: 9, perMinute: 0.6, p50: 420, p95: 900 },
  provider: { solved: 9, calls: 20, callsPerSolved: 20 / 9, extraPaid: 1 },
  fleet: { workers: [], error: null },
  keys: [{ keyRef: "key_abc", names: ["default"], threads: 50, inUse: 3, balance: "12.5" }],
  dlq: {
    stream: 1,
    failed: [
      {
        id: "01a23f44-13cb-7216-a127-dd1fd3eb3b01",
        type: "image",
        region: "fsn1",
        at: new Date(now).toISOString(),
        code: "ERROR_X",
        reason: hostile,
        redrives: 0,
        home: true,
      },
    ],
  },
  recovery: { snapshot: null, drills: [], assess: null },
  regionsView: null,
  rollouts: null,
  money: {
    today: { chargedMicros: 44_850, refundedMicros: 2_990, netMicros: 41_860 },
    last30Days: { chargedMicros: 1_044_850, refundedMicros: 2_990, netMicros: 1_041_860 },
    accounts: [
      {
        provider: "2captcha.com/key_abc",
        balanceMicros: 12_500_000,
        sampledAt: now - 20_000,
        spendPerHourMicros: 2_500_000,
        hoursLeft: 5,
      },
    ],
    level: "warn",
  },
  ...over,
});

const fig = (html: string, name: string) =>
  new RegExp(`data-figure="${name.replace(/\./g, "\\.")}">([^<]*)<`).exec(html)?.[1];

test("figures per region, type and state, totals, provider calls", () => {
  const html = renderLive(state(), { name: "a", role: "viewer" });
  expect(fig(html, "tasks.fsn1.turnstile.completed")).toBe("7");
  expect(fig(html, "tasks.hel1.turnstile.completed")).toBe("2");
  expect(fig(html, "tasks.total.completed")).toBe("9");
  expect(fig(html, "tasks.all.failed")).toBe("1");
  expect(fig(html, "provider.callsPerSolved")).toBe("2.22");
  expect(fig(html, "provider.extraPaid")).toBe("1");
  expect(fig(html, "key.key_abc.inUse")).toBe("3");
});

test("redrive buttons only for operators and home tasks; text from rows is escaped", () => {
  const viewer = renderLive(state(), { name: "v", role: "viewer" });
  expect(viewer).not.toContain("data-redrive");
  expect(viewer).toContain("operator role needed");
  const op = renderLive(state(), { name: "o", role: "operator" });
  expect(op).toContain('aria-label="Redrive task 01a23f44-13cb-7216-a127-dd1fd3eb3b01"');
  expect(op).not.toContain(hostile);
  expect(op).toContain("&lt;script&gt;");
  const away = state();
  away.dlq.failed[0]!.home = false;
  away.dlq.failed[0]!.region = "hel1";
  expect(renderLive(away, { name: "o", role: "operator" })).not.toContain("data-redrive");
});

test("timelines never carry a token: event data is filtered to named fields", () => {
  expect(safeEventData({ token: "TOKEN-1", userAgent: "UA", providerId: "77", worker: "w1", expiresAt: "x" })).toEqual({
    providerId: "77",
    worker: "w1",
    expiresAt: "x",
  });
  const html = renderTimeline(
    {
      task: {
        id: "01a23f44-13cb-7216-a127-dd1fd3eb3b01",
        region: "fsn1",
        type: "turnstile",
        priority: "normal",
        state: "completed",
        version: 2,
        attempts: 1,
        redrives: 0,
        providerId: "77",
        providerKeyRef: "key_abc",
        providerSubmissions: 1,
        providerPolls: 2,
        leaseOwner: null,
        submitOwner: "w1",
        errorCode: null,
        errorMessage: null,
        createdAt: "2026-12-04T05:00:00.000Z",
        startedAt: null,
        completedAt: null,
        deadlineAt: null,
        hasToken: true,
      },
      events: [
        {
          seq: 5,
          at: "2026-12-04T05:00:01.000Z",
          kind: "completed",
          state: "completed",
          version: 2,
          region: "fsn1",
          data: safeEventData({ token: "TOKEN-1", providerId: "77" }),
        },
      ],
      truncated: false,
      audit: [],
    },
    "x",
  );
  expect(html).not.toContain("TOKEN-1");
  expect(html).toContain("stored (never shown)");
  expect(html).toContain("providerId=77");
  expect(renderTimeline(undefined, "<b>")).toContain("&lt;b&gt;");
});

test("rollouts: shard share per version from the assignment; none before the first solver", () => {
  const html = renderLive(
    state({
      rollouts: {
        shards: 16,
        share: { v1: 12, v2: 4 },
        updatedAt: "2026-12-04T05:00:00.000Z",
        by: "solver w1",
        revision: 3,
      },
    }),
    { name: "v", role: "viewer" },
  );
  expect(fig(html, "rollout.v1.shards")).toBe("12");
  expect(fig(html, "rollout.v2.percent")).toBe("25%");
  expect(html).toContain('aria-label="share of version v2"');
  expect(renderLive(state(), { name: "v", role: "viewer" })).toContain("no shard assignment yet");
  expect(renderLive(state({ rollouts: { error: "timeout" } }), { name: "v", role: "viewer" })).toContain(
    "unreadable: timeout",
  );
});

test("two regions: the lease holder and each mirror's lag; one region: none", () => {
  expect(regionsViewOf(["fsn1"], null)).toBeNull();
  const v = regionsViewOf(["fsn1", "hel1"], {
    local: "fsn1",
    lease: { holder: "fsn1", epoch: 3, validUntil: 15_000 },
    mirrors: [{ remote: "hel1", lag: 12, activeMs: 300, replicaPending: 0 }],
    now: 10_000,
  });
  expect(v).toEqual({
    lease: { holder: "fsn1", epoch: 3, validForMs: 5000 },
    mirrors: [{ remote: "hel1", lag: 12, activeMs: 300 }],
  });
  const html = renderLive(state({ regions: ["fsn1", "hel1"], regionsView: v }), { name: "v", role: "viewer" });
  expect(fig(html, "lease.holder")).toBe("fsn1");
  expect(fig(html, "mirror.hel1.lag")).toBe("12");
  expect(
    regionsViewOf(["fsn1", "hel1"], {
      local: "fsn1",
      lease: new Error("down"),
      mirrors: [{ remote: "hel1", error: "not found" }],
      now: 0,
    }),
  ).toEqual({ lease: "down", mirrors: [{ remote: "hel1", error: "not found" }] });
});

test("the rollout service's record: state, step and the last decision, escaped; none before the first rollout", () => {
  const plan = RolloutPlan.parse({ version: "v2", stable: "v1", regions: ["fsn1", "hel1"], steps: [5, 100], gate: {} });
  const base = newRollout(plan, new Date(now), "ops");
  const html = renderLive(
    state({
      rollout: {
        revision: 3,
        record: withLog(
          { ...base, state: "rolledBack", applied: true, reason: `gate failed in fsn1 at 5%: ${hostile}` },
          { action: "rollback", why: "task failure rate 45.5% vs stable 0.0%" },
          new Date(now),
        ),
      },
    }),
    { name: "v", role: "viewer" },
  );
  expect(fig(html, "rollout.state")).toBe("rolledBack");
  expect(html).toContain("task failure rate 45.5% vs stable 0.0%");
  expect(html).not.toContain("<script>alert(1)");
  const running = renderLive(
    state({ rollout: { revision: 4, record: { ...base, region: 1, step: 1, applied: false } } }),
    { name: "v", role: "viewer" },
  );
  expect(fig(running, "rollout.percent")).toBe("100%");
  expect(running).toContain("(moving shards)");
  expect(renderLive(state(), { name: "v", role: "viewer" })).toContain("no rollout has run");
});

test("money: spend today and over 30 days from the ledger, each account's balance, spend rate and hours left", () => {
  const html = renderLive(state(), { name: "v", role: "viewer" });
  expect(fig(html, "money.today.net")).toBe("$0.041860");
  expect(fig(html, "money.today.refunded")).toBe("$0.002990");
  expect(fig(html, "money.last30Days.net")).toBe("$1.041860");
  expect(fig(html, "money.2captcha.com/key_abc.balance")).toBe("$12.500000");
  expect(fig(html, "money.2captcha.com/key_abc.spendPerHour")).toBe("$2.500000/h");
  expect(fig(html, "money.2captcha.com/key_abc.hoursLeft")).toBe("5.0 h");
  expect(html).toContain('<span class="badge warn">warn</span>');
  const idle = renderLive(
    state({
      money: {
        today: { chargedMicros: 0, refundedMicros: 0, netMicros: 0 },
        last30Days: { chargedMicros: 0, refundedMicros: 0, netMicros: 0 },
        accounts: [{ provider: "p/key_x", balanceMicros: 1, sampledAt: now, spendPerHourMicros: 0, hoursLeft: null }],
        level: "ok",
      },
    }),
    { name: "v", role: "viewer" },
  );
  expect(fig(idle, "money.p/key_x.hoursLeft")).toBe("no spend in the last hour");
  expect(renderLive(state({ money: { error: hostile } }), { name: "v", role: "viewer" })).not.toContain(hostile);
});

test("a region named like the page does not double the title: the region is labelled as one", () => {
  const page = renderPage("", { name: "v", role: "viewer" }, "console");
  const h1 = /<h1>(.*?)<\/h1>/.exec(page)?.[1]?.replace(/<[^>]+>/g, "");
  expect(h1).toBe("Pipeline console region console");
  expect(/<title>([^<]*)<\/title>/.exec(page)?.[1]).toBe("Pipeline console · region console");
  expect(renderLogin("console")).toContain('Pipeline console <span class="muted">region console</span>');
});

test("with no rollout ever started, the rollouts panel says there has been none", () => {
  const html = renderLive(state({ rollout: null }), { name: "v", role: "viewer" });
  expect(html).toContain("no rollout has run");
  expect(html).not.toContain("unreadable");
});
