import { KEY_NAME } from "@pipeline/shared/kv";
import { z } from "zod";
import { DatabaseUrl } from "../config.ts";
import { SCENARIOS, unconfirmedDrill } from "../drill/scenarios.ts";

const Flag = z.literal(true).optional();
/** Who runs a change (audited) and why. */
const Actor = { by: z.string().min(1).max(64).optional(), reason: z.string().min(1).max(200).optional() };
const Ms = z.coerce.number().int().min(0).max(3_600_000).optional();
const Domain = z.string().regex(/^[A-Za-z0-9_-]+$/, "a JetStream domain (a region name)");
/** The explorer's filters as `tasks` takes them, less its page: checked by the bulk module (bulk/filter.ts), which names the option. */
const ExplorerFilter = {
  state: z.string().optional(),
  client: z.string().optional(),
  type: z.string().optional(),
  priority: z.string().optional(),
  region: z.string().optional(),
  "solver-version": z.string().optional(),
  since: z.string().optional(),
  until: z.string().optional(),
  search: z.string().optional(),
};
/** A bulk action (bulk/run.ts): the preview alone, or with --yes the run; audited as the console's. */
const Bulk = { args: z.tuple([]), ...ExplorerFilter, yes: Flag, json: Flag, by: Actor.by };

/** One variant per command; unknown flags are refused (strict). */
export const Command = z.discriminatedUnion("command", [
  z.object({ command: z.literal("assess"), args: z.tuple([]), json: Flag }).strict(),
  z.object({ command: z.literal("migrate"), args: z.tuple([]), json: Flag }).strict(),
  z
    .object({
      command: z.literal("recover-stale"),
      args: z.tuple([]),
      json: Flag,
      "older-than": z.coerce.number().int().min(0).optional(),
    })
    .strict(),
  z.object({ command: z.literal("rebuild-queue"), args: z.tuple([]), json: Flag }).strict(),
  z.object({ command: z.literal("snapshot"), args: z.tuple([]), json: Flag }).strict(),
  z.object({ command: z.literal("snapshots"), args: z.tuple([]), json: Flag }).strict(),
  z
    .object({
      command: z.literal("restore"),
      args: z.tuple([z.string().min(1)], { error: "restore takes one snapshot (a name, `latest`, or a path)" }),
      /** The target; else RESTORE_INTO_URL. Its password: PGPASSWORD or a passfile (a password here is warned about). */
      into: DatabaseUrl.optional(),
      json: Flag,
      "no-replay": Flag,
      "allow-gap": Flag,
      /** Take the snapshot from its off-host copy in this JetStream domain (another region). */
      from: Domain.optional(),
      /** Replay from the mirror of EVENTS in this domain (this region's NATS was lost too). */
      "events-from": Domain.optional(),
    })
    .strict(),
  z.object({ command: z.literal("retention"), args: z.tuple([]), json: Flag }).strict(),
  z
    .object({
      command: z.literal("reconcile"),
      args: z.tuple([]),
      /** The window: the last N hours (default RECONCILE_HOURS). */
      hours: z.coerce
        .number()
        .int()
        .min(1)
        .max(24 * 90)
        .optional(),
      json: Flag,
    })
    .strict(),
  z
    .object({
      command: z.literal("verify"),
      args: z.tuple([z.string().min(1)], { error: "verify takes one snapshot (a name, `latest`, or a path)" }),
      json: Flag,
    })
    .strict(),
  z
    .object({
      command: z.literal("config"),
      args: z.union(
        [
          z.tuple([z.literal("show")]),
          z.tuple([z.literal("history")]),
          z.tuple([z.literal("set"), z.string().min(1)]),
          z.tuple([z.literal("rollback")]),
          z.tuple([z.literal("rollback"), z.coerce.number().int().positive()]),
        ],
        { error: "config takes: show | history | set <file.json|-> | rollback [revision]" },
      ),
      json: Flag,
      ...Actor,
    })
    .strict(),
  z
    .object({
      command: z.literal("rotate-key"),
      args: z.tuple([]),
      to: z.string().regex(KEY_NAME, "a key name of the solvers' key file"),
      wait: Ms,
      json: Flag,
      ...Actor,
    })
    .strict(),
  z.object({ command: z.literal("workers"), args: z.tuple([]), json: Flag }).strict(),
  z
    .object({
      command: z.literal("audit"),
      args: z.tuple([]),
      limit: z.coerce.number().int().min(1).max(1000).optional(),
      json: Flag,
    })
    .strict(),
  z
    .object({
      command: z.literal("tasks"),
      args: z.tuple([]),
      // Checked by the explorer's own schema (explorer/task-query.ts), which names the option at fault.
      state: z.string().optional(),
      client: z.string().optional(),
      type: z.string().optional(),
      priority: z.string().optional(),
      region: z.string().optional(),
      "solver-version": z.string().optional(),
      since: z.string().optional(),
      until: z.string().optional(),
      search: z.string().optional(),
      limit: z.string().optional(),
      after: z.string().optional(),
      json: Flag,
    })
    .strict(),
  z
    .object({
      command: z.literal("lanes"),
      args: z.union(
        [z.tuple([]), z.tuple([z.literal("pause"), z.string()]), z.tuple([z.literal("resume"), z.string()])],
        { error: "lanes takes: (nothing) | pause <lane> | resume <lane>" },
      ),
      // Checked by the lanes module's own schema (lanes/model.ts), which names the option at fault.
      reason: z.string().optional(),
      for: z.string().optional(),
      by: Actor.by,
      json: Flag,
    })
    .strict(),
  z
    .object({
      command: z.literal("fair-share"),
      args: z.union([z.tuple([]), z.tuple([z.literal("set"), z.string()])], {
        error: "fair-share takes: (nothing) | set <file.json | ->",
      }),
      by: Actor.by,
      json: Flag,
    })
    .strict(),
  z.object({ command: z.literal("redrive-all"), ...Bulk }).strict(),
  z.object({ command: z.literal("cancel-all"), ...Bulk }).strict(),
  z
    .object({
      command: z.literal("drill"),
      args: z.tuple([z.enum(SCENARIOS, { error: `drill takes one of: ${SCENARIOS.join(", ")}` })], {
        error: `drill takes one of: ${SCENARIOS.join(", ")}`,
      }),
      rate: z.coerce.number().min(0.5).max(1000).optional(),
      baseline: Ms,
      timeout: Ms,
      to: z.string().regex(KEY_NAME, "a key name of the solvers' key file").optional(),
      /** The operator means it: queue-loss and db-loss destroy live state (DESTRUCTIVE). */
      yes: Flag,
      json: Flag,
      ...Actor,
    })
    .strict()
    .superRefine((c, ctx) => {
      const refused = unconfirmedDrill(c.args[0], c.yes);
      if (refused) ctx.addIssue({ code: "custom", path: ["yes"], message: refused });
    }),
  z
    .object({
      command: z.literal("incidents"),
      args: z.tuple([]),
      limit: z.coerce.number().int().min(1).max(1000).optional(),
      json: Flag,
    })
    .strict(),
  z
    .object({
      command: z.literal("incident"),
      args: z.tuple([z.string().regex(/^[1-9][0-9]{0,14}$/, "an incident id (a positive integer)")], {
        error: "incident takes one incident id (a positive integer)",
      }),
      markdown: Flag,
      json: Flag,
    })
    .strict(),
  z.object({ command: z.literal("help"), args: z.array(z.string()) }).strict(),
]);
export type Command = z.infer<typeof Command>;
/** The variant of one command (`CommandOf<"restore">`). */
export type CommandOf<K extends Command["command"]> = Extract<Command, { command: K }>;

