import { describe, expect, test } from "bun:test";
import { Host } from "./inventory.ts";
import { archOf, batches, releasesToPrune, solverPort, targetHosts, unitOf } from "./plan.ts";

const host = (name: string, region: string, roles: string[]) =>
  Host.parse({ name, region, roles, ssh: { host: `${name}.example` } });

describe("deploy plan", () => {
  test("targets the app hosts, of one region when asked, in inventory order", () => {
    const hosts = [
      host("fsn1-app-1", "fsn1", ["app"]),
      host("fsn1-nats-1", "fsn1", ["nats"]),
      host("hel1-app-1", "hel1", ["app"]),
      host("fsn1-app-2", "fsn1", ["app"]),
    ];
    expect(targetHosts(hosts).map((h) => h.name)).toEqual(["fsn1-app-1", "hel1-app-1", "fsn1-app-2"]);
    expect(targetHosts(hosts, "fsn1").map((h) => h.name)).toEqual(["fsn1-app-1", "fsn1-app-2"]);
    expect(targetHosts(hosts, "nbg1")).toEqual([]);
  });

  test("inventory defaults: the deploy user (not root), port 22, the production paths and the install script", () => {
    expect(host("a", "fsn1", ["app"])).toMatchObject({
      ssh: { user: "deploy", port: 22 },
      root: "/opt/captcha-pipeline",
      install: "/usr/local/sbin/captcha-pipeline-install",
    });
    expect(Host.safeParse({ name: "a", region: "fsn1", roles: ["db"], ssh: { host: "x" } }).success).toBe(false);
  });

  test("batches of the given size; a size below 1 is refused", () => {
    expect(batches([1, 2, 3, 4, 5], 2)).toEqual([[1, 2], [3, 4], [5]]);
    expect(batches([1, 2], 5)).toEqual([[1, 2]]);
    expect(() => batches([1], 0)).toThrow();
  });

  test("the solver has one unit per version, gateway and recovery one each", () => {
    expect(unitOf("solver", "v2")).toBe("solver@v2.service");
    expect(unitOf("gateway", "v2")).toBe("gateway.service");
    expect(unitOf("recovery", "v2")).toBe("recovery.service");
  });

  test("uname -m names the binary's architecture; others are refused", () => {
    expect(archOf("x86_64\n")).toBe("x64");
    expect(archOf("aarch64")).toBe("arm64");
    expect(() => archOf("riscv64")).toThrow("unsupported");
  });

  test("pruning keeps the newest releases and never one in use", () => {
    const rel = [
      { version: "v1", installedAt: 1 },
      { version: "v2", installedAt: 2 },
      { version: "v3", installedAt: 3 },
      { version: "v4", installedAt: 4 },
      { version: "v5", installedAt: 5 },
    ];
    expect(releasesToPrune(rel, new Set(["v5"]), 3)).toEqual(["v2", "v1"]);
    // A rolled-back host runs v1: it stays, and two newer ones with it.
    expect(releasesToPrune(rel, new Set(["v1"]), 3)).toEqual(["v3", "v2"]);
    // Two solver versions in use and keep 1: both stay.
    expect(releasesToPrune(rel, new Set(["v2", "v4"]), 1)).toEqual(["v5", "v3", "v1"]);
  });

  test("a solver version keeps its metrics port; a new one takes the lowest free one", () => {
    const taken = new Map([
      ["v1", 9464],
      ["v2", 9466],
    ]);
    expect(solverPort("v1", taken)).toBe(9464);
    expect(solverPort("v3", taken)).toBe(9465);
    expect(solverPort("v1", new Map())).toBe(9464);
  });
});
