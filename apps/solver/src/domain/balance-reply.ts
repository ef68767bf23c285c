// The provider's answer to `res.php?action=getbalance`, read explicitly: a balance in micro-dollars
// from its decimal text, or why not (the field at fault named).
import { balanceMicros, type ProviderReply } from "@pipeline/shared/provider";

export type BalanceReading = { ok: true; micros: number } | { ok: false; error: string };

/**
 * The balance a getbalance reply states. An error code, a transport failure or a `request` that is
 * not a decimal number of dollars is no balance, and says which.
 */
export function readBalanceReply(reply: ProviderReply): BalanceReading {
  switch (reply.kind) {
    case "ok": {
      const micros = balanceMicros(reply.value);
      return micros === undefined
        ? {
            ok: false,
            error: `getbalance reply: request is not a decimal balance (${JSON.stringify(reply.value.slice(0, 40))})`,
          }
        : { ok: true, micros };
    }
    case "error":
      return { ok: false, error: `getbalance reply: provider error ${reply.code}` };
    case "not_ready":
      return { ok: false, error: "getbalance reply: request is CAPCHA_NOT_READY, not a balance" };
    case "transport":
      return { ok: false, error: `getbalance: ${reply.reason}` };
  }
}
