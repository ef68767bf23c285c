# Hetzner Cloud firewalls filter the PUBLIC interfaces only; a host with a firewall attached drops
# every inbound public packet no rule admits. The private network is not filtered by them: there
# each host's nftables ruleset (cloud-init) admits only what its role serves, from var.private_cidr.
# The private-network rules below repeat that intent (and are what the policy test reads): no
# NATS (4222/6222/7422) or Postgres (5432) port is ever opened to 0.0.0.0/0 or ::/0. The gateways
# are public only through their region's load balancer (443, lb.tf), never directly.

resource "hcloud_firewall" "base" {
  name = "captcha-pipeline-base"

  rule {
    description = "SSH from the admin networks (operators, the deploy command)"
    direction   = "in"
    protocol    = "tcp"
    port        = "22"
    source_ips  = var.admin_cidrs
  }

  rule {
    description = "ICMP (path MTU discovery, ping)"
    direction   = "in"
    protocol    = "icmp"
    source_ips  = ["0.0.0.0/0", "::/0"]
  }
}

locals {
  # Ports each role serves on the private network.
  role_ports = {
    app      = ["8080", "9464-9479"]
    nats     = ["4222", "6222", "7422"]
    postgres = ["5432"]
    witness  = ["4222", "6222"]
    # Nothing: it scrapes the others (outbound); its UIs are on loopback (ssh -L).
    monitoring = []
  }
}

resource "hcloud_firewall" "role" {
  for_each = local.role_ports
  name     = "captcha-pipeline-${each.key}"

  dynamic "rule" {
    for_each = each.value
    content {
      description = "${each.key} ${rule.value} from the private network"
      direction   = "in"
      protocol    = "tcp"
      port        = rule.value
      source_ips  = [var.private_cidr]
    }
  }
}
