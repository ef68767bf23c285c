import { expect, test } from "bun:test";
import { checkVictim, readProc } from "./victim.ts";

const solver = {
  cmdline: ["/usr/bin/bun", "/srv/app/apps/solver/src/main.ts"],
  environ: { REGION: "fsn1" },
  startedAt: new Date("2026-01-01T00:00:00Z"),
};

test("a solver of this region whose process is as old as its heartbeat may be killed", () => {
  expect(checkVictim(4242, "fsn1", "2026-01-01T00:00:01Z", solver).ok).toBe(true);
});

test("a forged heartbeat cannot aim the drill at another process", () => {
  expect(checkVictim(-1, "fsn1", "2026-01-01T00:00:01Z", solver)).toMatchObject({
    ok: false,
    why: expect.stringContaining("not a single process"),
  });
  expect(checkVictim(1, "fsn1", "2026-01-01T00:00:01Z", solver).ok).toBe(false);
  expect(checkVictim(4242, "fsn1", "2026-01-01T00:00:01Z", undefined).ok).toBe(false);
  expect(
    checkVictim(4242, "fsn1", "2026-01-01T00:00:01Z", { ...solver, cmdline: ["/usr/sbin/sshd", "-D"] }).why,
  ).toContain("not a solver");
  expect(checkVictim(4242, "fsn1", "2026-01-01T00:00:01Z", { ...solver, environ: { REGION: "hel1" } }).why).toContain(
    "region hel1",
  );
  expect(checkVictim(4242, "fsn1", "2025-12-31T00:00:00Z", solver).why).toContain("reused");
});

test("readProc reads a real process: this one", () => {
  const me = readProc(process.pid)!;
  expect(me.cmdline.length).toBeGreaterThan(0);
  expect(Math.abs(me.startedAt!.getTime() - (Date.now() - performance.now()))).toBeLessThan(5000);
});
