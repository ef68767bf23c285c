// Static checks of the Hetzner deployment (infra/deploy, docs/deploy.md): nothing is started and no
// cloud is called. systemd units (systemd-analyze verify and security), the cloud-init user-data
// of every role rendered from its Terraform template (cloud-init schema, and the files it writes),
// the NATS configs (permissions equal to permissions.ts; `nats-server -t` accepts them), the
// Terraform policy (firewalls, private network, regions, witness, inventory; terraform fmt),
// shellcheck on every shell script under infra/, and issue 34's hardening: one system user per app
// (cloud-init's own users module, run with its commands recorded), the units' IP access lists,
// Postgres over verified TLS, the production env templates (loaded with each app's config) and
// .gitignore of the Terraform state.
import { expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { gunzipSync } from "node:zlib";
import { cloudInitCommand, findNatsServer, findShellcheck, findSudo, onPath } from "@pipeline/devstack";
import { NATS_ROLES, rolePermissions } from "@pipeline/shared/nats";
import { loadConfig as loadGatewayConfig } from "../../apps/gateway/src/config.ts";
import { QuotasConfig } from "../../apps/gateway/src/domain/quotas.ts";
import { loadConfig as loadRecoveryConfig } from "../../apps/recovery/src/config.ts";
import { loadConfig as loadRolloutConfig, regionEndpoints } from "../../apps/rollout/src/config.ts";
import { loadConfig as loadSolverConfig } from "../../apps/solver/src/config.ts";
import { allowedSignersLine } from "../build.ts";
import { templatefile } from "../rehearsal/templatefile.ts";
import { appCredentials } from "./cli/secret-catalog.ts";
import type { StoreFile } from "./cli/secret-store.ts";
import { secretsCommand } from "./cli/secrets-cli.ts";
import { permissionsJson, permissionsTemplate } from "./nats/generate-permissions.ts";

// Loaded untyped: its declarations pull in `lib: dom`, whose FormData breaks the emulator's types.
const { parse: parseHcl } = require("@cdktf/hcl2json") as {
  parse: (file: string, text: string) => Promise<Record<string, unknown>>;
};

const ROOT = join(import.meta.dir, "..", "..");
const DEPLOY = join(ROOT, "infra", "deploy");
const SYSTEMD = join(DEPLOY, "systemd");
const TERRAFORM = join(DEPLOY, "terraform");
const read = (...p: string[]) => readFileSync(join(...p), "utf8");

/** Exposure scores (systemd-analyze security, 0 = locked down, 10 = exposed) the units must stay under. Measured: 1.1 (gateway, recovery, rollout: IPAddressDeny=any), 1.2 (solver, nats-server). */
const MAX_EXPOSURE: Record<string, number> = {
  "gateway.service": 1.5,
  "solver@v1.service": 1.5,
  "recovery.service": 1.5,
  "rollout.service": 1.5,
  "nats-server.service": 1.5,
};
/** Hetzner's limit on user-data. */
const MAX_USER_DATA = 32 * 1024;

function run(cmd: string[], opts: { cwd?: string; env?: Record<string, string>; input?: string } = {}) {
  const r = spawnSync(cmd[0]!, cmd.slice(1), {
    cwd: opts.cwd,
    env: { ...process.env, ...opts.env },
    input: opts.input,
    encoding: "utf8",
    timeout: 120_000,
  });
  return { status: r.status, out: `${r.stdout ?? ""}${r.stderr ?? ""}`.trim(), stdout: r.stdout ?? "" };
}

// ---------------------------------------------------------------------------------------------
// systemd

const UNIT_FILES = readdirSync(SYSTEMD).filter((f) => /\.(service|target)$/.test(f));
/** The units to check: templates as one instance (solver@v1). */
const UNITS = UNIT_FILES.map((f) => f.replace(/@\.service$/, "@v1.service"));

/**
 * A root for `systemd-analyze --root=`: the system's own units (so sysinit.target and friends
 * resolve), ours in /etc/systemd/system, and an executable stand-in at every path an Exec*= line
 * names (the binaries are shipped by the deploy command and do not exist here).
 */
function systemdRoot(): string {
  const root = mkdtempSync(join(tmpdir(), "deploy-systemd-"));
  mkdirSync(join(root, "usr", "lib", "systemd"), { recursive: true });
  if (existsSync("/usr/lib/systemd/system"))
    cpSync("/usr/lib/systemd/system", join(root, "usr", "lib", "systemd", "system"), {
      recursive: true,
      verbatimSymlinks: true,
    });
  mkdirSync(join(root, "etc", "systemd", "system"), { recursive: true });
  // The drop-ins the app host's user-data writes next to the units (the private network of IPAddressAllow=).
  for (const w of parsed("fsn1-app-1").write_files ?? []) {
    const m = /^\/etc\/systemd\/system\/([^/]+\.service)\.d\/[^/]+\.conf$/.exec(w.path);
    if (!m || !UNIT_FILES.includes(m[1]!)) continue;
    mkdirSync(join(root, dirname(w.path)), { recursive: true });
    writeFileSync(join(root, w.path), w.content ?? "");
  }
  for (const f of UNIT_FILES) {
    const text = read(SYSTEMD, f);
    writeFileSync(join(root, "etc", "systemd", "system", f), text);
    for (const m of text.matchAll(/^Exec\w+=[-+!@:|]*(\S+)/gm)) {
      const path = join(root, m[1]!.replaceAll("%i", "v1"));
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, "#!/bin/sh\nexit 0\n");
      chmodSync(path, 0o755);
    }
  }
  return root;
}

const hasSystemd = onPath("systemd-analyze") !== undefined;
// Debian's systemd package is on every machine this runs on (and CI's): its absence is a failure, not a skip.

