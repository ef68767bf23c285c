// Each host's user-data: infra/deploy/terraform/modules/userdata (main.tf) in TypeScript, with the
// variables Terraform passes, rendered from the project's own templates (infra/deploy/cloud-init,
// nats, postgres). The load balancer (a Hetzner product, no cloud-init file in the project) gets
// infra/rehearsal/cloud-init/lb.yaml. The NATS hosts get `nats_server_url` (install-nats-server's
// third argument): the host's copy of the release tarball instead of GitHub's (README.md).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { HostSpec } from "./config.ts";
import { templatefile } from "./templatefile.ts";

export interface UserDataVars {
  hosts: HostSpec[];
  regions: string[];
  leafHubRegion: string;
  privateCidr: string;
  natsServerVersion: string;
  natsServerSha256: string;
  /** Where the NATS hosts fetch nats-server's release tarball (GitHub's release URL in production). */
  natsServerUrl: string;
  adminSshKeys: string[];
  deploySshKeys: string[];
  releaseSigningKeys: string[];
  /** Each load balancer's HAProxy config and its certificate and key (one PEM, HAProxy's `crt`), by host name. */
  lbs: Record<string, { haproxyConfig: string; certificate: string }>;
}

const TLS_BLOCK =
  '  tls {\n    cert_file: "/etc/nats/tls/server.pem"\n    key_file: "/etc/nats/tls/server-key.pem"\n    ca_file: "/etc/nats/tls/ca.pem"\n    timeout: 2\n  }';

const readDeploy = (repo: string, ...p: string[]) => readFileSync(join(repo, "infra", "deploy", ...p), "utf8");

/** Each role's subject permissions on a region's server, as main.tf writes them (not jsonencode). */
function permissions(repo: string, region: string): Record<string, string> {
  const q = (s: string) => `"${s}"`;
  const all = JSON.parse(
    readDeploy(repo, "nats", "permissions.json")
      .replaceAll("@region@", region)
      .replaceAll("@REGION@", region.toUpperCase()),
  ) as Record<string, { publish: { allow: string[]; deny: string[] }; subscribe: { allow: string[]; deny: string[] } }>;
  const list = (xs: string[]) => xs.map(q).join(", ");
  return Object.fromEntries(
    Object.entries(all).map(([role, p]) => [
      `permissions_${role}`,
      `{ "publish": { "allow": [${list(p.publish.allow)}], "deny": [${list(p.publish.deny)}] }, "subscribe": { "allow": [${list(p.subscribe.allow)}], "deny": [${list(p.subscribe.deny)}] } }`,
    ]),
  );
}

/** A region NATS server's config (region.conf.tftpl): its routes, its leafnode block, the permissions. */
function natsConf(repo: string, v: UserDataVars, h: HostSpec): string {
  const natsOf = (r: string) => v.hosts.filter((x) => x.role === "nats" && x.region === r);
  const routes = natsOf(h.region)
    .filter((p) => p.name !== h.name)
    .map((p) => `    "nats-route://${p.ip}:6222"`)
    .join(",\n");
  const urls = natsOf(v.leafHubRegion)
    .map((p) => `"nats-leaf://leaf:@@PASSWORD:leaf_remote@@@${p.ip}:7422"`)
    .join(", ");
  const leafnodes =
    h.region === v.leafHubRegion
      ? `  listen: "${h.ip}:7422"\n  advertise: "${h.ip}:7422"\n${TLS_BLOCK}`
      : `  remotes: [\n    {\n      urls: [${urls}]\n      account: "PIPELINE"\n      tls {\n        ca_file: "/etc/nats/tls/ca.pem"\n      }\n    }\n  ]\n  reconnect: "2s"`;
  return templatefile(join(repo, "infra", "deploy", "nats", "region.conf.tftpl"), {
    server_name: h.name,
    region: h.region,
    private_ip: h.ip,
    cluster_routes: routes,
    leafnodes,
    ...permissions(repo, h.region),
  });
}

