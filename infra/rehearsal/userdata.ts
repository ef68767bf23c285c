// Each host's user-data: infra/deploy/terraform/modules/userdata (main.tf) in TypeScript, with the
// variables Terraform passes, rendered from the project's own templates (infra/deploy/cloud-init,
// nats, postgres). The load balancer (a Hetzner product, no cloud-init file in the project) gets
// infra/rehearsal/cloud-init/lb.yaml. One difference, named here and in README.md: the NATS
// server's install script fetches the tarball from the host (`natsServerUrl`) instead of GitHub.
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
  /** The load balancer's HAProxy config (lb hosts only). */
  haproxyConfig: string;
  /** The load balancer's certificate and key, one PEM (HAProxy's `crt`). */
  lbCertificate: string;
}

const TLS_BLOCK =
  '  tls {\n    cert_file: "/etc/nats/tls/server.pem"\n    key_file: "/etc/nats/tls/server-key.pem"\n    ca_file: "/etc/nats/tls/ca.pem"\n    timeout: 2\n  }';

/** GitHub's download line in install-nats-server.sh, which the rehearsal points at the host. */
export const GITHUB_URL_LINE =
  'url="https://github.com/nats-io/nats-server/releases/download/v${version}/${name}.tar.gz"';

/**
 * The install script as the rehearsal's NATS hosts get it. When the project's script takes the URL
 * as its third argument (NATS_SERVER_URL, see README.md) it is used as it is; until then its
 * GitHub line is replaced, and a script that has neither fails here rather than at boot.
 */
export function natsInstallScript(text: string): { script: string; urlArgument: boolean } {
  if (!text.includes(GITHUB_URL_LINE) && /\$\{?3/.test(text)) return { script: text, urlArgument: true };
  if (!text.includes(GITHUB_URL_LINE))
    throw new Error(`install-nats-server.sh has no line ${GITHUB_URL_LINE}: the rehearsal cannot point it at the host`);
  return {
    script: text.replace(
      GITHUB_URL_LINE,
      'url="${NATS_SERVER_URL:?}"  # the rehearsal: the host serves the tarball (infra/rehearsal/README.md)',
    ),
    urlArgument: false,
  };
}

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
      install_script: natsInstallScript(read("scripts", "install-nats-server.sh")).script,
      nats_server_version: v.natsServerVersion,
      nats_server_sha256: v.natsServerSha256,
      // Unused by today's templates (Terraform ignores a variable a template does not name); the
      // proposed third argument of install-nats-server (README.md) reads it.
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
      const text = templatefile(join(deploy, "cloud-init", "nats.yaml"), { ...natsFiles, ...base, nats_conf });
      out[h.name] = text.includes(v.natsServerUrl) ? text : withNatsServerUrl(text, v);
    } else if (h.role === "postgres") {
      out[h.name] = templatefile(join(deploy, "cloud-init", "postgres.yaml"), {
        ...base,
        postgres_conf: templatefile(join(deploy, "postgres", "captcha-pipeline.conf.tftpl"), { private_ip: h.ip }),
        pg_hba: templatefile(join(deploy, "postgres", "pg_hba.conf.tftpl"), { private_cidr: v.privateCidr }),
      });
    } else {
      out[h.name] = templatefile(join(repo, "infra", "rehearsal", "cloud-init", "lb.yaml"), {
        ...base,
        haproxy_config: v.haproxyConfig,
        lb_certificate: v.lbCertificate,
      });
    }
  }
  return out;
}

/** Today's runcmd line, with the URL given to the patched script through its environment. */
function withNatsServerUrl(text: string, v: UserDataVars): string {
  const line = `  - [/usr/local/lib/captcha-pipeline/install-nats-server, "${v.natsServerVersion}", "${v.natsServerSha256}"]`;
  if (!text.includes(line)) throw new Error(`the rendered nats.yaml has no line ${line.trim()}`);
  return text.replace(
    line,
    `  - [env, "NATS_SERVER_URL=${v.natsServerUrl}", /usr/local/lib/captcha-pipeline/install-nats-server, "${v.natsServerVersion}", "${v.natsServerSha256}"]`,
  );
}