test("systemd-analyze verify: every unit, without a word of output", () => {
  expect(hasSystemd).toBe(true);
  const root = systemdRoot();
  try {
    for (const unit of UNITS) {
      const r = run(["systemd-analyze", "verify", `--root=${root}`, "--man=no", unit]);
      expect({ unit, status: r.status, out: r.out }).toEqual({ unit, status: 0, out: "" });
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test("systemd-analyze security: each service's exposure stays under its threshold", () => {
  expect(hasSystemd).toBe(true);
  const root = systemdRoot();
  try {
    for (const [unit, max] of Object.entries(MAX_EXPOSURE)) {
      const r = run(["systemd-analyze", "security", "--offline=true", `--root=${root}`, "--no-pager", unit]);
      const m = /Overall exposure level for \S+: (\d+(?:\.\d+)?)/.exec(r.out);
      expect(m, `${unit}: ${r.out.slice(-400)}`).not.toBeNull();
      const exposure = Number(m![1]);
      console.log(`[deploy-static] ${unit}: exposure ${exposure} (max ${max})`);
      expect({ unit, exposure, under: exposure <= max }).toEqual({ unit, exposure, under: true });
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

/** Each app unit and the system user (and group of the same name) it runs as: one per app, so that one app's files are not another's. */
const APP_USERS: Record<string, string> = {
  "gateway.service": "pipeline-gateway",
  "solver@.service": "pipeline-solver",
  "recovery.service": "pipeline-recovery",
  "rollout.service": "pipeline-rollout",
};

test("the app units keep the contract: user, env files, paths, stop timeout, hardening", () => {
  const unit = (f: string) => read(SYSTEMD, f);
  for (const [f, user] of Object.entries(APP_USERS)) {
    const u = unit(f);
    for (const line of [
      `User=${user}`,
      `Group=${user}`,
      "EnvironmentFile=/etc/captcha-pipeline/common.env",
      "NoNewPrivileges=yes",
      "ProtectSystem=strict",
      "ProtectHome=yes",
      "PrivateTmp=yes",
      "PrivateDevices=yes",
      "ProtectKernelTunables=yes",
      "ProtectKernelModules=yes",
      "ProtectKernelLogs=yes",
      "ProtectControlGroups=yes",
      "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
      "RestrictNamespaces=yes",
      "LockPersonality=yes",
      "SystemCallFilter=@system-service",
      "CapabilityBoundingSet=",
      "Restart=on-failure",
      "KillSignal=SIGTERM",
    ]) {
      expect({ f, line, present: u.split("\n").includes(line) }).toEqual({ f, line, present: true });
    }
    expect(u).toMatch(/^RestartSec=\d+/m);
    expect(u).toMatch(/^LimitNOFILE=\d+/m);
    // Bun's JIT needs W+X memory.
    expect(u).not.toMatch(/^MemoryDenyWriteExecute=/m);
  }
  expect(unit("gateway.service")).toMatch(/^EnvironmentFile=\/etc\/captcha-pipeline\/gateway\.env$/m);
  expect(unit("gateway.service")).toMatch(/^ExecStart=\/opt\/captcha-pipeline\/gateway\/current\/gateway$/m);
  expect(unit("recovery.service")).toMatch(/^ExecStart=\/opt\/captcha-pipeline\/recovery\/current\/recovery$/m);
  // One rollout service per deployment: installed everywhere, started only where rollout.env exists.
  expect(unit("rollout.service")).toMatch(/^ExecStart=\/opt\/captcha-pipeline\/rollout\/current\/rollout$/m);
  expect(unit("rollout.service")).toMatch(/^ConditionPathExists=\/etc\/captcha-pipeline\/rollout\.env$/m);
  expect(unit("recovery.service")).toMatch(/^StateDirectory=captcha-pipeline$/m);
  // The snapshots (pg_dump of every task) are recovery's alone: systemd makes the folder 0700, owned by its user.
  expect(unit("recovery.service")).toMatch(/^StateDirectoryMode=0700$/m);
  expect(unit("recovery.service")).toMatch(/^Environment=DATA_DIR=\/var\/lib\/captcha-pipeline$/m);
  const solver = unit("solver@.service");
  expect(solver).toMatch(/^ExecStart=\/opt\/captcha-pipeline\/solver\/releases\/%i\/solver$/m);
  expect(solver).toMatch(/^EnvironmentFile=\/etc\/captcha-pipeline\/solver\.env$/m);
  expect(solver).toMatch(/^EnvironmentFile=-\/etc\/captcha-pipeline\/solver@%i\.env$/m);
  expect(solver).toMatch(/^Environment=SOLVER_VERSION=%i$/m);
  // The solver drains for up to DRAIN_TIMEOUT_MS (25 s by default): systemd must wait longer.
  expect(Number(/^TimeoutStopSec=(\d+)$/m.exec(solver)?.[1])).toBeGreaterThan(25);
  const nats = unit("nats-server.service");
  expect(nats).toMatch(/^ExecStart=\/usr\/local\/bin\/nats-server -c \/etc\/nats\/nats\.conf$/m);
  expect(nats).toMatch(/^User=nats$/m);
});

// ---------------------------------------------------------------------------------------------
// Rendering the templates (what modules/userdata does with templatefile, in TypeScript)

interface Host {
  name: string;
  region: string;
  role: "app" | "nats" | "postgres" | "witness" | "monitoring";
  private_ip: string;
}

const SAMPLE = {
  regions: ["fsn1", "hel1"],
  leaf_hub_region: "fsn1",
  private_cidr: "10.0.0.0/16",
  nats_server_version: "2.15.1",
  nats_server_sha256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
  // Empty: install-nats-server's GitHub URL (the rehearsal passes its own copy's).
  nats_server_url: "",
  admin_ssh_keys: [
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOpsOpsOpsOpsOpsOpsOpsOpsOpsOpsOpsOpsOpsOpsOps ops@example",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOtherOpsOtherOpsOtherOpsOtherOpsOtherOpsOther alice",
  ],
  deploy_ssh_keys: ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDeployDeployDeployDeployDeployDeployDeployDe deploy@ci"],
  release_signing_keys: ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIReleaseReleaseReleaseReleaseReleaseReleaseRel release"],
  hosts: [
    ...["fsn1", "hel1"].flatMap((r, k): Host[] => [
      { name: `${r}-app-1`, region: r, role: "app", private_ip: `10.0.${k + 1}.10` },
      { name: `${r}-app-2`, region: r, role: "app", private_ip: `10.0.${k + 1}.11` },
      ...[0, 1, 2].map(
        (i): Host => ({ name: `${r}-nats-${i + 1}`, region: r, role: "nats", private_ip: `10.0.${k + 1}.${20 + i}` }),
      ),
      { name: `${r}-pg-1`, region: r, role: "postgres", private_ip: `10.0.${k + 1}.30` },
    ]),
    ...["nbg1", "fsn1", "hel1"].map(
      (l, i): Host => ({ name: `${l}-witness-1`, region: l, role: "witness", private_ip: `10.0.100.${10 + i}` }),
    ),
    { name: "fsn1-mon-1", region: "fsn1", role: "monitoring" as const, private_ip: "10.0.1.40" },
  ],
};

/**
 * Terraform's templatefile for the subset our templates use (`${name}`, `${indent(N, name)}`,
 * `${base64gzip(name)}`, the escape `$${`): the rehearsal's, which fails on anything else (another
 * function, a directive), so a template cannot drift into syntax this rendering would get wrong.
 */
const renderTemplate = templatefile;

const q = (s: string) => `"${s}"`;
const TLS_BLOCK =
  '  tls {\n    cert_file: "/etc/nats/tls/server.pem"\n    key_file: "/etc/nats/tls/server-key.pem"\n    ca_file: "/etc/nats/tls/ca.pem"\n    timeout: 2\n  }';

function permissionsText(role: string, region: string): string {
  const t = permissionsTemplate()[role]!;
  const sub = (s: string) => q(s.replaceAll("@region@", region).replaceAll("@REGION@", region.toUpperCase()));
  const list = (xs: string[]) => xs.map(sub).join(", ");
  return `{ "publish": { "allow": [${list(t.publish.allow)}], "deny": [${list(t.publish.deny)}] }, "subscribe": { "allow": [${list(t.subscribe.allow)}], "deny": [${list(t.subscribe.deny)}] } }`;
}

function renderUserData(s: typeof SAMPLE): Record<string, string> {
  const natsOf = (r: string) => s.hosts.filter((h) => h.role === "nats" && h.region === r);
  const witnesses = s.hosts.filter((h) => h.role === "witness");
  const routes = (h: Host) =>
    (h.role === "witness" ? witnesses : natsOf(h.region))
      .filter((p) => p.name !== h.name)
      .map((p) => `    "nats-route://${p.private_ip}:6222"`)
      .join(",\n");
  const leafnodes = (h: Host) =>
    h.region === s.leaf_hub_region
      ? `  listen: "${h.private_ip}:7422"\n  advertise: "${h.private_ip}:7422"\n${TLS_BLOCK}`
      : `  remotes: [\n    {\n      urls: [${natsOf(s.leaf_hub_region)
          .map((p) => q(`nats-leaf://leaf:@@PASSWORD:leaf_remote@@@${p.private_ip}:7422`))
          .join(
            ", ",
          )}]\n      account: "PIPELINE"\n      tls {\n        ca_file: "/etc/nats/tls/ca.pem"\n      }\n    }\n  ]\n  reconnect: "2s"`;
  const witnessCluster = (h: Host) =>
    witnesses.length < 2
      ? ""
      : `\ncluster {\n  name: "witness"\n  listen: "${h.private_ip}:6222"\n  routes: [\n${routes(h)}\n  ]\n  tls {\n    cert_file: "/etc/nats/tls/server.pem"\n    key_file: "/etc/nats/tls/server-key.pem"\n    ca_file: "/etc/nats/tls/ca.pem"\n    verify: true\n    timeout: 2\n  }\n}\n`;
  const units = {
    gateway_unit: read(SYSTEMD, "gateway.service"),
    solver_unit: read(SYSTEMD, "solver@.service"),
    recovery_unit: read(SYSTEMD, "recovery.service"),
    rollout_unit: read(SYSTEMD, "rollout.service"),
    target_unit: read(SYSTEMD, "captcha-pipeline.target"),
  };
  const natsFiles = {
    nats_unit: read(SYSTEMD, "nats-server.service"),
    render_script: read(DEPLOY, "scripts", "nats-render-config.sh"),
    install_script: read(DEPLOY, "scripts", "install-nats-server.sh"),
    nats_server_version: s.nats_server_version,
    nats_server_sha256: s.nats_server_sha256,
    nats_server_url: s.nats_server_url,
  };
  // Logins on every host; the deploy user's side of an app host (modules/userdata: logins, deploy_files).
  const yamlKeys = (keys: string[]) => keys.map((k) => `- ${JSON.stringify(k.trim())}`).join("\n");
  const logins = {
    sshd_config: read(DEPLOY, "ssh", "10-captcha-pipeline.conf"),
    admin_ssh_keys: yamlKeys(s.admin_ssh_keys),
  };
  const deployFiles = {
    deploy_ssh_keys: yamlKeys(s.deploy_ssh_keys),
    deploy_sudoers: read(DEPLOY, "sudoers", "captcha-pipeline-deploy"),
    deploy_install_script: read(DEPLOY, "scripts", "captcha-pipeline-install.sh"),
    release_signers: s.release_signing_keys.map(allowedSignersLine).join("\n"),
  };
  const out: Record<string, string> = {};
  for (const h of s.hosts) {
    const base = { hostname: h.name, private_cidr: s.private_cidr, ...logins };
    if (h.role === "app")
      out[h.name] = renderTemplate(join(DEPLOY, "cloud-init", "app.yaml"), { ...units, ...deployFiles, ...base });
    else if (h.role === "nats") {
      const conf = renderTemplate(join(DEPLOY, "nats", "region.conf.tftpl"), {
        server_name: h.name,
        region: h.region,
        private_ip: h.private_ip,
        cluster_routes: routes(h),
        leafnodes: leafnodes(h),
        ...Object.fromEntries(NATS_ROLES.map((r) => [`permissions_${r}`, permissionsText(r, h.region)])),
      });
      out[h.name] = renderTemplate(join(DEPLOY, "cloud-init", "nats.yaml"), { ...natsFiles, ...base, nats_conf: conf });
    } else if (h.role === "witness") {
      const conf = renderTemplate(join(DEPLOY, "nats", "witness.conf.tftpl"), {
        server_name: h.name,
        private_ip: h.private_ip,
        cluster: witnessCluster(h),
        lease_users: s.regions
          .map((r) => `      { user: "recovery_${r}", password: "@@BCRYPT:recovery_${r}@@" }`)
          .join("\n"),
      });
      out[h.name] = renderTemplate(join(DEPLOY, "cloud-init", "witness.yaml"), {
        ...natsFiles,
        ...base,
        nats_conf: conf,
      });
    } else if (h.role === "monitoring") {
      out[h.name] = renderTemplate(join(DEPLOY, "cloud-init", "monitoring.yaml"), base);
    } else {
      out[h.name] = renderTemplate(join(DEPLOY, "cloud-init", "postgres.yaml"), {
        ...base,
        postgres_conf: renderTemplate(join(DEPLOY, "postgres", "captcha-pipeline.conf.tftpl"), {
          private_ip: h.private_ip,
        }),
        pg_hba: renderTemplate(join(DEPLOY, "postgres", "pg_hba.conf.tftpl"), { private_cidr: s.private_cidr }),
      });
    }
  }
  return out;
}

const USER_DATA = renderUserData(SAMPLE);
const hostOf = (name: string) => SAMPLE.hosts.find((h) => h.name === name)!;

interface WriteFile {
  path: string;
  content?: string;
  encoding?: string;
  permissions?: string;
  owner?: string;
  defer?: boolean;
}
interface CloudConfig {
  write_files?: WriteFile[];
  packages?: string[];
  runcmd?: Array<string | string[]>;
  users?: Array<string | { name: string }>;
}
/** A file cloud-init writes from `encoding: gz+b64`: base64, then gunzip (which throws on a bad stream). */
const gunzipB64 = (b64: string) => gunzipSync(Buffer.from(b64, "base64")).toString("utf8");
/** The user-data as the YAML says it: gz+b64 files still encoded. */
const parsedRaw = (name: string) => Bun.YAML.parse(USER_DATA[name]!) as CloudConfig;
/** The user-data as cloud-init writes it: every gz+b64 file's content decoded, so the checks read the text. */
const parsed = (name: string): CloudConfig => {
  const c = parsedRaw(name);
  const decode = (w: WriteFile) => (w.encoding === "gz+b64" ? { ...w, content: gunzipB64(w.content ?? "") } : w);
  return c.write_files ? { ...c, write_files: c.write_files.map(decode) } : c;
};
const fileIn = (name: string, path: string) => parsed(name).write_files?.find((f) => f.path === path)?.content;

test("permissions.json is the output of generate-permissions.ts (it follows permissions.ts)", () => {
  expect(read(DEPLOY, "nats", "permissions.json")).toBe(permissionsJson());
});

test("cloud-init schema: every role's user-data, rendered with sample values, is a valid #cloud-config", () => {
  const { cmd, env } = cloudInitCommand((m) => console.log(`[deploy-static] ${m}`));
  const dir = mkdtempSync(join(tmpdir(), "deploy-cloud-init-"));
  try {
    const roles = new Set<string>();
    // Hetzner refuses user_data over 32 KiB: say how close each role is.
    const sizes = new Map<string, number>();
    for (const [name, text] of Object.entries(USER_DATA))
      sizes.set(hostOf(name).role, Math.max(sizes.get(hostOf(name).role) ?? 0, Buffer.byteLength(text)));
    console.log(
      `[deploy-static] user-data bytes (of ${MAX_USER_DATA}): ${[...sizes].map(([r, n]) => `${r} ${n}`).join(", ")}`,
    );
    for (const [name, text] of Object.entries(USER_DATA)) {
      roles.add(hostOf(name).role);
      expect(text.startsWith("#cloud-config\n")).toBe(true);
      expect(Buffer.byteLength(text)).toBeLessThanOrEqual(MAX_USER_DATA);
      // Every ${...} of the templates was filled in (renderTemplate throws on an unknown one); the
      // ones left are the units' and scripts' own shell syntax, inserted as values.
      const file = join(dir, `${name}.yaml`);
      writeFileSync(file, text);
      const r = run([...cmd, "schema", "--config-file", file], { env });
      expect({ name, status: r.status, out: r.out }).toEqual({ name, status: 0, out: `Valid cloud-config: ${file}` });
    }
    expect([...roles].sort()).toEqual(["app", "monitoring", "nats", "postgres", "witness"]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("the user-data writes the units and scripts byte for byte, bootstraps users, folders, firewall and packages", () => {
  const app = parsed("fsn1-app-1");
  expect(fileIn("fsn1-app-1", "/etc/systemd/system/gateway.service")).toBe(read(SYSTEMD, "gateway.service"));
  expect(fileIn("fsn1-app-1", "/etc/systemd/system/solver@.service")).toBe(read(SYSTEMD, "solver@.service"));
  expect(fileIn("fsn1-app-1", "/etc/systemd/system/recovery.service")).toBe(read(SYSTEMD, "recovery.service"));
  expect(fileIn("fsn1-app-1", "/etc/systemd/system/captcha-pipeline.target")).toBe(
    read(SYSTEMD, "captcha-pipeline.target"),
  );
  for (const user of Object.values(APP_USERS))
    expect(app.users?.some((u) => typeof u === "object" && u.name === user)).toBe(true);
  const appRun = JSON.stringify(app.runcmd);
  expect(appRun).toContain('"0700","-o","root","-g","root","/etc/captcha-pipeline"');
  expect(appRun).toContain("/opt/captcha-pipeline");
  expect(app.packages).toEqual(expect.arrayContaining(["nftables", "curl", "postgresql-client"]));
  for (const name of ["fsn1-nats-1", "nbg1-witness-1"]) {
    const c = parsed(name);
    expect(fileIn(name, "/etc/systemd/system/nats-server.service")).toBe(read(SYSTEMD, "nats-server.service"));
    expect(fileIn(name, "/usr/local/lib/captcha-pipeline/nats-render-config")).toBe(
      read(DEPLOY, "scripts", "nats-render-config.sh"),
    );
    expect(fileIn(name, "/usr/local/lib/captcha-pipeline/install-nats-server")).toBe(
      read(DEPLOY, "scripts", "install-nats-server.sh"),
    );
    expect(c.users?.some((u) => typeof u === "object" && u.name === "nats")).toBe(true);
    expect(JSON.stringify(c.runcmd)).toContain(
      `["/usr/local/lib/captcha-pipeline/install-nats-server","${SAMPLE.nats_server_version}","${SAMPLE.nats_server_sha256}","${SAMPLE.nats_server_url}"]`,
    );
  }
  expect(parsed("fsn1-pg-1").packages).toContain("postgresql");
  expect(fileIn("fsn1-pg-1", "/etc/postgresql/15/main/conf.d/captcha-pipeline.conf")).toContain(
    "listen_addresses = 'localhost,10.0.1.30'",
  );
  expect(fileIn("fsn1-pg-1", "/etc/postgresql/15/main/pg_hba.conf")).toMatch(
    /^hostssl\s+all\s+pipeline_owner,pipeline_gateway,pipeline_solver,pipeline_rollout\s+10\.0\.0\.0\/16\s+scram-sha-256$/m,
  );
  expect(fileIn("fsn1-pg-1", "/etc/postgresql/15/main/pg_hba.conf")).not.toMatch(/\s(trust|md5|password)\s*$/m);
  // The firewall of each role: default drop, and each private port only from the private network.
  const ports: Record<string, string> = {
    "fsn1-app-1": "8080",
    "fsn1-nats-1": "{ 4222, 6222, 7422 }",
    "fsn1-pg-1": "5432",
    "fsn1-nats-2": "8222",
    "hel1-witness-1": "8222",
    "nbg1-witness-1": "{ 4222, 6222 }",
  };
  for (const [name, port] of Object.entries(ports)) {
    const nft = fileIn(name, "/etc/nftables.conf")!;
    expect(nft).toContain("policy drop;");
    expect(nft).toContain("define PRIVATE = 10.0.0.0/16");
    expect(nft).toContain(`ip saddr $PRIVATE tcp dport ${port} accept`);
    // Every accepted port other than SSH names the private network.
    for (const line of nft.split("\n").filter((l) => /dport/.test(l) && !/dport 22 accept/.test(l)))
      expect(line).toContain("ip saddr $PRIVATE");
  }
});

// ---------------------------------------------------------------------------------------------
// Users, files and network of the app units (issue 34)

/**
 * What cloud-init's users-and-groups module would run for a host's user-data: the real module and
 * Debian distro code (infra/deploy/cloud-init-users.py), with useradd, groupadd, sudoers and
 * keys recorded instead of done, the user-data merged over the package's own cloud.cfg (whose
 * `users: [default]` would add the image's `debian` login).
 */
function cloudInitUsers(name: string): { calls: string[][]; sudo: Record<string, string | string[]> } {
  const { cmd, env } = cloudInitCommand((m) => console.log(`[deploy-static] ${m}`));
  const python = env.PYTHONPATH ? cmd[0]! : "python3";
  const base = env.PYTHONPATH
    ? join(env.PYTHONPATH, "..", "..", "..", "..", "etc", "cloud", "cloud.cfg")
    : "/etc/cloud/cloud.cfg";
  const dir = mkdtempSync(join(tmpdir(), "deploy-users-"));
  try {
    const file = join(dir, `${name}.yaml`);
    writeFileSync(file, USER_DATA[name]!);
    const r = run([python, join(DEPLOY, "cloud-init-users.py"), base, file], { env });
    expect(r.status, r.out).toBe(0);
    return JSON.parse(r.stdout) as { calls: string[][]; sudo: Record<string, string | string[]> };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

test("cloud-init: each app runs as its own system user in its own system group; no role gets the image's default login", () => {
  const systemUsers: Record<string, string[]> = {
    "fsn1-app-1": Object.values(APP_USERS),
    "fsn1-nats-1": ["nats"],
    "fsn1-pg-1": [],
    "nbg1-witness-1": ["nats"],
  };
  for (const [host, expected] of Object.entries(systemUsers)) {
    const { calls, sudo } = cloudInitUsers(host);
    const useradd = calls.filter((c) => c[0] === "useradd");
    // The image's default user (Debian: `debian`, passwordless sudo for anything, the same SSH keys) is not created.
    expect({ host, users: useradd.map((c) => c[1]) }).toEqual({ host, users: expect.not.arrayContaining(["debian"]) });
    // The one login with root's rights: the operators' `ops` (root cannot log in over SSH; see "logins" below).
    expect({
      host,
      unrestricted: Object.entries(sudo)
        .filter(([, rules]) => [rules].flat().some((r) => /NOPASSWD:\s*ALL\s*$/.test(r)))
        .map(([u]) => u),
    }).toEqual({ host, unrestricted: ["ops"] });
    const system = useradd.filter((c) => c.includes("--system"));
    expect({ host, system: system.map((c) => c[1]).sort() }).toEqual({ host, system: [...expected].sort() });
    for (const c of system) {
      const user = c[1]!;
      // No --gid and no --no-user-group: useradd --system makes the user's own group, and makes it a
      // system group (USERGROUPS_ENAB in Debian's login.defs). A group named first (`groups:`,
      // primary_group) is made by a plain groupadd: a regular group, as on today's hosts.
      expect({ host, user, gid: c.includes("--gid"), noUserGroup: c.includes("--no-user-group") }).toEqual({
        host,
        user,
        gid: false,
        noUserGroup: false,
      });
      expect({
        host,
        user,
        groupadd: calls.filter((g) => g[0] === "groupadd" && g.at(-1) === user && !g.includes("--system")),
      }).toEqual({ host, user, groupadd: [] });
      expect({
        host,
        user,
        shell: c[c.indexOf("--shell") + 1],
        home: c[c.indexOf("--home") + 1],
        noHome: c.includes("-M"),
      }).toEqual({
        host,
        user,
        shell: "/usr/sbin/nologin",
        home: user === "nats" ? "/var/lib/nats" : "/nonexistent",
        noHome: true,
      });
      expect(calls).toContainEqual(["passwd", "-l", user]);
    }
  }
});

// ---------------------------------------------------------------------------------------------
// Logins (issue 34): no root over SSH; the deploy's own user and its narrow sudo; signed releases

const SUDOERS = read(DEPLOY, "sudoers", "captcha-pipeline-deploy");
/** The sudoers drop-in's commands: the app units' verbs (a regular expression over the whole argument list) and the install script. */
const DEPLOY_COMMANDS = [
  "/usr/bin/systemctl ^(start|stop|restart|enable|disable|is-active --quiet) (gateway|recovery|rollout|solver@[a-z0-9_]{1,32})\\.service$",
  "/usr/local/sbin/captcha-pipeline-install",
];

test("logins: root cannot log in over SSH on any role (disable_root, PermitRootLogin no); operators log in as `ops`, the deploy as `deploy` on app hosts", () => {
  const roles = {
    "fsn1-app-1": "app",
    "fsn1-nats-1": "nats",
    "fsn1-pg-1": "postgres",
    "nbg1-witness-1": "witness",
    "fsn1-mon-1": "monitoring",
  } as const;
  const sshd = read(DEPLOY, "ssh", "10-captcha-pipeline.conf");
  for (const line of ["PermitRootLogin no", "PasswordAuthentication no", "KbdInteractiveAuthentication no"])
    expect(sshd.split("\n")).toContain(line);
  for (const [name, role] of Object.entries(roles)) {
    const c = parsed(name) as CloudConfig & { disable_root?: boolean; ssh_pwauth?: boolean };
    expect({ name, disable_root: c.disable_root, ssh_pwauth: c.ssh_pwauth }).toEqual({
      name,
      disable_root: true,
      ssh_pwauth: false,
    });
    const drop = c.write_files?.find((f) => f.path === "/etc/ssh/sshd_config.d/10-captcha-pipeline.conf");
    expect({ name, content: drop?.content, owner: drop?.owner, permissions: drop?.permissions }).toEqual({
      name,
      content: sshd,
      owner: "root:root",
      permissions: "0644",
    });
    expect(c.packages).toContain("sudo");
    const users = (c.users ?? []).filter((u) => typeof u === "object") as Array<{
      name: string;
      sudo?: string;
      ssh_authorized_keys?: string[];
      lock_passwd?: boolean;
    }>;
    const ops = users.find((u) => u.name === "ops");
    expect({ name, keys: ops?.ssh_authorized_keys, locked: ops?.lock_passwd }).toEqual({
      name,
      keys: SAMPLE.admin_ssh_keys,
      locked: true,
    });
    const deploy = users.find((u) => u.name === "deploy");
    if (role === "app") {
      // Its keys are Terraform's deploy_ssh_keys; no sudo of cloud-init's: the drop-in is its one rule.
      expect({ name, keys: deploy?.ssh_authorized_keys, locked: deploy?.lock_passwd, sudo: deploy?.sudo }).toEqual({
        name,
        keys: SAMPLE.deploy_ssh_keys,
        locked: true,
        sudo: undefined,
      });
      expect(cloudInitUsers(name).sudo).toEqual({ ops: "ALL=(ALL) NOPASSWD:ALL" });
    } else expect({ name, deploy }).toEqual({ name, deploy: undefined });
  }
});

/**
 * The files written gzip-compressed and base64-encoded (`encoding: gz+b64`, Terraform's base64gzip),
 * each with its source: the big ones, which alone would take the app host's user-data past
 * Hetzner's 32 KiB.
 */
const GZ_FILES: Record<string, () => string> = {
  "/usr/local/sbin/captcha-pipeline-install": () => read(DEPLOY, "scripts", "captcha-pipeline-install.sh"),
  "/etc/systemd/system/gateway.service": () => read(SYSTEMD, "gateway.service"),
  "/etc/systemd/system/solver@.service": () => read(SYSTEMD, "solver@.service"),
  "/etc/systemd/system/recovery.service": () => read(SYSTEMD, "recovery.service"),
  "/etc/systemd/system/rollout.service": () => read(SYSTEMD, "rollout.service"),
  "/etc/systemd/system/nats-server.service": () => read(SYSTEMD, "nats-server.service"),
  "/usr/local/lib/captcha-pipeline/nats-render-config": () => read(DEPLOY, "scripts", "nats-render-config.sh"),
};

test("every gz+b64 file of the user-data is base64 of a valid gzip stream, decoding to its source file byte for byte", () => {
  const seen = new Set<string>();
  for (const name of Object.keys(USER_DATA)) {
    for (const w of parsedRaw(name).write_files ?? []) {
      if (w.encoding === undefined) continue;
      const raw = w.content ?? "";
      expect({ name, path: w.path, encoding: w.encoding, base64: /^[A-Za-z0-9+/]+={0,2}$/.test(raw) }).toEqual({
        name,
        path: w.path,
        encoding: "gz+b64",
        base64: true,
      });
      const gz = Buffer.from(raw, "base64");
      // The gzip magic and deflate, then a stream gunzip reads to its end (it throws otherwise).
      expect({ name, path: w.path, magic: [...gz.subarray(0, 3)] }).toEqual({
        name,
        path: w.path,
        magic: [0x1f, 0x8b, 8],
      });
      const source = GZ_FILES[w.path];
      expect({ name, path: w.path, known: source !== undefined }).toEqual({ name, path: w.path, known: true });
      expect({ name, path: w.path, text: gunzipSync(gz).toString("utf8") }).toEqual({
        name,
        path: w.path,
        text: source!(),
      });
      seen.add(w.path);
    }
  }
  expect([...seen].sort()).toEqual(Object.keys(GZ_FILES).sort());
});

test("the deploy user's sudoers drop-in lists only the app units' systemctl verbs and the install script; visudo accepts it", () => {
  const files = parsed("fsn1-app-1").write_files ?? [];
  const drop = files.find((f) => f.path === "/etc/sudoers.d/captcha-pipeline-deploy");
  expect({ content: drop?.content, owner: drop?.owner, permissions: drop?.permissions }).toEqual({
    content: SUDOERS,
    owner: "root:root",
    permissions: "0440",
  });
  for (const name of ["fsn1-nats-1", "fsn1-pg-1", "nbg1-witness-1"])
    expect(parsed(name).write_files?.some((f) => f.path.startsWith("/etc/sudoers.d/"))).toBe(false);
  const { visudo } = findSudo((m) => console.log(`[deploy-static] ${m}`));
  const dir = mkdtempSync(join(tmpdir(), "deploy-sudoers-"));
  try {
    writeFileSync(join(dir, "captcha-pipeline-deploy"), SUDOERS, { mode: 0o440 });
    const r = run([visudo, "-c", "-f", join(dir, "captcha-pipeline-deploy")]);
    expect({ status: r.status, out: r.out }).toEqual({
      status: 0,
      out: `${join(dir, "captcha-pipeline-deploy")}: parsed OK`,
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  // One rule, for `deploy`, as root, and exactly these commands: no ALL, no shell, no SETENV, no wildcard.
  const rules = SUDOERS.split("\n").filter((l) => l.trim() && !l.trimStart().startsWith("#"));
  expect(rules).toHaveLength(1);
  const m = /^deploy ALL=\(root\) NOPASSWD: (.*)$/.exec(rules[0]!);
  expect(m).not.toBeNull();
  expect(m![1]!.split(/, (?=\/)/)).toEqual(DEPLOY_COMMANDS);
  expect(m![1]).not.toMatch(/\bALL\b|SETENV|\*/);
  // The systemctl rule, read as sudo reads it (a regular expression over the arguments joined by spaces).
  const args = new RegExp(DEPLOY_COMMANDS[0]!.replace(/^\S+ /, ""));
  const allowed = [
    "gateway.service",
    "recovery.service",
    "rollout.service",
    "solver@v2.service",
    "solver@g3259101_dirty.service",
  ].flatMap((u) => ["start", "stop", "restart", "enable", "disable", "is-active --quiet"].map((v) => `${v} ${u}`));
  for (const a of allowed) expect({ a, allowed: args.test(a) }).toEqual({ a, allowed: true });
  for (const a of [
    "restart ssh.service",
    "stop gateway.service ssh.service",
    "start solver@v1.service nftables.service",
    "daemon-reload",
    "restart solver@../../x.service",
    "edit gateway.service",
    "enable --now gateway.service",
    "restart gateway.service.d",
    "mask gateway.service",
    "restart gatewayxservice",
  ])
    expect({ a, allowed: args.test(a) }).toEqual({ a, allowed: false });
});

test("signed releases: app hosts get the install script (0755 root) and an allowed_signers of Terraform's release_signing_keys, for releases only", () => {
  const files = parsed("fsn1-app-1").write_files ?? [];
  const script = files.find((f) => f.path === "/usr/local/sbin/captcha-pipeline-install");
  expect({ content: script?.content, owner: script?.owner, permissions: script?.permissions }).toEqual({
    content: read(DEPLOY, "scripts", "captcha-pipeline-install.sh"),
    owner: "root:root",
    permissions: "0755",
  });
  const signers = files.find((f) => f.path === "/etc/captcha-pipeline-release/allowed_signers");
  expect({ content: signers?.content, owner: signers?.owner, permissions: signers?.permissions }).toEqual({
    content: SAMPLE.release_signing_keys
      .map((k) => `captcha-pipeline-release namespaces="captcha-pipeline-release" ${k}\n`)
      .join(""),
    owner: "root:root",
    permissions: "0644",
  });
  // The script reads the signers from there, and verifies with the principal and namespace the build signs with.
  const text = read(DEPLOY, "scripts", "captcha-pipeline-install.sh");
  expect(text).toMatch(/^SIGNERS=\/etc\/captcha-pipeline-release\/allowed_signers$/m);
  expect(text).toMatch(/^NAMESPACE=captcha-pipeline-release$/m);
  expect(text).toMatch(/^PRINCIPAL=captcha-pipeline-release$/m);
  expect(text).toContain('ssh-keygen -Y verify -f "$SIGNERS" -I "$PRINCIPAL" -n "$NAMESPACE"');
});

test("files: env files are root's alone (systemd reads them); each app has its own folder for the files it reads; the snapshots are recovery's", () => {
  const appRun = parsed("fsn1-app-1").runcmd?.map((c) => JSON.stringify(c)) ?? [];
  expect(appRun).toContain(
    JSON.stringify(["install", "-d", "-m", "0700", "-o", "root", "-g", "root", "/etc/captcha-pipeline"]),
  );
  for (const user of Object.values(APP_USERS))
    expect(appRun).toContain(
      JSON.stringify([
        "install",
        "-d",
        "-m",
        "0750",
        "-o",
        "root",
        "-g",
        user,
        `/etc/${user.replace(/^pipeline-/, "captcha-pipeline-")}`,
      ]),
    );
  // No unit gets write access anywhere but recovery's state directory.
  for (const f of Object.keys(APP_USERS)) {
    const u = read(SYSTEMD, f);
    expect({
      f,
      writes: u.match(/^(ReadWritePaths|StateDirectory|CacheDirectory|LogsDirectory|RuntimeDirectory)=.*$/gm) ?? [],
    }).toEqual({ f, writes: f === "recovery.service" ? ["StateDirectory=captcha-pipeline"] : [] });
  }
  // The solver's provider keys: a file in the solver's folder, 0640 root:pipeline-solver (docs/deploy.md tells how to install it).
  expect(envExample("solver").PROVIDER_KEYS_FILE).toStartWith("/etc/captcha-pipeline-solver/");
  expect(envExample("solver").PROVIDER_KEY).toBeUndefined();
  expect(envExample("recovery").PROVIDER_KEY).toBeUndefined();
  expect(read(ROOT, "docs", "deploy.md")).toContain(
    "install -m 0640 -o root -g pipeline-solver provider-keys.json /etc/captcha-pipeline-solver/",
  );
  // The deploy command (or the host's install script it calls) writes a solver version's env file root-only too.
  const writers = [
    join(DEPLOY, "cli", "deploy-host.ts"),
    join(DEPLOY, "scripts", "captcha-pipeline-install.sh"),
  ].filter((f) => existsSync(f) && readFileSync(f, "utf8").includes("METRICS_PORT=%s"));
  expect(writers.length).toBeGreaterThan(0);
  for (const f of writers) expect(readFileSync(f, "utf8")).toMatch(/umask 077(?:\\n|\n)\s*printf 'METRICS_PORT=%s/);
});

/** An address as a number (IPv4: 32 bits, IPv6: 128) and its family. */
function ipBits(ip: string): { v6: boolean; n: bigint } {
  if (!ip.includes(":")) return { v6: false, n: ip.split(".").reduce((a, o) => (a << 8n) | BigInt(Number(o)), 0n) };
  const [head, tail] = ip.split("::") as [string, string | undefined];
  const h = head ? head.split(":") : [];
  const t = tail ? tail.split(":") : [];
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill("0"), ...t];
  return { v6: true, n: groups.reduce((a, g) => (a << 16n) | BigInt(parseInt(g, 16)), 0n) };
}

const IP_KEYWORDS: Record<string, string[]> = {
  any: ["0.0.0.0/0", "::/0"],
  localhost: ["127.0.0.0/8", "::1/128"],
  "link-local": ["169.254.0.0/16", "fe80::/64"],
  multicast: ["224.0.0.0/4", "ff00::/8"],
};

function inCidr(ip: string, cidr: string): boolean {
  const [net, len] = cidr.split("/") as [string, string | undefined];
  const a = ipBits(ip);
  const b = ipBits(net);
  if (a.v6 !== b.v6) return false;
  const width = a.v6 ? 128n : 32n;
  const shift = width - BigInt(len ?? String(width));
  return a.n >> shift === b.n >> shift;
}

/**
 * systemd's IP access lists of a unit (its file, then its drop-ins): an address is reached when
 * an IPAddressAllow= entry holds it, or else when no IPAddressDeny= entry does (systemd.resource-control).
 */
function ipPolicy(texts: string[]): { allow: string[]; deny: string[]; reaches: (ip: string) => boolean } {
  const lists: Record<string, string[]> = { IPAddressAllow: [], IPAddressDeny: [] };
  for (const t of texts)
    for (const m of t.matchAll(/^(IPAddressAllow|IPAddressDeny)=(.*)$/gm)) {
      const items = m[2]!.trim().split(/\s+/).filter(Boolean);
      if (items.length === 0) lists[m[1]!] = [];
      else lists[m[1]!]!.push(...items.flatMap((i) => IP_KEYWORDS[i] ?? [i]));
    }
  const allow = lists.IPAddressAllow!;
  const deny = lists.IPAddressDeny!;
  return { allow, deny, reaches: (ip) => allow.some((c) => inCidr(ip, c)) || !deny.some((c) => inCidr(ip, c)) };
}

/** A unit's text and the drop-ins the app host's user-data writes for it. */
const unitWithDropIns = (f: string) => [
  read(SYSTEMD, f),
  ...(parsed("fsn1-app-1").write_files ?? [])
    .filter((w) => w.path.startsWith(`/etc/systemd/system/${f}.d/`))
    .map((w) => w.content ?? ""),
];

test("network: no app unit reaches the metadata service; gateway, recovery and rollout reach only localhost and the private network", () => {
  const metadata = ["169.254.169.254", "169.254.0.1", "fe80::1", "fe80::a9fe:a9fe"];
  const privateNet = ["10.0.1.5", "10.0.1.20", "10.0.1.30", "10.0.2.20", "10.0.2.30", "10.0.100.10", "10.0.255.254"];
  const internet = [
    "1.1.1.1",
    "185.12.64.1",
    "8.8.8.8",
    "2a01:4ff:ff00::add:1",
    "2606:4700:4700::1111",
    "192.168.1.1",
    "172.16.0.1",
    "10.1.0.1",
  ];
  expect(SAMPLE.private_cidr).toBe("10.0.0.0/16");
  for (const f of Object.keys(APP_USERS)) {
    const texts = unitWithDropIns(f);
    expect({ f, line: texts[0]!.split("\n").includes("IPAddressDeny=169.254.0.0/16 fe80::/10") }).toEqual({
      f,
      line: true,
    });
    const p = ipPolicy(texts);
    for (const ip of metadata) expect({ f, ip, reached: p.reaches(ip) }).toEqual({ f, ip, reached: false });
    for (const ip of ["127.0.0.1", "::1", ...privateNet])
      expect({ f, ip, reached: p.reaches(ip) }).toEqual({ f, ip, reached: true });
    // The solver calls the provider and the clients' callbacks: the internet stays open to it.
    for (const ip of internet)
      expect({ f, ip, reached: p.reaches(ip) }).toEqual({ f, ip, reached: f === "solver@.service" });
    if (f !== "solver@.service") {
      expect({ f, allow: p.allow }).toEqual({ f, allow: ["127.0.0.0/8", "::1/128", SAMPLE.private_cidr] });
      // The private range comes from Terraform's private_cidr, in a drop-in (the unit itself is the same file on every deployment).
      expect({ f, dropIn: texts.slice(1).join("") }).toEqual({
        f,
        dropIn: expect.stringContaining(`IPAddressAllow=${SAMPLE.private_cidr}\n`),
      });
    } else expect(p.allow).toEqual([]);
  }
});

// ---------------------------------------------------------------------------------------------
// Postgres over TLS, the production env files, .gitignore

test("Postgres requires TLS: hostssl only, ssl on with the server's own certificate (the server waits for it), every DATABASE_URL verify-full", () => {
  const hba = fileIn("fsn1-pg-1", "/etc/postgresql/15/main/pg_hba.conf")!;
  const rules = hba
    .split("\n")
    .filter((l) => l.trim() && !l.trimStart().startsWith("#"))
    .map((l) => l.trim().split(/\s+/));
  expect(rules.length).toBeGreaterThan(0);
  // Over TCP only hostssl: a client without TLS matches no line and is refused.
  for (const r of rules)
    expect({ rule: r.join(" "), type: r[0] }).toEqual({
      rule: r.join(" "),
      type: r[0] === "local" ? "local" : "hostssl",
    });
  const conf = fileIn("fsn1-pg-1", "/etc/postgresql/15/main/conf.d/captcha-pipeline.conf")!;
  for (const line of [
    "ssl = on",
    "ssl_cert_file = '/etc/postgresql/tls/server.pem'",
    "ssl_key_file = '/etc/postgresql/tls/server-key.pem'",
    "ssl_min_protocol_version = 'TLSv1.3'",
  ])
    expect(conf.split("\n")).toContain(line);
  // Without its certificate Postgres would not start at all: it waits for the operator's files, as nats-server does.
  const dropIn = fileIn("fsn1-pg-1", "/etc/systemd/system/postgresql@15-main.service.d/tls.conf")!;
  expect(dropIn).toContain("ConditionPathExists=/etc/postgresql/tls/server.pem\n");
  expect(dropIn).toContain("ConditionPathExists=/etc/postgresql/tls/server-key.pem\n");
  const pgRun = parsed("fsn1-pg-1").runcmd?.map((c) => JSON.stringify(c)) ?? [];
  // The Postgres exporter's DSN (the package's is empty: "malformed dsn"), peer over the socket; restarted with it.
  const exporterDefaults = parsed("fsn1-pg-1").write_files?.find(
    (f) => f.path === "/etc/default/prometheus-postgres-exporter",
  );
  expect(exporterDefaults).toMatchObject({ permissions: "0644", owner: "root:root", defer: true });
  expect(exporterDefaults?.content).toBe(
    "DATA_SOURCE_NAME='user=prometheus host=/run/postgresql dbname=postgres sslmode=disable'\nARGS=\"\"\n",
  );
  expect(pgRun).toContain(JSON.stringify(["systemctl", "restart", "prometheus-postgres-exporter.service"]));
  expect(pgRun).toContain(
    JSON.stringify(["install", "-d", "-m", "0750", "-o", "root", "-g", "postgres", "/etc/postgresql/tls"]),
  );
  expect(pgRun.indexOf(JSON.stringify(["systemctl", "daemon-reload"]))).toBeGreaterThanOrEqual(0);
  expect(pgRun.indexOf(JSON.stringify(["systemctl", "daemon-reload"]))).toBeLessThan(
    pgRun.indexOf(JSON.stringify(["systemctl", "restart", "postgresql.service"])),
  );
  // Every Postgres URL the operator is told to use: the docs and the env templates.
  const texts: Record<string, string> = { "docs/deploy.md": read(ROOT, "docs", "deploy.md") };
  for (const f of readdirSync(ENV_DIR)) texts[`infra/deploy/env/${f}`] = read(ENV_DIR, f);
  let urls = 0;
  for (const [file, text] of Object.entries(texts))
    for (const m of text.matchAll(/postgres(?:ql)?:\/\/[^\s"'`|)]+/g)) {
      urls++;
      const u = new URL(m[0].replace(/<[^>]*>/g, "x").replace(/\.k\./g, ".1."));
      // No sslrootcert= in the URL: postgres.js sends a parameter it does not know to the server as a
      // setting, which refuses it (unrecognized configuration parameter "sslrootcert"). The CA comes
      // from NODE_EXTRA_CA_CERTS (Bun) and PGSSLROOTCERT (libpq: pg_dump, psql), both in common.env.
      expect({
        file,
        url: m[0],
        sslmode: u.searchParams.get("sslmode"),
        sslrootcert: u.searchParams.get("sslrootcert"),
      }).toEqual({ file, url: m[0], sslmode: "verify-full", sslrootcert: null });
    }
  expect(urls).toBeGreaterThanOrEqual(6);
  const common = envExample("common");
  expect(common.NODE_EXTRA_CA_CERTS).toBe(CA_FILE);
  expect(common.PGSSLROOTCERT).toBe(CA_FILE);
});

