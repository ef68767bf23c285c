// `apt-get` run against a temporary source list and lists folder inside a work folder: packages
// are downloaded there (signatures checked with the machine's Debian keyring), never installed, and
// nothing of the system's apt state is read or written.
import { type SpawnSyncReturns, spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** The machine's Debian archive keyring, which every temporary source list is signed by. */
export const DEBIAN_KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg";

/** Runs `apt-get -qq <args>` in the work folder, against its own source list. */
export type TempApt = (args: string[]) => SpawnSyncReturns<string>;

/**
 * Writes `deb [signed-by=<keyring>] <mirror> <suite> main` for each suite into `work/sources.list`
 * (with an empty `work/lists`) and returns an apt-get that uses only them, run in `work`.
 */
export function tempApt(work: string, mirror: string, suites: string[]): TempApt {
  const lists = join(work, "lists");
  mkdirSync(join(lists, "partial"), { recursive: true });
  const list = join(work, "sources.list");
  writeFileSync(list, suites.map((suite) => `deb [signed-by=${DEBIAN_KEYRING}] ${mirror} ${suite} main\n`).join(""));
  return (args) =>
    spawnSync(
      "apt-get",
      [
        "-qq",
        "-o",
        `Dir::Etc::sourcelist=${list}`,
        "-o",
        "Dir::Etc::sourceparts=-",
        "-o",
        `Dir::State::Lists=${lists}`,
        "-o",
        "APT::Sandbox::User=root",
        ...args,
      ],
      { cwd: work, encoding: "utf8" },
    );
}

/** The last line apt-get printed (on stderr, else stdout): what a failure message quotes. */
export const lastLine = (r: SpawnSyncReturns<string>): string | undefined =>
  (r.stderr || r.stdout).trim().split("\n").pop();
