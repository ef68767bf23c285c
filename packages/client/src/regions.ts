// Which region a request goes to: the home region (the first URL) while it answers, the others
// after it fails, and home again once a probe after `failBackMs` finds it accepting.

/** The shared region order (REGIONS) encoded in task ids: the last byte is the home region's 1-based position. */
export function homeRegionOfId(id: string, order: readonly string[]): string | undefined {
  if (!/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(id)) return undefined;
  const i = Number.parseInt(id.slice(34), 16);
  return i >= 1 ? order[i - 1] : undefined;
}

/**
 * The region indexes to try, in order: `first`, then those a 503's `x-try-regions` named (mapped
 * through `names`), then every other one in the configured order. Each index once.
 */
export function tryOrder(count: number, first: number, hinted: readonly number[] = []): number[] {
  const out: number[] = [];
  const add = (i: number) => {
    if (i >= 0 && i < count && !out.includes(i)) out.push(i);
  };
  add(first);
  for (const i of hinted) add(i);
  for (let k = 1; k <= count; k++) add((first + k) % count);
  return out;
}

/** The indexes of the regions an `x-try-regions` header names (`hel1,fsn1`), those `names` maps to a configured URL. */
export function hintedRegions(
  header: string | null | undefined,
  names: Readonly<Record<string, string>>,
  urls: readonly string[],
): number[] {
  if (!header) return [];
  return header
    .split(",")
    .map((n) => names[n.trim()])
    .filter((u): u is string => u !== undefined)
    .map((u) => urls.indexOf(normalizeBaseUrl(u)))
    .filter((i) => i >= 0);
}

/** A base URL without its trailing slashes. */
export const normalizeBaseUrl = (u: string) => u.replace(/\/+$/, "");

export interface RegionState {
  /** The region new requests go to. */
  active(): number;
  /** A request to `from` failed (connection, 503): later requests go to `to`. True when that moved the active region. */
  failedOver(from: number, to: number): boolean;
  /** Whether it is time to probe home (away from it for at least failBackMs since the last probe). */
  probeDue(): boolean;
  /** The probe's answer: home accepting (back home) or not (probe again after failBackMs). */
  probed(homeAccepting: boolean): void;
}

/** The active-region state of one client; `now` injectable for tests. */
export function createRegionState(failBackMs: number, now: () => number = Date.now): RegionState {
  let active = 0;
  let awaySince = 0;
  return {
    active: () => active,
    failedOver(from, to) {
      if (from !== active || to === active) return false;
      if (active === 0) awaySince = now();
      active = to;
      if (to === 0) awaySince = 0;
      return true;
    },
    probeDue: () => active !== 0 && now() - awaySince >= failBackMs,
    probed(ok) {
      if (ok) active = 0;
      awaySince = now();
    },
  };
}
