// The console's bulk actions (operator role, `x-console-action: bulk`): POST /console/api/bulk/preview
// with an action and an explorer filter answers the count, the oldest ids, the limit and a
// confirmation token (bulk/token.ts: bound to the action, the normalized filter, the count and this
// region, for five minutes); POST /console/api/bulk/confirm with that token runs it (bulk/run.ts, the
// same module as `recovery redrive-all` / `cancel-all`) and answers what it did. A bad body is a 400
// naming its fields; a forged, expired or foreign token is a 400 naming `token`.

import type { Logger } from "@pipeline/shared/log";
import type { Hono } from "hono";
import { z } from "zod";
import { groupsReader } from "../adapters/fair-share-groups.ts";
import { BulkAction, parseBulkFilter } from "../bulk/filter.ts";
import { type BulkDeps, previewBulk, runBulk } from "../bulk/run.ts";
import { bulkSigner } from "../bulk/token.ts";
import type { RecoveryConfig } from "../config.ts";
import type { RecoveryContext } from "../context.ts";
import { redriveTask } from "./redrive.ts";
import type { Session } from "./tokens.ts";

export interface BulkRouteDeps {
  config: Pick<RecoveryConfig, "REGION" | "CONSOLE_BULK_MAX" | "TASK_DEADLINE_MS" | "PUBLISH_DEADLINE_MS">;
  ctx: Pick<RecoveryContext, "database" | "js" | "jsm">;
  log: Logger;
  /** Drops the page's cached figures (the dead letters changed). */
  invalidate: () => void;
}

const FilterInput = z.record(z.string(), z.union([z.string(), z.number()]));
const PreviewBody = z.object({ action: BulkAction, filter: FilterInput.default({}) }).strict();
const ConfirmBody = z.object({ action: BulkAction, token: z.string().min(1).max(8192) }).strict();

/** A zod failure as the explorer answers one: the message and the fields at fault. */
function refusal(err: z.ZodError) {
  const fields = err.issues.map((i) =>
    i.code === "unrecognized_keys" ? i.keys.join(",") : i.path.join(".") || "body",
  );
  return { error: err.issues.map((i, k) => `${fields[k]}: ${i.message}`).join("; "), fields };
}

/** The bulk module's dependencies, its redrive the console's single-task one (also the CLI's). */
export function bulkDeps(d: BulkRouteDeps): BulkDeps {
  const redrive = {
    sql: d.ctx.database.sql,
    db: d.ctx.database.db,
    js: d.ctx.js,
    region: d.config.REGION,
    deadlineMs: d.config.TASK_DEADLINE_MS,
    publishDeadlineMs: d.config.PUBLISH_DEADLINE_MS,
    groups: groupsReader(d.ctx.jsm, d.config.REGION, d.log),
  };
  return {
    sql: d.ctx.database.sql,
    db: d.ctx.database.db,
    js: d.ctx.js,
    region: d.config.REGION,
    publishDeadlineMs: d.config.PUBLISH_DEADLINE_MS,
    max: d.config.CONSOLE_BULK_MAX,
    log: d.log,
    redriveOne: async (id, actor) => {
      const r = await redriveTask(redrive, id, actor, { audit: false });
      return r.ok ? null : r.code;
    },
  };
}

/** The console's app (server.ts): the session on `who`. */
type App = Hono<{ Bindings: { ip: string }; Variables: { who: Session } }>;

/** The preview and confirm routes; a signer (its own secret) per console. */
export function bulkRoutes(app: App, d: BulkRouteDeps): void {
  const signer = bulkSigner();
  const deps = bulkDeps(d);
  app.use("/console/api/bulk/*", async (c, next) => {
    const who = c.get("who");
    if (who.role !== "operator") return c.json({ error: "the operator role is needed for a bulk action" }, 403);
    // A header a cross-site form cannot send (with the SameSite=Strict cookie: no CSRF).
    if (c.req.header("x-console-action") !== "bulk") return c.json({ error: "missing x-console-action: bulk" }, 400);
    await next();
  });
  app.post("/console/api/bulk/preview", async (c) => {
    const body = PreviewBody.safeParse(await c.req.json().catch(() => undefined));
    if (!body.success) return c.json(refusal(body.error), 400);
    const f = parseBulkFilter(body.data.action, body.data.filter, d.config.REGION);
    if (!f.ok) return c.json({ error: f.error, fields: f.fields.map((x) => `filter.${x}`) }, 400);
    const p = await previewBulk(deps, body.data.action, f.filter);
    const t = signer.sign({ action: p.action, filter: p.filter, count: p.count, region: d.config.REGION });
    return c.json({ ...p, ...t });
  });
  app.post("/console/api/bulk/confirm", async (c) => {
    const who = c.get("who");
    const body = ConfirmBody.safeParse(await c.req.json().catch(() => undefined));
    if (!body.success) return c.json(refusal(body.error), 400);
    const v = signer.verify(body.data.token, { action: body.data.action, region: d.config.REGION });
    if (!v.ok) return c.json({ error: v.reason, fields: ["token"] }, 400);
    const r = await runBulk(deps, v.grant.action, v.grant.filter, {
      actor: `console:${who.name}`,
      via: "console",
      previewed: v.grant.count,
    });
    d.invalidate();
    d.log.info(
      { who: who.name, action: r.action, done: r.done, attempted: r.attempted, auditId: r.auditId },
      "console: bulk action",
    );
    return c.json(r);
  });
}
