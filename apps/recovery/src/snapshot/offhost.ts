// Off-host snapshot copies (issue 16.4). A snapshot on the database's host dies with the host,
// together with the database and EVENTS; so after each snapshot the service copies its dump and
// manifest into a NATS Object Store bucket in ANOTHER region's JetStream domain (reached over the
// leafnode link, docs/regions.md), reads the copy back and checks its sha256 against the
// manifest's. Only a verified copy is recorded (`<name>.offhost.json` beside the snapshot), which
// `snapshots` lists and `assess` checks. `restore --from <domain>` fetches a copy into the local
// snapshot folder, checks it again and restores it as usual.
import { createHash } from "node:crypto";
import {
  chmodSync,
  createReadStream,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { Readable } from "node:stream";
import { jetstream } from "@nats-io/jetstream";
import { type ObjectStore, Objm } from "@nats-io/obj";
import type { NatsConnection } from "@pipeline/shared/nats";
import { z } from "zod";
import { resolveSnapshot, type Snapshot, SnapshotError, SnapshotManifest } from "./manifest.ts";

/** Where copies go: a bucket named after the source region, in the other region's domain. */
export interface OffHostTarget {
  nc: NatsConnection;
  /** The JetStream domain holding the copies (another region). */
  domain: string;
  /** Default `snapshots_<region>`. */
  bucket: string;
  /** Request timeout over the link. */
  timeoutMs?: number;
}

export const offHostBucket = (region: string) => `snapshots_${region.toLowerCase()}`;

/** What the local marker says: a verified copy of this snapshot exists there. */
export const OffHostRecord = z.object({
  snapshot: z.string(),
  domain: z.string(),
  bucket: z.string(),
  dumpObject: z.string(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  bytes: z.number().int().nonnegative(),
  verifiedAt: z.iso.datetime(),
  copyMs: z.number().int().nonnegative(),
});
export type OffHostRecord = z.infer<typeof OffHostRecord>;

export class OffHostError extends Error {
  override name = "OffHostError";
}

const recordPath = (s: Snapshot) => s.manifestPath.replace(/\.json$/, ".offhost.json");

/** The verified off-host copy recorded for a local snapshot, if any. */
export function offHostRecord(s: Snapshot): OffHostRecord | undefined {
  const p = recordPath(s);
  if (!existsSync(p)) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(p, "utf8"));
  } catch {
    return undefined; // a damaged record counts as no copy
  }
  const r = OffHostRecord.safeParse(json);
  return r.success && r.data.sha256 === s.manifest.sha256 ? r.data : undefined;
}

async function openStore(t: OffHostTarget, create: boolean): Promise<ObjectStore> {
  const objm = new Objm(jetstream(t.nc, { domain: t.domain, timeout: t.timeoutMs ?? 10_000 }));
  return create
    ? objm.create(t.bucket, { description: "off-host copies of recovery snapshots (issue 16.4)" })
    : objm.open(t.bucket);
}

/** sha256 (hex) and size of an object, read back from the store. */
async function digestOf(store: ObjectStore, name: string): Promise<{ sha256: string; bytes: number }> {
  const r = await store.get(name);
  if (!r) throw new OffHostError(`${name}: not in the bucket`);
  const h = createHash("sha256");
  let bytes = 0;
  for await (const chunk of r.data as unknown as AsyncIterable<Uint8Array>) {
    h.update(chunk);
    bytes += chunk.length;
  }
  await r.error;
  return { sha256: h.digest("hex"), bytes };
}

/**
 * Copies a local snapshot off the host and verifies the copy (read back, sha256 and size against
 * the manifest); writes the local record only then. Keeps the newest `keep` copies in the bucket.
 */