const ENV_DIR = join(DEPLOY, "env");
const CA_FILE = "/etc/ssl/captcha-pipeline/internal-ca.pem";
const ENV_APPS = ["gateway", "solver", "recovery", "rollout"] as const;

/**
 * An env file as systemd's EnvironmentFile= reads it, for the forms the templates may use: `KEY=value`
 * with no quote, backslash or blank in the value, or `KEY='value'` (single quotes keep the text as it
 * is: QUOTAS' JSON). Anything else is an error, so no template relies on a corner of the parser. A
 * `<...>` is a placeholder (the operator's secret, replaced by a value of that plain form).
 */
function parseEnvFile(text: string, file: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [i, line] of text.split("\n").entries()) {
    if (!line.trim() || /^\s*[#;]/.test(line)) continue;
    const m = /^([A-Z][A-Z0-9_]*)=(?:'([^']*)'|((?:<[^>]*>|[^'"\\\s<])*))$/.exec(line);
    if (!m) throw new Error(`${file}:${i + 1}: not KEY=value or KEY='value': ${line}`);
    if (m[1]! in out) throw new Error(`${file}:${i + 1}: ${m[1]} twice`);
    out[m[1]!] = m[2] ?? m[3]!;
  }
  return out;
}

/** A template of infra/deploy/env (`<...>` = the operator's secret). */
const envExample = (name: string) => parseEnvFile(read(ENV_DIR, `${name}.env.example`), `${name}.env.example`);

