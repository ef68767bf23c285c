// The operator console (issue 19): its own listener in the recovery service (CONSOLE_HOST /
// CONSOLE_PORT, 127.0.0.1:8090 by default), never behind the public load balancer. Server-
// rendered HTML (page.ts) refreshed by a small script; JSON of the same figures at
// /console/api/state. Sign-in with a console token (tokens.ts), then an HttpOnly, SameSite=Strict
// session cookie the server keeps (and forgets at sign-out); `Authorization: Bearer <token>` works
// for scripts. Before any of it (issue 34, guard.ts): the Host must be one of the console's names
// (421), a POST must come from the console's own origin (403), and an address that failed too many
// sign-ins waits (429, throttle.ts). The log names the connection's address, never X-Forwarded-For.
import { readFileSync } from "node:fs";
import { type KV, Kvm } from "@nats-io/kv";
import { ConfigError } from "@pipeline/shared/config";
import { liveWorkers, openRegionBucket, openWorkersBucket } from "@pipeline/shared/kv";
import type { Logger } from "@pipeline/shared/log";
import { buckets } from "@pipeline/shared/subjects";
import { type Context, Hono } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import { groupsReader } from "../adapters/fair-share-groups.ts";
import { type Assessment, assess } from "../assess/assess.ts";
import { probeRegions, type RegionsProbe, regionChecks } from "../assess/regions.ts";
import type { RecoveryConfig } from "../config.ts";
import type { RecoveryContext } from "../context.ts";
import { listTasks, parseTaskListQuery } from "../explorer/task-query.ts";
import { redactUrl } from "../redact-url.ts";
import { bulkRoutes } from "./bulk.ts";
import { BULK_CSS, BULK_JS, renderBulk } from "./bulk-page.ts";
import { type ConsoleState, collectState, taskTimeline } from "./data.ts";
import { EXPLORER_CSS, EXPLORER_JS, renderExplorer, renderExplorerError, renderExplorerRows } from "./explorer.ts";
import { allowedHost, sameOrigin, secureCookie } from "./guard.ts";
import { incidentRoutes } from "./incidents.ts";
import { laneRoutes } from "./lanes.ts";
import { CSS, JS, renderLive, renderLogin, renderPage, renderTimeline } from "./page.ts";
import { redriveTask } from "./redrive.ts";
import { rolloutRoutes } from "./rollout.ts";
import { ROLLOUT_CSS, ROLLOUT_JS } from "./rollout-panel.ts";
import { type SignInThrottle, signInThrottle } from "./throttle.ts";
import { type TimelineCache, timelineCache } from "./timeline-cache.ts";
import { parseTokens, type Session, sessions } from "./tokens.ts";

export interface ConsoleServer {
  url: string;
  stop(): Promise<void>;
}

const COOKIE = "console_session";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The entries of CONSOLE_TOKENS and CONSOLE_TOKENS_FILE together (empty: the console stays off). */
export function consoleTokens(config: Pick<RecoveryConfig, "CONSOLE_TOKENS" | "CONSOLE_TOKENS_FILE">) {
  const file = config.CONSOLE_TOKENS_FILE ? readFileSync(config.CONSOLE_TOKENS_FILE, "utf8") : "";
  try {
    return parseTokens([config.CONSOLE_TOKENS ?? "", file].join("\n"));
  } catch (err) {
    throw new ConfigError(`invalid configuration:\n  CONSOLE_TOKENS / CONSOLE_TOKENS_FILE: ${(err as Error).message}`, [
      "CONSOLE_TOKENS",
    ]);
  }
}

/** `ip`: the connection's address (Bun's requestIP), the only source address the console trusts. */
type Env = { Bindings: { ip: string }; Variables: { who: Session } };

const peer = (c: Context<Env>) => c.env?.ip ?? "unknown";

