// `recovery config show|history|set|rollback`: the solvers' runtime config in KV.
import { readFileSync } from "node:fs";
import { configHistory, liveWorkers } from "@pipeline/shared/kv";
import { UsageError } from "../../context.ts";
import { rollbackConfig, setConfig } from "../../fleet/config-ops.ts";
import type { CommandOf } from "../args.ts";
import { type CliEnv, print } from "../env.ts";
import { type Fleet, withFleet } from "../fleet.ts";

type ConfigCmd = CommandOf<"config">;

/** show: the current revision; history: every kept one; both with the revisions in use. */
async function showConfig(cmd: ConfigCmd, { configKv, workersKv }: Fleet, sub: "show" | "history"): Promise<number> {
  const all = await configHistory(configKv);
  const { workers } = await liveWorkers(workersKv);
  const shown = sub === "show" ? all.slice(-1) : all;
  const lines = shown.map(
    (r) =>
      `rev ${String(r.revision).padEnd(5)} ${r.at.toISOString()}  ${r.parsed.ok ? `${r.parsed.value.changedBy}: ${JSON.stringify((({ changedBy: _b, changedAt: _a, ...f }) => f)(r.parsed.value))}` : `INVALID (${r.parsed.error})`}`,
  );
  const inUse = [...new Set(workers.map((w) => String(w.configRevision ?? "env")))];
  print(
    cmd.json,
    { revisions: shown, inUse },
    `${lines.join("\n") || "no config stored: solvers use their environment"}\nin use by the live solvers: ${inUse.join(", ") || "(none alive)"}`,
  );
  return 0;
}

/** set: a JSON document from a file or stdin (`-`), validated, stored as a new revision. */
async function setConfigFrom(cmd: ConfigCmd, { deps }: Fleet, arg: string | number | undefined): Promise<number> {
  const text = arg === "-" ? await Bun.stdin.text() : readFileSync(String(arg), "utf8");
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new UsageError(`${arg}: not JSON`);
  }
  const r = await setConfig(deps, doc, cmd.reason);
  print(cmd.json, r, `stored revision ${r.revision}; \`recovery workers\` shows who applied it`);
  return 0;
}

export function configCommand(cmd: ConfigCmd, env: CliEnv): Promise<number> {
  return withFleet(env, cmd.by, async (fleet) => {
    const [sub, arg] = cmd.args;
    if (sub === "show" || sub === "history") return showConfig(cmd, fleet, sub);
    if (sub === "set") return setConfigFrom(cmd, fleet, arg);
    const r = await rollbackConfig(fleet.deps, typeof arg === "number" ? arg : undefined, cmd.reason);
    print(cmd.json, r, `revision ${r.restored} restored as revision ${r.revision}`);
    return 0;
  });
}
