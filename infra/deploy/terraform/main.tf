# Hosts per role per region, the witness, their private addresses and their user-data.
locals {
  region_index = { for i, r in var.regions : r => i + 1 }

  # Private addresses: region k holds 10.0.k.0/24 (apps .10+, NATS .20+, Postgres .30+; the
  # monitoring host is .40 of the first region), the witness nodes 10.0.100.0/24.
  region_hosts = flatten([
    for r in var.regions : concat(
      [for i in range(var.app_count) : { name = "${r}-app-${i + 1}", region = r, location = r, role = "app", server_type = var.app_server_type, private_ip = cidrhost(cidrsubnet(var.private_cidr, 8, local.region_index[r]), 10 + i) }],
      [for i in range(var.nats_count) : { name = "${r}-nats-${i + 1}", region = r, location = r, role = "nats", server_type = var.nats_server_type, private_ip = cidrhost(cidrsubnet(var.private_cidr, 8, local.region_index[r]), 20 + i) }],
      [for i in range(var.postgres_count) : { name = "${r}-pg-${i + 1}", region = r, location = r, role = "postgres", server_type = var.postgres_server_type, private_ip = cidrhost(cidrsubnet(var.private_cidr, 8, local.region_index[r]), 30 + i) }],
    )
  ])

  witness_locations = concat([var.witness_location], var.witness_in_regions ? var.regions : [])
  witness_hosts = [for i, l in local.witness_locations : {
    name        = "${l}-witness-1"
    region      = l
    location    = l
    role        = "witness"
    server_type = var.witness_server_type
    private_ip  = cidrhost(cidrsubnet(var.private_cidr, 8, 100), 10 + i)
  }]

  # One monitoring host for the fleet (Prometheus, Alertmanager: infra/monitoring), in the first
  # region's subnet at .40; it scrapes every host over the private network.
  monitoring_hosts = [{
    name        = "${var.regions[0]}-mon-1"
    region      = var.regions[0]
    location    = var.regions[0]
    role        = "monitoring"
    server_type = var.monitoring_server_type
    private_ip  = cidrhost(cidrsubnet(var.private_cidr, 8, local.region_index[var.regions[0]]), 40)
  }]

  hosts = { for h in concat(local.region_hosts, local.witness_hosts, local.monitoring_hosts) : h.name => h }
}

module "userdata" {
  source              = "./modules/userdata"
  hosts               = [for h in values(local.hosts) : { name = h.name, region = h.region, role = h.role, private_ip = h.private_ip }]
  regions             = var.regions
  leaf_hub_region     = var.leaf_hub_region
  private_cidr        = var.private_cidr
  nats_server_version = var.nats_server_version
  nats_server_sha256  = var.nats_server_sha256
  nats_server_url     = var.nats_server_url
  # Root cannot log in over SSH: the operators' Hetzner keys go to the `ops` user.
  admin_ssh_keys       = [for k in data.hcloud_ssh_key.admin : k.public_key]
  deploy_ssh_keys      = var.deploy_ssh_keys
  release_signing_keys = var.release_signing_keys
}

data "hcloud_ssh_key" "admin" {
  for_each = toset(var.ssh_key_names)
  name     = each.value
}

resource "hcloud_server" "host" {
  for_each    = local.hosts
  name        = each.key
  server_type = each.value.server_type
  image       = var.image
  location    = each.value.location
  ssh_keys    = [for k in data.hcloud_ssh_key.admin : k.id]
  user_data   = module.userdata.user_data[each.key]
  firewall_ids = [
    hcloud_firewall.base.id,
    hcloud_firewall.role[each.value.role].id,
  ]
  labels = {
    app    = "captcha-pipeline"
    role   = each.value.role
    region = each.value.region
  }

  public_net {
    ipv4_enabled = true
    ipv6_enabled = true
  }

  # Every host is on the private network, at its planned address.
  network {
    network_id = hcloud_network.private.id
    ip         = each.value.private_ip
  }

  # user_data only runs at the first boot; a changed template must not replace a running host
  # (ship changes with the deploy command, or taint the host on purpose).
  lifecycle {
    ignore_changes = [user_data, ssh_keys, image]
  }

  depends_on = [hcloud_network_subnet.region, hcloud_network_subnet.witness]
}
