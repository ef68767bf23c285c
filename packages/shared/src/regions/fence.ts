// The region fence: with several regions, a solver makes a new provider submission (and a
// gateway accepts a new task) only while its region's keeper holds the region's lease
// (docs/regions.md). It reads the keeper's view (KV `region_<r>`, key `lease`) as it changes; no
// view, another holder, or a view past its validUntil (the keeper stopped renewing: cut off from
// the witness, or dead) means fenced. Polls of provider ids already held go on: they cost nothing.
import type { KV } from "@nats-io/kv";
import type { Logger } from "../log.ts";
import { LeaseView, maySubmit } from "./lease.ts";

export interface Fence {
  allows(): boolean;
  stop(): void;
}

export function watchFence(kv: KV, region: string, log: Logger, now: () => number = Date.now): Fence {
  let view: LeaseView | undefined;
  let stopped = false;
  let closing: (() => void) | undefined;
  let wasAllowed: boolean | undefined;
  void (async () => {
    while (!stopped) {
      try {
        const w = await kv.watch({ key: "lease" });
        closing = () => w.stop();
        for await (const e of w) {
          if (e.operation !== "PUT") {
            view = undefined;
            continue;
          }
          const r = LeaseView.safeParse(
            (() => {
              try {
                return e.json();
              } catch {
                return undefined;
              }
            })(),
          );
          if (!r.success) log.error({ key: e.key }, "region lease view does not parse: fenced");
          view = r.success ? r.data : undefined;
        }
      } catch (err) {
        if (!stopped) log.warn({ err: (err as Error).message }, "region lease watch failed; retrying");
      }
      if (!stopped) await Bun.sleep(500);
    }
  })();
  return {
    allows() {
      const ok = maySubmit(view, region, now());
      if (ok !== wasAllowed) {
        (ok ? log.info.bind(log) : log.warn.bind(log))(
          { region, holder: view?.holder ?? null, epoch: view?.epoch ?? null },
          ok ? "region lease held: provider submissions allowed" : "region fenced: no new provider submissions",
        );
        wasAllowed = ok;
      }
      return ok;
    },
    stop() {
      stopped = true;
      closing?.();
    },
  };
}
