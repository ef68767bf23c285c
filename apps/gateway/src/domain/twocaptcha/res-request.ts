import { z } from "zod";

/** What a res.php call asks for, with its ids already checked to be task ids. */
export type ResRequest =
  | { action: "get"; ids: string[]; bulk: boolean }
  | { action: "get2"; id: string }
  | { action: "getbalance" }
  | { action: "reportbad" | "reportgood"; id: string };

/** At most this many ids in one bulk `get` (`ids=a,b,c`); more is ERROR_BAD_PARAMETERS. */
export const MAX_BULK_IDS = 100;

/**
 * The balance `getbalance` answers. The gateway does not bill its clients and cannot see the
 * provider account, so there is no real number to give: this fixed value is large enough that
 * scripts guarding on a low balance keep running. It says nothing about provider funds.
 */
export const FACADE_BALANCE = "1000000";

const Action = z.enum(["get", "get2", "getbalance", "reportbad", "reportgood"]);
// Our ids are UUIDs (see the README, "2Captcha-compatible facade"); compared lower-case.
const TaskId = z
  .string()
  .trim()
  .pipe(z.uuid())
  .transform((s) => s.toLowerCase());
const TaskIds = z
  .string()
  .transform((s) =>
    s
      .split(",")
      .map((p) => p.trim())
      .filter(Boolean),
  )
  .pipe(z.array(TaskId).min(1));

/**
 * Reads a res.php call's action and ids. Unknown or missing action -> ERROR_EMPTY_ACTION; an id
 * that is not one of ours in form (missing, not a UUID) -> ERROR_WRONG_ID_FORMAT; `ids` wins over
 * `id` for `get`, as providers do, and is refused for every other action.
 */
export function parseResRequest(
  params: Readonly<Record<string, string>>,
): { ok: true; request: ResRequest } | { ok: false; code: string } {
  const action = Action.safeParse(params.action);
  if (!action.success) return { ok: false, code: "ERROR_EMPTY_ACTION" };
  if (action.data === "getbalance") return { ok: true, request: { action: "getbalance" } };
  if (action.data === "get" && params.ids !== undefined) {
    const ids = TaskIds.safeParse(params.ids);
    if (!ids.success) return { ok: false, code: "ERROR_WRONG_ID_FORMAT" };
    if (ids.data.length > MAX_BULK_IDS) return { ok: false, code: "ERROR_BAD_PARAMETERS" };
    return { ok: true, request: { action: "get", ids: ids.data, bulk: true } };
  }
  if (params.ids !== undefined && params.id === undefined) return { ok: false, code: "ERROR_WRONG_ID_FORMAT" };
  const id = TaskId.safeParse(params.id);
  if (!id.success) return { ok: false, code: "ERROR_WRONG_ID_FORMAT" };
  if (action.data === "get") return { ok: true, request: { action: "get", ids: [id.data], bulk: false } };
  return { ok: true, request: { action: action.data, id: id.data } };
}
