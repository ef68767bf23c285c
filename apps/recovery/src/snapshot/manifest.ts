import { createHash } from "node:crypto";
import { createReadStream, existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { describeIssues } from "@pipeline/shared/schemas";
import { z } from "zod";

/** The manifest written beside each dump; its presence is what makes a snapshot exist. */
export const SnapshotManifest = z.object({
  format: z.literal(1),
  name: z.string().regex(/^snap-[0-9A-Za-z-]+$/),
  createdAt: z.iso.datetime(),
  /** A file name in the manifest's own folder: no path, so a forged manifest cannot point elsewhere. */
  dumpFile: z.string().regex(/^snap-[0-9A-Za-z-]+\.dump$/, "a dump file name in the snapshot folder"),
  bytes: z.number().int().nonnegative(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  /** host:port/database, never credentials. */
  source: z.string(),
  region: z.string(),
  events: z.object({
    stream: z.string(),
    /** Last sequence of EVENTS read *before* the dump started: replay starts after it. */
    lastSeq: z.number().int().nonnegative(),
    /** Creation time of the stream: a recreated stream restarts its sequences. */
    streamCreated: z.string(),
  }),
  tookMs: z.number().int().nonnegative(),
});
export type SnapshotManifest = z.infer<typeof SnapshotManifest>;

export interface Snapshot {
  manifest: SnapshotManifest;
  manifestPath: string;
  dumpPath: string;
}

/** Raised for a snapshot that does not exist, does not parse or does not match its checksum. */
export class SnapshotError extends Error {
  override name = "SnapshotError";
}

export async function sha256File(path: string): Promise<string> {
  const h = createHash("sha256");
  for await (const chunk of createReadStream(path)) h.update(chunk as Buffer);
  return h.digest("hex");
}

function readManifest(path: string): Snapshot {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new SnapshotError(`${path}: not a readable manifest (${(err as Error).message})`);
  }
  const r = SnapshotManifest.safeParse(json);
  if (!r.success) throw new SnapshotError(`${path}: invalid manifest: ${describeIssues(r.error)}`);
  return { manifest: r.data, manifestPath: path, dumpPath: join(dirname(path), r.data.dumpFile) };
}

/** Every valid snapshot in `dir`, newest first (unreadable manifests are skipped). */
export function listSnapshots(dir: string): Snapshot[] {
  if (!existsSync(dir)) return [];
  const out: Snapshot[] = [];
  for (const f of readdirSync(dir)) {
    if (!/^snap-.*\.json$/.test(f)) continue;
    try {
      out.push(readManifest(join(dir, f)));
    } catch {
      // a foreign or damaged file: `verify` reports those when named explicitly
    }
  }
  return out.sort((a, b) => b.manifest.createdAt.localeCompare(a.manifest.createdAt));
}

/** A snapshot by `latest`, by name, or by the path of its manifest or dump. */
export function resolveSnapshot(dir: string, ref: string): Snapshot {
  if (ref === "latest") {
    const s = listSnapshots(dir)[0];
    if (!s) throw new SnapshotError(`no snapshot in ${dir}`);
    return s;
  }
  const candidates = [
    ref,
    `${ref}.json`,
    join(dir, ref),
    join(dir, `${ref}.json`),
    ref.replace(/\.dump$/, ".json"),
    join(dir, basename(ref).replace(/\.dump$/, ".json")),
  ];
  for (const c of candidates) if (c.endsWith(".json") && existsSync(c)) return readManifest(resolve(c));
  throw new SnapshotError(`snapshot "${ref}" not found (looked in ${dir})`);
}

/** Checks the dump against the manifest's size and sha256. */
export async function checkIntegrity(s: Snapshot): Promise<void> {
  if (!existsSync(s.dumpPath)) throw new SnapshotError(`${s.manifest.name}: dump file ${s.dumpPath} is missing`);
  const sum = await sha256File(s.dumpPath);
  if (sum !== s.manifest.sha256)
    throw new SnapshotError(
      `${s.manifest.name}: checksum mismatch (manifest ${s.manifest.sha256.slice(0, 12)}…, file ${sum.slice(0, 12)}…)`,
    );
}