interface ConsoleDeps {
  config: RecoveryConfig;
  ctx: RecoveryContext;
  log: Logger;
  tokens: ReturnType<typeof consoleTokens>;
  session: ReturnType<typeof sessions>;
  throttle: SignInThrottle;
  /** Each session's events cursors of the timelines it shows. */
  timelines: TimelineCache;
  /** The figures of the page (cached for a second). */
  state: () => Promise<ConsoleState>;
  /** Drops the cached figures (after a redrive). */
  invalidate: () => void;
}

/**
 * assess probes the provider and walks the consumers: re-run every 10 s in the background, not
 * per request. With several regions, the region probe too.
 */
function backgroundAssess(
  config: RecoveryConfig,
  ctx: RecoveryContext,
  workersKv: KV,
  regionKv: KV | undefined,
  remotes: string[],
  log: Logger,
) {
  let lastAssess: Assessment | null = null;
  let lastProbe: RegionsProbe | null = null;
  const runAssess = async () => {
    try {
      if (regionKv) lastProbe = await probeRegions(ctx.jsm, regionKv, config.REGION, remotes, ctx.database.sql);
      const workers = await liveWorkers(workersKv)
        .then((w) => w.workers)
        .catch((e: Error) => e);
      lastAssess = await assess({
        region: config.REGION,
        jsm: ctx.jsm,
        sql: ctx.database.sql,
        snapshotDir: config.SNAPSHOT_DIR,
        snapshotMaxAgeMs: config.SNAPSHOT_MAX_AGE_MS,
        staleAfterMs: config.STALE_AFTER_MS,
        provider: { url: config.PROVIDER_URL, key: config.PROVIDER_KEY, timeoutMs: config.PROVIDER_TIMEOUT_MS },
        workers,
        ...(lastProbe ? { regionChecks: regionChecks(lastProbe) } : {}),
        ...(ctx.nc.info ? { natsServer: { version: ctx.nc.info.version, url: redactUrl(config.NATS_URL) } } : {}),
      });
    } catch (err) {
      log.warn({ err: (err as Error).message }, "console: assess failed");
    }
  };
  const timer = setInterval(() => void runAssess(), 10_000);
  void runAssess();
  return { assessment: () => lastAssess, probe: () => lastProbe, stop: () => clearInterval(timer) };
}

/** One read of the sources per second at most, however many pages poll; a failed read is not kept. */
function cachedState(read: () => Promise<ConsoleState>) {
  let cached: { at: number; state: Promise<ConsoleState> } | undefined;
  const state = () => {
    const now = Date.now();
    if (!cached || now - cached.at >= 1000) {
      cached = { at: now, state: read() };
      cached.state.catch(() => (cached = undefined));
    }
    return cached.state;
  };
  return { state, invalidate: () => (cached = undefined) };
}

