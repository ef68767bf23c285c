// The rollouts panel without a server: steps with pause markers, the last gate reading, the log,
// and the buttons `command` allows (an operator's only); the browser test clicks them.
import { expect, test } from "bun:test";
import { newRollout, type Rollout, RolloutPlan, withLog } from "@pipeline/shared/rollout";
import type { ConsoleState } from "./data.ts";
import { rolloutPanel } from "./rollout-panel.ts";

const plan = RolloutPlan.parse({ version: "v2", stable: "v1", regions: ["fsn1"], steps: [5, "pause", 100], gate: {} });
const figures = {
  canary: { tasks: 12, failed: 0, p95Ms: 820, extraPaid: 0, providerCalls: 30, providerErrors: 1 },
  stable: { tasks: 40, failed: 1, p95Ms: 760, extraPaid: 0, providerCalls: 90, providerErrors: 2 },
};
const waiting: Rollout = withLog(
  {
    ...newRollout(plan, new Date(0), "ops"),
    state: "paused",
    awaiting: "promotion",
    step: 1,
    applied: true,
    reason: "waiting for promotion after 5% in fsn1",
  },
  { action: "await", region: "fsn1", percent: 5, why: "waiting for promotion after 5% in fsn1", figures },
  new Date(1000),
);
const state = (record: Rollout | null) =>
  ({
    region: "fsn1",
    rollouts: { shards: 16, share: { v1: 15, v2: 1 }, updatedAt: new Date(0).toISOString(), by: "x", revision: 2 },
    rollout: record ? { record, revision: 5 } : null,
  }) as unknown as ConsoleState;
const op = { name: "alice", role: "operator" as const };
const viewer = { name: "bob", role: "viewer" as const };
const fig = (html: string, name: string) => new RegExp(`data-figure="${name}"[^>]*>([^<]*)<`).exec(html)?.[1];

test("a rollout waiting at its pause step: the steps with the pause current, the gate reading, Promote goes on", () => {
  const html = rolloutPanel(state(waiting), op);
  expect(html).toMatch(/<li class="pause current" aria-current="step">pause<\/li>/);
  expect(html).toContain('<li class=" done">5%</li>');
  expect(fig(html, "rollout.percent")).toBe("5%");
  expect(fig(html, "rollout.awaiting")).toBe("waiting for promotion");
  expect(fig(html, "rollout.gate.canary.tasks")).toBe("12");
  expect(fig(html, "rollout.gate.stable.p95")).toBe("760 ms");
  expect(fig(html, "rollout.gate.verdict")).toBe("waiting for promotion after 5% in fsn1");
  // Resume is refused at a pause step (promote goes on), so there is no Resume button; nor Pause.
  const verbs = [...html.matchAll(/data-rollout-verb="(\w+)"/g)].map((m) => m[1]);
  expect(verbs).toEqual(["promote", "abort"]);
  expect(html).toContain("Promote (go on to 100%)");
});

test("a viewer sees no button; an ended rollout has none; no rollout says so", () => {
  expect(rolloutPanel(state(waiting), viewer)).not.toContain("data-rollout-verb");
  expect(rolloutPanel(state(waiting), viewer)).toContain("the operator role is needed");
  expect(rolloutPanel(state({ ...waiting, state: "aborted", awaiting: undefined }), op)).not.toContain(
    "data-rollout-verb",
  );
  expect(rolloutPanel(state(null), op)).toContain("no rollout has run");
});

test("running: Pause, Promote (100% in the region) and Abort; an inconclusive pause: Resume, Promote, Abort", () => {
  const running = { ...waiting, state: "running" as const, awaiting: undefined, step: 0 };
  expect([...rolloutPanel(state(running), op).matchAll(/data-rollout-verb="(\w+)"/g)].map((m) => m[1])).toEqual([
    "pause",
    "promote",
    "abort",
  ]);
  expect(rolloutPanel(state(running), op)).toContain("Promote (100% in fsn1)");
  const held = { ...running, state: "paused" as const, awaiting: "decision" as const, reason: "inconclusive: <b>" };
  const html = rolloutPanel(state(held), op);
  expect([...html.matchAll(/data-rollout-verb="(\w+)"/g)].map((m) => m[1])).toEqual(["resume", "promote", "abort"]);
  expect(fig(html, "rollout.awaiting")).toBe("inconclusive: decide");
  expect(html).not.toContain("<b>");
});
