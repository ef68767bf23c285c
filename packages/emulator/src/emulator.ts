import { Accounts } from "./accounts.ts";
import { BooksRecorder, type EmulatorBooks } from "./books.ts";
import { type EmulatorConfigView, type EmulatorTaskView, handleControl } from "./control-api.ts";
import type { EmulatorState } from "./emulator-state.ts";
import { handleInPhp } from "./in-php.ts";
import { readProtocolParams } from "./request-params.ts";
import { handleResPhp } from "./res-php.ts";
import {
  applyPatch,
  EmulatorConfigError,
  type EmulatorConfigPatch,
  type EmulatorOptions,
  EmulatorSettings,
  parseSettings,
  resolveSettings,
} from "./settings.ts";
import { type EmulatorStats, StatsRecorder } from "./stats.ts";
import { TaskBook } from "./task-book.ts";

/** A running (or startable) provider emulator. */
export interface Emulator {
  /** Starts listening; resolves with the base URL (`http://127.0.0.1:<port>`). Idempotent. */
  start(): Promise<{ url: string; port: number }>;
  /** Stops listening and closes open connections. Idempotent. */
  stop(): Promise<void>;
  /** Base URL; throws before start(). */
  readonly url: string;
  /** Counters since the last reset. */
  stats(): EmulatorStats;
  /** Zeroes the counters; tasks and balances stay. */
  resetStats(): void;
  /** What the provider charged and refunded per key since the last reset (the books). */
  books(): EmulatorBooks;
  /** Zeroes the counters, forgets every task, refills every balance and clears the books. */
  reset(): void;
  /**
   * Changes options at runtime; each field given replaces the current one (so `faults: {}`
   * clears every fault). host/port only before start(). Throws EmulatorConfigError on bad input.
   */
  configure(patch: Partial<EmulatorOptions>): void;
  /** The task behind a provider id (its issued answer included), or undefined. */
  task(providerId: string): EmulatorTaskView | undefined;
}

/** Largest request body accepted; bigger bodies get HTTP 413 before any protocol check. */
const MAX_REQUEST_BODY = 16 * 1024 * 1024;

function corsPreflight(): Response {
  return new Response(null, {
    status: 204,
    headers: {
      "access-control-allow-origin": "*",
      "access-control-allow-methods": "GET, POST",
      "access-control-allow-headers": "content-type",
    },
  });
}

/** The emulator's state from validated settings: fresh accounts, no task, zeroed counters. */
function initialState(resolved: EmulatorState["settings"], opts: EmulatorOptions): EmulatorState {
  const state: EmulatorState = {
    settings: resolved,
    accounts: new Accounts(resolved.keys),
    books: new BooksRecorder(),
    tasks: new TaskBook(() => state.now()),
    stats: new StatsRecorder(),
    now: opts.now ?? Date.now,
    random: opts.random ?? Math.random,
  };
  return state;
}

function applyConfig(state: EmulatorState, patch: EmulatorConfigPatch): void {
  state.settings = applyPatch(state.settings, patch);
  if (patch.keys) state.accounts.configure(patch.keys);
}

/** What the control API shows of the settings (never a key). */
function configView(state: EmulatorState): EmulatorConfigView {
  return {
    keyCount: Object.keys(state.settings.keys).length,
    latencyMs: state.settings.latencyMs,
    latencyJitterMs: state.settings.latencyJitterMs,
    maxImageBytes: state.settings.maxImageBytes,
    faults: state.settings.faults,
  };
}

function taskView(state: EmulatorState, providerId: string): EmulatorTaskView | undefined {
  const t = state.tasks.get(providerId);
  if (!t) return undefined;
  return {
    id: t.id,
    method: t.method,
    fingerprint: t.fingerprint,
    submittedAt: t.submittedAt,
    readyAt: t.readyAt,
    answer: t.unsolvable ? null : t.answer,
    unsolvable: t.unsolvable,
    answerReadAt: t.answerReadAt ?? null,
    report: t.report ?? null,
    chargedUnits: t.chargedUnits ?? 0,
    refundedUnits: t.refundedUnits ?? 0,
  };
}

