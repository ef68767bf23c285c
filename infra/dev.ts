// `npm run dev`: `turbo run dev`, which starts the infra task (NATS, Postgres, migrations:
// infra/stack.ts), the emulator and every app (each waits for the infra task's settings file).
// Ctrl-C goes to turbo, which stops every task; this exits with turbo's code.
// `npm run dev -- --regions 2`: two regions and their witness instead (infra/dev-regions.ts).
import { spawn } from "node:child_process";
import { join } from "node:path";

const root = join(import.meta.dir, "..");
const argv = process.argv.slice(2);
const at = argv.findIndex((a) => a === "--regions" || a.startsWith("--regions="));
if (at >= 0) {
  const n = argv[at]!.includes("=") ? argv[at]!.split("=")[1] : argv[at + 1];
  if (n === "2") {
    await import("./dev-regions.ts");
  } else if (n !== "1") {
    console.error(`usage: npm run dev [-- --regions 2]   (got --regions ${n ?? ""})`);
    process.exit(2);
  }
  if (n === "2") await new Promise(() => {});
  argv.splice(at, argv[at]!.includes("=") ? 1 : 2);
}
const turbo = spawn(
  join(root, "node_modules", ".bin", "turbo"),
  ["run", "dev", "--ui=stream", "--log-prefix=task", ...argv],
  {
    cwd: root,
    env: { ...process.env, TURBO_TELEMETRY_DISABLED: "1", DO_NOT_TRACK: "1" },
    stdio: "inherit",
  },
);
// Turbo gets the terminal's Ctrl-C itself (same process group); a SIGTERM sent to this process alone is passed on.
process.on("SIGINT", () => {});
process.on("SIGTERM", () => turbo.kill("SIGTERM"));
turbo.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
