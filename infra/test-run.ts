// One `bun test` process over some paths, its output forwarded whole line by whole line (two run
// side by side in `npm test`: the tests beside the code, and tests/), with what the summary needs:
// its pass and fail counts, why each test failed, and how long each file took.
import { spawn } from "node:child_process";
import { join } from "node:path";
import { type FailureDigest, failureDigest } from "./failure-digest.ts";
import { type FileTimes, fileTimes } from "./file-times.ts";

export interface BunTestRun {
  code: number;
  passed: number;
  failed: number;
  why: FailureDigest;
  times: FileTimes;
}

/** Forwards a stream's whole lines to `out`, so two processes' lines never interleave mid-line. */
function lineForwarder(out: NodeJS.WriteStream) {
  let partial = "";
  return {
    push(chunk: string) {
      const at = (partial + chunk).lastIndexOf("\n");
      const all = partial + chunk;
      if (at < 0) {
        partial = all;
        return;
      }
      out.write(all.slice(0, at + 1));
      partial = all.slice(at + 1);
    },
    flush() {
      if (partial) out.write(`${partial}\n`);
      partial = "";
    },
  };
}

export async function runBunTest(root: string, paths: string[], env: NodeJS.ProcessEnv): Promise<BunTestRun> {
  const child = spawn(join(root, "node_modules", ".bin", "bun"), ["test", "--timeout", "60000", ...paths], {
    cwd: root,
    env,
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const out = lineForwarder(process.stdout);
  const err = lineForwarder(process.stderr);
  let tail = "";
  const why = failureDigest();
  const times = fileTimes();
  child.stdout!.on("data", (b: Buffer) => out.push(b.toString()));
  child.stderr!.on("data", (b: Buffer) => {
    const s = b.toString();
    err.push(s);
    tail = (tail + s).slice(-4000);
    why.push(s);
    times.push(s);
  });
  const code: number = await new Promise((r) => child.on("exit", (c) => r(c ?? 1)));
  times.close();
  out.flush();
  err.flush();
  try {
    process.kill(-child.pid!, "SIGKILL"); // anything a test left running (servers it started)
  } catch {}
  const passed = Number(/(\d+) pass\b/.exec(tail)?.[1] ?? 0);
  let failed = Number(/(\d+) fail\b/.exec(tail)?.[1] ?? 0);
  if (code !== 0 && failed === 0) failed = 1; // a crash or an error outside a test
  return { code, passed, failed, why, times };
}
