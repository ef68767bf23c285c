import { spawn } from "node:child_process";

export interface CommandResult {
  /** The exit code; null when the command could not be started or died of a signal. */
  code: number | null;
  /** stdout and stderr as they came, interleaved (empty when `quiet`), plus a spawn error's message. */
  output: string;
}

/**
 * Runs a command to its end without blocking the event loop (the async counterpart of
 * `spawnSync`): whatever else this process serves meanwhile (a test's relays, its emulator) keeps
 * running. `quiet` discards the output.
 */
export function runCommand(argv: readonly string[], opts: { quiet?: boolean } = {}): Promise<CommandResult> {
  const [bin, ...args] = argv;
  if (bin === undefined) return Promise.reject(new Error("runCommand: empty argv"));
  const child = spawn(bin, args, { stdio: opts.quiet ? "ignore" : ["ignore", "pipe", "pipe"] });
  let output = "";
  const collect = (b: Buffer) => {
    output += b.toString();
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  return new Promise((resolve) => {
    let settled = false;
    const done = (code: number | null) => {
      if (settled) return;
      settled = true;
      resolve({ code, output });
    };
    child.on("error", (err) => {
      output += err.message;
      done(null);
    });
    child.on("close", (code) => done(code));
  });
}
