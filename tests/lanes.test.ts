// Pausing a lane on a running stack (gateway, solver, emulated provider): with `normal` paused,
// high tasks complete while no normal task starts (no provider submission, rows stay queued, a
// solver started meanwhile does not take them either); resumed, they complete; nothing is lost.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eventually } from "@pipeline/devstack/testing";
import type { TaskView } from "@pipeline/shared/schemas";
import { api, type Stack, startStack } from "./harness.ts";
import { runRecoveryCli } from "./support/recovery-cli.ts";

const snapshots = mkdtempSync(join(tmpdir(), "lanes-e2e-"));

const region = "lanesx";
let s: Stack;
beforeAll(async () => {
  s = await startStack({ region, solvers: 1, emulator: { latencyMs: 200 } });
}, 120_000);
afterAll(async () => {
  await s?.stop();
});

interface Lane {
  lane: string;
  state: string;
  record: { by: string; reason?: string } | null;
  consumers: { name: string; paused: boolean }[];
}

/** `bun run recovery lanes ...` against the stack, as an operator runs it; its JSON. */
const lanes = <T>(...args: string[]) => recoveryCli<T>(["lanes", ...args]);

/** A recovery command with `--json` against the stack; its exit code must be one of `codes`. */
async function recoveryCli<T>(args: string[], codes = [0]): Promise<T> {
  const { code, out, err } = await runRecoveryCli(s, { region, snapshotDir: snapshots }, [...args, "--json"]);
  expect(codes).toContain(code);
  expect(err).toBe("");
  return JSON.parse(out) as T;
}
const status = () => lanes<Lane[]>();
const normalOf = (l: Lane[]) => l.find((x) => x.lane === "normal")!;

async function submit(priority: string, n: number, tag: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = await api<{ id: string }>(s, "/v1/tasks", {
      method: "POST",
      body: {
        type: "turnstile",
        priority,
        params: { sitekey: "0x4AAAAAAAC3DHQFLr1GavRN", pageurl: `https://example.com/${tag}/${i}` },
      },
    });
    expect(r.status).toBe(202);
    ids.push(r.body.id);
  }
  return ids;
}

const states = async (ids: string[]) =>
  s.db.sql<{ state: string; started_at: Date | null }[]>`select state, started_at from tasks where id = any(${ids})`;

test("normal paused: high completes, no normal task starts (a new solver neither); resumed: all complete, none lost", async () => {
  // The solver's lane consumers exist once it has started.
  await eventually(async () => (await status()).every((l) => l.consumers.length === 1), 30_000);
  const paused = await lanes<{ state: Lane }>("pause", "normal", "--reason", "e2e", "--by", "ops");
  expect(paused.state.state).toBe("paused");
  expect(paused.state.record?.reason).toBe("e2e");
  const before = s.emu.stats().submissions;
  const normal = await submit("normal", 6, "normal");
  const high = await submit("high", 4, "high");
  for (const id of high) expect((await api<TaskView>(s, `/v1/tasks/${id}?wait=30`)).body.status).toBe("completed");
  // A solver starting while the lane is paused (its consumers made again at its start) takes none either.
  s.spawnSolver();
  const t0 = Date.now();
  while (Date.now() - t0 < 5000) {
    const rows = await states(normal);
    expect(rows.map((r) => r.state)).toEqual(Array(6).fill("queued"));
    expect(rows.every((r) => r.started_at === null)).toBe(true);
    await Bun.sleep(500);
  }
  expect(s.emu.stats().submissions - before).toBe(high.length);
  const held = normalOf(await status());
  expect(held.consumers.length).toBe(1);
  expect(held.consumers.every((c) => c.paused)).toBe(true);
  // assess: the paused lane is a warning naming who paused it, and its waiting tasks are no failure.
  const a = await recoveryCli<{ checks: { name: string; level: string; summary: string }[] }>(["assess"], [0, 1]);
  const laneLine = a.checks.find((c) => c.name === "lane");
  console.log(`[lanes] assess while paused: ${JSON.stringify(a.checks.filter((c) => c.level !== "ok"))}`);
  expect(laneLine?.level).toBe("warn");
  expect(laneLine?.summary).toMatch(/^normal PAUSED by ops@.* since .*: e2e/);
  expect(a.checks.find((c) => c.name === "queue")?.level).not.toBe("fail");

  const t1 = Date.now();
  const resumed = await lanes<{ failed: unknown[]; state: Lane }>("resume", "normal");
  expect(resumed.failed).toEqual([]);
  expect(resumed.state.state).toBe("running");
  for (const id of normal) expect((await api<TaskView>(s, `/v1/tasks/${id}?wait=30`)).body.status).toBe("completed");
  console.log(
    `[lanes] 6 normal tasks held queued for ${Math.round((t1 - t0) / 1000)} s while 4 high completed; all 6 completed ${Date.now() - t1} ms after the resume`,
  );
  const rows = await states([...normal, ...high]);
  expect(rows.length).toBe(10);
  expect(rows.every((r) => r.state === "completed")).toBe(true);
  expect(s.emu.stats().submissions - before).toBe(10);
  const audit = await s.db.sql<{ action: string; actor: string }[]>`
    select action, actor from audit_log where action like 'lane.%' order by id`;
  expect(audit.map((a) => a.action)).toEqual(["lane.pause", "lane.resume"]);
  expect(audit[0]!.actor).toMatch(/^cli:ops@/);
}, 180_000);
