// The fair-share groups recovery queues tasks again with (the stale sweep, `rebuild-queue`, a
// region's adoption, the console's and the CLI's redrives): the record stored now, read at most
// every `everyMs` (a bulk redrive of a thousand tasks reads it once).
import type { JetStreamManager } from "@nats-io/jetstream";
import { type GroupOf, groupsNow } from "@pipeline/shared/fair-share";
import type { Logger } from "@pipeline/shared/log";

export type GroupsReader = () => Promise<GroupOf>;

export function groupsReader(jsm: JetStreamManager, region: string, log: Logger, everyMs = 5000): GroupsReader {
  let last: { at: number; groupOf: GroupOf } | undefined;
  return async () => {
    if (last && Date.now() - last.at < everyMs) return last.groupOf;
    const groupOf = await groupsNow(jsm, region, (why) =>
      log.warn({ region, why }, "fair-share record not read: tasks queued again go on their lanes' own subjects"),
    );
    last = { at: Date.now(), groupOf };
    return groupOf;
  };
}
