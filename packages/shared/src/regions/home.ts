// Every task's home region is written into its id: the last byte of the UUID is the region's
// 1-based position in REGIONS (the same ordered list in every region), so any gateway can tell
// where a task lives from its id alone. 0 means "before regions" (ids minted by one region).
import { REGION_PATTERN } from "../subjects.ts";

/** The ordered region list every region shares (`fsn1,hel1`): the position is the id's region byte. */
export function parseRegions(list: string, local: string): string[] {
  const regions = list
    .split(",")
    .map((r) => r.trim())
    .filter(Boolean);
  if (regions.length === 0) return [local];
  if (regions.length > 255) throw new Error("at most 255 regions");
  for (const r of regions) if (!REGION_PATTERN.test(r)) throw new Error(`region "${r}" is not one subject token`);
  if (new Set(regions).size !== regions.length) throw new Error("a region is listed twice");
  if (!regions.includes(local)) throw new Error(`REGION "${local}" is not in REGIONS (${regions.join(",")})`);
  return regions;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The id with its home region byte set to `region`'s position in `regions`. */
export function withHomeRegion(id: string, regions: readonly string[], region: string): string {
  const i = regions.indexOf(region);
  if (i < 0) throw new Error(`unknown region "${region}"`);
  if (!UUID.test(id)) throw new Error("not a UUID");
  return `${id.slice(0, 34)}${(i + 1).toString(16).padStart(2, "0")}`;
}

/** The home region written in an id; undefined for ids from before regions or of an unknown position. */
export function homeRegionOf(id: string, regions: readonly string[]): string | undefined {
  if (!UUID.test(id)) return undefined;
  const i = Number.parseInt(id.slice(34), 16);
  return i >= 1 ? regions[i - 1] : undefined;
}

/** The same id as minted by each region (an Idempotency-Key's task may have been accepted by another one). */
export function homeRegionVariants(id: string, regions: readonly string[]): string[] {
  return regions.map((r) => withHomeRegion(id, regions, r));
}
