// The CLI's argument parsing: refusals that must happen before anything connects (issue 14).
import { expect, test } from "bun:test";
import { type DrillOptions, runDrill } from "../drill/run-drill.ts";
import { parseCommand } from "./args.ts";

test("drills that destroy live state (queue-loss, db-loss) are refused without --yes, naming it", () => {
  for (const scenario of ["queue-loss", "db-loss"]) {
    const r = parseCommand(["drill", scenario]);
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.error).toContain("--yes");
    expect(parseCommand(["drill", scenario, "--yes"]).ok).toBe(true);
    expect(parseCommand(["drill", scenario, "--rate", "5", "--yes", "--json"]).ok).toBe(true);
  }
  // The others destroy nothing: no confirmation asked.
  for (const scenario of ["worker-crash", "key-compromise", "config-corruption"])
    expect(parseCommand(["drill", scenario]).ok).toBe(true);
});

test("runDrill itself refuses an unconfirmed destructive scenario before touching anything", async () => {
  // No context at all: the refusal comes before the first use of any dependency.
  const o = { scenario: "db-loss" } as unknown as DrillOptions;
  await expect(runDrill(o)).rejects.toThrow(/--yes/);
  await expect(runDrill({ ...o, scenario: "queue-loss" })).rejects.toThrow(/--yes/);
});

test("reconcile takes --hours (a whole number of hours) and --json; anything else is refused naming the flag", () => {
  expect(parseCommand(["reconcile"])).toEqual({ ok: true, command: { command: "reconcile", args: [] } });
  expect(parseCommand(["reconcile", "--hours", "2", "--json"])).toEqual({
    ok: true,
    command: { command: "reconcile", args: [], hours: 2, json: true },
  });
  const bad = parseCommand(["reconcile", "--hours", "0.5"]);
  expect(bad.ok).toBe(false);
  if (!bad.ok) expect(bad.error).toStartWith("--hours:");
  const unknown = parseCommand(["reconcile", "--days", "2"]);
  if (!unknown.ok) expect(unknown.error).toContain("--days");
});
