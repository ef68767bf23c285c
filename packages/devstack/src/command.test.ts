import { describe, expect, test } from "bun:test";
import { runCommand } from "./command.ts";

describe("runCommand", () => {
  test("resolves with the exit code and both streams' output", async () => {
    const r = await runCommand(["sh", "-c", "echo out; echo err >&2; exit 3"]);
    expect(r.code).toBe(3);
    expect(r.output).toContain("out");
    expect(r.output).toContain("err");
  });

  test("quiet discards the output but keeps the code", async () => {
    expect(await runCommand(["sh", "-c", "echo out; exit 0"], { quiet: true })).toEqual({ code: 0, output: "" });
  });

  test("a command that cannot start resolves with code null and the reason", async () => {
    const r = await runCommand(["/nonexistent/surely-not-a-binary"]);
    expect(r.code).toBeNull();
    expect(r.output).toContain("ENOENT");
  });

  test("does not block the event loop while the command runs", async () => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    await runCommand(["sleep", "0.3"]);
    clearInterval(timer);
    expect(ticks).toBeGreaterThan(10);
  });
});
