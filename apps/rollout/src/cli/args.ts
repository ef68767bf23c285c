// The rollout CLI's words: its commands, their usage, and argv split into the command, its
// arguments and the flags every command shares (`--json`, `--also v2,v3`). Pure (args.test.ts).
import { z } from "zod";

/** One entry per command in cli/commands/index.ts. */
export const VERBS = [
  "start",
  "status",
  "history",
  "pause",
  "resume",
  "promote",
  "abort",
  "serve",
  "shift",
  "reconcile",
] as const;
export type Verb = (typeof VERBS)[number];

export const USAGE = `usage: npm run rollout -- <command> [--json]
  start <version> [--steps 5,25,50,100 or 5,pause,25,50,100] [--regions fsn1,hel1] [--stable v1] [--bake 60s] [--deadline 10m]
                             [--on-inconclusive pause|rollback] [--gate minTasks=20,...]
                             start a rollout (the rollout service carries it out)
  status                     the rollout, and per region which version pulls which shard and runs how many processes
  pause | resume | promote [--full] | abort
                             change the running rollout (promote: past a pause step to the next step, elsewhere
                             or with --full 100% in the current region; abort: every region back to stable)
  history                    the rollout's decisions with the gate figures behind each
  serve                      run the rollout service (as apps/rollout/src/main.ts)
  shift <version> <N|P%>     by hand: give <version> N shards (or P%) of REGION, taken from the other versions
  reconcile [--also v2,v3]   make REGION's lane consumers match its assignment (after an interrupted shift)
Environment: NATS_URL, NATS_USER/NATS_PASSWORD or NATS_CREDS (the rollout user), REGION, REGIONS,
NATS_URL_<REGION>... for the other regions, DATABASE_URL (the audit log), ACK_WAIT_MS.`;

/** A solver version as the commands take it (`shift v2 25%`, `--also v2,v3`). */
export const Version = z.string().regex(/^[a-z0-9_]{1,32}$/, "lower-case letters, digits and '_'");

/** A command line: the command, its positional arguments, and the shared flags. */
export interface CliArgs {
  verb: Verb;
  rest: string[];
  json: boolean;
  /** `--also v2,v3`: more versions whose consumers `reconcile` (and `shift`) look at. */
  also: string[];
}

export type Parsed =
  | { kind: "help"; exitCode: 0 | 2 }
  | { kind: "unknown"; verb: string }
  | ({ kind: "command" } & CliArgs);

const isVerb = (s: string): s is Verb => (VERBS as readonly string[]).includes(s);

/** Splits argv: `--json` and `--also <list>` anywhere, then the command and its arguments. No command: help, exit 2; `help`: help, exit 0. */
export function parseArgs(argv: string[]): Parsed {
  const json = argv.includes("--json");
  const alsoAt = argv.indexOf("--also");
  const also = alsoAt >= 0 ? (argv[alsoAt + 1] ?? "").split(",").filter(Boolean) : [];
  const args = argv.filter((a, i) => a !== "--json" && (alsoAt < 0 || (i !== alsoAt && i !== alsoAt + 1)));
  const [verb, ...rest] = args;
  if (!verb || verb === "help" || verb === "--help") return { kind: "help", exitCode: verb ? 0 : 2 };
  if (!isVerb(verb)) return { kind: "unknown", verb };
  return { kind: "command", verb, rest, json, also };
}
