# The user-data of every host, rendered from infra/deploy/cloud-init/*.yaml and the NATS and
# Postgres templates. No provider: tests/deploy-static.test.ts renders it with `terraform console`
# (offline) and compares the result with its own rendering of the same templates.

variable "hosts" {
  description = "Every host: name, region (its location for witness nodes), role (app, nats, postgres, witness, monitoring) and private IP."
  type = list(object({
    name       = string
    region     = string
    role       = string
    private_ip = string
  }))
}

variable "regions" {
  description = "The regions, in the order shared by every app (REGIONS)."
  type        = list(string)
}

variable "leaf_hub_region" {
  description = "The region whose NATS servers accept the leafnode link; the others connect to it."
  type        = string
}

variable "private_cidr" {
  type = string
}

variable "nats_server_version" {
  type = string
}

variable "nats_server_sha256" {
  type = string
}

variable "nats_server_url" {
  description = "Where install-nats-server fetches the release tarball; empty: GitHub's release URL. The sha256 is checked either way."
  type        = string
  default     = ""
}

variable "admin_ssh_keys" {
  description = "The operators' public keys: every host's `ops` user (root cannot log in over SSH)."
  type        = list(string)
}

variable "deploy_ssh_keys" {
  description = "The deploy command's public keys: the app hosts' `deploy` user."
  type        = list(string)
}

variable "release_signing_keys" {
  description = "The public keys whose release signatures the app hosts' install script accepts (allowed_signers)."
  type        = list(string)
}

