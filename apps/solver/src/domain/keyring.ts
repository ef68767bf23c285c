import type { Breaker } from "./breaker.ts";
import { keyRefOf } from "./key-ref.ts";

/** The provider key a task is submitted with: its name, its hash reference and its value. */
export interface ProviderKeyInUse {
  name: string;
  ref: string;
  value: string;
}

export const keyInUse = (name: string, value: string): ProviderKeyInUse => ({ name, ref: keyRefOf(value), value });

/**
 * The key every new provider call uses, switchable at run time (key rotation), with one breaker
 * per key: a key that was stopped (revoked, out of money) must not hold back its successor.
 */
export interface KeyRing {
  current(): ProviderKeyInUse;
  breaker(ref: string): Breaker;
  use(key: ProviderKeyInUse): void;
}

export function createKeyRing(initial: ProviderKeyInUse, makeBreaker: (key: ProviderKeyInUse) => Breaker): KeyRing {
  let current = initial;
  const breakers = new Map<string, Breaker>([[initial.ref, makeBreaker(initial)]]);
  return {
    current: () => current,
    breaker(ref) {
      const b = breakers.get(ref);
      if (b) return b;
      // Only the current key ever gets calls; another ref's breaker is a fresh, closed one.
      const made = makeBreaker(ref === current.ref ? current : { name: "?", ref, value: "" });
      breakers.set(ref, made);
      return made;
    },
    use(key) {
      if (!breakers.has(key.ref)) breakers.set(key.ref, makeBreaker(key));
      current = key;
    },
  };
}
