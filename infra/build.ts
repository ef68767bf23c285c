// `npm run build [-- --version v2] [--arch x64|arm64|all] [--apps gateway,solver] [--out dist]`:
// one self-contained binary per app and architecture, `dist/<app>-<version>-linux-<arch>` (Bun's
// `build --compile`: the runtime, our code, its dependencies and the SQL migrations in one file),
// each with `<binary>.sha256` in sha256sum's format, which the deploy command checks.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { createReadStream, mkdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
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
} as const;
export type AppName = keyof typeof APP_ENTRIES;
export const ARCHES = ["x64", "arm64"] as const;
export type Arch = (typeof ARCHES)[number];

/** Versions name systemd instances (`solver@v2`) and SOLVER_VERSION, hence the solver's alphabet. */
export const Version = z.string().regex(/^[a-z0-9_]{1,32}$/, "lower-case letters, digits and '_' (it names solver@<version> and SOLVER_VERSION)");

export interface BuiltBinary {
  app: AppName;
  arch: Arch;
  version: string;
  path: string;
  sha256: string;
  bytes: number;
}

export function binaryName(app: string, version: string, arch: Arch): string {
  return `${app}-${version}-linux-${arch}`;
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
  const dirty = spawnSync("git", ["status", "--porcelain", "--untracked-files=no"], { cwd: root, encoding: "utf8" }).stdout?.trim();
  return `g${sha}${dirty ? "_dirty" : ""}`;
}

/** Builds one binary; the file appears only once complete (built under a temporary name). */
export async function buildBinary(o: { app: AppName; arch: Arch; version: string; outDir: string; bun?: string }): Promise<BuiltBinary> {
  Version.parse(o.version);
  mkdirSync(o.outDir, { recursive: true });
  const path = join(o.outDir, binaryName(o.app, o.version, o.arch));
  const tmp = `${path}.partial`;
  const bun = o.bun ?? process.execPath;
  const r = spawnSync(bun, ["build", "--compile", "--minify", `--target=bun-linux-${o.arch}`, "--outfile", tmp, join(root, APP_ENTRIES[o.app])], { cwd: root, encoding: "utf8" });
  if (r.status !== 0) {
    rmSync(tmp, { force: true });
    throw new Error(`bun build --compile ${o.app} (${o.arch}) failed:\n${r.stderr || r.stdout}`);
  }
  renameSync(tmp, path);
  const sha256 = await sha256File(path);
  writeFileSync(`${path}.sha256`, `${sha256}  ${basename(path)}\n`);
  return { app: o.app, arch: o.arch, version: o.version, path, sha256, bytes: Bun.file(path).size };
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
  })
  .strict();

function parseArgs(argv: string[]): z.infer<typeof Args> {
  const o: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z]+)(?:=(.*))?$/.exec(argv[i]!);
    if (!m) throw new Error(`unexpected argument ${JSON.stringify(argv[i])}`);
    o[m[1]!] = m[2] ?? argv[++i] ?? "";
  }
  const r = Args.safeParse(o);
  if (!r.success) throw new Error(r.error.issues.map((i) => `--${i.path.join(".")}: ${i.message}`).join("\n"));
  return r.data;
}

if (import.meta.main) {
  let args: z.infer<typeof Args>;
  try {
    args = parseArgs(Bun.argv.slice(2));
  } catch (err) {
    console.error(`build: ${(err as Error).message}\nusage: npm run build -- [--version v2] [--arch x64|arm64|all] [--apps gateway,solver,recovery,rollout,emulator] [--out dist]`);
    process.exit(2);
  }
  const version = args.version ?? gitVersion();
  const arches: Arch[] = args.arch === "all" ? [...ARCHES] : [args.arch];
  const apps = args.apps ?? (Object.keys(APP_ENTRIES) as AppName[]);
  const t0 = Date.now();
  for (const arch of arches)
    for (const app of apps) {
      const b = await buildBinary({ app, arch, version, outDir: resolve(args.out) });
      console.log(`${b.path}  ${(b.bytes / 1e6).toFixed(1)} MB  sha256 ${b.sha256.slice(0, 16)}…`);
    }
  console.log(`built ${apps.length * arches.length} binaries of version ${version} in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}