/** The counters and resets over `state`, as the handle and the control API offer them. */
function controlOf(state: EmulatorState) {
  return {
    stats: (): EmulatorStats => state.stats.snapshot(state.tasks.inFlightByKey()),
    resetStats: (): void => state.stats.reset(state.tasks.inFlightByKey()),
    books: (): EmulatorBooks => state.books.snapshot(),
    reset: (): void => {
      state.tasks.clear();
      state.accounts.refill();
      state.books.reset();
      state.stats.reset({});
    },
    applyConfig: (patch: EmulatorConfigPatch) => applyConfig(state, patch),
    configView: () => configView(state),
    task: (providerId: string) => taskView(state, providerId),
  };
}

/** in.php and res.php (the protocol), anything else to the control API. */
async function route(state: EmulatorState, control: ReturnType<typeof controlOf>, req: Request): Promise<Response> {
  const path = new URL(req.url).pathname;
  if (path === "/in.php" || path === "/res.php") {
    if (req.method === "OPTIONS") return corsPreflight();
    if (req.method !== "GET" && req.method !== "POST") return new Response("Method Not Allowed", { status: 405 });
    const call = await readProtocolParams(req);
    return path === "/in.php" ? handleInPhp(state, call) : handleResPhp(state, call);
  }
  return (await handleControl(req, path, control)) ?? new Response("Not Found", { status: 404 });
}

function serve(host: string, port: number, fetch: (req: Request) => Promise<Response>) {
  return Bun.serve({
    hostname: host,
    port,
    maxRequestBodySize: MAX_REQUEST_BODY,
    idleTimeout: 90,
    fetch,
    error(err) {
      console.error(JSON.stringify({ event: "emulator.handler_error", message: err.message }));
      return new Response("Internal Server Error", { status: 500 });
    },
  });
}

/** A runtime patch checked as settings; host/port refused while the emulator listens. */
function checkPatch(patch: Partial<EmulatorOptions>, listening: boolean) {
  const { now: _n, random: _r, host: h, port: p, ...rest } = patch;
  if ((h !== undefined || p !== undefined) && listening) {
    throw new EmulatorConfigError("host/port cannot change while the emulator is running", [
      ...(h !== undefined ? ["host"] : []),
      ...(p !== undefined ? ["port"] : []),
    ]);
  }
  return parseSettings(EmulatorSettings, {
    ...rest,
    ...(h !== undefined ? { host: h } : {}),
    ...(p !== undefined ? { port: p } : {}),
  });
}

/**
 * Creates a 2Captcha/CaptchaAI v1 protocol emulator (in.php/res.php plus a JSON control API).
 * Nothing listens until start(). Options are validated at once (EmulatorConfigError).
 * Logs nothing per request; API keys are never printed.
 */
export function createEmulator(opts: EmulatorOptions = {}): Emulator {
  const { now: _now, random: _random, ...plain } = opts;
  const settings = parseSettings(EmulatorSettings, plain);
  let host = settings.host ?? "127.0.0.1";
  let port = settings.port ?? 0;
  const state = initialState(resolveSettings(settings), opts);
  const control = controlOf(state);

  let server: ReturnType<typeof Bun.serve> | undefined;
  let baseUrl: string | undefined;

  return {
    async start() {
      if (!server) {
        server = serve(host, port, (req) => route(state, control, req));
        const boundPort = server.port ?? port;
        baseUrl = `http://${host.includes(":") ? `[${host}]` : host}:${boundPort}`;
      }
      return { url: baseUrl!, port: server.port ?? port };
    },
    async stop() {
      const s = server;
      server = undefined;
      baseUrl = undefined;
      if (s) await s.stop(true);
    },
    get url() {
      if (!baseUrl) throw new Error("emulator not started: call start() first");
      return baseUrl;
    },
    stats: control.stats,
    resetStats: control.resetStats,
    books: control.books,
    reset: control.reset,
    configure(patch) {
      const checked = checkPatch(patch, server !== undefined);
      if (checked.host !== undefined) host = checked.host;
      if (checked.port !== undefined) port = checked.port;
      const { host: _h, port: _p, ...runtime } = checked;
      applyConfig(state, runtime);
      if (patch.now) state.now = patch.now;
      if (patch.random) state.random = patch.random;
    },
    task: control.task,
  };
}
