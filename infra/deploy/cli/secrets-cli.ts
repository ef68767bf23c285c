// `npm run deploy -- secrets <init|list|rotate|retire|set|export> ...`: the operator's secrets store
// (secret-store.ts) and what is in it (secret-catalog.ts). Prints names, dates and next steps,
// never a value: a value leaves the store only over SSH's stdin (the deploy) or into a 0600 file
// (`export`, for a client's API key).
import { closeSync, openSync, writeSync } from "node:fs";
import { resolve } from "node:path";
import { catalog, fillStore, rotateEntry, specOf } from "./secret-catalog.ts";
import { now, readStore, type StoreFile, storePath, writeStore } from "./secret-store.ts";
import { pushServerSecrets } from "./servers.ts";

export const SECRETS_USAGE = `usage: npm run deploy -- secrets init --regions fsn1,hel1 [--store FILE]
       npm run deploy -- secrets list [--store FILE]
       npm run deploy -- secrets rotate <name> [--store FILE]
       npm run deploy -- secrets retire <name> [--store FILE]
       npm run deploy -- secrets set <name> [--store FILE] < file        (a value made elsewhere, on stdin)
       npm run deploy -- secrets export <name> --out FILE [--previous] [--store FILE]
       npm run deploy -- secrets servers --hosts inventory.json [--region R] [--hub R] [--ssh-key FILE] [--store FILE]
The store: --store, else CAPTCHA_PIPELINE_SECRETS, else ~/.config/captcha-pipeline/secrets.json (0600).`;

interface Parsed {
  verb: string;
  name?: string;
  flags: Record<string, string | true>;
}

function parse(argv: string[]): Parsed {
  const positional: string[] = [];
  const flags: Record<string, string | true> = {};
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(argv[i]!);
    if (!m) positional.push(argv[i]!);
    else if (["previous", "force"].includes(m[1]!)) flags[m[1]!] = true;
    else flags[m[1]!] = m[2] ?? argv[++i] ?? "";
  }
  const known = ["store", "regions", "out", "previous", "force", "hosts", "region", "hub", "ssh-key"];
  const unknown = Object.keys(flags).find((f) => !known.includes(f));
  if (unknown) throw new UsageError(`unknown option --${unknown}`);
  if (positional.length > 2) throw new UsageError(`unexpected argument ${JSON.stringify(positional[2])}`);
  return { verb: positional[0] ?? "", ...(positional[1] ? { name: positional[1] } : {}), flags };
}

export class UsageError extends Error {
  override name = "UsageError";
}

const str = (v: string | true | undefined) => (typeof v === "string" && v ? v : undefined);

/** Runs one `secrets` command; what it says goes to `out` (names, dates, next steps: never a value). */
export async function secretsCommand(
  argv: string[],
  out: (line: string) => void,
  o: { env?: Record<string, string | undefined>; stdin?: () => Promise<string> } = {},
): Promise<void> {
  const { verb, name, flags } = parse(argv);
  const path = storePath(str(flags.store), o.env ?? process.env);
  const needName = () => {
    if (!name) throw new UsageError(`secrets ${verb} needs the secret's name (npm run deploy -- secrets list)`);
    return name;
  };
  const store = () => readStore(path);
  switch (verb) {
    case "init":
      return init(path, str(flags.regions), out);
    case "list":
      return list(path, store(), out);
    case "rotate":
      return rotate(path, store(), needName(), flags.force === true, out);
    case "retire":
      return retire(path, store(), needName(), out);
    case "set": {
      if (!o.stdin) throw new UsageError("secrets set reads the value on stdin");
      return set(path, store(), needName(), await o.stdin(), out);
    }
    case "export":
      return exportTo(path, store(), needName(), str(flags.out), flags.previous === true, out);
    case "servers": {
      const hosts = str(flags.hosts);
      if (!hosts) throw new UsageError("secrets servers needs --hosts inventory.json");
      const region = str(flags.region);
      const hub = str(flags.hub);
      const sshKey = str(flags["ssh-key"]);
      const failed = await pushServerSecrets(
        store(),
        { hosts, ...(region ? { region } : {}), ...(hub ? { hub } : {}), ...(sshKey ? { sshKey } : {}) },
        out,
      );
      if (failed.length) throw new Error(`not done on ${failed.join(", ")}`);
      return;
    }
    default:
      throw new UsageError(verb ? `unknown secrets command ${JSON.stringify(verb)}` : "secrets needs a command");
  }
}