locals {
  root = "${path.module}/../../.."

  nats_hosts    = { for r in var.regions : r => [for h in var.hosts : h if h.role == "nats" && h.region == r] }
  witness_hosts = [for h in var.hosts : h if h.role == "witness"]

  # Each user's permissions on a region's server (permissions.json is generated from
  # packages/shared/src/nats/permissions.ts), written as JSON that nats-server reads. Not
  # jsonencode: it escapes '>' as \u003e, which the NATS config parser does not read.
  permissions_template = file("${local.root}/nats/permissions.json")
  permissions = {
    for r in var.regions : r => {
      for role, p in jsondecode(replace(replace(local.permissions_template, "@region@", r), "@REGION@", upper(r))) : role => format(
        "{ \"publish\": { \"allow\": [%s], \"deny\": [%s] }, \"subscribe\": { \"allow\": [%s], \"deny\": [%s] } }",
        join(", ", [for s in p.publish.allow : "\"${s}\""]),
        join(", ", [for s in p.publish.deny : "\"${s}\""]),
        join(", ", [for s in p.subscribe.allow : "\"${s}\""]),
        join(", ", [for s in p.subscribe.deny : "\"${s}\""]),
      )
    }
  }

  tls_block = "  tls {\n    cert_file: \"/etc/nats/tls/server.pem\"\n    key_file: \"/etc/nats/tls/server-key.pem\"\n    ca_file: \"/etc/nats/tls/ca.pem\"\n    timeout: 2\n  }"

  # The hub listens and advertises its private address; every other region has one remote to
  # the hub's servers, as the hub's `leaf` user (its password: `leaf_remote` in passwords.env).
  leafnodes = {
    for r in var.regions : r => (r == var.leaf_hub_region ? {
      for h in local.nats_hosts[r] : h.name => "  listen: \"${h.private_ip}:7422\"\n  advertise: \"${h.private_ip}:7422\"\n${local.tls_block}"
      } : {
      for h in local.nats_hosts[r] : h.name => "  remotes: [\n    {\n      urls: [${join(", ", [for p in local.nats_hosts[var.leaf_hub_region] : "\"nats-leaf://leaf:@@PASSWORD:leaf_remote@@@${p.private_ip}:7422\""])}]\n      account: \"PIPELINE\"\n      tls {\n        ca_file: \"/etc/nats/tls/ca.pem\"\n      }\n    }\n  ]\n  reconnect: \"2s\""
    })
  }

  routes = { for h in var.hosts : h.name => join(",\n", [for p in(h.role == "witness" ? local.witness_hosts : lookup(local.nats_hosts, h.region, [])) : "    \"nats-route://${p.private_ip}:6222\"" if p.name != h.name]) }

  nats_conf = { for h in var.hosts : h.name => templatefile("${local.root}/nats/region.conf.tftpl", {
    server_name          = h.name
    region               = h.region
    private_ip           = h.private_ip
    cluster_routes       = local.routes[h.name]
    leafnodes            = local.leafnodes[h.region][h.name]
    permissions_admin    = local.permissions[h.region]["admin"]
    permissions_gateway  = local.permissions[h.region]["gateway"]
    permissions_solver   = local.permissions[h.region]["solver"]
    permissions_recovery = local.permissions[h.region]["recovery"]
    permissions_rollout  = local.permissions[h.region]["rollout"]
  }) if h.role == "nats" }

  witness_cluster = { for h in local.witness_hosts : h.name => length(local.witness_hosts) < 2 ? "" : "\ncluster {\n  name: \"witness\"\n  listen: \"${h.private_ip}:6222\"\n  routes: [\n${local.routes[h.name]}\n  ]\n  tls {\n    cert_file: \"/etc/nats/tls/server.pem\"\n    key_file: \"/etc/nats/tls/server-key.pem\"\n    ca_file: \"/etc/nats/tls/ca.pem\"\n    verify: true\n    timeout: 2\n  }\n}\n" }

  witness_conf = { for h in local.witness_hosts : h.name => templatefile("${local.root}/nats/witness.conf.tftpl", {
    server_name = h.name
    private_ip  = h.private_ip
    cluster     = local.witness_cluster[h.name]
    lease_users = join("\n", [for r in var.regions : "      { user: \"recovery_${r}\", password: \"@@BCRYPT:recovery_${r}@@\" }"])
  }) }

  units = {
    gateway_unit  = file("${local.root}/systemd/gateway.service")
    solver_unit   = file("${local.root}/systemd/solver@.service")
    recovery_unit = file("${local.root}/systemd/recovery.service")
    rollout_unit  = file("${local.root}/systemd/rollout.service")
    target_unit   = file("${local.root}/systemd/captcha-pipeline.target")
  }

  nats_files = {
    nats_unit           = file("${local.root}/systemd/nats-server.service")
    render_script       = file("${local.root}/scripts/nats-render-config.sh")
    install_script      = file("${local.root}/scripts/install-nats-server.sh")
    nats_server_version = var.nats_server_version
    nats_server_sha256  = var.nats_server_sha256
    nats_server_url     = var.nats_server_url
  }

  # Logins (every host): root cannot log in over SSH; `ops` has the operators' keys. A list of keys
  # is YAML list items, each key one JSON (so YAML double-quoted) string.
  logins = {
    sshd_config    = file("${local.root}/ssh/10-captcha-pipeline.conf")
    admin_ssh_keys = join("\n", [for k in var.admin_ssh_keys : "- ${jsonencode(trimspace(k))}"])
  }

  # The deploy command's side of an app host: its user's keys, its sudo rule, the install script
  # that rule allows, and the keys whose release signatures that script accepts.
  deploy_files = {
    deploy_ssh_keys       = join("\n", [for k in var.deploy_ssh_keys : "- ${jsonencode(trimspace(k))}"])
    deploy_sudoers        = file("${local.root}/sudoers/captcha-pipeline-deploy")
    deploy_install_script = file("${local.root}/scripts/captcha-pipeline-install.sh")
    release_signers       = join("\n", [for k in var.release_signing_keys : "captcha-pipeline-release namespaces=\"captcha-pipeline-release\" ${trimspace(k)}"])
  }

  user_data = { for h in var.hosts : h.name => (
    h.role == "app" ? templatefile("${local.root}/cloud-init/app.yaml", merge(local.units, local.logins, local.deploy_files, {
      hostname     = h.name
      private_cidr = var.private_cidr
    })) :
    h.role == "nats" ? templatefile("${local.root}/cloud-init/nats.yaml", merge(local.nats_files, local.logins, {
      hostname     = h.name
      private_cidr = var.private_cidr
      nats_conf    = local.nats_conf[h.name]
    })) :
    h.role == "witness" ? templatefile("${local.root}/cloud-init/witness.yaml", merge(local.nats_files, local.logins, {
      hostname     = h.name
      private_cidr = var.private_cidr
      nats_conf    = local.witness_conf[h.name]
    })) :
    h.role == "monitoring" ? templatefile("${local.root}/cloud-init/monitoring.yaml", merge(local.logins, {
      hostname     = h.name
      private_cidr = var.private_cidr
    })) :
    templatefile("${local.root}/cloud-init/postgres.yaml", merge(local.logins, {
      hostname      = h.name
      private_cidr  = var.private_cidr
      postgres_conf = templatefile("${local.root}/postgres/captcha-pipeline.conf.tftpl", { private_ip = h.private_ip })
      pg_hba        = templatefile("${local.root}/postgres/pg_hba.conf.tftpl", { private_cidr = var.private_cidr })
    }))
  ) }
}

output "user_data" {
  description = "user-data (#cloud-config) by host name."
  value       = local.user_data
}
