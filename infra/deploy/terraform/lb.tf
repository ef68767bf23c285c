# One load balancer per region in front of its gateways: TLS on 443 with a managed certificate,
# forwarded as HTTP to the gateways' 8080 over the private network; a gateway is in rotation while
# GET /readyz/accepting answers 2xx (ready, and its region not fenced: a fenced region's LB then
# fails its own health and a health-checked DNS name moves off it; docs/deploy.md). DNS: point each name of var.gateway_domains[region] at that region's
# load balancer (outputs.tf: load_balancers); a global name (api.example.com) can list both
# regions' addresses, and clients retry on the other region (x-try-regions) when one is fenced.
resource "hcloud_managed_certificate" "gateway" {
  for_each     = toset(var.regions)
  name         = "captcha-pipeline-${each.key}"
  domain_names = var.gateway_domains[each.key]
}

resource "hcloud_load_balancer" "gateway" {
  for_each           = toset(var.regions)
  name               = "captcha-pipeline-${each.key}"
  load_balancer_type = var.load_balancer_type
  location           = each.key
  labels = {
    app    = "captcha-pipeline"
    region = each.key
  }
}

# Its private address (10.0.k.5) is where the gateways see every request come from: their one
# trusted proxy (GATEWAY_TRUSTED_PROXIES; `terraform output load_balancers`, private_ip).
resource "hcloud_load_balancer_network" "gateway" {
  for_each         = toset(var.regions)
  load_balancer_id = hcloud_load_balancer.gateway[each.key].id
  network_id       = hcloud_network.private.id
  ip               = cidrhost(cidrsubnet(var.private_cidr, 8, local.region_index[each.key]), 5)
  depends_on       = [hcloud_network_subnet.region]
}

resource "hcloud_load_balancer_service" "gateway" {
  for_each         = toset(var.regions)
  load_balancer_id = hcloud_load_balancer.gateway[each.key].id
  protocol         = "https"
  listen_port      = 443
  destination_port = 8080

  http {
    certificates  = [hcloud_managed_certificate.gateway[each.key].id]
    redirect_http = false
  }

  health_check {
    protocol = "http"
    port     = 8080
    interval = 5
    timeout  = 3
    retries  = 2
    http {
      path         = "/readyz/accepting"
      status_codes = ["2??"]
    }
  }
}

resource "hcloud_load_balancer_target" "gateway" {
  for_each         = { for name, h in local.hosts : name => h if h.role == "app" }
  type             = "server"
  load_balancer_id = hcloud_load_balancer.gateway[each.value.region].id
  server_id        = hcloud_server.host[each.key].id
  use_private_ip   = true
  depends_on       = [hcloud_load_balancer_network.gateway]
}