/** The settings that are secrets: never in an env file, always a credential (infra/deploy/systemd LoadCredential=). */
const SECRET_SETTINGS =
  /^(NATS_PASSWORD(_[A-Z0-9_]+)?|DATABASE_PASSWORD(_[A-Z0-9_]+)?|API_KEYS|API_KEY_PEPPER|WEBHOOK_SECRET(_PREVIOUS)?|WITNESS_PASSWORD|CONSOLE_TOKENS|PROVIDER_KEY|DRILL_API_KEY)$/;

/** A store made by `npm run deploy -- secrets init` (fsn1, hel1) in a temporary folder, read back. */
async function generatedStore(): Promise<StoreFile> {
  const dir = mkdtempSync(join(tmpdir(), "static-secrets-"));
  try {
    const path = join(dir, "secrets.json");
    await secretsCommand(["init", "--regions", "fsn1,hel1", "--store", path], () => {}, { env: {} });
    return JSON.parse(readFileSync(path, "utf8")) as StoreFile;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * `app`'s credentials as systemd hands them over (its unit's `LoadCredential=<app>:<folder>`: the
 * folder loaded whole, each file a credential `<app>_<NAME>`).
 */
function credentialsDirectory(store: StoreFile, app: (typeof ENV_APPS)[number]): string {
  const dir = mkdtempSync(join(tmpdir(), `static-creds-${app}-`));
  for (const [name, value] of Object.entries(appCredentials(store, app, "fsn1")))
    writeFileSync(join(dir, `${app}_${name}`), value, { mode: 0o400 });
  return dir;
}

test("env templates: each app's production env (common.env + its own, PIPELINE_ENV unset) with the generated secrets as credentials loads with the app's own config; no secret in any template", async () => {
  expect(readdirSync(ENV_DIR).sort()).toEqual(
    ["common.env.example", ...ENV_APPS.map((a) => `${a}.env.example`)].sort(),
  );
  const common = envExample("common");
  // One login per app: no DATABASE_URL shared by all in common.env.
  expect(Object.keys(common).filter((k) => k.startsWith("DATABASE_URL"))).toEqual([]);
  const logins: Record<string, string> = {
    gateway: "pipeline_gateway",
    solver: "pipeline_solver",
    recovery: "pipeline_owner",
    rollout: "pipeline_rollout",
  };
  for (const file of ["common", ...ENV_APPS]) {
    const env = envExample(file);
    // Nothing to fill in by hand, no secret setting, no password in a URL.
    expect({ file, placeholders: Object.keys(env).filter((k) => /<[^>]*>/.test(env[k]!)) }).toEqual({
      file,
      placeholders: [],
    });
    expect({ file, secrets: Object.keys(env).filter((k) => SECRET_SETTINGS.test(k)) }).toEqual({ file, secrets: [] });
    for (const [k, v] of Object.entries(env))
      if (k.startsWith("DATABASE_URL"))
        expect({ file, k, password: new URL(v).password }).toEqual({ file, k, password: "" });
  }
  for (const app of ENV_APPS) {
    const env = envExample(app);
    expect({ app, PIPELINE_ENV: common.PIPELINE_ENV ?? env.PIPELINE_ENV }).toEqual({ app, PIPELINE_ENV: undefined });
    expect({ app, login: decodeURIComponent(new URL(env.DATABASE_URL!).username) }).toEqual({
      app,
      login: logins[app]!,
    });
    expect({ app, natsUser: env.NATS_USER }).toEqual({ app, natsUser: app });
  }
  const store = await generatedStore();
  const dirs: string[] = [];
  const full = (app: (typeof ENV_APPS)[number]) => {
    const dir = credentialsDirectory(store, app);
    dirs.push(dir);
    return { ...envExample("common"), ...envExample(app), CREDENTIALS_DIRECTORY: dir };
  };
  const v = (name: string) => store.secrets[name]!.value;
  try {
    const gateway = loadGatewayConfig(full("gateway"));
    expect(gateway.PIPELINE_ENV).toBe("production");
    expect(gateway.API_KEY_PEPPER).toBe(v("api-key-pepper"));
    expect(gateway.API_KEYS).toEqual([v("api-keys")]);
    expect(gateway.WEBHOOK_SECRET).toBe(v("webhook-secret"));
    expect(gateway.WEBHOOK_SECRET_PREVIOUS).toBeUndefined();
    expect(gateway.NATS_PASSWORD).toBe(v("fsn1/nats/gateway"));
    expect(new URL(gateway.DATABASE_URL).password).toBe(v("fsn1/postgres/pipeline_gateway"));
    expect(new URL(gateway.DATABASE_URL).searchParams.get("sslmode")).toBe("verify-full");
    // Behind the load balancer, the failed-login throttle counts clients, not the balancer.
    expect(gateway.GATEWAY_BEHIND_PROXY).toBe(true);
    expect(gateway.GATEWAY_TRUSTED_PROXIES.length).toBe(1);
    expect(gateway.AUTH_FAIL_MAX_PER_SOURCE).toBeGreaterThanOrEqual(gateway.AUTH_FAIL_MAX);
    expect(gateway.QUOTAS?.default.submitsPerSecond).toBeGreaterThan(0);
    expect(gateway.QUOTAS?.default.maxInFlight).toBeGreaterThan(0);
    const solver = loadSolverConfig(full("solver"));
    expect(solver.PROVIDER_KEYS_FILE).toBe("/etc/captcha-pipeline-solver/provider-keys.json");
    expect(solver.WEBHOOK_SECRET).toBe(v("webhook-secret"));
    expect(new URL(solver.DATABASE_URL).password).toBe(v("fsn1/postgres/pipeline_solver"));
    const recovery = loadRecoveryConfig(full("recovery"));
    expect(recovery.WITNESS_REPLICAS).toBe(3);
    expect(recovery.WITNESS_PASSWORD).toBe(v("fsn1/witness/recovery"));
    expect(recovery.CONSOLE_TOKENS).toBe(v("console-tokens"));
    expect(new URL(recovery.DATABASE_URL!).password).toBe(v("fsn1/postgres/pipeline_owner"));
    // Off-host snapshot copies go to the other region through this region's own NATS (the leafnode link): nothing beyond the private network.
    expect(recovery.offHostDomain).toBe("hel1");
    const rolloutEnv = full("rollout");
    const rollout = loadRolloutConfig(rolloutEnv);
    const regions = regionEndpoints(rollout, rolloutEnv, { needDatabase: true });
    expect(regions.map((r) => [r.name, r.databaseUrl && new URL(r.databaseUrl).hostname])).toEqual([
      ["fsn1", "10.0.1.30"],
      ["hel1", "10.0.2.30"],
    ]);
    expect(regions.map((r) => [r.auth, r.databaseUrl && new URL(r.databaseUrl).password])).toMatchObject([
      [{ user: "rollout", pass: v("fsn1/nats/rollout") }, v("fsn1/postgres/pipeline_rollout")],
      [{ user: "rollout", pass: v("hel1/nats/rollout") }, v("hel1/postgres/pipeline_rollout")],
    ]);
    // Without its credentials a production gateway does not start, and says which setting is missing where.
    const empty = mkdtempSync(join(tmpdir(), "static-creds-none-"));
    dirs.push(empty);
    const gatewayEnv = { ...envExample("common"), ...envExample("gateway") };
    expect(() => loadGatewayConfig({ ...gatewayEnv, CREDENTIALS_DIRECTORY: empty })).toThrow(
      `(not in the environment, and no credential API_KEYS in ${empty})`,
    );
    const noPepper = full("gateway");
    rmSync(join(noPepper.CREDENTIALS_DIRECTORY, "gateway_API_KEY_PEPPER"));
    expect(() => loadGatewayConfig(noPepper)).toThrow(
      `API_KEY_PEPPER: required outside dev (PIPELINE_ENV=dev): a generated secret of 32+ characters (openssl rand -hex 32) (not in the environment, and no credential API_KEY_PEPPER in ${noPepper.CREDENTIALS_DIRECTORY})`,
    );
  } finally {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  }
});

test("credentials: each app unit loads the folder the deploy writes for it (root's, 0700, files 0600), from stdin only", () => {
  const units = {
    gateway: "gateway.service",
    solver: "solver@.service",
    recovery: "recovery.service",
    rollout: "rollout.service",
  };
  for (const [app, file] of Object.entries(units) as [(typeof ENV_APPS)[number], string][]) {
    const lines = read(SYSTEMD, file)
      .split("\n")
      .filter((l) => l.startsWith("LoadCredential="))
      .map((l) => l.slice("LoadCredential=".length));
    // The folder the deploy writes, loaded whole: what is in it is the store's (the catalog test).
    expect({ app, lines }).toEqual({ app, lines: [`${app}:/etc/captcha-pipeline/credentials/${app}`] });
  }
  // The install script writes them 0600 root:root under 0700 root folders, from stdin only.
  const install = read(DEPLOY, "scripts", "captcha-pipeline-install.sh");
  expect(install).toContain('install -d -m 0700 -o root -g root "$ETC/credentials" "$new"');
  expect(install).toContain('(umask 077 && base64 -d <<<"$b64" >"$new/$name")');
});

test("env templates: the gateway's API_KEY_PEPPER (a credential), QUOTAS (the documented example parses with QuotasConfig) and the load balancer as its one trusted proxy", async () => {
  const gw = envExample("gateway");
  expect(gw.API_KEY_PEPPER).toBeUndefined();
  expect(read(SYSTEMD, "gateway.service")).toContain(
    "LoadCredential=gateway:/etc/captcha-pipeline/credentials/gateway",
  );
  expect(gw.GATEWAY_TRUST_PROXY).toBeUndefined();
  expect(gw.GATEWAY_BEHIND_PROXY).toBe("1");
  const docs = read(ROOT, "docs", "deploy.md");
  const documented = /QUOTAS='([^']*)'/.exec(docs)?.[1];
  expect(documented).toBe(gw.QUOTAS!);
  const quotas = QuotasConfig.parse(JSON.parse(documented!));
  expect(quotas.default).toEqual({ submitsPerSecond: 50, burst: 100, maxInFlight: 1000, maxRedrives: 3 });
  for (const key of [
    "API_KEY_PEPPER",
    "QUOTAS",
    "GATEWAY_BEHIND_PROXY=1",
    "GATEWAY_TRUSTED_PROXIES",
    "PIPELINE_ENV=dev",
    "npm run deploy -- secrets init",
  ])
    expect(docs).toContain(key);
  expect(docs).not.toContain("GATEWAY_TRUST_PROXY=");
  // The load balancer's private address: Terraform's, shown by `terraform output load_balancers` (private_ip) and in the template (fsn1).
  const tf = merged(await terraformFiles());
  const lbIp = String(tf.resource.hcloud_load_balancer_network.gateway[0].ip);
  expect(lbIp).toBe("${cidrhost(cidrsubnet(var.private_cidr, 8, local.region_index[each.key]), 5)}");
  expect(String(tf.output.load_balancers[0].value)).toContain(
    "private_ip = hcloud_load_balancer_network.gateway[r].ip",
  );
  expect(gw.GATEWAY_TRUSTED_PROXIES).toBe("10.0.1.5"); // cidrhost(cidrsubnet("10.0.0.0/16", 8, 1), 5): fsn1 is region 1
  expect(envExample("common").REGION).toBe("fsn1");
});

