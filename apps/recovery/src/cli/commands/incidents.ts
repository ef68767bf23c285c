// `recovery incidents` (the newest incidents) and `recovery incident <id> [--markdown]` (one, or its
// post-mortem skeleton with the figures filled in): docs/incidents.md.
import { openDatabase } from "@pipeline/shared/db";
import { UsageError } from "../../context.ts";
import { postMortem, renderIncidentList } from "../../incidents/markdown.ts";
import { fmtDuration, fmtTime } from "../../incidents/model.ts";
import { getIncident, listIncidents, parseIncidentId } from "../../incidents/store.ts";
import type { CommandOf } from "../args.ts";
import { type CliEnv, print } from "../env.ts";

async function withDb<T>(
  { config }: CliEnv,
  name: string,
  f: (sql: ReturnType<typeof openDatabase>["sql"]) => Promise<T>,
) {
  if (!config.DATABASE_URL) throw new UsageError(`DATABASE_URL is required for ${name}`);
  const database = openDatabase(config.DATABASE_URL, { max: 1, appName: `recovery-${name}` });
  try {
    return await f(database.sql);
  } finally {
    await database.close();
  }
}

export function incidentsCommand(cmd: CommandOf<"incidents">, env: CliEnv): Promise<number> {
  return withDb(env, "incidents", async (sql) => {
    const rows = await listIncidents(sql, cmd.limit ?? 50);
    print(cmd.json, rows, renderIncidentList(rows));
    return 0;
  });
}

export function incidentCommand(cmd: CommandOf<"incident">, env: CliEnv): Promise<number> {
  const id = parseIncidentId(cmd.args[0]);
  if (!id.ok) throw new UsageError(id.error);
  return withDb(env, "incident", async (sql) => {
    const i = await getIncident(sql, id.id);
    if (!i) {
      console.error(`recovery incident: no incident ${id.id}`);
      return 1;
    }
    if (cmd.markdown && !cmd.json) {
      console.log(postMortem(i));
      return 0;
    }
    print(
      cmd.json,
      i,
      [
        `incident ${i.id} (${i.key}): ${i.kind} in ${i.region}, ${i.open ? "OPEN" : "closed"}`,
        `  ${i.summary}`,
        `  start ${fmtTime(i.startedAt)}  detection ${fmtTime(i.detectedAt)}  recovery ${fmtTime(i.recoveredAt)}  end ${fmtTime(i.endedAt)} (UTC)`,
        `  MTTR ${fmtDuration(i.mttrMs)}; detection to recovery ${fmtDuration(i.detectToRecoverMs)}`,
        ...i.timeline.map((e) => `  ${fmtTime(e.at)} [${e.source}] ${e.what}`),
        `  post-mortem: bun run recovery incident ${i.id} --markdown`,
      ].join("\n"),
    );
    return 0;
  });
}
