import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { testPostgresAdminUrl } from "@pipeline/devstack/testing";
import postgres from "postgres";
import { fillStore } from "./secret-catalog.ts";
import type { StoreFile } from "./secret-store.ts";
import {
  natsPasswordsFile,
  postgresRolesSql,
  pushServerSecrets,
  scramVerifier,
  witnessPasswordsFile,
} from "./servers.ts";
import type { Ssh } from "./ssh.ts";

const store: StoreFile = { format: 1, regions: ["fsn1", "hel1"], secrets: {} };
fillStore(store, new Date().toISOString());
const v = (n: string) => store.secrets[n]!.value;

const tag = `t${Date.now().toString(36)}`;
const role = (r: string) => `${r}_${tag}`;
const database = `pipeline_${tag}`;
let admin: string;

afterAll(async () => {
  if (!admin) return;
  const sql = postgres(admin, { max: 1, onnotice: () => {} });
  try {
    await sql.unsafe(`drop database if exists "${database}" with (force)`);
    for (const r of ["pipeline_owner", "pipeline_gateway", "pipeline_solver", "pipeline_rollout"])
      await sql.unsafe(`drop role if exists "${role(r)}"`);
  } finally {
    await sql.end({ timeout: 5 });
  }
});

describe("the servers' side of the secrets", () => {
  test("passwords.env: a region's users and, outside the hub, the hub's leaf password; the witness's users", () => {
    const hub = natsPasswordsFile(store, "fsn1", "fsn1");
    expect(hub.split("\n").map((l) => l.split("=")[0])).toEqual([
      "system",
      "admin",
      "leaf",
      "gateway",
      "solver",
      "recovery",
      "rollout",
      "",
    ]);
    expect(hub).toContain(`gateway=${v("fsn1/nats/gateway")}\n`);
    const other = natsPasswordsFile(store, "hel1", "fsn1");
    expect(other).toContain(`leaf_remote=${v("fsn1/nats/leaf")}\n`);
    expect(other).toContain(`leaf=${v("hel1/nats/leaf")}\n`);
    // nats-render-config's rule for every line.
    for (const line of [...other.trim().split("\n"), ...witnessPasswordsFile(store).trim().split("\n")])
      expect(line).toMatch(/^[a-z0-9_]+=[A-Za-z0-9_-]{16,}$/);
    expect(witnessPasswordsFile(store)).toBe(
      `system=${v("witness/nats/system")}\nadmin=${v("witness/nats/admin")}\nrecovery_fsn1=${v("fsn1/witness/recovery")}\nrecovery_hel1=${v("hel1/witness/recovery")}\n`,
    );
  });

  test("Postgres: psql takes the SQL on stdin, creates the roles and the database, and each role logs in with the store's password, which the SQL does not hold", async () => {
    admin = await testPostgresAdminUrl();
    const sqlText = postgresRolesSql(store, "fsn1", { role, database });
    for (const r of ["pipeline_owner", "pipeline_gateway", "pipeline_solver", "pipeline_rollout"])
      expect(sqlText).not.toContain(v(`fsn1/postgres/${r}`));
    // Twice: the second run finds everything there and only sets the passwords again.
    for (let i = 0; i < 2; i++) {
      const p = Bun.spawn(["psql", "-X", "-q", "-f", "-", admin], {
        stdin: Buffer.from(sqlText),
        stdout: "pipe",
        stderr: "pipe",
      });
      const [out, err, code] = await Promise.all([
        new Response(p.stdout).text(),
        new Response(p.stderr).text(),
        p.exited,
      ]);
      expect({ code, err }).toEqual({ code: 0, err: "" });
      expect(out).toBe("");
    }
    const url = (r: string) => {
      const u = new URL(admin);
      u.username = role(r);
      u.password = v(`fsn1/postgres/${r}`);
      u.pathname = `/${database}`;
      return u.toString();
    };
    for (const r of ["pipeline_owner", "pipeline_gateway"]) {
      const sql = postgres(url(r), { max: 1, onnotice: () => {} });
      try {
        const [row] = await sql`select current_user as who, current_database() as db`;
        expect(row).toEqual({ who: role(r), db: database });
      } finally {
        await sql.end({ timeout: 5 });
      }
    }
    const wrong = new URL(url("pipeline_solver"));
    wrong.password = v("fsn1/postgres/pipeline_gateway");
    const bad = postgres(wrong.toString(), { max: 1, onnotice: () => {} });
    await expect(bad`select 1`).rejects.toThrow("password authentication failed");
    await bad.end({ timeout: 5 });
  });

  test("a SCRAM verifier is Postgres' format, salted: the same password twice gives two verifiers", () => {
    const a = scramVerifier("pw-0123456789abcdef");
    expect(a).toMatch(/^SCRAM-SHA-256\$4096:[A-Za-z0-9+/=]{24}\$[A-Za-z0-9+/=]{44}:[A-Za-z0-9+/=]{44}$/);
    expect(scramVerifier("pw-0123456789abcdef")).not.toBe(a);
  });
});

