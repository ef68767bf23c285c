// `recovery snapshots`: the local snapshots, newest first, and where their off-host copies are.
import { listSnapshots } from "../../snapshot/manifest.ts";
import { listOffHost, offHostBucket, offHostRecord } from "../../snapshot/offhost.ts";
import type { CommandOf } from "../args.ts";
import { type CliEnv, natsWithin, print } from "../env.ts";

type Remote = Awaited<ReturnType<typeof listOffHost>> | Error | undefined;

/** The copies held in the other region, when one is configured and reachable. */
async function remoteCopies(env: CliEnv): Promise<Remote> {
  const domain = env.config.offHostDomain;
  if (!domain) return undefined;
  const nc = await natsWithin(env, 5000).catch((e: Error) => e);
  return nc instanceof Error
    ? nc
    : await listOffHost({ nc, domain, bucket: offHostBucket(env.config.REGION) })
        .catch((e: Error) => e)
        .finally(() => nc.close());
}

export async function snapshotsCommand(cmd: CommandOf<"snapshots">, env: CliEnv): Promise<number> {
  const { config } = env;
  const all = listSnapshots(config.SNAPSHOT_DIR);
  const remote = await remoteCopies(env);
  const remoteNames = new Set(remote instanceof Array ? remote.map((m) => m.name) : []);
  const rows = all.map((s) => ({
    ...s.manifest,
    local: true,
    offHost: offHostRecord(s) ?? null,
    inOffHostBucket: remoteNames.has(s.manifest.name),
  }));
  const only =
    remote instanceof Array
      ? remote
          .filter((m) => !all.some((s) => s.manifest.name === m.name))
          .map((m) => ({ ...m, local: false, offHost: null, inOffHostBucket: true }))
      : [];
  const where = (r: (typeof rows)[number]) =>
    [
      r.local ? "local" : "",
      r.offHost
        ? `${r.offHost.domain}/${r.offHost.bucket} (verified ${r.offHost.verifiedAt})`
        : r.inOffHostBucket
          ? `${config.offHostDomain} (unverified)`
          : "",
    ]
      .filter(Boolean)
      .join(" + ") || "-";
  const lines = [...rows, ...only]
    .sort((a, b) => b.createdAt.localeCompare(a.createdAt))
    .map((r) => `${r.name}  ${String(r.bytes).padStart(10)} B  events seq ${r.events.lastSeq}  ${where(r)}`);
  if (remote instanceof Error) lines.push(`off-host copies in ${config.offHostDomain}: unreadable (${remote.message})`);
  if (!config.offHostDomain) lines.push("off-host copies: none configured (SNAPSHOT_OFFHOST)");
  print(
    cmd.json,
    {
      snapshots: [...rows, ...only],
      offHostDomain: config.offHostDomain ?? null,
      offHostError: remote instanceof Error ? remote.message : null,
    },
    lines.length ? lines.join("\n") : `no snapshot in ${config.SNAPSHOT_DIR}`,
  );
  return 0;
}
