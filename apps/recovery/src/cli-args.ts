import { z } from "zod";
import { DatabaseUrl } from "./config.ts";

const Flag = z.literal(true).optional();

/** One variant per command; unknown flags are refused (strict). */
export const Command = z.discriminatedUnion("command", [
  z.object({ command: z.literal("assess"), args: z.tuple([]), json: Flag }).strict(),
  z.object({ command: z.literal("recover-stale"), args: z.tuple([]), json: Flag, "older-than": z.coerce.number().int().min(0).optional() }).strict(),
  z.object({ command: z.literal("rebuild-queue"), args: z.tuple([]), json: Flag }).strict(),
  z.object({ command: z.literal("snapshot"), args: z.tuple([]), json: Flag }).strict(),
  z.object({ command: z.literal("snapshots"), args: z.tuple([]), json: Flag }).strict(),
  z.object({ command: z.literal("restore"), args: z.tuple([z.string().min(1)], { error: "restore takes one snapshot (a name, `latest`, or a path)" }), into: DatabaseUrl, json: Flag, "no-replay": Flag, "allow-gap": Flag }).strict(),
  z.object({ command: z.literal("verify"), args: z.tuple([z.string().min(1)], { error: "verify takes one snapshot (a name, `latest`, or a path)" }), json: Flag }).strict(),
  z.object({ command: z.literal("help"), args: z.array(z.string()) }).strict(),
]);
export type Command = z.infer<typeof Command>;

export const USAGE = `usage: bun run recovery <command> [options]

  assess [--json]                         queue, consumers, DLQ, tasks, stuck rows, snapshots, provider; exit 1 if a human is needed
  recover-stale [--older-than MS] [--json]  re-publish stale tasks that have no message in TASKS
  rebuild-queue [--json]                  recreate TASKS if missing and re-publish every unfinished task
  snapshot [--json]                       pg_dump + EVENTS sequence into SNAPSHOT_DIR (keeps SNAPSHOT_KEEP)
  snapshots [--json]                      list snapshots, newest first
  restore <snapshot> --into <url> [--no-replay] [--allow-gap] [--json]
                                          restore into an EMPTY database, then replay EVENTS after the snapshot
  verify <snapshot> [--json]              checksum + restore into a scratch database + row counts; drops it

  <snapshot> is a name (snap-...), 'latest', or a path to its .json/.dump.
  Environment: NATS_URL, DATABASE_URL, REGION, SNAPSHOT_DIR, PROVIDER_URL, PROVIDER_KEY (see apps/recovery/README.md).`;

/** Splits argv into command, positionals and flags (`--a`, `--a value`, `--a=value`). */
export function tokenize(argv: string[]): Record<string, unknown> {
  const [command = "help", ...rest] = argv;
  const out: Record<string, unknown> = { command: command === "--help" || command === "-h" ? "help" : command, args: [] as string[] };
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i]!;
    if (a.startsWith("--")) {
      const eq = a.indexOf("=");
      if (eq > 0) out[a.slice(2, eq)] = a.slice(eq + 1);
      else if (rest[i + 1] !== undefined && !rest[i + 1]!.startsWith("--") && ["into", "older-than"].includes(a.slice(2))) out[a.slice(2)] = rest[++i];
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
