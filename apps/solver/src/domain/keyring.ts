import type { TaskType } from "@pipeline/shared/schemas";
import type { Breaker } from "./breaker.ts";
import { keyRefOf } from "./key-ref.ts";

/** The provider key a task is submitted with: its name, its hash reference and its value. */
export interface ProviderKeyInUse {
  name: string;
  ref: string;
  value: string;
  /** The account it belongs to (PROVIDERS' id; PROVIDER_URL's account: "default"). */
  account?: string;
}

export const keyInUse = (name: string, value: string): ProviderKeyInUse => ({ name, ref: keyRefOf(value), value });

/** What routing knows of an account: its price per type (micro-dollars) and its priority. */
export interface AccountTerms {
  id: string;
  priority: number;
  priceMicros: Record<TaskType, number>;
  /** Below this balance (micro-dollars) the account is used only when no other can take the task; 0: no floor. */
  floorMicros?: number;
}

/**
 * The keys new provider calls use: PROVIDER_URL's account, whose key is switchable at run time
 * (key rotation), and the further accounts of PROVIDERS (fixed keys); one breaker per key: a key
 * that was stopped (revoked, out of money) must not hold back another.
 */
export interface KeyRing {
  /** PROVIDER_URL's account's key in use. */
  current(): ProviderKeyInUse;
  /** Every account's key in use, PROVIDER_URL's first. */
  accounts(): ProviderKeyInUse[];
  /** The key in use with this reference, if any (a key rotated away is none). */
  byRef(ref: string): ProviderKeyInUse | undefined;
  terms(key: ProviderKeyInUse): AccountTerms;
  breaker(ref: string): Breaker;
  use(key: ProviderKeyInUse): void;
  /** The newest balance sampled per key reference (the balance samples, read every little while). */
  setBalances(balances: Map<string, number>): void;
  /** The key's account is below its balance floor (unknown balance: not). */
  belowFloor(key: ProviderKeyInUse): boolean;
}

export function createKeyRing(
  initial: ProviderKeyInUse,
  makeBreaker: (key: ProviderKeyInUse) => Breaker,
  o: { extras?: ProviderKeyInUse[]; terms?: (account: string) => AccountTerms } = {},
): KeyRing {
  let current = initial;
  const extras = o.extras ?? [];
  const breakers = new Map<string, Breaker>([[initial.ref, makeBreaker(initial)]]);
  for (const k of extras) breakers.set(k.ref, makeBreaker(k));
  const byRef = (ref: string) => (ref === current.ref ? current : extras.find((k) => k.ref === ref));
  let balances = new Map<string, number>();
  const termsOf = (key: ProviderKeyInUse): AccountTerms =>
    o.terms?.(key.account ?? "default") ?? {
      id: key.account ?? "default",
      priority: 0,
      priceMicros: {} as Record<TaskType, number>,
    };
  return {
    current: () => current,
    accounts: () => [current, ...extras],
    byRef,
    terms: termsOf,
    setBalances(b) {
      balances = b;
    },
    belowFloor(key) {
      const floor = termsOf(key).floorMicros ?? 0;
      const balance = balances.get(key.ref);
      return floor > 0 && balance !== undefined && balance < floor;
    },
    breaker(ref) {
      const b = breakers.get(ref);
      if (b) return b;
      // Only keys in use ever get calls; another ref's breaker is a fresh, closed one.
      const made = makeBreaker(byRef(ref) ?? { name: "?", ref, value: "" });
      breakers.set(ref, made);
      return made;
    },
    use(key) {
      if (!breakers.has(key.ref)) breakers.set(key.ref, makeBreaker(key));
      current = key;
    },
  };
}

/**
 * The accounts a new provider task of `type` may go to, best first: those whose breaker lets
 * calls through; those above their balance floor before those below it; the cheapest for the type
 * first, then the lower priority, then the order given (PROVIDER_URL's account first). Whether one
 * has a free thread is the caller's to try, in order.
 */
export function routeOrder(ring: KeyRing, type: TaskType): ProviderKeyInUse[] {
  const usable = ring.accounts().filter((k) => ring.breaker(k.ref).allows());
  const rank = usable.map((k, i) => ({ k, i, t: ring.terms(k), low: ring.belowFloor(k) ? 1 : 0 }));
  rank.sort(
    (a, b) =>
      a.low - b.low ||
      (a.t.priceMicros[type] ?? 0) - (b.t.priceMicros[type] ?? 0) ||
      a.t.priority - b.t.priority ||
      a.i - b.i,
  );
  return rank.map((r) => r.k);
}
