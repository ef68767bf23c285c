// How a stack starts an app process. Tests and benchmarks: `spawnApp` (each app's output in a log
// file). Dev: `consoleLauncher`, each output line on the console prefixed with the app's name (and
// kept in a log file too), and an exit of its own reported (the dev stack then stops).
import { appendFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { type Proc, procOf, ROOT } from "../testing/processes.ts";

export function consoleLauncher(o: {
  logDir: string;
  /** An app exited by itself (not stopped by the stack). */
  onExit?: (name: string, code: number | null) => void;
  print?: (line: string) => void;
}) {
  const print = o.print ?? ((l: string) => console.log(l));
  return (name: string, script: string, env: Record<string, string>): Proc => {
    const logFile = join(o.logDir, `${name.replaceAll(" ", "-")}.log`);
    writeFileSync(logFile, "");
    const p = Bun.spawn([process.execPath, join(ROOT, script)], {
      cwd: ROOT,
      env: { ...process.env, ...env } as Record<string, string>,
      stdout: "pipe",
      stderr: "pipe",
    });
    let stopping = false;
    const pump = async (stream: ReadableStream<Uint8Array>) => {
      let rest = "";
      const decoder = new TextDecoder();
      for await (const chunk of stream) {
        const lines = (rest + decoder.decode(chunk, { stream: true })).split("\n");
        rest = lines.pop()!;
        for (const l of lines) {
          print(`[${name}] ${l}`);
          appendFileSync(logFile, `${l}\n`);
        }
      }
    };
    void pump(p.stdout);
    void pump(p.stderr);
    void p.exited.then((code) => {
      if (!stopping) o.onExit?.(name, code);
    });
    return procOf(p, name, logFile, () => {
      stopping = true;
    });
  };
}
