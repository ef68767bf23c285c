// `recovery rewrite-owners [--yes]`: rows owned by legacy client ids rewritten to the peppered ids
// (issue 14.8, docs/security.md "Client ids"). Without --yes: what would change, nothing changed.
import { ownerRewrites } from "@pipeline/shared/client-ids";
import { openDatabase } from "@pipeline/shared/db";
import { UsageError } from "../../context.ts";
import { rewriteOwners } from "../../owners/rewrite-owners.ts";
import type { CommandOf } from "../args.ts";
import { actorOf, type CliEnv, print } from "../env.ts";

export async function rewriteOwnersCommand(cmd: CommandOf<"rewrite-owners">, { config }: CliEnv): Promise<number> {
  if (!config.DATABASE_URL)
    throw new UsageError("DATABASE_URL is required for rewrite-owners (run it against each region's database)");
  if (!config.API_KEYS?.length)
    throw new UsageError(
      "API_KEYS is required for rewrite-owners (the gateways' keys: each key's legacy id is mapped to its peppered id)",
    );
  if (!config.API_KEY_PEPPER)
    throw new UsageError("API_KEY_PEPPER is required for rewrite-owners (the gateways' pepper)");
  // The mapping holds ids only; keys and the pepper are never printed.
  const rewrites = ownerRewrites(config.API_KEYS, config.API_KEY_PEPPER);
  const database = openDatabase(config.DATABASE_URL, { max: 1, appName: "recovery-rewrite-owners" });
  try {
    const r = await rewriteOwners(database.sql, rewrites, { apply: cmd.yes === true, actor: actorOf(cmd.by) });
    const c = r.counts;
    const rows = `tasks ${c.tasks}, webhook_deliveries ${c.webhook_deliveries}, audit_log ${c.audit_log}`;
    // --json also lists each legacy id with its peppered id (ids only): what QUOTAS is re-keyed with.
    print(
      cmd.json,
      { ...r, ids: rewrites },
      r.applied
        ? `rewrite-owners: ${r.clients} client(s); rewritten: ${rows}`
        : `rewrite-owners (dry run, nothing changed; --yes to apply): ${r.clients} client(s); would rewrite: ${rows}`,
    );
    return 0;
  } finally {
    await database.close();
  }
}
