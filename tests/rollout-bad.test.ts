// The rollout-bad drill, short variant (`npm run drill -- rollout-bad` runs the full one): v2 is
// misconfigured (its provider URL refuses connections), so the tasks it takes up fail their
// submission and wait for a retry. The gate compares v2 with v1 on the same window and rolls the
// rollout back: v2 drained, every shard back to v1, which finishes what v2 touched. Nothing is
// lost, no task ends failed, nothing is paid twice.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { eventually } from "@pipeline/devstack/testing";
import { type RolloutStage, runRolloutDrill, startRolloutStage } from "./support/rollout-drill.ts";

const FULL = process.env.ROLLOUT_DRILL_FULL === "1";
const RATE = Number(process.env.DRILL_RATE ?? 10);
const START = FULL
  ? ["--bake", "10s", "--gate", "minTasks=10"]
  : ["--steps", "25,100", "--bake", "4s", "--gate", "minTasks=10"];
let stage: RolloutStage;
// The operators' webhook (NOTIFY_WEBHOOK_URL of the rollout service): what it posted.
const hooks: { key: string; kind: string; severity: string; text: string }[] = [];
const hookServer = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    const b = (await req.json()) as { text: string; pipeline: { key: string; kind: string; severity: string } };
    hooks.push({ ...b.pipeline, text: b.text });
    return new Response("ok");
  },
});

beforeAll(async () => {
  // Port 9 (discard) is closed here: every provider call of v2 is refused.
  stage = await startRolloutStage({
    canaryEnv: { PROVIDER_URL: "http://127.0.0.1:9" },
    serviceEnv: {
      NOTIFY_WEBHOOK_URL: `http://127.0.0.1:${hookServer.port}/hook`,
      NOTIFY_CONSOLE_URL: "http://console.test",
    },
  });
}, 120_000);
afterAll(async () => {
  hookServer.stop(true);
  await stage?.stop();
});

test(`rollout-bad: a misconfigured v2 under ${RATE} tasks/s per region is rolled back by the gate; v1 finishes its tasks`, async () => {
  const f = await runRolloutDrill(stage, { rate: RATE, startArgs: START, endWithin: 120_000 });
  const gate = f.record.reason?.replace(/^gate failed in \S+ at \d+%: /, "") ?? "?";
  console.log(
    `drill rollout-bad: acknowledged ${f.acknowledged}, lost ${f.lost}, failed ${f.failed}, extra paid submissions ${f.extraPaid} ($${((f.extraPaid * 1450) / 1e6).toFixed(5)} at the list price), rolled back after ${f.seconds.toFixed(1)} s (gate: ${gate})` +
      ` (v2 took up ${f.touchedByCanary} task(s), ${f.touchedCompleted} of them completed by v1; tasks taken up by ${Object.entries(
        f.solvedBy,
      )
        .map(([w, n]) => `${w} ${n}`)
        .join(", ")})`,
  );
  console.log((await stage.cli("history")).out.trim());
  expect(f.record.state).toBe("rolledBack");
  // The rollback reached the operators' webhook once, with the gate's reason and the console's link.
  await eventually(async () => hooks.some((h) => h.kind === "rollback"), 10_000, 100);
  await Bun.sleep(1500);
  const rollbacks = hooks.filter((h) => h.kind === "rollback");
  expect(rollbacks).toHaveLength(1);
  expect(rollbacks[0]!.severity).toBe("critical");
  expect(rollbacks[0]!.text).toContain("gate failed in fsn1");
  expect(rollbacks[0]!.text).toContain("<http://console.test/console#rollout|Open the console>");
  expect(new Set(hooks.map((h) => h.key)).size).toBe(hooks.length);
  expect(f.record.reason).toMatch(/^gate failed in fsn1 at /);
  expect(f.seconds).toBeLessThan(30);
  expect(f.lost).toBe(0);
  expect(f.failed).toBe(0);
  expect(f.extraPaid).toBe(0);
  expect(f.touchedByCanary).toBeGreaterThan(0);
  expect(f.touchedCompleted).toBe(f.touchedByCanary);
  // hel1 was never touched; fsn1 is all v1 again and v2 idles there.
  const st = (await (await fetch(stage.statusUrl)).json()) as {
    regions: Record<string, { share: Record<string, number> }>;
  };
  expect(st.regions.fsn1!.share).toEqual({ v1: 16 });
  expect(st.regions.hel1!.share).toEqual({ v1: 16 });
  expect(f.record.log.some((e) => e.region === "hel1" && e.action === "shift")).toBe(false);
}, 400_000);
