# One private network, one subnet per region and one for the witness nodes. fsn1, nbg1 and hel1
# share the eu-central network zone, so the regions reach each other (and the witness) over it:
# the leafnode link, the lease renewals and Postgres never cross the public internet.
resource "hcloud_network" "private" {
  name     = "captcha-pipeline"
  ip_range = var.private_cidr
}

resource "hcloud_network_subnet" "region" {
  for_each     = local.region_index
  network_id   = hcloud_network.private.id
  type         = "cloud"
  network_zone = var.network_zone
  ip_range     = cidrsubnet(var.private_cidr, 8, each.value)
}

resource "hcloud_network_subnet" "witness" {
  network_id   = hcloud_network.private.id
  type         = "cloud"
  network_zone = var.network_zone
  ip_range     = cidrsubnet(var.private_cidr, 8, 100)
}
