// The console's lanes (docs/console.md, Lanes): the rows of the panel (/console/lanes) and the
// lanes as JSON (/console/api/lanes) for the viewer role and up; an operator's pause or resume
// (POST /console/api/lanes/:lane/pause|resume, `x-console-action: lane`, a JSON body
// `{reason?, for?}`) through the same module as `recovery lanes` (apps/recovery/src/lanes),
// audited as `lane.pause` / `lane.resume` with the actor `console:<name>`. A bad lane or body is a
// 400 naming the field, and changes nothing.
import type { KV } from "@nats-io/kv";
import { openRegionBucket } from "@pipeline/shared/kv";
import type { Logger } from "@pipeline/shared/log";
import type { Hono } from "hono";
import type { RecoveryConfig } from "../config.ts";
import type { RecoveryContext } from "../context.ts";
import { lanesStatus, pauseLane, resumeLane } from "../lanes/control.ts";
import { parseLaneAction } from "../lanes/model.ts";
import { LANES_CSS, LANES_JS, renderLaneRows } from "./lanes-page.ts";
import type { Session } from "./tokens.ts";

type App = Hono<{ Bindings: { ip: string }; Variables: { who: Session } }>;

export interface LaneRouteDeps {
  config: Pick<RecoveryConfig, "REGION">;
  ctx: Pick<RecoveryContext, "jsm" | "nc" | "database">;
  log: Logger;
  /** Drops the cached figures of the page after a change. */
  invalidate: () => void;
}

export function laneRoutes(app: App, { config, ctx, log, invalidate }: LaneRouteDeps): void {
  const region = config.REGION;
  let kv: KV | undefined;
  const read = () => lanesStatus({ jsm: ctx.jsm, region });
  app.get("/console/lanes.css", (c) => c.body(LANES_CSS, 200, { "content-type": "text/css; charset=utf-8" }));
  app.get("/console/lanes.js", (c) => c.body(LANES_JS, 200, { "content-type": "text/javascript; charset=utf-8" }));
  app.get("/console/lanes", async (c) => c.html(renderLaneRows(await read(), c.get("who").role === "operator")));
  app.get("/console/api/lanes", async (c) => c.json({ region, lanes: await read() }));
  app.post("/console/api/lanes/:lane/:action", async (c) => {
    const who = c.get("who");
    const action = c.req.param("action");
    if (action !== "pause" && action !== "resume") return c.json({ reason: "the action is pause or resume" }, 404);
    if (who.role !== "operator") return c.json({ reason: `the operator role is needed to ${action} a lane` }, 403);
    // A header a cross-site form cannot send (with the SameSite=Strict cookie: no CSRF).
    if (c.req.header("x-console-action") !== "lane") return c.json({ reason: "missing x-console-action: lane" }, 400);
    const text = await c.req.text();
    let body: unknown = {};
    if (text.trim()) {
      try {
        body = JSON.parse(text);
      } catch {
        return c.json({ reason: "body: not JSON", fields: ["body"] }, 400);
      }
    }
    if (typeof body !== "object" || body === null || Array.isArray(body))
      return c.json({ reason: "body: a JSON object {reason?, for?}", fields: ["body"] }, 400);
    if (action === "resume" && "for" in body)
      return c.json({ reason: "for: only a pause takes a duration", fields: ["for"] }, 400);
    const asked = parseLaneAction({ ...body, lane: c.req.param("lane") });
    if (!asked.ok) return c.json({ reason: asked.error, fields: asked.fields }, 400);
    kv ??= await openRegionBucket(ctx.nc, region);
    const deps = { jsm: ctx.jsm, kv, db: ctx.database.db, region };
    const actor = `console:${who.name}`;
    const r =
      action === "pause" ? await pauseLane(deps, asked.action, actor) : await resumeLane(deps, asked.action, actor);
    invalidate();
    log.info(
      { lane: asked.action.lane, action, who: who.name, applied: r.applied.length, failed: r.failed.length },
      "console: lane",
    );
    return c.json(r, 200);
  });
}
