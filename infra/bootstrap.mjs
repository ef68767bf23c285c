#!/usr/bin/env node
// Entry point of `npm run dev|test|bench|typecheck|drill|soak`: needs only Node.js and npm. npm's one job is
// to bring Bun onto a machine that has none (into .data/tools); Bun's own package manager then
// installs the workspaces from bun.lock (`bun install --frozen-lockfile`) whenever the lockfile
// changed, and the Bun script takes over.
import { spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const scripts = { dev: "infra/dev.ts", test: "infra/test.ts", bench: "bench/run.ts", typecheck: "infra/typecheck.ts", drill: "infra/drill.ts", soak: "bench/soak/run.ts", build: "infra/build.ts", deploy: "infra/deploy/deploy.ts", rehearse: "infra/rehearsal/rehearse.ts" };
const [cmd, ...args] = process.argv.slice(2);
if (!scripts[cmd]) {
  console.error(`usage: node infra/bootstrap.mjs <${Object.keys(scripts).join("|")}> [args]`);
  process.exit(2);
}
const say = (m) => console.error(`[bootstrap] ${m}`);
const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
const bunVersion = /^bun@(.+)$/.exec(pkg.packageManager ?? "")?.[1];
if (!bunVersion) {
  say('package.json has no "packageManager": "bun@<version>"');
  process.exit(2);
}

const runs = (bin) => spawnSync(bin, ["--version"], { encoding: "utf8" }).stdout?.trim();

/** A Bun of the pinned version: BUN_BIN, the workspace's own, one on PATH, or npm-installed into .data/tools. */
function findBun() {
  const candidates = [process.env.BUN_BIN, join(root, "node_modules", ".bin", "bun"), "bun", join(root, ".data", "tools", "node_modules", ".bin", "bun")].filter(Boolean);
  for (const c of candidates) if (runs(c) === bunVersion) return c;
  const tools = join(root, ".data", "tools");
  mkdirSync(tools, { recursive: true });
  say(`no Bun ${bunVersion} found: installing it with npm into ${tools}`);
  const r = spawnSync("npm", ["install", "--prefix", tools, "--no-save", "--no-package-lock", "--no-audit", "--no-fund", "--loglevel=error", `bun@${bunVersion}`], { stdio: "inherit" });
  const bin = join(tools, "node_modules", ".bin", "bun");
  if (r.status !== 0 || runs(bin) !== bunVersion) {
    say(`could not install bun@${bunVersion} with npm`);
    process.exit(1);
  }
  return bin;
}

/** What the installed node_modules were made from: bun.lock, the dependency patches and every workspace's package.json. */
function installKey() {
  const h = createHash("sha256");
  h.update(readFileSync(join(root, "bun.lock")));
  const patches = join(root, "patches");
  if (existsSync(patches)) for (const f of readdirSync(patches).sort()) h.update(readFileSync(join(patches, f)));
  for (const ws of [".", "apps/gateway", "apps/solver", "apps/recovery", "apps/rollout", "packages/shared", "packages/devstack", "packages/emulator", "infra", "tests"]) {
    const f = join(root, ws, "package.json");
    if (existsSync(f)) h.update(readFileSync(f));
  }
  return h.digest("hex");
}

let bun = findBun();
const stamp = join(root, "node_modules", ".installed-from");
const key = installKey();
if (!existsSync(stamp) || readFileSync(stamp, "utf8") !== key || !existsSync(join(root, "node_modules", ".bin", "turbo"))) {
  say("installing dependencies (bun install --frozen-lockfile)");
  const r = spawnSync(bun, ["install", "--frozen-lockfile"], { cwd: root, stdio: "inherit" });
  if (r.status !== 0) process.exit(r.status ?? 1);
  writeFileSync(stamp, key);
}
// From here on the workspace's own Bun (a devDependency) runs everything.
if (runs(join(root, "node_modules", ".bin", "bun")) === bunVersion) bun = join(root, "node_modules", ".bin", "bun");

const binDir = join(root, "node_modules", ".bin");
const child = spawn(bun, [scripts[cmd], ...args], { cwd: root, stdio: "inherit", env: { ...process.env, PATH: `${binDir}:${process.env.PATH ?? ""}` } });
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => child.kill(sig));
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
