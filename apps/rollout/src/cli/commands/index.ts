// The command table: one entry per command of cli/args.ts, each handler in its own file, with the
// regions it reaches (the CLI connects to those before running it).
import type { CliArgs, Verb } from "../args.ts";
import type { CliContext, Reach } from "../context.ts";
import { changeCommand } from "./change.ts";
import { historyCommand } from "./history.ts";
import { reconcileCommand } from "./reconcile.ts";
import { serveCommand } from "./serve.ts";
import { shiftCommand } from "./shift.ts";
import { startCommand } from "./start.ts";
import { statusCommand } from "./status.ts";

/** A command's handler: the exit code (0 done, 1 failed, 2 usage, 3 refused). */
export type Handler = (ctx: CliContext, args: CliArgs) => Promise<number>;

/** A command on the record or the shards (`reach`: the home region, or every one), or the service (no connection of the CLI's own). */
export type Entry =
  | { reach: Reach; run: Handler }
  | { reach: "none"; run: (env: Record<string, string | undefined>) => Promise<number> };

export const COMMANDS: Record<Verb, Entry> = {
  start: { reach: "all", run: startCommand },
  status: { reach: "all", run: statusCommand },
  history: { reach: "home", run: historyCommand },
  pause: { reach: "home", run: changeCommand("pause") },
  resume: { reach: "home", run: changeCommand("resume") },
  promote: { reach: "home", run: changeCommand("promote") },
  abort: { reach: "home", run: changeCommand("abort") },
  serve: { reach: "none", run: serveCommand },
  shift: { reach: "home", run: shiftCommand },
  reconcile: { reach: "home", run: reconcileCommand },
};