export async function copySnapshotOffHost(t: OffHostTarget, s: Snapshot, keep: number): Promise<OffHostRecord> {
  const started = Date.now();
  const store = await openStore(t, true);
  const m = s.manifest;
  const dumpStream = Readable.toWeb(createReadStream(s.dumpPath)) as unknown as ReadableStream<Uint8Array>;
  await store.put({ name: m.dumpFile, description: `pg_dump of ${m.source}, region ${m.region}` }, dumpStream);
  // The manifest goes last: a copy is listed only once its dump is complete.
  await store.putBlob({ name: `${m.name}.json` }, new TextEncoder().encode(`${JSON.stringify(m, null, 2)}\n`));
  const got = await digestOf(store, m.dumpFile);
  if (got.sha256 !== m.sha256 || got.bytes !== m.bytes)
    throw new OffHostError(
      `${m.name}: the copy in ${t.domain}/${t.bucket} does not match (sha256 ${got.sha256.slice(0, 12)}…, ${got.bytes} B; manifest ${m.sha256.slice(0, 12)}…, ${m.bytes} B)`,
    );
  const record: OffHostRecord = {
    snapshot: m.name,
    domain: t.domain,
    bucket: t.bucket,
    dumpObject: m.dumpFile,
    sha256: got.sha256,
    bytes: got.bytes,
    verifiedAt: new Date().toISOString(),
    copyMs: Date.now() - started,
  };
  const p = recordPath(s);
  writeFileSync(`${p}.tmp`, `${JSON.stringify(record, null, 2)}\n`, { mode: 0o600 });
  renameSync(`${p}.tmp`, p);
  await pruneOffHost(store, keep);
  // Records of snapshots pruned locally (take-snapshot keeps SNAPSHOT_KEEP) go too.
  for (const f of readdirSync(dirname(p))) {
    const m2 = /^(snap-[0-9A-Za-z-]+)\.offhost\.json$/.exec(f);
    if (m2 && !existsSync(join(dirname(p), `${m2[1]}.json`))) rmSync(join(dirname(p), f), { force: true });
  }
  return record;
}

async function manifestsIn(store: ObjectStore): Promise<SnapshotManifest[]> {
  const out: SnapshotManifest[] = [];
  for (const o of await store.list()) {
    if (o.deleted || !/^snap-[0-9A-Za-z-]+\.json$/.test(o.name)) continue;
    const blob = await store.getBlob(o.name);
    const r = blob ? SnapshotManifest.safeParse(JSON.parse(new TextDecoder().decode(blob))) : undefined;
    if (r?.success) out.push(r.data);
  }
  return out.sort((a, b) => b.createdAt.localeCompare(a.createdAt));
}

/** Removes all but the newest `keep` copies (manifest first, so none is listed half there). */
async function pruneOffHost(store: ObjectStore, keep: number): Promise<string[]> {
  const removed: string[] = [];
  for (const m of (await manifestsIn(store)).slice(keep)) {
    await store.delete(`${m.name}.json`);
    await store.delete(m.dumpFile).catch(() => {});
    removed.push(m.name);
  }
  return removed;
}

/** The copies held off the host, newest first. */
export async function listOffHost(t: OffHostTarget): Promise<SnapshotManifest[]> {
  return manifestsIn(await openStore(t, false));
}

/**
 * Fetches a copy (`latest` or a name) into `dir` (0700, files 0600) and checks its sha256 against
 * its manifest; returns it as a local snapshot for `restoreSnapshot`.
 */
export async function fetchOffHost(t: OffHostTarget, ref: string, dir: string): Promise<Snapshot> {
  const store = await openStore(t, false);
  const all = await manifestsIn(store);
  const name = ref
    .replace(/\.(json|dump)$/, "")
    .split("/")
    .pop()!;
  const m = ref === "latest" ? all[0] : all.find((x) => x.name === name);
  if (!m)
    throw new SnapshotError(
      `snapshot "${ref}" is not in ${t.domain}/${t.bucket}${all.length ? ` (newest: ${all[0]!.name})` : " (empty)"}`,
    );
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  const tmp = join(dir, `.${m.dumpFile}.fetch.tmp`);
  try {
    const r = await store.get(m.dumpFile);
    if (!r) throw new SnapshotError(`${m.name}: its dump is missing from ${t.domain}/${t.bucket}`);
    const h = createHash("sha256");
    const w = Bun.file(tmp).writer();
    for await (const chunk of r.data as unknown as AsyncIterable<Uint8Array>) {
      h.update(chunk);
      w.write(chunk);
    }
    await w.end();
    chmodSync(tmp, 0o600);
    await r.error;
    const sum = h.digest("hex");
    if (sum !== m.sha256)
      throw new SnapshotError(
        `${m.name}: the copy in ${t.domain}/${t.bucket} fails its checksum (manifest ${m.sha256.slice(0, 12)}…, copy ${sum.slice(0, 12)}…)`,
      );
    renameSync(tmp, join(dir, m.dumpFile));
    const manifestTmp = join(dir, `.${m.name}.json.fetch.tmp`);
    writeFileSync(manifestTmp, `${JSON.stringify(m, null, 2)}\n`, { mode: 0o600 });
    renameSync(manifestTmp, join(dir, `${m.name}.json`));
  } finally {
    rmSync(tmp, { force: true });
  }
  return resolveSnapshot(dir, m.name);
}
