// `recovery restore`: a snapshot (local, or its off-host copy with --from) into an empty database,
// then the replay of EVENTS after it (this region's, or another region's mirror with --events-from).
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@pipeline/shared/nats";
import { RECOVERY_JS_API_TIMEOUT_MS } from "../../context.ts";
import { recordRestoreInto } from "../../incidents/record.ts";
import { resolveSnapshot } from "../../snapshot/manifest.ts";
import { fetchOffHost, offHostBucket } from "../../snapshot/offhost.ts";
import { restoreSnapshot } from "../../snapshot/restore.ts";
import type { CommandOf } from "../args.ts";
import { actorOf, type CliEnv, natsWithin, print } from "../env.ts";
import { restoreTarget } from "../restore-target.ts";

type Restore = CommandOf<"restore">;

/** Where the replay reads EVENTS: none with --no-replay, else this region's or the mirror in --events-from. */
async function replaySource(cmd: Restore, nc: NatsConnection | undefined) {
  if (!nc || cmd["no-replay"]) return {};
  const domain = cmd["events-from"];
  return {
    nats: domain
      ? {
          js: jetstream(nc, { domain }),
          jsm: await jetstreamManager(nc, { domain, timeout: RECOVERY_JS_API_TIMEOUT_MS }),
          mirror: true,
        }
      : { js: jetstream(nc), jsm: await jetstreamManager(nc, { timeout: RECOVERY_JS_API_TIMEOUT_MS }) },
  };
}

export async function restoreCommand(cmd: Restore, env: CliEnv): Promise<number> {
  const { config } = env;
  const intoUrl = restoreTarget({
    into: cmd.into,
    env: { ...process.env, RESTORE_INTO_URL: config.RESTORE_INTO_URL },
    warn: (l) => console.error(l),
  });
  const nc = cmd["no-replay"] && !cmd.from ? undefined : await natsWithin(env, 5000);
  try {
    // --from: the off-host copy, fetched into SNAPSHOT_DIR and checked against its manifest.
    const snapshot = cmd.from
      ? await fetchOffHost(
          { nc: nc!, domain: cmd.from, bucket: offHostBucket(config.REGION) },
          cmd.args[0],
          config.SNAPSHOT_DIR,
        )
      : resolveSnapshot(config.SNAPSHOT_DIR, cmd.args[0]);
    const startedAt = Date.now();
    const r = await restoreSnapshot({
      snapshot,
      intoUrl,
      ...(await replaySource(cmd, nc)),
      ...(cmd["allow-gap"] ? { allowGap: true } : {}),
    });
    // The restore as an incident, with its audit row, in the restored database (docs/incidents.md).
    const notRecorded = await recordRestoreInto(intoUrl, {
      region: config.REGION,
      snapshot: r.snapshot,
      into: r.into,
      startedAt,
      restoreMs: r.restoreMs,
      totalMs: r.totalMs,
      replayedEvents: r.replay?.events ?? null,
      tasks: r.tasks,
      actor: `cli:${actorOf(undefined)}`,
    });
    if (notRecorded) console.error(`recovery restore: restored, but its incident was not recorded: ${notRecorded}`);
    const replay = r.replay
      ? `replayed ${r.replay.events} events (seq ${r.replay.fromSeq}..${r.replay.toSeq}): ${Object.entries(
          r.replay.counts,
        )
          .map(([k, v]) => `${k}=${v}`)
          .join(" ")}`
      : "no replay (--no-replay)";
    // Image tasks whose body had left BODIES: rebuilt failed (BODY_UNAVAILABLE), never queued without it.
    const bodyless = r.replay?.counts.bodyUnavailable
      ? `\n${r.replay.counts.bodyUnavailable} image tasks rebuilt without their body (failed, BODY_UNAVAILABLE): select id, error_message from tasks where error_code = 'BODY_UNAVAILABLE'`
      : "";
    print(
      cmd.json,
      r,
      `restored ${r.snapshot} into ${r.into} in ${r.restoreMs} ms; ${replay}; ${r.totalMs} ms in all\ntasks: ${Object.entries(
        r.tasks,
      )
        .map(([k, v]) => `${k}=${v}`)
        .join(" ")}${bodyless}\nnext: point the apps at it (DATABASE_URL, or rename the database), then recover-stale`,
    );
    return 0;
  } finally {
    await nc?.close();
  }
}
