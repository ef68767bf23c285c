// What every CLI command that works on the record or the shards gets: the configuration, the
// regions it reaches, the record store in the home region, the audit log, and how to print.
import { openAuditLog, openRegionLink, type RegionLink } from "../adapters/regions.ts";
import { createRolloutStore, openControlBucket, type RolloutStore } from "../adapters/store.ts";
import type { RegionEndpoint, RolloutConfig } from "../config.ts";

export interface CliContext {
  config: RolloutConfig;
  /** The regions the command reaches: the home one, or every one (`start`, `status`). */
  links: RegionLink[];
  home: RegionLink;
  store: RolloutStore;
  json: boolean;
  /** Who acts, as the record and the audit log name them. */
  by: string;
  auditTo: (action: string, detail: Record<string, unknown>) => Promise<void>;
}

/** Which regions a command connects to. */
export type Reach = "home" | "all";

/** Prints `value` as JSON (`--json`) or `text` for people. */
export function show(ctx: Pick<CliContext, "json">, value: unknown, text: string): void {
  console.log(ctx.json ? JSON.stringify(value) : text);
}

/**
 * Connects to the home region (or every region: `reach` "all"; their databases are not opened),
 * opens the record store and the audit log (DATABASE_URL, when set), runs `fn`, and closes
 * whatever was opened, whatever happens.
 */
export async function withCliContext(
  o: { config: RolloutConfig; endpoints: RegionEndpoint[]; reach: Reach; json: boolean },
  fn: (ctx: CliContext) => Promise<number>,
): Promise<number> {
  const by = `rollout-cli ${process.env.USER ?? "?"}`;
  const links: RegionLink[] = [];
  const auditLog = openAuditLog(o.config.DATABASE_URL, by);
  try {
    for (const e of o.endpoints)
      if (e.name === o.config.REGION || o.reach === "all")
        links.push(await openRegionLink({ ...e, databaseUrl: undefined }, "rollout-cli"));
    const home = links.find((l) => l.name === o.config.REGION)!;
    const store = createRolloutStore(await openControlBucket(home.nc, o.config.REGION));
    return await fn({ config: o.config, links, home, store, json: o.json, by, auditTo: auditLog.write });
  } finally {
    for (const l of links) await l.close();
    await auditLog.close();
  }
}