test(".gitignore: Terraform state, plans, variables and the inventory stay out of git; the examples and the lock file do not", () => {
  const tfDir = "infra/deploy/terraform";
  const ignored = [
    `${tfDir}/terraform.tfstate`,
    `${tfDir}/terraform.tfstate.backup`,
    `${tfDir}/.terraform.tfstate.lock.info`,
    `${tfDir}/plan.tfplan`,
    `${tfDir}/terraform.tfvars`,
    `${tfDir}/prod.auto.tfvars`,
    `${tfDir}/terraform.tfvars.json`,
    `${tfDir}/.terraform/providers/registry.terraform.io/hetznercloud/hcloud/x`,
    `${tfDir}/modules/userdata/.terraform/x`,
    `${tfDir}/inventory.json`,
    "inventory.json",
    "ops/inventory.prod.json",
  ];
  const kept = [
    `${tfDir}/main.tf`,
    `${tfDir}/terraform.tfvars.example`,
    `${tfDir}/.terraform.lock.hcl`,
    "infra/deploy/cli/inventory.ts",
    "infra/deploy/env/gateway.env.example",
  ];
  for (const path of [...ignored, ...kept]) {
    const r = run(["git", "check-ignore", "--no-index", "-q", path], { cwd: ROOT });
    expect({ path, ignored: r.status === 0 }).toEqual({ path, ignored: ignored.includes(path) });
  }
});

