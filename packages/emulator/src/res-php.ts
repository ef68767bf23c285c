import type { EmulatorState } from "./emulator-state.ts";
import { delay, rolls, transportFault } from "./faults.ts";
import { formatMoney } from "./money.ts";
import { bareReply, codeReply, okReply, type ReplyStyle, replyStyleOf } from "./protocol-reply.ts";
import type { ProtocolParams } from "./request-params.ts";
import type { ProviderTask } from "./task-book.ts";

const PROVIDER_ID = /^\d{1,20}$/;
/** Reports are taken this long after the answer was read (2Captcha: 15 minutes). */
export const REPORT_WINDOW_MS = 15 * 60_000;

type Lookup = { ok: true; task: ProviderTask } | { ok: false; code: string };

/** The ids a get/get2 call names: `ids=1,2,3` (bulk) wins over `id`; null when malformed. */
function requestedIds(params: Record<string, string>): { ids: string[]; bulk: boolean } | null {
  if (params.ids !== undefined) {
    const ids = params.ids
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
    if (ids.length === 0 || !ids.every((id) => PROVIDER_ID.test(id))) return null;
    return { ids, bulk: true };
  }
  const id = params.id?.trim();
  if (!id || !PROVIDER_ID.test(id)) return null;
  return { ids: [id], bulk: false };
}

/**
 * Reads one task's result for `key`. The first read of a finished task frees its slot and,
 * when solved, charges the key (booked).
 */
function readResult(state: EmulatorState, key: string, id: string): Lookup {
  const task = state.tasks.get(id);
  if (!task || task.key !== key) return { ok: false, code: "ERROR_WRONG_CAPTCHA_ID" };
  if (state.now() < task.readyAt) return { ok: false, code: "CAPCHA_NOT_READY" };
  if (state.tasks.markRead(task) && !task.unsolvable) {
    task.chargedUnits = state.accounts.charge(key, state.settings.priceUnits[task.method]);
    state.books.charge(key, task.chargedUnits);
  }
  if (task.unsolvable) return { ok: false, code: "ERROR_CAPTCHA_UNSOLVABLE" };
  return { ok: true, task };
}

function report(
  state: EmulatorState,
  style: ReplyStyle,
  key: string,
  kind: "bad" | "good",
  rawId: string | undefined,
): Response {
  const id = rawId?.trim();
  if (!id || !PROVIDER_ID.test(id)) return codeReply(style, "ERROR_WRONG_ID_FORMAT");
  const task = state.tasks.get(id);
  if (!task || task.key !== key) return codeReply(style, "ERROR_WRONG_CAPTCHA_ID");
  if (task.report) return codeReply(style, "ERROR_DUPLICATE_REPORT");
  if (task.answerReadAt !== undefined && state.now() - task.answerReadAt > REPORT_WINDOW_MS)
    return codeReply(style, "ERROR_REPORT_NOT_RECORDED");
  task.report = kind;
  state.stats.report(kind);
  // A bad answer is not paid for: what its read charged goes back to the balance.
  if (kind === "bad" && task.chargedUnits) {
    task.refundedUnits = task.chargedUnits;
    state.accounts.credit(key, task.chargedUnits);
    state.books.refund(key, task.chargedUnits);
  }
  return bareReply(style, "OK_REPORT_RECORDED", 1);
}

function get(
  state: EmulatorState,
  style: ReplyStyle,
  key: string,
  action: "get" | "get2",
  params: Record<string, string>,
): Response {
  const req = requestedIds(params);
  if (!req || (req.bulk && action === "get2")) return codeReply(style, "ERROR_WRONG_ID_FORMAT");
  const faults = state.settings.faults;
  if (rolls(faults.pollErrorRate, state.random)) return codeReply(style, faults.pollErrorCode ?? "ERROR_SERVER_ERROR");

  if (req.bulk) {
    const parts = req.ids.map((id) => {
      const r = readResult(state, key, id);
      return r.ok ? r.task.answer : r.code;
    });
    return bareReply(style, parts.join("|"), 1);
  }
  const r = readResult(state, key, req.ids[0]!);
  if (!r.ok) return codeReply(style, r.code);
  const { task } = r;
  if (action === "get") return okReply(style, task.answer, task.answerExtra);
  const price = formatMoney(state.settings.priceUnits[task.method]);
  if (style.json) return okReply(style, task.answer, { ...task.answerExtra, price });
  return okReply(style, `${task.answer}|${price}`);
}

/**
 * Handles one res.php call: get (single or bulk `ids`), get2, getbalance, reportbad,
 * reportgood. Counts the call (and get/get2 as a poll per provider id) before any fault, so
 * stats describe what the client did. Unknown or missing action -> ERROR_EMPTY_ACTION.
 */
export async function handleResPhp(state: EmulatorState, call: ProtocolParams): Promise<Response> {
  const { params } = call;
  const style = replyStyleOf(params);
  const action = params.action ?? "";
  state.stats.resCall();
  state.stats.called(params.key, state.now());
  if (action === "get" || action === "get2") state.stats.poll(requestedIds(params)?.ids ?? []);

  const faults = state.settings.faults;
  await delay(faults.slowResponseMs);
  const page = transportFault(faults, state.now(), state.random);
  if (page) return page;
  if (faults.forceCode?.resPhp) return codeReply(style, faults.forceCode.resPhp);

  const keyError = state.accounts.rejectKey(params.key);
  if (keyError) return codeReply(style, keyError);
  const key = params.key!;

  switch (action) {
    case "get":
    case "get2":
      return get(state, style, key, action, params);
    case "getbalance":
      return bareReply(style, formatMoney(state.accounts.balanceUnits(key)), 1);
    case "reportbad":
      return report(state, style, key, "bad", params.id);
    case "reportgood":
      return report(state, style, key, "good", params.id);
    default:
      return codeReply(style, "ERROR_EMPTY_ACTION");
  }
}