export const USAGE = `usage: bun run recovery <command> [options]

  assess [--json]                         queue, consumers, DLQ, tasks, stuck rows, snapshots, provider; exit 1 if a human is needed
  migrate [--json]                        apply the schema migrations and the app roles' grants to DATABASE_URL, as the owner (idempotent; advisory lock)
  recover-stale [--older-than MS] [--json]  re-publish stale tasks that have no message in TASKS
  rebuild-queue [--json]                  recreate TASKS if missing and re-publish every unfinished task
  snapshot [--json]                       pg_dump + EVENTS sequence into SNAPSHOT_DIR (keeps SNAPSHOT_KEEP)
  snapshots [--json]                      list snapshots, newest first, and where their off-host copies are
  restore <snapshot> [--into <url>] [--from DOMAIN] [--events-from DOMAIN] [--no-replay] [--allow-gap] [--json]
                                          restore into an EMPTY database, then replay EVENTS after the snapshot;
                                          the target: --into, else RESTORE_INTO_URL; its password: PGPASSWORD or
                                          ~/.pgpass (PGPASSFILE), never on the command line (visible to every user);
                                          --from: the off-host copy in that region's domain (checked again);
                                          --events-from: replay from that region's mirror of our EVENTS
  reconcile [--hours N] [--json]          per provider account: the ledger's net against the balance's fall between the
                                          samples at the window's ends (default RECONCILE_HOURS); exit 1 beyond the tolerance
  retention [--json]                      erase expired tokens, old params/images/callback URLs, delete old finished rows
  verify <snapshot> [--json]              checksum + restore into a scratch database + row counts; drops it
  workers [--json]                        live solvers (heartbeats): key, config revision, breaker, in flight
  config show|history [--json]            the solvers' runtime config in KV, and its kept revisions
  config set <file.json|-> [--by WHO] [--reason WHY]
                                          validate, then store a new revision (solvers apply it live)
  config rollback [revision] [--by WHO]   store again the given revision, or the last good one before the current
  rotate-key --to <name> [--wait MS] [--by WHO] [--reason WHY]
                                          switch every solver to another key of their key file; waits until all applied it
  audit [--limit N] [--json]              who changed what (config, keys, drills), newest first
  tasks [--state S] [--client C] [--type T] [--priority P] [--region R] [--solver-version V] [--since T] [--until T]
        [--search TEXT] [--limit N] [--after NEXT] [--json]
                                          tasks newest first (the console's task explorer); T: ISO time or 15m/2h/7d back;
                                          TEXT: a task id, idempotency key, sitekey or the start of a pageurl
  redrive-all [tasks' filters but --limit/--after] [--yes] [--by WHO] [--json]
                                          every failed task of this region the filter matches (at most CONSOLE_BULK_MAX, oldest
                                          first): without --yes the count and the oldest ids; with --yes redrive them (audited)
  cancel-all --client C [tasks' filters] [--yes] [--by WHO] [--json]
                                          the same for a client's unfinished tasks (queued, retrying, solving): cancel them
  lanes [--json]                          the region's lanes (high, normal, low): paused or running, by whom, since when
  lanes pause <lane> [--reason WHY] [--for 30m] [--by WHO]
                                          pause a lane: no task of it starts until resumed (or --for passed); audited
  lanes resume <lane> [--by WHO]          resume it: its queued tasks are delivered again; audited
  fair-share [--json]                     the region's fair-share groups: weights, clients, queued tasks
  fair-share set <file.json | -> [--by WHO]
                                          replace them ({"groups": {"<name>": {"weight": N, "clients": [ids]}},
                                          "defaultWeight": N}); a group with queued tasks is never dropped; audited
  incidents [--limit N] [--json]          failovers, rollbacks, restores, breaker storms, drills: newest first, open or closed, MTTR
  incident <id> [--markdown] [--json]     one incident's figures and timeline; --markdown: a post-mortem skeleton to fill in
  drill <scenario> [--rate N] [--baseline MS] [--timeout MS] [--to NAME] [--yes] [--json]
                                          run a fault under steady load; measure RPO and RTO (scenarios: ${SCENARIOS.join(", ")});
                                          queue-loss and db-loss destroy live state: refused without --yes

  <snapshot> is a name (snap-...), 'latest', or a path to its .json/.dump.
  Environment: NATS_URL, DATABASE_URL, REGION, SNAPSHOT_DIR, PROVIDER_URL, PROVIDER_KEY; drills also GATEWAY_URL and
  DRILL_API_KEY (see apps/recovery/README.md).`;

