// The operator's secrets store: one JSON file, 0600, in a 0700 folder outside the repository
// (default ~/.config/captcha-pipeline/secrets.json; --store FILE or CAPTCHA_PIPELINE_SECRETS).
// `npm run deploy -- secrets init` fills it once with every secret the fleet needs (secret-catalog.ts);
// `rotate <name>` rolls one and keeps the value before it as `previous` until `retire <name>`.
// Nothing here prints or logs a value: errors name the secret and the file, never what it holds.
// docs/deploy.md, "Secrets", says why a local file and not sops/age or a vault.
import { randomBytes } from "node:crypto";
import {
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  statSync,
  writeSync,
} from "node:fs";
import { homedir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { z } from "zod";

/** The repository: a store inside it could be committed, so it is refused. */
const REPO = resolve(import.meta.dir, "..", "..", "..");

const Entry = z
  .object({
    value: z.string(),
    createdAt: z.string(),
    /** The value before the last rotation, still honoured where the secret allows two (webhook secret, API keys). */
    previous: z.object({ value: z.string(), retiredAt: z.string() }).strict().optional(),
  })
  .strict();
export type Entry = z.infer<typeof Entry>;

export const StoreFile = z
  .object({
    format: z.literal(1),
    /** The regions the per-region secrets were made for, in REGIONS order. */
    regions: z.array(z.string().regex(/^[a-z0-9][a-z0-9_-]{0,31}$/)).min(1),
    secrets: z.record(z.string(), Entry),
  })
  .strict();
export type StoreFile = z.infer<typeof StoreFile>;

/** The store's path: the flag, else CAPTCHA_PIPELINE_SECRETS, else ~/.config/captcha-pipeline/secrets.json. */
export function storePath(flag?: string, env: Record<string, string | undefined> = process.env): string {
  const p = flag || env.CAPTCHA_PIPELINE_SECRETS;
  if (p) return resolve(p);
  const config = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), ".config");
  return join(config, "captcha-pipeline", "secrets.json");
}

function refuseInsideRepository(path: string): void {
  const rel = relative(REPO, path);
  if (!rel.startsWith("..") && !rel.startsWith("/"))
    throw new Error(
      `secrets store ${path} is inside the repository: keep it outside (default ~/.config/captcha-pipeline/secrets.json)`,
    );
}

/** Reads the store; refuses one that others than its owner may read (mode 0600 expected). */
export function readStore(path: string): StoreFile {
  if (!existsSync(path))
    throw new Error(`no secrets store at ${path}: make it once with \`npm run deploy -- secrets init --regions ...\``);
  const mode = statSync(path).mode & 0o777;
  if (mode & 0o077)
    throw new Error(
      `secrets store ${path} is mode ${mode.toString(8).padStart(4, "0")}: only its owner may read it (chmod 600)`,
    );
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch {
    throw new Error(`secrets store ${path}: not valid JSON`);
  }
  const r = StoreFile.safeParse(raw);
  if (!r.success)
    // Paths and messages only: an issue's message never carries a value here (no refinements on values).
    throw new Error(
      `secrets store ${path}:\n${r.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`).join("\n")}`,
    );
  return r.data;
}

/** Writes the store atomically (a 0600 file renamed over the old one), its folder 0700. */
export function writeStore(path: string, store: StoreFile): void {
  refuseInsideRepository(path);
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  const fd = openSync(tmp, "wx", 0o600);
  try {
    writeSync(fd, `${JSON.stringify(StoreFile.parse(store), null, 2)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
}

/** 64 hex characters (256 bits): peppers, webhook masters, API keys, console tokens. */
export const hexSecret = (): string => randomBytes(32).toString("hex");

/**
 * 32 characters of `A-Z a-z 0-9 _ -` (192 bits): NATS and Postgres passwords, safe in URLs (leafnode
 * links, DATABASE_URL) and in nats-render-config's `user=password` lines.
 */
export const passwordSecret = (): string => randomBytes(24).toString("base64url");

export const now = (): string => new Date().toISOString();

/** The current value of `name`; throws naming it (and the store) when the store has none. */
export function valueOf(store: StoreFile, name: string, path = "the secrets store"): string {
  const e = store.secrets[name];
  if (!e) throw new Error(`${path} has no secret ${name}: \`npm run deploy -- secrets init\` adds what is missing`);
  return e.value;
}
