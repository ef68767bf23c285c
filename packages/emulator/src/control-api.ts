import type { EmulatorBooks } from "./books.ts";
import { EmulatorConfigPatch, type EmulatorSettings, fieldsOf } from "./settings.ts";
import type { EmulatorStats } from "./stats.ts";

/** A provider task as the control API shows it (never with the key). */
export interface EmulatorTaskView {
  id: string;
  method: string;
  fingerprint: string;
  submittedAt: number;
  readyAt: number;
  /** The answer issued, or null when the task ends ERROR_CAPTCHA_UNSOLVABLE. */
  answer: string | null;
  unsolvable: boolean;
  answerReadAt: number | null;
  report: "bad" | "good" | null;
  /** Units its first read charged, and units a bad report gave back (0 when none). */
  chargedUnits: number;
  refundedUnits: number;
}

/** Current runtime settings as the control API shows them: keys are counted, not listed. */
export interface EmulatorConfigView extends Omit<EmulatorSettings, "keys" | "host" | "port"> {
  keyCount: number;
}

/** What the control API needs from an emulator. */
export interface ControlTarget {
  stats(): EmulatorStats;
  books(): EmulatorBooks;
  reset(): void;
  applyConfig(patch: EmulatorConfigPatch): void;
  configView(): EmulatorConfigView;
  task(providerId: string): EmulatorTaskView | undefined;
}

function json(body: unknown, status = 200): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

/**
 * Serves the control endpoints (JSON, not part of the protocol): GET /emulator/stats,
 * GET /emulator/books, POST /emulator/reset, GET|POST /emulator/config, GET /emulator/tasks/<id>,
 * GET /healthz.
 * A bad config body gets 400 with the offending field names and changes nothing.
 * Returns null for paths it does not own.
 */
export async function handleControl(req: Request, path: string, target: ControlTarget): Promise<Response | null> {
  if (path === "/healthz") return json({ ok: true });
  if (!path.startsWith("/emulator/")) return null;

  if (path === "/emulator/stats") {
    return req.method === "GET" ? json(target.stats()) : json({ error: "method_not_allowed" }, 405);
  }
  if (path === "/emulator/books") {
    return req.method === "GET" ? json(target.books()) : json({ error: "method_not_allowed" }, 405);
  }
  if (path === "/emulator/reset") {
    if (req.method !== "POST") return json({ error: "method_not_allowed" }, 405);
    target.reset();
    return json({ ok: true });
  }
  if (path === "/emulator/config") {
    if (req.method === "GET") return json({ ok: true, config: target.configView() });
    if (req.method !== "POST") return json({ error: "method_not_allowed" }, 405);
    let body: unknown;
    try {
      body = await req.json();
    } catch {
      return json({ error: "invalid_json", fields: ["(body)"] }, 400);
    }
    const r = EmulatorConfigPatch.safeParse(body);
    if (!r.success) {
      const issues = r.error.issues.map((i) => ({ path: i.path.map(String).join("."), message: i.message }));
      return json({ error: "invalid_config", fields: fieldsOf(r.error), issues }, 400);
    }
    target.applyConfig(r.data);
    return json({ ok: true, config: target.configView() });
  }
  const taskMatch = /^\/emulator\/tasks\/(\d{1,20})$/.exec(path);
  if (taskMatch && req.method === "GET") {
    const view = target.task(taskMatch[1]!);
    return view ? json(view) : json({ error: "not_found" }, 404);
  }
  return json({ error: "not_found" }, 404);
}