test("terraform.tfvars.example names only declared variables, and every variable without a default", async () => {
  const example = (await parseHcl("terraform.tfvars", read(TERRAFORM, "terraform.tfvars.example"))) as Hcl;
  const tf = merged(await terraformFiles());
  for (const k of Object.keys(example)) expect({ k, declared: k in tf.variable }).toEqual({ k, declared: true });
  for (const [k, v] of Object.entries(tf.variable as Hcl))
    if ((v as Hcl[])[0]!.default === undefined) expect({ k, inExample: k in example }).toEqual({ k, inExample: true });
});

/** The rendered NATS config of a host, as written to /etc/nats/nats.conf.tmpl. */
const natsConf = (name: string) => fileIn(name, "/etc/nats/nats.conf.tmpl")!;

test("NATS configs: domain = region, the cluster, the leafnode link, and each user's permissions are permissions.ts's", () => {
  for (const region of SAMPLE.regions) {
    const conf = natsConf(`${region}-nats-1`);
    expect(conf).toContain(`domain: "${region}"`);
    expect(conf).toContain(`name: "${region}"`);
    expect(conf).toContain(`"nats-route://${hostOf(`${region}-nats-2`).private_ip}:6222"`);
    for (const role of NATS_ROLES) {
      const m = new RegExp(
        `\\{ user: "${role}", password: "@@BCRYPT:${role}@@", permissions: (\\{.*\\}) \\}$`,
        "m",
      ).exec(conf);
      expect(m, `${region} ${role}`).not.toBeNull();
      const p = rolePermissions(role, [region]);
      expect(JSON.parse(m![1]!)).toEqual({
        publish: { allow: p.publish.allow, deny: p.publish.deny ?? [] },
        subscribe: { allow: p.subscribe.allow, deny: p.subscribe.deny ?? [] },
      });
    }
  }
  // fsn1 is the hub: it listens and advertises its own private address; hel1 connects to every fsn1 server.
  expect(natsConf("fsn1-nats-2")).toContain('advertise: "10.0.1.21:7422"');
  const spoke = natsConf("hel1-nats-1");
  for (const ip of ["10.0.1.20", "10.0.1.21", "10.0.1.22"])
    expect(spoke).toContain(`nats-leaf://leaf:@@PASSWORD:leaf_remote@@@${ip}:7422`);
  expect(spoke).not.toContain("advertise:");
  expect(natsConf("fsn1-nats-1")).not.toContain("remotes:");
  const witness = natsConf("nbg1-witness-1");
  for (const r of SAMPLE.regions) expect(witness).toContain(`user: "recovery_${r}"`);
  expect(witness).toContain('"nats-route://10.0.100.11:6222"');
});

