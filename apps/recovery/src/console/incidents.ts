// The console's incidents (viewer role and up; docs/incidents.md): the list and one incident as JSON
// (/console/api/incidents[/:id]) and as pages (/console/incidents[/:id]), the main page's panel rows
// (/console/incident-rows) and its script (/console/incidents.js). Read only: nothing here changes a
// record. A bad id or limit is a 400 naming the field.
import type { Hono } from "hono";
import { z } from "zod";
import type { RecoveryConfig } from "../config.ts";
import type { RecoveryContext } from "../context.ts";
import { getIncident, listIncidents, parseIncidentId } from "../incidents/store.ts";
import {
  INCIDENTS_JS,
  incidentMissing,
  renderIncidentList,
  renderIncidentPage,
  renderIncidentRows,
} from "./incidents-page.ts";
import type { Session } from "./tokens.ts";

type App = Hono<{ Bindings: { ip: string }; Variables: { who: Session } }>;

export interface IncidentRouteDeps {
  config: Pick<RecoveryConfig, "REGION">;
  ctx: Pick<RecoveryContext, "database">;
}

const ListQuery = z.object({ limit: z.coerce.number().int().min(1).max(500).default(50) }).strict();

function parseList(q: Record<string, string>): { ok: true; limit: number } | { ok: false; error: string } {
  const r = ListQuery.safeParse(q);
  if (r.success) return { ok: true, limit: r.data.limit };
  return {
    ok: false,
    error: r.error.issues
      .map((i) =>
        i.code === "unrecognized_keys" ? `${i.keys.join(",")}: unknown` : `${i.path.join(".")}: ${i.message}`,
      )
      .join("; "),
  };
}

export function incidentRoutes(app: App, { config, ctx }: IncidentRouteDeps): void {
  const sql = ctx.database.sql;
  app.get("/console/incidents.js", (c) =>
    c.body(INCIDENTS_JS, 200, { "content-type": "text/javascript; charset=utf-8" }),
  );
  app.get("/console/incident-rows", async (c) => c.html(renderIncidentRows(await listIncidents(sql, 10))));
  app.get("/console/api/incidents", async (c) => {
    const q = parseList(c.req.query());
    if (!q.ok) return c.json({ error: q.error }, 400);
    return c.json({ incidents: await listIncidents(sql, q.limit) });
  });
  app.get("/console/api/incidents/:id", async (c) => {
    const id = parseIncidentId(c.req.param("id"));
    if (!id.ok) return c.json({ error: id.error }, 400);
    const i = await getIncident(sql, id.id);
    return i ? c.json(i) : c.json({ error: "no such incident" }, 404);
  });
  app.get("/console/incidents", async (c) => {
    const q = parseList(c.req.query());
    if (!q.ok) return c.html(`<p class="fail">${q.error.replace(/[<>&"]/g, "")}</p>`, 400);
    return c.html(renderIncidentList(await listIncidents(sql, q.limit), config.REGION));
  });
  app.get("/console/incidents/:id", async (c) => {
    const raw = c.req.param("id");
    const id = parseIncidentId(raw);
    if (!id.ok) return c.html(incidentMissing(raw), 400);
    const i = await getIncident(sql, id.id);
    return i ? c.html(renderIncidentPage(i)) : c.html(incidentMissing(raw), 404);
  });
}