describe("secrets servers: what it runs on each host", () => {
  /** A stand-in for the SSH client: records each script and its stdin; answers as `answer` says. */
  function fakeSsh(answer: (host: string, script: string) => { code: number; stdout: string }) {
    const calls: { host: string; script: string; stdin?: string }[] = [];
    const run: Ssh["run"] = async (h, script, o) => {
      calls.push({ host: h.name, script, ...(o?.stdin !== undefined ? { stdin: o.stdin } : {}) });
      const a = answer(h.name, script);
      return { ...a, stderr: a.code ? "refused" : "" };
    };
    const ssh: Ssh = {
      run,
      async check(h, step, script, o) {
        const r = await run(h, script, o);
        if (r.code) throw new Error(`${h.name}: ${step} failed (exit ${r.code})`);
        return r.stdout;
      },
    };
    return { ssh, calls };
  }

  function inventory(): string {
    const dir = mkdtempSync(join(tmpdir(), "servers-inv-"));
    dirs.push(dir);
    const host = (name: string, region: string, roles: string[]) => ({
      name,
      region,
      roles,
      ssh: { host: `${name}.example`, user: "ops" },
      hostKeys: ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"],
    });
    const file = join(dir, "inventory.json");
    writeFileSync(
      file,
      JSON.stringify({
        hosts: [
          host("fsn1-app-1", "fsn1", ["app"]),
          host("fsn1-nats-1", "fsn1", ["nats"]),
          host("fsn1-nats-2", "fsn1", ["nats"]),
          host("hel1-nats-1", "hel1", ["nats"]),
          host("fsn1-pg-1", "fsn1", ["postgres"]),
          host("nbg1-witness-1", "nbg1", ["witness"]),
        ],
      }),
    );
    return file;
  }
  const dirs: string[] = [];
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  test("passwords.env and the roles' SQL go on stdin, never in a script; a changed file restarts nats-server, then waits for its health", async () => {
    const { ssh, calls } = fakeSsh((_, script) => ({
      code: 0,
      stdout: script.includes("install -m 0600") ? "changed\n" : "",
    }));
    const said: string[] = [];
    const failed = await pushServerSecrets(store, { hosts: inventory(), region: "fsn1" }, (m) => said.push(m), ssh);
    expect(failed).toEqual([]);
    // fsn1's NATS servers, its Postgres host, the witness; not hel1's, not the app host.
    expect([...new Set(calls.map((c) => c.host))]).toEqual([
      "fsn1-nats-1",
      "fsn1-nats-2",
      "fsn1-pg-1",
      "nbg1-witness-1",
    ]);
    const nats1 = calls.filter((c) => c.host === "fsn1-nats-1");
    expect(nats1[0]!.stdin).toBe(natsPasswordsFile(store, "fsn1", "fsn1"));
    expect(nats1[0]!.script).toContain(
      "sudo -n install -m 0600 -o root -g root /dev/stdin /etc/nats/passwords.env.new",
    );
    expect(nats1[1]!.script).toBe("sudo -n systemctl restart nats-server");
    expect(nats1[2]!.script).toContain(":8222/healthz");
    expect(calls.find((c) => c.host === "nbg1-witness-1")!.stdin).toBe(witnessPasswordsFile(store));
    expect(calls.find((c) => c.host === "fsn1-pg-1")!.script).toBe("sudo -n -u postgres psql -X -q -d postgres -f -");
    const values = Object.values(store.secrets).map((e) => e.value);
    for (const c of calls) for (const value of values) expect(c.script).not.toContain(value);
    for (const value of values) expect(said.join("\n")).not.toContain(value);
  });

  test("a NATS server that fails stops the push: the next ones are not touched", async () => {
    const { ssh, calls } = fakeSsh((host) => ({ code: host === "fsn1-nats-1" ? 1 : 0, stdout: "unchanged\n" }));
    const said: string[] = [];
    const failed = await pushServerSecrets(store, { hosts: inventory(), region: "fsn1" }, (m) => said.push(m), ssh);
    expect(failed).toEqual(["fsn1-nats-1", "fsn1-nats-2", "fsn1-pg-1", "nbg1-witness-1"]);
    expect(new Set(calls.map((c) => c.host))).toEqual(new Set(["fsn1-nats-1"]));
    expect(said.join("\n")).toContain("stopping; not touched: fsn1-nats-2, fsn1-pg-1, nbg1-witness-1");
  });
});
