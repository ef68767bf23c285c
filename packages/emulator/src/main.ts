import { createEmulator } from "./emulator.ts";
import { loadEmulatorEnv } from "./env.ts";

// Wiring only: env -> emulator -> start; stop on SIGINT/SIGTERM.
let options;
try {
  options = loadEmulatorEnv(process.env);
} catch (err) {
  console.error(err instanceof Error ? err.message : String(err));
  process.exit(2);
}

const emulator = createEmulator(options);
const { url, port } = await emulator.start();
console.log(JSON.stringify({ event: "emulator.started", url, port }));

let stopping = false;
async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  await emulator.stop();
  console.log(JSON.stringify({ event: "emulator.stopped", signal }));
  process.exit(0);
}
process.on("SIGINT", () => void shutdown("SIGINT"));
process.on("SIGTERM", () => void shutdown("SIGTERM"));
