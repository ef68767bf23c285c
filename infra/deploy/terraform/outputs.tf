# What the deploy command reads (`terraform output -raw inventory > inventory.json`).
output "inventory" {
  description = "Every host: name, region (its location for witness nodes), roles, SSH address and login (deploy on app hosts, ops elsewhere), its pinned host keys (var.host_keys), private IP."
  value = jsonencode({
    hosts = [for name in sort(keys(local.hosts)) : {
      name      = name
      region    = local.hosts[name].region
      roles     = [local.hosts[name].role]
      ssh       = { host = hcloud_server.host[name].ipv4_address, user = local.hosts[name].role == "app" ? "deploy" : "ops", port = 22 }
      hostKeys  = lookup(var.host_keys, name, [])
      privateIp = local.hosts[name].private_ip
    }]
  })
}

output "load_balancers" {
  description = "Per region, the gateways' load balancer: its public addresses (for DNS) and its private address (the gateways' GATEWAY_TRUSTED_PROXIES)."
  value = { for r in var.regions : r => {
    ipv4 = hcloud_load_balancer.gateway[r].ipv4
    ipv6 = hcloud_load_balancer.gateway[r].ipv6
    # The address the gateways see requests come from: the one proxy whose X-Forwarded-For they believe.
    private_ip = hcloud_load_balancer_network.gateway[r].ip
  } }
}
