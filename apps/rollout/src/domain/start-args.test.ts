import { expect, test } from "bun:test";
import { DEFAULT_STEPS, parseDuration, parseStartArgs, planOf } from "./start-args.ts";

const where = { stable: "v1", regions: ["fsn1", "hel1"] };

test("defaults: 5, 25, 50, 100 % in every region, stable from the assignment", () => {
  const p = planOf(parseStartArgs(["v2"]), where);
  expect(p).toMatchObject({
    version: "v2",
    stable: "v1",
    regions: ["fsn1", "hel1"],
    steps: DEFAULT_STEPS,
    bakeMs: 60_000,
    progressDeadlineMs: 600_000,
  });
  expect(p.gate.minTasks).toBe(20);
});

test("every option", () => {
  const p = planOf(
    parseStartArgs([
      "v3",
      "--steps",
      "10,50%,100",
      "--regions",
      "hel1",
      "--stable",
      "v2",
      "--bake",
      "5s",
      "--deadline",
      "2m",
      "--gate",
      "minTasks=5,maxP95Ratio=2",
    ]),
    where,
  );
  expect(p).toMatchObject({
    version: "v3",
    stable: "v2",
    regions: ["hel1"],
    steps: [10, 50, 100],
    bakeMs: 5000,
    progressDeadlineMs: 120_000,
    gate: { minTasks: 5, maxP95Ratio: 2 },
  });
});

test("bad input names the option or field", () => {
  expect(() => parseStartArgs([])).toThrow("start: takes <version> first");
  expect(() => parseStartArgs(["v2", "--step", "5"])).toThrow('unknown option "--step"');
  expect(() => parseStartArgs(["v2", "--bake", "soon"])).toThrow("--bake");
  expect(() => planOf(parseStartArgs(["v2", "--steps", "50,25,100"]), where)).toThrow(
    "steps: increasing percentages ending at 100",
  );
  expect(() => planOf(parseStartArgs(["v2", "--gate", "minTask=5"]), where)).toThrow("gate");
  expect(() => planOf(parseStartArgs(["V2"]), where)).toThrow("version");
  expect(() => planOf(parseStartArgs(["v1"]), where)).toThrow("already the stable version");
  expect(parseDuration("1.5s")).toBe(1500);
});

test("pause steps and --on-inconclusive", () => {
  const p = planOf(parseStartArgs(["v2", "--steps", "5,pause,25%,50,100", "--on-inconclusive", "rollback"]), where);
  expect(p.steps).toEqual([5, "pause", 25, 50, 100]);
  expect(p.onInconclusive).toBe("rollback");
  expect(planOf(parseStartArgs(["v2"]), where).onInconclusive).toBe("pause");
  expect(() => planOf(parseStartArgs(["v2", "--steps", "pause,50,100"]), where)).toThrow(
    "a pause step comes after a percentage, not first",
  );
  expect(() => planOf(parseStartArgs(["v2", "--steps", "50,100,pause"]), where)).toThrow("ending at 100");
  expect(() => parseStartArgs(["v2", "--steps", "5,hold,100"])).toThrow("start: --steps");
  expect(() => parseStartArgs(["v2", "--on-inconclusive", "wait"])).toThrow("start: --on-inconclusive");
});
