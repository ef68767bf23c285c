// `recovery rotate-key`: switch every solver to another key of their key file; waits until all applied it.
import { rotateKey } from "../../fleet/config-ops.ts";
import type { CommandOf } from "../args.ts";
import { type CliEnv, print } from "../env.ts";
import { withFleet } from "../fleet.ts";

/** Exit 1 unless every live solver applied the new key (and at least one is alive). */
export function rotateKeyCommand(cmd: CommandOf<"rotate-key">, env: CliEnv): Promise<number> {
  return withFleet(env, cmd.by, async ({ deps }) => {
    const r = await rotateKey(deps, cmd.to, {
      ...(cmd.reason ? { reason: cmd.reason } : {}),
      waitMs: cmd.wait ?? 30_000,
    });
    const ok = r.refused.length === 0 && r.pending.length === 0 && r.workers.length > 0;
    print(
      cmd.json,
      r,
      `rotate-key ${r.from ?? "?"} -> ${cmd.to}: revision ${r.revision}; applied by ${r.applied.length}/${r.workers.length} solver(s) in ${r.ms} ms` +
        (r.refused.length
          ? `\nREFUSED by ${r.refused.map((x) => `${x.workerId} (${x.error})`).join(", ")}: the old key is still in use there; fix the key file, then rotate again`
          : "") +
        (r.pending.length ? `\nno answer yet from ${r.pending.join(", ")}` : "") +
        (r.workers.length === 0 ? "\nno live solver: the new key is used when they start" : ""),
    );
    return ok ? 0 : 1;
  });
}
