import { createEmulator } from "./emulator.ts";
import { loadEmulatorEnv, loadSecondEmulatorEnv } from "./env.ts";

// Wiring only: env -> emulator(s) -> start; stop on SIGINT/SIGTERM. With EMULATOR_B_PORT, a
// second provider in the same process (its own keys, prices and speed).
let options;
let second;
try {
  options = loadEmulatorEnv(process.env);
  second = loadSecondEmulatorEnv(process.env);
} catch (err) {
  console.error(err instanceof Error ? err.message : String(err));
  process.exit(2);
}

const emulators = [createEmulator(options), ...(second ? [createEmulator(second)] : [])];
for (const [i, emulator] of emulators.entries()) {
  const { url, port } = await emulator.start();
  console.log(JSON.stringify({ event: "emulator.started", provider: i === 0 ? "a" : "b", url, port }));
}

let stopping = false;
async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  for (const emulator of emulators) await emulator.stop();
  console.log(JSON.stringify({ event: "emulator.stopped", signal }));
  process.exit(0);
}
process.on("SIGINT", () => void shutdown("SIGINT"));
process.on("SIGTERM", () => void shutdown("SIGTERM"));
