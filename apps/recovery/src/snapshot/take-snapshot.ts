import {
  chmodSync,
  closeSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import type { JetStreamManager } from "@nats-io/jetstream";
import type { Logger } from "@pipeline/shared/log";
import { progressBar } from "@pipeline/shared/progress";
import { streams } from "@pipeline/shared/subjects";
import { describeUrl, pgDump } from "../adapters/pg-tools.ts";
import { listSnapshots, type Snapshot, type SnapshotManifest, sha256File } from "./manifest.ts";

export interface SnapshotOptions {
  databaseUrl: string;
  dir: string;
  keep: number;
  region: string;
  jsm: JetStreamManager;
  log?: Logger;
}

function fsyncPath(path: string): void {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Writes `data` to `path` through a temp file, fsync and rename: readers see all of it or nothing. */
function writeAtomically(path: string, data: string): void {
  const tmp = `${path}.tmp`;
  writeFileSync(tmp, data, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  fsyncPath(tmp);
  renameSync(tmp, path);
}

/**
 * Takes a snapshot: reads the EVENTS stream's last sequence, then `pg_dump -Fc` of the database
 * (every event at or before that sequence is therefore in the dump; later ones are replayed by
 * `restore`). The dump goes to a temp file, is fsynced, checksummed and renamed; the manifest is
 * written last, the same way, so a crash leaves no half snapshot. Keeps the newest `keep`.
 */
export async function takeSnapshot(o: SnapshotOptions): Promise<Snapshot> {
  const started = Date.now();
  // A dump holds every task and token: the folder is the owner's alone, every file 0600.
  mkdirSync(o.dir, { recursive: true, mode: 0o700 });
  chmodSync(o.dir, 0o700);
  const info = await o.jsm.streams.info(streams.events(o.region));
  const createdAt = new Date(started).toISOString();
  const name = `snap-${createdAt.replace(/[:.]/g, "-")}`;
  const dumpFile = `${name}.dump`;
  const tmp = join(o.dir, `.${dumpFile}.tmp`);
  try {
    // On a terminal: kB or MB written so far against the previous dump's size (the estimate), polled.
    const previous = listSnapshots(o.dir)[0]?.manifest.bytes;
    const big = (previous ?? 0) >= 10e6;
    const mb = (b: number) => (big ? Math.round(b / 1e5) / 10 : Math.round(b / 1e3));
    const bar = progressBar("snapshot (pg_dump)", previous ? mb(previous) : undefined, { unit: big ? "MB" : "kB" });
    const poll = setInterval(() => {
      try {
        const size = mb(statSync(tmp).size);
        bar.update(size, previous && size > mb(previous) ? size : undefined);
      } catch {
        // not created yet
      }
    }, 200);
    try {
      await pgDump(o.databaseUrl, tmp);
      const final = mb(statSync(tmp).size);
      bar.update(final, previous ? final : undefined);
    } finally {
      clearInterval(poll);
      bar.done();
    }
    chmodSync(tmp, 0o600); // pg_dump writes 0644
    fsyncPath(tmp);
    const sha256 = await sha256File(tmp);
    const bytes = statSync(tmp).size;
    renameSync(tmp, join(o.dir, dumpFile));
    const manifest: SnapshotManifest = {
      format: 1,
      name,
      createdAt,
      dumpFile,
      bytes,
      sha256,
      source: describeUrl(o.databaseUrl),
      region: o.region,
      events: { stream: streams.events(o.region), lastSeq: info.state.last_seq, streamCreated: info.created },
      tookMs: Date.now() - started,
    };
    const manifestPath = join(o.dir, `${name}.json`);
    writeAtomically(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
    fsyncPath(o.dir);
    o.log?.info({ snapshot: name, bytes, eventsSeq: manifest.events.lastSeq, ms: manifest.tookMs }, "snapshot written");
    pruneSnapshots(o.dir, o.keep);
    return { manifest, manifestPath, dumpPath: join(o.dir, dumpFile) };
  } finally {
    rmSync(tmp, { force: true });
  }
}

/** Removes all but the newest `keep` snapshots (manifest first, so none is ever half there), and old temp files. */
export function pruneSnapshots(dir: string, keep: number): string[] {
  const removed: string[] = [];
  for (const s of listSnapshots(dir).slice(keep)) {
    rmSync(s.manifestPath, { force: true });
    rmSync(s.dumpPath, { force: true });
    removed.push(s.manifest.name);
  }
  const hourAgo = Date.now() - 3600_000;
  for (const f of readdirSync(dir)) {
    if (f.endsWith(".tmp") && statSync(join(dir, f)).mtimeMs < hourAgo) rmSync(join(dir, f), { force: true });
  }
  return removed;
}
