// The console's rollout commands (operator role, `x-console-action: rollout`): POST
// /console/api/rollout/<pause|resume|promote|abort> with an optional JSON body `{id, full}` changes
// the rollout service's record through the same function as `npm run rollout -- <verb>`
// (changeRollout of @pipeline/shared/rollout/store: the same rules, compare-and-set, retried),
// audited as `rollout.<verb>` with actor `console:<name>`. `id`: refused unless the current rollout
// is that one (a page left open on an older rollout); `full`: `promote --full`. The rollout
// service's next tick carries the change out. A bad verb or body is a 400 naming the field; no
// rollout, or a state that does not allow the command, a 409 saying why; nothing is written then.
import { type KV, Kvm } from "@nats-io/kv";
import type { Logger } from "@pipeline/shared/log";
import { COMMANDS } from "@pipeline/shared/rollout";
import { CONTROL_BUCKET, changeRollout, createRolloutStore } from "@pipeline/shared/rollout/store";
import type { Hono } from "hono";
import { z } from "zod";
import type { RecoveryContext } from "../context.ts";
import { recordAudit } from "../fleet/audit.ts";
import type { Session } from "./tokens.ts";

export interface RolloutRouteDeps {
  ctx: Pick<RecoveryContext, "nc" | "database">;
  log: Logger;
  /** Drops the page's cached figures (the record changed). */
  invalidate: () => void;
}

/** The console's app (server.ts): the session on `who`. */
type App = Hono<{ Bindings: { ip: string }; Variables: { who: Session } }>;

const Verb = z.enum(COMMANDS);
const Body = z.object({ id: z.string().min(1).max(100).optional(), full: z.boolean().optional() }).strict();

/** `field: message; ...` of a zod failure. */
const describe = (err: z.ZodError) =>
  err.issues
    .map((i) => `${i.code === "unrecognized_keys" ? i.keys.join(",") : i.path.join(".") || "body"}: ${i.message}`)
    .join("; ");

/** The request's JSON body (empty: `{}`), or undefined when it is not JSON. */
async function jsonBody(req: { text(): Promise<string> }): Promise<unknown> {
  const text = await req.text();
  if (!text.trim()) return {};
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export function rolloutRoutes(app: App, d: RolloutRouteDeps): void {
  // Opened, never created, here: the rollout service and its CLI create the bucket.
  let kv: KV | undefined;
  // Kvm.open does not look for the stream; status() does (none yet: no rollout was ever started).
  const bucket = async () =>
    (kv ??= await new Kvm(d.ctx.nc)
      .open(CONTROL_BUCKET)
      .then(async (b) => (await b.status(), b))
      .catch((err: Error) => (/not found/i.test(err.message) ? undefined : Promise.reject(err))));
  app.post("/console/api/rollout/:verb", async (c) => {
    const who = c.get("who");
    if (who.role !== "operator") return c.json({ reason: "the operator role is needed to change a rollout" }, 403);
    // A header a cross-site form cannot send (with the SameSite=Strict cookie: no CSRF).
    if (c.req.header("x-console-action") !== "rollout")
      return c.json({ reason: "missing x-console-action: rollout" }, 400);
    const verb = Verb.safeParse(c.req.param("verb"));
    if (!verb.success) return c.json({ reason: `verb: one of ${COMMANDS.join(", ")}` }, 400);
    const raw = await jsonBody(c.req);
    if (raw === undefined) return c.json({ reason: "body: not JSON" }, 400);
    const body = Body.safeParse(raw);
    if (!body.success) return c.json({ reason: describe(body.error) }, 400);
    if (body.data.full !== undefined && verb.data !== "promote")
      return c.json({ reason: "full: only promote takes it" }, 400);
    const kvNow = await bucket();
    if (!kvNow) return c.json({ reason: "there is no rollout" }, 409);
    const actor = `console:${who.name}`;
    const r = await changeRollout(createRolloutStore(kvNow), {
      verb: verb.data,
      by: actor,
      ...(body.data.id ? { id: body.data.id } : {}),
      ...(body.data.full ? { full: true } : {}),
      audit: async (action, detail) => {
        await recordAudit(d.ctx.database.db, { actor, action, detail });
      },
    });
    d.invalidate();
    d.log.info({ verb: verb.data, who: who.name, ok: r.ok }, "console: rollout command");
    if (!r.ok) return c.json({ reason: r.reason }, r.status === "busy" ? 503 : 409);
    const x = r.record;
    return c.json({ id: x.id, state: x.state, step: x.step, applied: x.applied, reason: x.reason ?? null });
  });
}
