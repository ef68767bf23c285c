// The command table: one handler per command of cli/args.ts, each in its own file.
import { type Command, type CommandOf, USAGE } from "../args.ts";
import type { CliEnv } from "../env.ts";
import { assessCommand } from "./assess.ts";
import { auditCommand } from "./audit.ts";
import { cancelAllCommand, redriveAllCommand } from "./bulk.ts";
import { configCommand } from "./config.ts";
import { drillCommand } from "./drill.ts";
import { fairShareCommand } from "./fair-share.ts";
import { incidentCommand, incidentsCommand } from "./incidents.ts";
import { lanesCommand } from "./lanes.ts";
import { migrateCommand } from "./migrate.ts";
import { rebuildQueueCommand } from "./rebuild-queue.ts";
import { reconcileCommand } from "./reconcile.ts";
import { recoverStaleCommand } from "./recover-stale.ts";
import { restoreCommand } from "./restore.ts";
import { retentionCommand } from "./retention.ts";
import { rotateKeyCommand } from "./rotate-key.ts";
import { snapshotCommand } from "./snapshot.ts";
import { snapshotsCommand } from "./snapshots.ts";
import { tasksCommand } from "./tasks.ts";
import { verifyCommand } from "./verify.ts";
import { workersCommand } from "./workers.ts";

/** A command's handler: the exit code (0 done / all good, 1 failed or needs a human). */
export type Handler<K extends Command["command"]> = (cmd: CommandOf<K>, env: CliEnv) => Promise<number>;

export const COMMANDS: { [K in Command["command"]]: Handler<K> } = {
  help: async () => {
    console.log(USAGE);
    return 0;
  },
  assess: assessCommand,
  migrate: migrateCommand,
  "recover-stale": recoverStaleCommand,
  "rebuild-queue": rebuildQueueCommand,
  snapshot: snapshotCommand,
  snapshots: snapshotsCommand,
  retention: retentionCommand,
  reconcile: reconcileCommand,
  restore: restoreCommand,
  verify: verifyCommand,
  workers: workersCommand,
  config: configCommand,
  "rotate-key": rotateKeyCommand,
  audit: auditCommand,
  tasks: tasksCommand,
  "redrive-all": redriveAllCommand,
  "cancel-all": cancelAllCommand,
  lanes: lanesCommand,
  "fair-share": fairShareCommand,
  drill: drillCommand,
  incidents: incidentsCommand,
  incident: incidentCommand,
};

/** Runs the handler of `cmd.command`. */
export function dispatch<K extends Command["command"]>(cmd: CommandOf<K>, env: CliEnv): Promise<number> {
  return (COMMANDS[cmd.command as K] as Handler<K>)(cmd, env);
}
