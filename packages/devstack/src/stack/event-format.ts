// Whether the solvers' `completed` events still carry the token (before issue 16.3's solver change)
// or only say one is stored (`tokenStored: true`): tests that compare tokens across a restore or a
// replica accept the tokenless outcome only in the second case.
import type { JetStreamManager } from "@nats-io/jetstream";
import { eventSubject, streams } from "@pipeline/shared/subjects";

/** Reads the newest `completed` event of the region's EVENTS. */
export async function completedEventsCarryToken(jsm: JetStreamManager, region: string): Promise<boolean> {
  const m = await jsm.streams.getMessage(streams.events(region), { last_by_subj: eventSubject(region, "completed") });
  if (!m) throw new Error(`no completed event in ${streams.events(region)}`);
  const data = (m.json() as { data?: Record<string, unknown> }).data ?? {};
  if (typeof data.token === "string") return true;
  if (data.tokenStored === true) return false;
  throw new Error("a completed event with neither token nor tokenStored");
}