/** A witness node's config (witness.conf.tftpl): a single node has no cluster block; one lease user per region. */
function witnessConf(repo: string, v: UserDataVars, h: HostSpec): string {
  if (v.hosts.filter((x) => x.role === "witness").length > 1)
    throw new Error("the rehearsal renders one witness node (its cluster block is Terraform's alone)");
  return templatefile(join(repo, "infra", "deploy", "nats", "witness.conf.tftpl"), {
    server_name: h.name,
    private_ip: h.ip,
    cluster: "",
    lease_users: v.regions
      .map((r) => `      { user: "recovery_${r}", password: "@@BCRYPT:recovery_${r}@@" }`)
      .join("\n"),
  });
}

/** main.tf's locals: units, nats_files, logins, deploy_files. */
function fileVars(repo: string, v: UserDataVars) {
  const read = (...p: string[]) => readDeploy(repo, ...p);
  const yamlKeys = (keys: string[]) => keys.map((k) => `- ${JSON.stringify(k.trim())}`).join("\n");
  return {
    logins: { sshd_config: read("ssh", "10-captcha-pipeline.conf"), admin_ssh_keys: yamlKeys(v.adminSshKeys) },
    units: {
      gateway_unit: read("systemd", "gateway.service"),
      solver_unit: read("systemd", "solver@.service"),
      recovery_unit: read("systemd", "recovery.service"),
      rollout_unit: read("systemd", "rollout.service"),
      target_unit: read("systemd", "captcha-pipeline.target"),
    },
    natsFiles: {
      nats_unit: read("systemd", "nats-server.service"),
      render_script: read("scripts", "nats-render-config.sh"),
      install_script: read("scripts", "install-nats-server.sh"),
      nats_server_version: v.natsServerVersion,
      nats_server_sha256: v.natsServerSha256,
      // install-nats-server's third argument: the host's copy of the release tarball (empty: GitHub).
      nats_server_url: v.natsServerUrl,
    },
    deployFiles: {
      deploy_ssh_keys: yamlKeys(v.deploySshKeys),
      deploy_sudoers: read("sudoers", "captcha-pipeline-deploy"),
      deploy_install_script: read("scripts", "captcha-pipeline-install.sh"),
      release_signers: v.releaseSigningKeys
        .map((k) => `captcha-pipeline-release namespaces="captcha-pipeline-release" ${k.trim()}`)
        .join("\n"),
    },
  };
}

export function renderUserData(repo: string, v: UserDataVars): Record<string, string> {
  const deploy = join(repo, "infra", "deploy");
  const { logins, units, natsFiles, deployFiles } = fileVars(repo, v);
  const out: Record<string, string> = {};
  for (const h of v.hosts) {
    const base = { hostname: h.name, private_cidr: v.privateCidr, ...logins };
    if (h.role === "app")
      out[h.name] = templatefile(join(deploy, "cloud-init", "app.yaml"), { ...units, ...deployFiles, ...base });
    else if (h.role === "nats") {
      const nats_conf = natsConf(repo, v, h);
      out[h.name] = templatefile(join(deploy, "cloud-init", "nats.yaml"), { ...natsFiles, ...base, nats_conf });
    } else if (h.role === "witness") {
      const nats_conf = witnessConf(repo, v, h);
      out[h.name] = templatefile(join(deploy, "cloud-init", "witness.yaml"), { ...natsFiles, ...base, nats_conf });
    } else if (h.role === "monitoring") {
      out[h.name] = templatefile(join(deploy, "cloud-init", "monitoring.yaml"), base);
    } else if (h.role === "postgres") {
      out[h.name] = templatefile(join(deploy, "cloud-init", "postgres.yaml"), {
        ...base,
        postgres_conf: templatefile(join(deploy, "postgres", "captcha-pipeline.conf.tftpl"), { private_ip: h.ip }),
        pg_hba: templatefile(join(deploy, "postgres", "pg_hba.conf.tftpl"), { private_cidr: v.privateCidr }),
      });
    } else {
      const lb = v.lbs[h.name];
      if (!lb) throw new Error(`${h.name}: no HAProxy config and certificate given for this load balancer`);
      out[h.name] = templatefile(join(repo, "infra", "rehearsal", "cloud-init", "lb.yaml"), {
        ...base,
        haproxy_config: lb.haproxyConfig,
        lb_certificate: lb.certificate,
      });
    }
  }
  return out;
}
