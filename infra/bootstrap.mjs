#!/usr/bin/env node
// Entry point of `npm run dev|test|bench|typecheck`: needs only Node.js and npm. It installs the
// dependencies when they are missing (Bun comes from npm), then hands over to the Bun script.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const scripts = { dev: "infra/dev.ts", test: "infra/test.ts", bench: "bench/run.ts", typecheck: "infra/typecheck.ts" };
const [cmd, ...args] = process.argv.slice(2);
if (!scripts[cmd]) {
  console.error(`usage: node infra/bootstrap.mjs <${Object.keys(scripts).join("|")}> [args]`);
  process.exit(2);
}

const bun = join(root, "node_modules", ".bin", "bun");
const lock = join(root, "package-lock.json");
const installed = join(root, "node_modules", ".package-lock.json");
const stale = !existsSync(bun) || !existsSync(installed) || (existsSync(lock) && statSync(lock).mtimeMs > statSync(installed).mtimeMs + 1000);
if (stale) {
  console.error("[bootstrap] installing dependencies (npm ci)");
  const r = spawnSync("npm", [existsSync(lock) ? "ci" : "install", "--no-audit", "--no-fund", "--loglevel=error"], { cwd: root, stdio: "inherit" });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

const child = spawn(bun, [scripts[cmd], ...args], { cwd: root, stdio: "inherit" });
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => child.kill(sig));
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