function list(path: string, store: StoreFile, out: (line: string) => void): void {
  out(`${path}: regions ${store.regions.join(",")}`);
  for (const s of catalog(store.regions)) {
    const e = store.secrets[s.name];
    out(
      `${s.name.padEnd(34)} ${e ? `made ${e.createdAt}${e.previous ? `, previous kept since ${e.previous.retiredAt}` : ""}` : "MISSING (secrets init)"}  ${s.about}`,
    );
  }
}

function rotate(path: string, store: StoreFile, name: string, force: boolean, out: (line: string) => void): void {
  const spec = rotateEntry(store, name, now(), { force });
  writeStore(path, store);
  out(`${spec.name}: rotated in ${path} (the value before it is kept as previous until \`secrets retire\`)`);
  out("now, in this order:");
  for (const [i, step] of spec.after.entries()) out(`  ${i + 1}. ${step}`);
}

function retire(path: string, store: StoreFile, name: string, out: (line: string) => void): void {
  specOf(store.regions, name);
  const e = store.secrets[name];
  if (!e?.previous) return out(`${name}: no previous value to retire`);
  delete e.previous;
  writeStore(path, store);
  out(`${name}: previous value dropped; redeploy the apps that read it (secrets rotate printed which)`);
}

function set(path: string, store: StoreFile, name: string, input: string, out: (line: string) => void): void {
  specOf(store.regions, name);
  const value = input.replace(/\r?\n$/, "");
  if (!value) throw new Error(`${name}: nothing on stdin (secrets set <name> < file)`);
  const cur = store.secrets[name];
  store.secrets[name] = {
    value,
    createdAt: now(),
    ...(cur && cur.value !== value ? { previous: { value: cur.value, retiredAt: now() } } : {}),
  };
  writeStore(path, store);
  out(`${name}: set from stdin (${value.length} characters)`);
}

function exportTo(
  path: string,
  store: StoreFile,
  name: string,
  file: string | undefined,
  previous: boolean,
  out: (line: string) => void,
): void {
  if (!file) throw new UsageError("secrets export needs --out FILE (a new file, made 0600)");
  const e = store.secrets[name];
  const value = previous ? e?.previous?.value : e?.value;
  if (value === undefined) throw new Error(`${name}: no ${previous ? "previous " : ""}value in ${path}`);
  const fd = openSync(resolve(file), "wx", 0o600);
  try {
    writeSync(fd, `${value}\n`);
  } finally {
    closeSync(fd);
  }
  out(`${name}: written to ${resolve(file)} (0600); hand it over and delete it`);
}

function init(path: string, regionsFlag: string | undefined, out: (line: string) => void): void {
  const regions = regionsFlag
    ?.split(",")
    .map((r) => r.trim())
    .filter(Boolean);
  let store: StoreFile;
  let made = false;
  try {
    store = readStore(path);
    for (const r of regions ?? []) if (!store.regions.includes(r)) store.regions.push(r);
  } catch (err) {
    if (!(err as Error).message.startsWith("no secrets store")) throw err;
    if (!regions?.length) throw new UsageError("secrets init needs --regions (REGIONS order, e.g. fsn1,hel1)");
    store = { format: 1, regions, secrets: {} };
    made = true;
  }
  const added = fillStore(store, now());
  if (!added.length) return out(`${path}: every secret is there already (${Object.keys(store.secrets).length})`);
  writeStore(path, store);
  out(`${path}: ${made ? "made (0600)" : "completed"}; ${added.length} secret(s) generated:`);
  for (const n of added) out(`  ${n}`);
  out("values are never printed: the deploy hands each app its own (npm run deploy -- <app> <version> ...)");
}