const VALUE_FLAGS = [
  "into",
  "from",
  "events-from",
  "older-than",
  "by",
  "reason",
  "to",
  "wait",
  "limit",
  "rate",
  "baseline",
  "timeout",
  "hours",
  "state",
  "client",
  "type",
  "priority",
  "region",
  "solver-version",
  "since",
  "until",
  "search",
  "after",
  "for",
];

/** Splits argv into command, positionals and flags (`--a`, `--a value`, `--a=value`). */
export function tokenize(argv: string[]): Record<string, unknown> {
  const [command = "help", ...rest] = argv;
  const out: Record<string, unknown> = {
    command: command === "--help" || command === "-h" ? "help" : command,
    args: [] as string[],
  };
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]!;
    if (a.startsWith("--")) {
      const eq = a.indexOf("=");
      if (eq > 0) out[a.slice(2, eq)] = a.slice(eq + 1);
      else if (rest[i + 1] !== undefined && !rest[i + 1]!.startsWith("--") && VALUE_FLAGS.includes(a.slice(2)))
        out[a.slice(2)] = rest[++i];
      else out[a.slice(2)] = true;
    } else (out.args as string[]).push(a);
  }
  return out;
}

/** Parses argv; on error returns the message to print (the field at fault, never a stack). */
export function parseCommand(argv: string[]): { ok: true; command: Command } | { ok: false; error: string } {
  const r = Command.safeParse(tokenize(argv));
  if (r.success) return { ok: true, command: r.data };
  const msg = r.error.issues
    .map((i) => {
      if (i.path[0] === "command") return `unknown command "${String(tokenize(argv).command)}"`;
      if (i.code === "unrecognized_keys") return `unknown option ${i.keys.map((k) => `--${k}`).join(", ")}`;
      const at = i.path[0] === "args" ? "arguments" : i.path.length ? `--${i.path.join(".")}` : "command";
      return `${at}: ${i.message}`;
    })
    .join("\n");
  return { ok: false, error: msg };
}
