#!/bin/bash
# install-nats-server VERSION SHA256 [URL]
#
# Run once by cloud-init (runcmd) on NATS and witness hosts: downloads nats-server's release tarball
# for linux-amd64 from GitHub (or URL, when given and not empty: a mirror of the same tarball), checks it against SHA256 (from the release's SHA256SUMS, pinned in
# Terraform: var.nats_server_sha256) and installs the binary as /usr/local/bin/nats-server.
# Debian 12's own package (2.9.10) is too old for the project (>= 2.14, see docs/nats.md).
set -euo pipefail

die() {
  echo "install-nats-server: $*" >&2
  exit 1
}

[[ $# -eq 2 || $# -eq 3 ]] || die "usage: install-nats-server VERSION SHA256 [URL]"
version=${1#v}
sha256=$2
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "bad version '$1'"
[[ $sha256 =~ ^[0-9a-f]{64}$ ]] || die "bad sha256 '$sha256'"

if [[ -x /usr/local/bin/nats-server ]] && /usr/local/bin/nats-server --version | grep -qF "v${version}"; then
  echo "install-nats-server: v${version} already installed"
  exit 0
fi

name="nats-server-v${version}-linux-amd64"
# An empty third argument (Terraform's default nats_server_url) means GitHub's release.
url=${3:-"https://github.com/nats-io/nats-server/releases/download/v${version}/${name}.tar.gz"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

curl -fsSL --retry 5 --retry-delay 3 -o "$work/${name}.tar.gz" "$url"
echo "${sha256}  $work/${name}.tar.gz" | sha256sum --check --strict --quiet - || die "sha256 mismatch for $url"
tar -xzf "$work/${name}.tar.gz" -C "$work"
install -o root -g root -m 0755 "$work/${name}/nats-server" /usr/local/bin/nats-server
/usr/local/bin/nats-server --version
