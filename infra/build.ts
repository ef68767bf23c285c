// `npm run build [-- --version v2] [--arch x64|arm64|all] [--apps gateway,solver] [--out dist]
//   --signing-key FILE | --unsigned]`: one self-contained binary per app and architecture,
// `dist/<app>-<version>-linux-<arch>` (Bun's `build --compile`: the runtime, our code, its
// dependencies and the SQL migrations in one file), each with `<binary>.sha256` in sha256sum's
// format and `<binary>.sha256.sig`, that line signed with the release signing key (`ssh-keygen -Y
// sign`; RELEASE_SIGNING_KEY or --signing-key). The deploy command refuses an unsigned release and
// the hosts install one only when the signature verifies against their allowed_signers.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { z } from "zod";

const root = resolve(import.meta.dir, "..");

/** The apps a binary is built for, and the source file each starts from. */
export const APP_ENTRIES = {
  gateway: "apps/gateway/src/main.ts",
  solver: "apps/solver/src/main.ts",
  recovery: "apps/recovery/src/bin.ts",
  rollout: "apps/rollout/src/bin.ts",
  emulator: "packages/emulator/src/main.ts",
  /** The monitoring host's NATS exporter (infra/deploy/cloud-init/monitoring.yaml's nats-exporter.service). */
  "nats-exporter": "packages/nats-exporter/src/main.ts",
} as const;
export type AppName = keyof typeof APP_ENTRIES;
export const ARCHES = ["x64", "arm64"] as const;
export type Arch = (typeof ARCHES)[number];

/** Versions name systemd instances (`solver@v2`) and SOLVER_VERSION, hence the solver's alphabet. */
export const Version = z
  .string()
  .regex(/^[a-z0-9_]{1,32}$/, "lower-case letters, digits and '_' (it names solver@<version> and SOLVER_VERSION)");

export interface BuiltBinary {
  app: AppName;
  arch: Arch;
  version: string;
  path: string;
  sha256: string;
  bytes: number;
  /** `<path>.sha256.sig`, when built with a signing key. */
  signature?: string;
}

export function binaryName(app: string, version: string, arch: Arch): string {
  return `${app}-${version}-linux-${arch}`;
}

/** What a release signature is for (`ssh-keygen -Y -n`): a signature made for anything else does not verify. */
export const SIGNATURE_NAMESPACE = "captcha-pipeline-release";
/** The principal the hosts' allowed_signers gives the release keys (`ssh-keygen -Y verify -I`). */
export const SIGNER_PRINCIPAL = "captcha-pipeline-release";

/** The allowed_signers line (ssh-keygen(1) ALLOWED SIGNERS) that trusts `publicKey` for releases, and for nothing else. */
export function allowedSignersLine(publicKey: string): string {
  return `${SIGNER_PRINCIPAL} namespaces="${SIGNATURE_NAMESPACE}" ${publicKey.trim()}`;
}

/**
 * Signs `<binary>.sha256` with `ssh-keygen -Y sign` (SIGNATURE_NAMESPACE) into `<binary>.sha256.sig`;
 * `key` is a private key file, or a public one whose private half is in ssh-agent. Throws when
 * ssh-keygen does not sign.
 */
export function signChecksum(checksumFile: string, key: string): string {
  const sig = `${checksumFile}.sig`;
  rmSync(sig, { force: true });
  const r = spawnSync("ssh-keygen", ["-q", "-Y", "sign", "-f", key, "-n", SIGNATURE_NAMESPACE, checksumFile], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  });
  if (r.status !== 0 || !existsSync(sig))
    throw new Error(
      `ssh-keygen -Y sign ${checksumFile} with ${key} failed: ${(r.stderr || r.stdout || `exit ${r.status}`).trim()}`,
    );
  return sig;
}

/** Whether `<checksumFile>.sig` is a good signature of it by a key of `allowedSigners`: the hosts' check (ssh-keygen -Y verify). */
export function verifyChecksum(checksumFile: string, allowedSigners: string): { ok: boolean; message: string } {
  const r = spawnSync(
    "ssh-keygen",
    [
      "-Y",
      "verify",
      "-f",
      allowedSigners,
      "-I",
      SIGNER_PRINCIPAL,
      "-n",
      SIGNATURE_NAMESPACE,
      "-s",
      `${checksumFile}.sig`,
    ],
    {
      input: readFileSync(checksumFile),
      encoding: "utf8",
    },
  );
  return { ok: r.status === 0, message: `${r.stdout}${r.stderr}`.trim() };
}

export async function sha256File(path: string): Promise<string> {
  const h = createHash("sha256");
  for await (const chunk of createReadStream(path)) h.update(chunk as Buffer);
  return h.digest("hex");
}

/** The default version: `g` and the short commit (`g3259101`), `_dirty` when the tree has changes. */
export function gitVersion(): string {
  const sha = spawnSync("git", ["rev-parse", "--short=7", "HEAD"], { cwd: root, encoding: "utf8" }).stdout?.trim();
  if (!sha) return "dev";
  const dirty = spawnSync("git", ["status", "--porcelain", "--untracked-files=no"], {
    cwd: root,
    encoding: "utf8",
  }).stdout?.trim();
  return `g${sha}${dirty ? "_dirty" : ""}`;
}

