terraform {
  required_version = ">= 1.5"
  required_providers {
    hcloud = {
      source  = "hetznercloud/hcloud"
      version = "~> 1.49"
    }
  }
}

# HCLOUD_TOKEN from the environment (docs/deploy.md, "First apply").
provider "hcloud" {}
