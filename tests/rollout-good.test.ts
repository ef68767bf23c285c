// The rollout-good drill, short variant (`npm run drill -- rollout-good` runs the full one): under
// steady load through both regions' gateways, the rollout service takes v2 from idle to every shard
// of fsn1, then of hel1, step by step, each gate comparing v2 with v1 on the same window. Every
// acknowledged task completes, none is paid twice, and both versions solved tasks.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { type RolloutStage, runRolloutDrill, startRolloutStage } from "./support/rollout-drill.ts";

const FULL = process.env.ROLLOUT_DRILL_FULL === "1";
const RATE = Number(process.env.DRILL_RATE ?? 10);
// Full: the default steps (5, 25, 50, 100 %) with a 10 s bake; short: 25 and 100 % with 4 s.
const START = FULL
  ? ["--bake", "10s", "--gate", "minTasks=10"]
  : ["--steps", "25,100", "--bake", "4s", "--gate", "minTasks=10"];
let stage: RolloutStage;

beforeAll(async () => {
  stage = await startRolloutStage();
}, 120_000);
afterAll(() => stage?.stop());

test(`rollout-good: v1 -> v2 in fsn1 then hel1 under ${RATE} tasks/s per region; nothing lost, nothing paid twice`, async () => {
  // The rollout service is killed -9 twice on the way (once mid-step in fsn1, once in hel1) and must resume.
  const f = await runRolloutDrill(stage, {
    rate: RATE,
    startArgs: START,
    endWithin: FULL ? 240_000 : 120_000,
    crashWhen: [(r) => r.log.some((e) => e.action === "shift"), (r) => r.region === 1],
  });
  console.log(
    `drill rollout-good: acknowledged ${f.acknowledged}, lost ${f.lost}, failed ${f.failed}, extra paid submissions ${f.extraPaid} ($${((f.extraPaid * 1450) / 1e6).toFixed(5)} at the list price), promoted in ${f.seconds.toFixed(1)} s` +
      ` (rollout service killed -9 ${f.crashes} times on the way; steps ${f.record.plan.steps.join("/")}% per region, bake ${f.record.plan.bakeMs / 1000} s; tasks taken up by ${Object.entries(
        f.solvedBy,
      )
        .map(([w, n]) => `${w} ${n}`)
        .join(", ")})`,
  );
  console.log((await stage.cli("history")).out.trim());
  expect(f.record.state).toBe("promoted");
  expect(f.crashes).toBe(2);
  expect(f.record.log.filter((e) => e.action === "shift").map((e) => `${e.region} ${e.percent}`)).toEqual(
    ["fsn1", "hel1"].flatMap((r, i) => f.record.plan.steps.slice(i === 0 ? 1 : 0).map((p) => `${r} ${p}`)),
  );
  expect(f.lost).toBe(0);
  expect(f.failed).toBe(0);
  expect(f.extraPaid).toBe(0);
  expect(f.touchedByCanary).toBeGreaterThan(0);
  expect(Object.keys(f.solvedBy).some((w) => !w.endsWith("-v2"))).toBe(true);
  // Both regions now pull every shard through v2.
  const st = (await (await fetch(stage.statusUrl)).json()) as {
    regions: Record<string, { share: Record<string, number> }>;
  };
  expect(st.regions.fsn1!.share).toEqual({ v2: 16 });
  expect(st.regions.hel1!.share).toEqual({ v2: 16 });
}, 400_000);