/**
 * Builds one binary and its `.sha256` (and `.sha256.sig` when given a signing key); the binary
 * appears only once complete (built under a temporary name).
 */
export async function buildBinary(o: {
  app: AppName;
  arch: Arch;
  version: string;
  outDir: string;
  bun?: string;
  signingKey?: string;
}): Promise<BuiltBinary> {
  Version.parse(o.version);
  mkdirSync(o.outDir, { recursive: true });
  const path = join(o.outDir, binaryName(o.app, o.version, o.arch));
  const tmp = `${path}.partial`;
  const bun = o.bun ?? process.execPath;
  const r = spawnSync(
    bun,
    [
      "build",
      "--compile",
      "--minify",
      `--target=bun-linux-${o.arch}`,
      "--outfile",
      tmp,
      join(root, APP_ENTRIES[o.app]),
    ],
    { cwd: root, encoding: "utf8" },
  );
  if (r.status !== 0) {
    rmSync(tmp, { force: true });
    throw new Error(`bun build --compile ${o.app} (${o.arch}) failed:\n${r.stderr || r.stdout}`);
  }
  renameSync(tmp, path);
  const sha256 = await sha256File(path);
  writeFileSync(`${path}.sha256`, `${sha256}  ${basename(path)}\n`);
  rmSync(`${path}.sha256.sig`, { force: true });
  const signature = o.signingKey ? signChecksum(`${path}.sha256`, o.signingKey) : undefined;
  return {
    app: o.app,
    arch: o.arch,
    version: o.version,
    path,
    sha256,
    bytes: Bun.file(path).size,
    ...(signature ? { signature } : {}),
  };
}

const Args = z
  .object({
    version: Version.optional(),
    arch: z.enum(["x64", "arm64", "all"]).default("all"),
    apps: z
      .string()
      .transform((s) => s.split(",").filter(Boolean))
      .pipe(z.array(z.enum(Object.keys(APP_ENTRIES) as [AppName, ...AppName[]])).min(1))
      .optional(),
    out: z.string().min(1).default(join(root, "dist")),
    "signing-key": z.string().min(1).optional(),
    unsigned: z.literal(true).optional(),
  })
  .strict()
  .refine((a) => a["signing-key"] || a.unsigned, {
    path: ["signing-key"],
    message:
      "a release signing key is required (--signing-key FILE or RELEASE_SIGNING_KEY; docs/deploy.md): the deploy refuses unsigned releases. --unsigned builds them anyway",
  })
  .refine((a) => !a["signing-key"] || existsSync(a["signing-key"]), { path: ["signing-key"], message: "no such file" });

/** The command line, with RELEASE_SIGNING_KEY as the default of --signing-key. */
export function parseBuildArgs(
  argv: string[],
  env: Record<string, string | undefined> = process.env,
): z.infer<typeof Args> {
  const o: Record<string, unknown> = {};
  if (env.RELEASE_SIGNING_KEY) o["signing-key"] = env.RELEASE_SIGNING_KEY;
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(argv[i]!);
    if (!m) throw new Error(`unexpected argument ${JSON.stringify(argv[i])}`);
    if (m[1] === "unsigned") o.unsigned = true;
    else o[m[1]!] = m[2] ?? argv[++i] ?? "";
  }
  const r = Args.safeParse(o);
  if (!r.success) throw new Error(r.error.issues.map((i) => `--${i.path.join(".")}: ${i.message}`).join("\n"));
  return r.data;
}

if (import.meta.main) {
  let args: z.infer<typeof Args>;
  try {
    args = parseBuildArgs(Bun.argv.slice(2));
  } catch (err) {
    console.error(
      `build: ${(err as Error).message}\nusage: npm run build -- [--version v2] [--arch x64|arm64|all] [--apps gateway,solver,recovery,rollout,emulator] [--out dist] (--signing-key FILE | --unsigned)`,
    );
    process.exit(2);
  }
  const version = args.version ?? gitVersion();
  const arches: Arch[] = args.arch === "all" ? [...ARCHES] : [args.arch];
  const apps = args.apps ?? (Object.keys(APP_ENTRIES) as AppName[]);
  const t0 = Date.now();
  for (const arch of arches)
    for (const app of apps) {
      const b = await buildBinary({
        app,
        arch,
        version,
        outDir: resolve(args.out),
        ...(args["signing-key"] ? { signingKey: args["signing-key"] } : {}),
      });
      console.log(
        `${b.path}  ${(b.bytes / 1e6).toFixed(1)} MB  sha256 ${b.sha256.slice(0, 16)}…${b.signature ? "  signed" : "  UNSIGNED"}`,
      );
    }
  console.log(
    `built ${apps.length * arches.length} binaries of version ${version} in ${((Date.now() - t0) / 1000).toFixed(1)} s`,
  );
}