/** Security headers on every answer: nothing cached, framed, sniffed, referred, or loaded from elsewhere. */
function securityHeaders(app: Hono<Env>): void {
  app.use("*", async (c, next) => {
    await next();
    c.header("cache-control", "no-store");
    c.header("x-frame-options", "DENY");
    c.header("x-content-type-options", "nosniff");
    c.header("referrer-policy", "no-referrer");
    c.header(
      "content-security-policy",
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
  });
}

/** Before anything: the Host must be one of the console's names, and a POST must come from its own origin. */
function requestGuards(app: Hono<Env>, { config }: ConsoleDeps): void {
  app.use("*", async (c, next) => {
    // DNS rebinding: a page of another name resolving to this address is not served.
    if (!allowedHost(c.req.header("host"), config.consoleHostNames))
      return c.text("misdirected request: not one of the console's host names (CONSOLE_HOST_NAMES)", 421);
    const method = c.req.method;
    if (method !== "GET" && method !== "HEAD" && method !== "OPTIONS") {
      const facts = {
        origin: c.req.header("origin"),
        fetchSite: c.req.header("sec-fetch-site"),
        host: c.req.header("host"),
        bearer: /^Bearer /.test(c.req.header("authorization") ?? ""),
      };
      if (!sameOrigin(facts))
        return c.json(
          {
            error:
              "cross-origin request refused: a POST must come from the console's own page (Origin) or a script with its token",
          },
          403,
        );
    }
    await next();
  });
}

/** The throttle's 429: the seconds to wait in Retry-After. */
function throttled(c: Context<Env>, d: ConsoleDeps, wait: number, html: boolean) {
  d.log.warn({ from: peer(c), retryAfterSec: wait }, "console: sign-in throttled");
  c.header("retry-after", String(wait));
  return html
    ? c.html(renderLogin(d.config.REGION, "Too many failed sign-ins from this address; try again later."), 429)
    : c.json({ error: "too many failed sign-ins from this address; try again later" }, 429);
}

/** The public routes: assets, sign-in (throttled per address), sign-out (the session is revoked). */
function signIn(app: Hono<Env>, d: ConsoleDeps): void {
  const { config, log, tokens, session, throttle, timelines } = d;
  app.get("/console/app.css", (c) =>
    c.body(CSS + EXPLORER_CSS + BULK_CSS + ROLLOUT_CSS, 200, { "content-type": "text/css; charset=utf-8" }),
  );
  app.get("/console/app.js", (c) =>
    c.body(JS + EXPLORER_JS + BULK_JS + ROLLOUT_JS, 200, { "content-type": "text/javascript; charset=utf-8" }),
  );
  app.get("/console/login", (c) => c.html(renderLogin(config.REGION)));
  app.post("/console/login", async (c) => {
    // A throttled address's token is not even checked: no oracle while it waits.
    const wait = throttle.blocked(peer(c));
    if (wait) return throttled(c, d, wait, true);
    const form = await c.req.parseBody().catch(() => ({}) as Record<string, unknown>);
    const token = typeof form.token === "string" ? form.token : "";
    const who = token ? tokens.check(token) : undefined;
    if (!who) {
      throttle.failed(peer(c));
      log.warn({ from: peer(c) }, "console: sign-in refused");
      return c.html(renderLogin(config.REGION, "That is not a console token."), 401);
    }
    log.info({ who: who.name, role: who.role, from: peer(c) }, "console: signed in");
    const secure = secureCookie({
      consoleHost: config.CONSOLE_HOST,
      mode: config.CONSOLE_COOKIE_SECURE,
      protocol: new URL(c.req.url).protocol,
    });
    setCookie(c, COOKIE, session.issue(who), { httpOnly: true, sameSite: "Strict", path: "/console", secure });
    return c.redirect("/console", 303);
  });
  app.post("/console/logout", (c) => {
    const sid = session.revoke(getCookie(c, COOKIE));
    if (sid) timelines.drop(sid);
    deleteCookie(c, COOKIE, { path: "/console" });
    return c.redirect("/console/login", 303);
  });
}

/** The gate: everything else needs a live session or a Bearer token; a wrong token counts as a failed sign-in. */
function gate(app: Hono<Env>, d: ConsoleDeps): void {
  const { log, tokens, session, throttle } = d;
  app.use("/console/*", async (c, next) => {
    const auth = c.req.header("authorization");
    let who: Session | undefined;
    if (auth?.startsWith("Bearer ")) {
      const wait = throttle.blocked(peer(c));
      if (wait) return throttled(c, d, wait, false);
      const p = tokens.check(auth.slice(7).trim());
      if (!p) {
        throttle.failed(peer(c));
        log.warn({ from: peer(c), via: "bearer" }, "console: sign-in refused");
      }
      // A script's timelines are kept under its entry's name.
      who = p && { ...p, sid: `bearer:${p.name}` };
    } else who = session.verify(getCookie(c, COOKIE));
    if (!who) {
      if (c.req.path.startsWith("/console/api/") || c.req.method !== "GET")
        return c.json({ error: "a console token is required (a viewer or operator entry of CONSOLE_TOKENS)" }, 401);
      return c.redirect("/console/login", 302);
    }
    c.set("who", who);
    await next();
  });
}

/** The page, its live part, the state as JSON, and a task's timeline (JSON and HTML). */
function pages(app: Hono<Env>, { config, state, timelines }: ConsoleDeps): void {
  const explorer = renderExplorer({ regions: config.regions, retentionDays: config.TASK_RETENTION_DAYS });
  // An operator's explorer also has the bulk actions (console/bulk-page.ts).
  const explorerOp = renderExplorer({
    regions: config.regions,
    retentionDays: config.TASK_RETENTION_DAYS,
    bulk: renderBulk(config.CONSOLE_BULK_MAX),
  });
  app.get("/console", async (c) => {
    const who = c.get("who");
    return c.html(
      renderPage(renderLive(await state(), who), who, config.REGION, who.role === "operator" ? explorerOp : explorer),
    );
  });
  app.get("/console/", (c) => c.redirect("/console", 301));
  app.get("/console/live", async (c) => c.html(renderLive(await state(), c.get("who"))));
  app.get("/console/api/state", async (c) => c.json(await state()));
  app.get("/console/api/tasks/:id", async (c) => {
    const id = c.req.param("id");
    if (!UUID.test(id)) return c.json({ error: "not a task id" }, 400);
    const t = await timelines.read(c.get("who").sid, id);
    return t ? c.json(t) : c.json({ error: "no such task" }, 404);
  });
  app.get("/console/timeline/:id", async (c) => {
    const id = c.req.param("id");
    if (!UUID.test(id)) return c.html(`<p class="fail">not a task id</p>`, 400);
    const t = await timelines.read(c.get("who").sid, id);
    return c.html(renderTimeline(t, id), t ? 200 : 404);
  });
}

/**
 * The task explorer (viewer role and up): one page of tasks as JSON (`/console/api/tasks`) or as rows
 * for the page (`/console/tasks`); a refused query is a 400 naming its fields.
 */
function explorerRoutes(app: Hono<Env>, { ctx }: ConsoleDeps): void {
  app.get("/console/api/tasks", async (c) => {
    const q = parseTaskListQuery(c.req.query());
    if (!q.ok) return c.json({ error: q.error, fields: q.fields }, 400);
    return c.json(await listTasks(ctx.database.sql, q.query));
  });
  app.get("/console/tasks", async (c) => {
    const { page, ...input } = c.req.query();
    const q = parseTaskListQuery(input);
    if (!q.ok) return c.html(renderExplorerError(q.error, q.fields), 400);
    const n = Math.max(1, Math.min(100_000, Number.parseInt(page ?? "1", 10) || 1));
    return c.html(renderExplorerRows(await listTasks(ctx.database.sql, q.query), n));
  });
}

/** An operator's redrive (the gateway's retry, audited); a viewer is refused. */
function redrive(app: Hono<Env>, { config, ctx, log, invalidate }: ConsoleDeps): void {
  const groups = groupsReader(ctx.jsm, config.REGION, log);
  app.post("/console/api/tasks/:id/redrive", async (c) => {
    const who = c.get("who");
    if (who.role !== "operator") return c.json({ reason: "the operator role is needed to redrive" }, 403);
    // A header a cross-site form cannot send (with the SameSite=Strict cookie: no CSRF).
    if (c.req.header("x-console-action") !== "redrive")
      return c.json({ reason: "missing x-console-action: redrive" }, 400);
    const id = c.req.param("id");
    if (!UUID.test(id)) return c.json({ reason: "not a task id" }, 400);
    const r = await redriveTask(
      {
        sql: ctx.database.sql,
        db: ctx.database.db,
        js: ctx.js,
        region: config.REGION,
        deadlineMs: config.TASK_DEADLINE_MS,
        publishDeadlineMs: config.PUBLISH_DEADLINE_MS,
        groups,
      },
      id,
      `console:${who.name}`,
    );
    invalidate();
    log.info({ taskId: id, who: who.name, ok: r.ok }, "console: redrive");
    return r.ok ? c.json(r, 202) : c.json(r, r.status);
  });
}

/** The console's Hono app: headers, sign-in and its gate, pages, redrive, one error handler. */
function consoleApp(d: ConsoleDeps): Hono<Env> {
  const app = new Hono<Env>();
  securityHeaders(app);
  requestGuards(app, d);
  signIn(app, d);
  gate(app, d);
  pages(app, d);
  explorerRoutes(app, d);
  redrive(app, d);
  incidentRoutes(app, d);
  bulkRoutes(app, d);
  rolloutRoutes(app, d);
  laneRoutes(app, d);
  app.onError((err, c) => {
    d.log.error({ err: err.message, path: c.req.path }, "console: request failed");
    return c.json({ error: "internal error" }, 500);
  });
  app.notFound((c) => c.text("not found", 404));
  return app;
}

export async function startConsole(
  config: RecoveryConfig,
  ctx: RecoveryContext,
  log: Logger,
): Promise<ConsoleServer | undefined> {
  const tokens = consoleTokens(config);
  if (tokens.length === 0) {
    log.info("console off: no CONSOLE_TOKENS / CONSOLE_TOKENS_FILE entry");
    return undefined;
  }
  const session = sessions();
  const throttle = signInThrottle({
    maxFailures: config.CONSOLE_SIGNIN_MAX_FAILURES,
    windowMs: config.CONSOLE_SIGNIN_WINDOW_MS,
  });
  const timelines = timelineCache((id, cursor) =>
    taskTimeline({ sql: ctx.database.sql, js: ctx.js, jsm: ctx.jsm }, id, cursor),
  );
  const workersKv: KV = await openWorkersBucket(ctx.nc, config.REGION);
  // The rollout bucket is opened, never created, here (the first solver creates it).
  let rolloutKv: KV | undefined;
  const rollout = async () =>
    (rolloutKv ??= await new Kvm(ctx.nc).open(buckets.rollout(config.REGION)).catch(() => undefined));
  // The rollout service's record, when it runs in this region (apps/rollout/src/adapters/store.ts: `rollout_control`).
  let controlKv: KV | undefined;
  const rolloutControl = async () =>
    (controlKv ??= await new Kvm(ctx.nc).open("rollout_control").catch(() => undefined));
  const remotes = config.regions.filter((r) => r !== config.REGION);
  const regionKv = remotes.length ? await openRegionBucket(ctx.nc, config.REGION) : undefined;
  const background = backgroundAssess(config, ctx, workersKv, regionKv, remotes, log);
  let stopped = false;
  const { state, invalidate } = cachedState(() =>
    collectState({
      region: config.REGION,
      regions: config.regions,
      sql: ctx.database.sql,
      jsm: ctx.jsm,
      js: ctx.js,
      workersKv,
      snapshotDir: config.SNAPSHOT_DIR,
      providerKey: config.PROVIDER_KEY,
      balanceWarnHours: config.BALANCE_HOURS_WARN,
      assessment: background.assessment,
      regionsProbe: background.probe,
      rolloutKv: rollout,
      rolloutControlKv: rolloutControl,
    }),
  );

  const app = consoleApp({ config, ctx, log, tokens, session, throttle, timelines, state, invalidate });
  const server = Bun.serve({
    hostname: config.CONSOLE_HOST,
    port: config.CONSOLE_PORT,
    fetch: (req, srv) => app.fetch(req, { ip: srv.requestIP(req)?.address ?? "unknown" }),
  });
  const url = `http://${config.CONSOLE_HOST.includes(":") ? `[${config.CONSOLE_HOST}]` : config.CONSOLE_HOST}:${server.port}/console`;
  log.info(
    { url, hostNames: config.consoleHostNames, tokens: tokens.map((t) => `${t.name}:${t.role}`) },
    "console listening",
  );
  return {
    url,
    async stop() {
      if (stopped) return;
      stopped = true;
      background.stop();
      await server.stop(true);
    },
  };
}