const nats = (() => {
  try {
    return findNatsServer();
  } catch {
    return undefined;
  }
})();
const hasOpenssl = onPath("openssl") !== undefined;

test("nats-server -t accepts every rendered NATS config (hashes and TLS files filled in; nothing started)", () => {
  expect(nats).toBeDefined();
  expect(hasOpenssl).toBe(true);
  const dir = mkdtempSync(join(tmpdir(), "deploy-nats-"));
  try {
    const key = join(dir, "server-key.pem");
    const cert = join(dir, "server.pem");
    const ssl = run([
      "openssl",
      "req",
      "-x509",
      "-newkey",
      "rsa:2048",
      "-nodes",
      "-keyout",
      key,
      "-out",
      cert,
      "-days",
      "1",
      "-subj",
      "/CN=nats-test",
    ]);
    expect(ssl.status).toBe(0);
    const hash = Bun.password.hashSync("x".repeat(24), { algorithm: "bcrypt", cost: 4 });
    for (const name of SAMPLE.hosts.filter((h) => h.role === "nats" || h.role === "witness").map((h) => h.name)) {
      const conf = natsConf(name)
        .replaceAll("/etc/nats/tls/server.pem", cert)
        .replaceAll("/etc/nats/tls/server-key.pem", key)
        .replaceAll("/etc/nats/tls/ca.pem", cert)
        .replaceAll("/var/lib/nats/jetstream", join(dir, "js"))
        .replace(/@@BCRYPT:[a-z0-9_]+@@/g, hash)
        .replace(/@@PASSWORD:[a-z0-9_]+@@/g, "p".repeat(24));
      expect(conf.split("\n").filter((l) => !l.trimStart().startsWith("#") && l.includes("@@"))).toEqual([]);
      const file = join(dir, `${name}.conf`);
      writeFileSync(file, conf);
      const r = run([nats!.bin, "-t", "-c", file]);
      expect({ name, status: r.status, out: r.status === 0 ? "" : r.out }).toEqual({ name, status: 0, out: "" });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// ---------------------------------------------------------------------------------------------
// Terraform

const hasTerraform = onPath("terraform") !== undefined;
const tfEnv = () => {
  const cfg = join(tmpdir(), "deploy-static.terraformrc");
  if (!existsSync(cfg)) writeFileSync(cfg, "");
  return { TF_CLI_CONFIG_FILE: cfg, TF_IN_AUTOMATION: "1", CHECKPOINT_DISABLE: "1" };
};

/** User-data with each gz+b64 file's content replaced by its decoded text (as a JSON string). */
const decodedGz = (text: string) =>
  text.replace(
    /^(\s+encoding: gz\+b64\n\s+content: )(\S+)$/gm,
    (_, head: string, b64: string) => `${head}${JSON.stringify(gunzipB64(b64))}`,
  );

test.skipIf(!hasTerraform)(
  "modules/userdata (terraform console, offline) renders exactly what the test renders (gz+b64 files decoded)",
  () => {
    const dir = mkdtempSync(join(tmpdir(), "deploy-tf-"));
    try {
      const vars = join(dir, "sample.tfvars.json");
      writeFileSync(vars, JSON.stringify(SAMPLE));
      const r = run(["terraform", "console", `-var-file=${vars}`], {
        cwd: join(TERRAFORM, "modules", "userdata"),
        env: tfEnv(),
        input: "jsonencode(local.user_data)\n",
      });
      expect(r.status, r.out).toBe(0);
      const fromTerraform = JSON.parse(JSON.parse(r.stdout.trim())) as Record<string, string>;
      expect(Object.keys(fromTerraform).sort()).toEqual(Object.keys(USER_DATA).sort());
      // What Hetzner receives is Terraform's: its gzip (Go's deflate) differs from Bun's by a few bytes.
      const sizes = new Map<string, number>();
      for (const [name, text] of Object.entries(fromTerraform)) {
        const role = hostOf(name).role;
        sizes.set(role, Math.max(sizes.get(role) ?? 0, Buffer.byteLength(text)));
        expect({ name, bytes: Buffer.byteLength(text) <= MAX_USER_DATA }).toEqual({ name, bytes: true });
      }
      console.log(
        `[deploy-static] terraform's user-data bytes (of ${MAX_USER_DATA}): ${[...sizes].map(([r, n]) => `${r} ${n}`).join(", ")}`,
      );
      // Byte for byte, but for the gz+b64 files: those compared decoded (gunzip throws on a bad stream).
      for (const name of Object.keys(USER_DATA))
        expect({ name, text: decodedGz(fromTerraform[name]!) }).toEqual({ name, text: decodedGz(USER_DATA[name]!) });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test.skipIf(!hasTerraform)("terraform fmt -check -recursive: the Terraform is formatted", () => {
  const r = run(["terraform", "fmt", "-check", "-recursive", "-no-color", TERRAFORM], { env: tfEnv() });
  expect({ status: r.status, out: r.out }).toEqual({ status: 0, out: "" });
});

type Hcl = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function terraformFiles(): Promise<Hcl[]> {
  const files = readdirSync(TERRAFORM).filter((f) => f.endsWith(".tf"));
  return Promise.all(files.map((f) => parseHcl(f, read(TERRAFORM, f)) as Promise<Hcl>));
}

/** Merges the parsed files: every block kind, then every type and name. */
function merged(parts: Hcl[]): Hcl {
  const out: Hcl = { resource: {}, variable: {}, output: {}, locals: {}, module: {}, data: {} };
  for (const p of parts) {
    for (const [type, byName] of Object.entries((p.resource ?? {}) as Hcl))
      out.resource[type] = { ...out.resource[type], ...byName };
    for (const kind of ["variable", "output", "module"]) Object.assign(out[kind], p[kind] ?? {});
    for (const l of (p.locals ?? []) as Hcl[]) Object.assign(out.locals, l);
  }
  return out;
}

const PRIVATE_PORTS = [4222, 6222, 7422, 5432];
const OPEN = ["0.0.0.0/0", "::/0"];

/** Every inbound rule of every firewall, with `var.`, `local.`, `each.` and dynamic `rule.value` resolved. */
function firewallRules(tf: Hcl): Array<{ firewall: string; protocol: string; port?: string; sources: string[] }> {
  const varDefault = (name: string) => {
    const v = tf.variable[name]?.[0];
    if (!v) throw new Error(`firewall names var.${name}, which is not declared`);
    return v.default;
  };
  const resolve = (v: unknown, scope: Record<string, unknown>): unknown => {
    if (Array.isArray(v))
      return v.flatMap((x) => {
        const r = resolve(x, scope);
        return Array.isArray(r) && typeof x === "string" && /^\$\{[^}]+\}$/.test(x) ? r : [r];
      });
    if (typeof v !== "string") return v;
    const whole = /^\$\{([^}]+)\}$/.exec(v);
    if (!whole) {
      if (v.includes("${")) return v.replace(/\$\{([^}]+)\}/g, (_, e: string) => String(resolve(`\${${e}}`, scope)));
      return v;
    }
    const expr = whole[1]!.trim();
    if (expr in scope) return scope[expr];
    const m = /^var\.([a-z_0-9]+)$/.exec(expr);
    // A variable without a default (admin_cidrs) is the operator's: its validation is checked separately.
    if (m) return varDefault(m[1]!) ?? `var.${m[1]}`;
    const l = /^local\.([a-z_0-9]+)$/.exec(expr);
    if (l && l[1]! in tf.locals) return tf.locals[l[1]!];
    throw new Error(`cannot judge the firewall expression ${v}`);
  };
  const rules: ReturnType<typeof firewallRules> = [];
  for (const [name, blocks] of Object.entries((tf.resource.hcloud_firewall ?? {}) as Hcl)) {
    const block = (blocks as Hcl[])[0]!;
    const instances: Array<Record<string, unknown>> = block.for_each
      ? Object.entries(resolve(block.for_each, {}) as Record<string, unknown>).map(([k, v]) => ({
          "each.key": k,
          "each.value": v,
        }))
      : [{}];
    for (const scope of instances) {
      const push = (r: Hcl, s: Record<string, unknown>) => {
        if (r.direction !== "in") return;
        const sources = resolve(r.source_ips, s);
        rules.push({
          firewall: name,
          protocol: String(r.protocol),
          port: r.port === undefined ? undefined : String(resolve(r.port, s)),
          sources: (Array.isArray(sources) ? sources : [sources]).map(String),
        });
      };
      for (const r of (block.rule ?? []) as Hcl[]) push(r, scope);
      for (const d of (block.dynamic?.rule ?? []) as Hcl[]) {
        const items = resolve(d.for_each, scope);
        for (const item of Array.isArray(items) ? items : Object.values(items as object))
          for (const c of d.content as Hcl[]) push(c, { ...scope, "rule.value": item });
      }
    }
  }
  return rules;
}

const portRange = (port: string | undefined): [number, number] => {
  if (port === undefined || port === "any") return [1, 65535];
  const [a, b] = port.split("-").map(Number);
  return [a!, b ?? a!];
};

test("Terraform policy: no NATS or Postgres port open to the internet; only SSH from admin_cidrs is public", async () => {
  const tf = merged(await terraformFiles());
  const rules = firewallRules(tf);
  expect(rules.length).toBeGreaterThan(0);
  const privateCidr = tf.variable.private_cidr[0].default;
  for (const r of rules) {
    const [lo, hi] = portRange(r.port);
    const touchesPrivatePort = r.protocol !== "icmp" && PRIVATE_PORTS.some((p) => p >= lo && p <= hi);
    if (touchesPrivatePort) expect({ rule: r, sources: r.sources }).toEqual({ rule: r, sources: [privateCidr] });
    // Open to the whole internet: ICMP only (the gateways are public through their load balancer).
    if (r.sources.some((s) => OPEN.includes(s)))
      expect({ rule: r, protocol: r.protocol }).toEqual({ rule: r, protocol: "icmp" });
  }
  const ssh = rules.filter((r) => r.port === "22");
  expect(ssh.map((r) => r.sources)).toEqual([["var.admin_cidrs"]]);
  expect(tf.variable.admin_cidrs[0].default).toBeUndefined();
  expect(JSON.stringify(tf.variable.admin_cidrs[0].validation)).toContain("0.0.0.0/0");
  // The load balancer: 443 outside, the gateways' 8080 over the private network, health /readyz/accepting.
  const svc = Object.values(tf.resource.hcloud_load_balancer_service as Hcl)[0][0];
  expect([svc.listen_port, svc.destination_port, svc.protocol]).toEqual([443, 8080, "https"]);
  expect(svc.health_check[0].http[0].path).toBe("/readyz/accepting");
  const target = Object.values(tf.resource.hcloud_load_balancer_target as Hcl)[0][0];
  expect(target.use_private_ip).toBe(true);
});

test("Terraform policy: every server on the private network; both regions and the witness; the inventory output", async () => {
  const tf = merged(await terraformFiles());
  const servers = Object.entries(tf.resource.hcloud_server as Hcl);
  expect(servers.length).toBeGreaterThan(0);
  const attachments = Object.values((tf.resource.hcloud_server_network ?? {}) as Hcl).map((b) =>
    String((b as Hcl[])[0]!.server_id),
  );
  for (const [name, blocks] of servers) {
    const s = (blocks as Hcl[])[0]!;
    const inline = (s.network ?? []) as Hcl[];
    const attached =
      inline.some((n) => String(n.network_id).startsWith("${hcloud_network.")) ||
      attachments.some((a) => a.includes(`hcloud_server.${name}.`));
    expect({ server: name, attached }).toEqual({ server: name, attached: true });
  }
  expect(tf.variable.regions[0].default).toEqual(["fsn1", "hel1"]);
  expect(tf.variable.witness_location[0].default).toBe("nbg1");
  expect(Object.keys(tf.resource.hcloud_network_subnet ?? {}).sort()).toEqual(["region", "witness"]);
  expect(String(tf.resource.hcloud_network_subnet.region[0].for_each)).toContain("region_index");
  expect(String(tf.locals.witness_hosts)).toMatch(/role\s+=\s+"witness"/);
  expect(String(tf.locals.region_hosts)).toMatch(
    /role\s+=\s+"app"[\s\S]*role\s+=\s+"nats"[\s\S]*role\s+=\s+"postgres"/,
  );
  expect(Object.keys(tf.resource.hcloud_load_balancer)).toEqual(["gateway"]);
  expect(String(tf.resource.hcloud_load_balancer.gateway[0].for_each)).toContain("var.regions");
  const inventory = String(tf.output.inventory?.[0]?.value ?? "");
  expect(inventory).toStartWith("${jsonencode(");
  for (const key of [
    "hosts =",
    "name ",
    "region ",
    "roles ",
    "ssh ",
    "host = hcloud_server.host[name].ipv4_address",
    'user = local.hosts[name].role == "app" ? "deploy" : "ops"',
    "port = 22",
    "hostKeys ",
    "lookup(var.host_keys, name, [])",
    "privateIp ",
  ])
    expect(inventory).toContain(key);
  expect(inventory).not.toContain('"root"');
  // The deploy user's and the release signing keys are the operator's to give (no default), checked as public keys.
  for (const v of ["deploy_ssh_keys", "release_signing_keys"]) {
    expect({ v, default: tf.variable[v]?.[0]?.default }).toEqual({ v, default: undefined });
    expect(JSON.stringify(tf.variable[v][0].validation)).toContain("ssh-ed25519");
  }
  expect(tf.variable.host_keys[0].default).toEqual({});
  expect(String(tf.module.userdata[0].admin_ssh_keys)).toContain("data.hcloud_ssh_key.admin");
  // The modules/userdata inputs are what the test renders with.
  const mod = await parseHcl("main.tf", read(TERRAFORM, "modules", "userdata", "main.tf"));
  expect(Object.keys((mod as Hcl).variable).sort()).toEqual(Object.keys(SAMPLE).sort());
});

// ---------------------------------------------------------------------------------------------
// shell

function shellScripts(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir)) {
    if (e === "node_modules" || e.startsWith(".")) continue;
    const p = join(dir, e);
    if (statSync(p).isDirectory()) out.push(...shellScripts(p));
    else if (e.endsWith(".sh")) out.push(p);
  }
  return out;
}

test("shellcheck: every shell script under infra/", () => {
  const shellcheck = findShellcheck((m) => console.log(`[deploy-static] ${m}`));
  const scripts = shellScripts(join(ROOT, "infra"));
  expect(scripts.map((s) => relative(ROOT, s))).toEqual(
    expect.arrayContaining([
      "infra/deploy/scripts/install-nats-server.sh",
      "infra/deploy/scripts/nats-render-config.sh",
    ]),
  );
  for (const s of scripts) {
    const r = run([shellcheck, "--norc", "--severity=style", s]);
    expect({ script: relative(ROOT, s), status: r.status, out: r.out }).toEqual({
      script: relative(ROOT, s),
      status: 0,
      out: "",
    });
  }
});
