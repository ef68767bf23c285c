// One rehearsal fleet per machine: the bridge (rh-br0), its addresses and the containers' names are
// the machine's, so a second clone (a CI job beside another) waits until the first one's fleet is
// down. The lock names the clone whose fleet is up ($REHEARSAL_CACHE/fleet.json); it is stale when
// that clone has no state.json or none of its hosts' nspawn processes is alive.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { CACHE, DATA } from "./config.ts";
import { type Log, sleep } from "./exec.ts";

const LOCK = join(CACHE, "fleet.json");

/** The data folder of another clone whose fleet is up, if any. */
export function otherFleet(): string | undefined {
  if (!existsSync(LOCK)) return undefined;
  const { data } = JSON.parse(readFileSync(LOCK, "utf8")) as { data: string };
  if (data === DATA) return undefined;
  const state = join(data, "state.json");
  if (!existsSync(state)) return undefined;
  const s = JSON.parse(readFileSync(state, "utf8")) as { phase?: string; hosts?: Array<{ nspawnPid: number }> };
  const live = (s.hosts ?? []).some((h) => existsSync(`/proc/${h.nspawnPid}`));
  return live || s.phase === "starting" ? data : undefined;
}

export async function acquireFleet(log: Log, waitMs = 30 * 60_000): Promise<void> {
  mkdirSync(CACHE, { recursive: true });
  let said = false;
  for (const until = Date.now() + waitMs; ; await sleep(5000)) {
    const other = otherFleet();
    if (!other) break;
    if (Date.now() > until)
      throw new Error(`another clone's rehearsal is up (${other}): npm run rehearse -- down there`);
    if (!said) log(`waiting: another clone's rehearsal is up (${other})`);
    said = true;
  }
  writeFileSync(LOCK, `${JSON.stringify({ data: DATA, since: new Date().toISOString(), pid: process.pid })}\n`);
}

export function releaseFleet(): void {
  if (!existsSync(LOCK)) return;
  const { data } = JSON.parse(readFileSync(LOCK, "utf8")) as { data: string };
  if (data === DATA) rmSync(LOCK, { force: true });
}
