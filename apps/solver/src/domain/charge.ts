// What a solved task cost, as the ledger books it: the provider's own price when its reply says
// one (`res.php?action=get2`), else the configured price, flagged as an estimate.
import { priceMicros } from "@pipeline/shared/provider";
import type { TaskType } from "@pipeline/shared/schemas";

/** What every charge of a solver shares: which provider account, region and version booked it. */
export interface LedgerContext {
  /** The provider URL's host (`ocr.captchaai.com`, `127.0.0.1:18090`). */
  providerHost: string;
  region: string;
  solverVersion: string;
  /** Micro-dollars per solve by type, for replies without a price. */
  estimates: Record<TaskType, number>;
  /** With several accounts (PROVIDERS): the host and the estimates of the account a key reference belongs to. */
  hostOfRef?: (keyRef: string) => string;
  estimatesOfRef?: (keyRef: string) => Record<TaskType, number>;
}

/** One charge of the ledger, before it knows its task's owner (the write reads it from the row). */
export interface Charge {
  providerTaskId: string;
  /** `<host>/<key ref>`: the account, never the key. */
  provider: string;
  region: string;
  solverVersion: string;
  amountMicros: number;
  /** `provider`: the provider said this price; `estimate`: the configured one (the ledger's `price_source`). */
  priceSource: "provider" | "estimate";
}

/** The ledger's name of a provider account: its URL host and the key's reference. */
export function providerName(providerHost: string, keyRef: string): string {
  return `${providerHost}/${keyRef}`;
}

/**
 * The charge of an answer read for `providerTaskId`: the price the reply carries (`extra.price`,
 * get2) when it is a decimal, else the estimate for the type (flagged `estimate`).
 */
export function chargeOf(
  ctx: LedgerContext,
  a: { extra?: Record<string, unknown>; type: TaskType; providerTaskId: string; keyRef: string },
): Charge {
  const reported = priceMicros(a.extra?.price);
  return {
    providerTaskId: a.providerTaskId,
    provider: providerName(ctx.hostOfRef?.(a.keyRef) ?? ctx.providerHost, a.keyRef),
    region: ctx.region,
    solverVersion: ctx.solverVersion,
    amountMicros: reported ?? (ctx.estimatesOfRef?.(a.keyRef) ?? ctx.estimates)[a.type],
    priceSource: reported === undefined ? "estimate" : "provider",
  };
}
