variable "regions" {
  description = "The regions, each a Hetzner location, in the order every app shares (REGIONS): the last byte of a task id is its home's position here."
  type        = list(string)
  default     = ["fsn1", "hel1"]
  validation {
    condition     = length(var.regions) >= 1 && alltrue([for r in var.regions : can(regex("^[a-z0-9]+$", r))])
    error_message = "Regions are Hetzner locations: lower-case letters and digits (they become NATS subject tokens and stream names)."
  }
}

variable "witness_location" {
  description = "The third location, holding a witness node (the lease quorum no single region holds)."
  type        = string
  default     = "nbg1"
}

variable "witness_in_regions" {
  description = "Adds one witness node in each region's location: a 3-node witness cluster (fsn1, hel1, nbg1) instead of a single node whose loss fences every region."
  type        = bool
  default     = true
}

variable "leaf_hub_region" {
  description = "The region whose NATS servers accept the leafnode link (and advertise their address); the others connect to it."
  type        = string
  default     = "fsn1"
}

variable "network_zone" {
  description = "The Hetzner network zone of every location above (fsn1, nbg1 and hel1 are all eu-central)."
  type        = string
  default     = "eu-central"
}

variable "private_cidr" {
  description = "The private network; region k (1-based) gets 10.0.k.0/24, the witness nodes 10.0.100.0/24."
  type        = string
  default     = "10.0.0.0/16"
}

variable "admin_cidrs" {
  description = "Where SSH (22) may come from: the operators and the machine running the deploy command."
  type        = list(string)
  validation {
    condition     = length(var.admin_cidrs) > 0 && !contains(var.admin_cidrs, "0.0.0.0/0") && !contains(var.admin_cidrs, "::/0")
    error_message = "Name the admin networks; SSH is not opened to the whole internet."
  }
}

variable "ssh_key_names" {
  description = "Names of SSH keys already in the Hetzner project: the operators' keys, for every host's `ops` user (sudo; root cannot log in over SSH)."
  type        = list(string)
}

variable "deploy_ssh_keys" {
  description = "Public keys (\"ssh-ed25519 AAAA... comment\") of the machine that runs the deploy command: the app hosts' `deploy` user, whose sudo allows only the app units and the install script."
  type        = list(string)
  validation {
    condition     = length(var.deploy_ssh_keys) > 0 && alltrue([for k in var.deploy_ssh_keys : can(regex("^(ssh-ed25519|ecdsa-sha2-nistp(256|384|521)|ssh-rsa) [A-Za-z0-9+/]+={0,3}( [ -~]*)?$", trimspace(k)))])
    error_message = "One or more OpenSSH public keys, each on one line (\"ssh-ed25519 AAAA... comment\")."
  }
}

variable "release_signing_keys" {
  description = "Public keys of the release signing key(s) (npm run build --signing-key): the app hosts install a release only when its checksum is signed by one of them (allowed_signers)."
  type        = list(string)
  validation {
    condition     = length(var.release_signing_keys) > 0 && alltrue([for k in var.release_signing_keys : can(regex("^(ssh-ed25519|ecdsa-sha2-nistp(256|384|521)|ssh-rsa) [A-Za-z0-9+/]+={0,3}( [ -~]*)?$", trimspace(k)))])
    error_message = "One or more OpenSSH public keys, each on one line (\"ssh-ed25519 AAAA... comment\")."
  }
}

variable "host_keys" {
  description = "Per host name, its SSH host keys or their SHA256 fingerprints as recorded at its first boot (docs/deploy.md): the inventory's hostKeys, which the deploy pins. An app host without any is refused by the deploy."
  type        = map(list(string))
  default     = {}
}

variable "image" {
  type    = string
  default = "debian-12"
}

variable "app_count" {
  description = "App hosts per region (gateway, solvers, recovery on each)."
  type        = number
  default     = 2
}

variable "nats_count" {
  description = "NATS servers per region (a JetStream cluster: 3 survives one loss)."
  type        = number
  default     = 3
}

variable "postgres_count" {
  description = "Postgres hosts per region (1: a primary; replicas are not set up by this module)."
  type        = number
  default     = 1
}

variable "app_server_type" {
  type    = string
  default = "cx32"
}

variable "nats_server_type" {
  type    = string
  default = "cx22"
}

variable "postgres_server_type" {
  type    = string
  default = "cx32"
}

variable "witness_server_type" {
  type    = string
  default = "cx22"
}

variable "monitoring_server_type" {
  description = "The monitoring host (Prometheus with 30 days of samples, Alertmanager)."
  type        = string
  default     = "cx22"
}

variable "load_balancer_type" {
  type    = string
  default = "lb11"
}

variable "gateway_domains" {
  description = "Per region, the names its load balancer answers to (a managed TLS certificate is made for them; their zone must be in Hetzner DNS), e.g. { fsn1 = [\"fsn1.api.example.com\", \"api.example.com\"] }."
  type        = map(list(string))
}

variable "nats_server_version" {
  description = "nats-server release installed from GitHub on NATS and witness hosts (>= 2.14, docs/nats.md)."
  type        = string
  default     = "2.15.1"
}

variable "nats_server_sha256" {
  description = "sha256 of nats-server-v<version>-linux-amd64.tar.gz, from the release's SHA256SUMS."
  type        = string
  validation {
    condition     = can(regex("^[0-9a-f]{64}$", var.nats_server_sha256))
    error_message = "A sha256: 64 lower-case hex digits."
  }
}

variable "nats_server_url" {
  description = "Where the NATS hosts fetch that tarball (a mirror); empty: GitHub's release. Its sha256 is checked either way."
  type        = string
  default     = ""
}
