import { describe, expect, test } from "bun:test";
import { fileURLToPath } from "node:url";

const MAIN = fileURLToPath(new URL("./main.ts", import.meta.url));

async function firstLine(stream: ReadableStream<Uint8Array>): Promise<{ line: string; rest: Promise<string> }> {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    const nl = buf.indexOf("\n");
    if (nl >= 0) {
      const rest = (async () => {
        let more = buf.slice(nl + 1);
        for (;;) {
          const r = await reader.read();
          if (r.done) return more;
          more += decoder.decode(r.value, { stream: true });
        }
      })();
      return { line: buf.slice(0, nl), rest };
    }
  }
  return { line: buf, rest: Promise.resolve("") };
}

describe("main", () => {
  test("prints one JSON line with the url, serves, and stops cleanly on SIGTERM", async () => {
    const proc = Bun.spawn([process.execPath, MAIN], {
      env: { ...process.env, EMULATOR_PORT: "0", EMULATOR_KEYS: "main-test-key:3", EMULATOR_LATENCY_MS: "0" },
      stdout: "pipe",
      stderr: "pipe",
    });
    const { line, rest } = await firstLine(proc.stdout);
    const started = JSON.parse(line) as { event: string; url: string };
    expect(started.event).toBe("emulator.started");
    expect(started.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const reply = await fetch(
      `${started.url}/in.php?key=main-test-key&method=turnstile&sitekey=s&pageurl=https://x.test`,
    );
    expect(await reply.text()).toMatch(/^OK\|\d+$/);
    proc.kill("SIGTERM");
    expect(await proc.exited).toBe(0);
    const output = line + (await rest) + (await new Response(proc.stderr).text());
    expect(output).toContain("emulator.stopped");
    expect(output).not.toContain("main-test-key");
  });

  test("exits with a message naming the bad variable", async () => {
    const proc = Bun.spawn([process.execPath, MAIN], {
      env: { ...process.env, EMULATOR_PORT: "not-a-port" },
      stdout: "pipe",
      stderr: "pipe",
    });
    expect(await proc.exited).toBe(2);
    expect(await new Response(proc.stderr).text()).toContain("EMULATOR_PORT");
  });
});
