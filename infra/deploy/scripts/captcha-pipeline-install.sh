#!/bin/bash
# captcha-pipeline-install: the root side of a deploy (infra/deploy/deploy.ts), installed by
# cloud-init on app hosts as /usr/local/sbin/captcha-pipeline-install (0755 root:root). The deploy
# logs in as `deploy`, whose sudo allows this script and the app units' systemctl verbs and nothing
# else (/etc/sudoers.d/captcha-pipeline-deploy): every file a deploy changes as root is changed
# here, each argument checked first. A release is installed only when its checksum line carries a
# good signature by a key of $SIGNERS (ssh-keygen -Y verify) and the binary received matches it.
#
#   release <app> <version> <arch> <sha256> <signature>   the binary on stdin; <signature> is the
#                                    base64 of `npm run build`'s <binary>.sha256.sig
#   switch <app> <version>           current -> releases/<version> (gateway, recovery, rollout)
#   ports                            "gateway <GATEWAY_PORT>", "solver@<version> <METRICS_PORT>" lines
#   solver-port <version> <port>     gives solver@<version>.env a METRICS_PORT unless it has one
#   prune <app> <version>...         removes those releases (never `current`), a solver's env file too
#   credentials <app>                `<NAME> <base64>` lines on stdin (never arguments) into
#                                    $ETC/credentials/<app>/NAME, 0600 root (LoadCredential= of the unit)
set -euo pipefail

# The test hosts (tests/support/ssh-hosts.ts) change these three lines and nothing else.
ROOT=/opt/captcha-pipeline
ETC=/etc/captcha-pipeline
SIGNERS=/etc/captcha-pipeline-release/allowed_signers

# What `npm run build` signs with (infra/build.ts: SIGNATURE_NAMESPACE, SIGNER_PRINCIPAL).
NAMESPACE=captcha-pipeline-release
PRINCIPAL=captcha-pipeline-release
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
umask 022

die() {
  local code=$1
  shift
  echo "captcha-pipeline-install: $*" >&2
  exit "$code"
}

check_app() {
  [[ $1 =~ ^(gateway|solver|recovery|rollout)$ ]] || die 2 "app must be gateway, solver, recovery or rollout (got '$1')"
}
check_version() {
  [[ $1 =~ ^[a-z0-9_]{1,32}$ ]] || die 2 "version: 1-32 lower-case letters, digits and '_' (got '$1')"
}

release() {
  [[ $# -eq 5 ]] || die 2 "usage: release <app> <version> <arch> <sha256> <signature-base64>"
  local app=$1 version=$2 arch=$3 sum=$4 sig=$5
  check_app "$app"
  check_version "$version"
  [[ $arch =~ ^(x64|arm64)$ ]] || die 2 "arch must be x64 or arm64 (got '$arch')"
  [[ $sum =~ ^[0-9a-f]{64}$ ]] || die 2 "sha256: 64 lower-case hex digits"
  [[ $sig =~ ^[A-Za-z0-9+/]+=*$ ]] || die 2 "signature: base64 of the .sha256.sig file"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  # The line `npm run build` wrote and signed: the signature covers the app, version and arch.
  local name="$app-$version-linux-$arch"
  printf '%s  %s\n' "$sum" "$name" >"$work/sum"
  base64 -d <<<"$sig" >"$work/sum.sig" 2>/dev/null || die 2 "signature: not base64"
  if ! ssh-keygen -Y verify -f "$SIGNERS" -I "$PRINCIPAL" -n "$NAMESPACE" -s "$work/sum.sig" <"$work/sum" >"$work/verify" 2>&1; then
    die 4 "signature refused for $name, nothing installed: $(tail -n 1 "$work/verify")"
  fi
  local rel="$ROOT/$app/releases/$version"
  local fresh=0
  [[ -d $rel ]] || fresh=1
  mkdir -p "$rel"
  local partial="$rel/.$app.partial"
  cat >"$partial"
  local got
  got=$(sha256sum <"$partial" | cut -d' ' -f1)
  if [[ $got != "$sum" ]]; then
    rm -f "$partial"
    if [[ $fresh -eq 1 ]]; then rmdir "$rel"; fi
    die 3 "checksum mismatch, nothing installed: the binary received has sha256 $got, its signed checksum says $sum"
  fi
  chmod 0755 "$partial"
  install -m 0644 "$work/sum" "$rel/$app.sha256"
  install -m 0644 "$work/sum.sig" "$rel/$app.sha256.sig"
  mv -f "$partial" "$rel/$app"
  touch "$rel"
  echo "installed $name: signature good, sha256 $sum"
}

switch() {
  [[ $# -eq 2 ]] || die 2 "usage: switch <app> <version>"
  check_app "$1"
  check_version "$2"
  [[ $1 != solver ]] || die 2 "the solver has no current release (one unit per version)"
  [[ -x $ROOT/$1/releases/$2/$1 ]] || die 2 "$1 has no release $2"
  ln -sfn "releases/$2" "$ROOT/$1/.current.new"
  mv -T "$ROOT/$1/.current.new" "$ROOT/$1/current"
}

# The last NAME=<digits> line of the files given (systemd's EnvironmentFile= order: the last wins).
port_in() {
  local name=$1
  shift
  sed -n "s/^$name=\\([0-9][0-9]*\\)[[:space:]]*\$/\\1/p" "$@" 2>/dev/null | tail -n 1
}

ports() {
  [[ $# -eq 0 ]] || die 2 "usage: ports"
  local port f v
  port=$(port_in GATEWAY_PORT "$ETC/common.env" "$ETC/gateway.env")
  echo "gateway ${port:-8080}"
  for f in "$ETC"/solver@*.env; do
    [[ -f $f ]] || continue
    v=${f##*/solver@}
    v=${v%.env}
    [[ $v =~ ^[a-z0-9_]{1,32}$ ]] || continue
    port=$(port_in METRICS_PORT "$f")
    if [[ -n $port ]]; then echo "solver@$v $port"; fi
  done
}

solver_port() {
  [[ $# -eq 2 ]] || die 2 "usage: solver-port <version> <port>"
  check_version "$1"
  [[ $2 =~ ^[1-9][0-9]{3,4}$ && $2 -ge 1024 && $2 -le 65535 ]] || die 2 "port: 1024-65535 (got '$2')"
  local f="$ETC/solver@$1.env"
  if [[ -n $(port_in METRICS_PORT "$f") ]]; then return 0; fi
  # Env files are 0600 root (systemd reads them before dropping privileges); an existing file's
  # other settings stay.
  (
    umask 077
    printf 'METRICS_PORT=%s\n' "$2" >>"$f"
  )
}

prune() {
  [[ $# -ge 2 ]] || die 2 "usage: prune <app> <version>..."
  local app=$1 v current
  shift
  check_app "$app"
  current=$(readlink "$ROOT/$app/current" || true)
  for v in "$@"; do
    check_version "$v"
    [[ $current != "releases/$v" ]] || die 2 "$v is $app's current release: not pruned"
  done
  for v in "$@"; do
    rm -rf "${ROOT:?}/$app/releases/$v"
    if [[ $app == solver ]]; then rm -f "$ETC/solver@$v.env"; fi
  done
}

credentials() {
  [[ $# -eq 1 ]] || die 2 "usage: credentials <app>   (<NAME> <base64> lines on stdin)"
  check_app "$1"
  local dir="$ETC/credentials/$1" new="$ETC/credentials/.$1.new" name b64 f n=0 changed=""
  rm -rf "$new"
  install -d -m 0700 -o root -g root "$ETC/credentials" "$new"
  while read -r name b64 || [[ -n $name ]]; do
    [[ $name =~ ^[A-Z][A-Z0-9_]{0,63}$ && $b64 =~ ^[A-Za-z0-9+/]*=*$ ]] || die 2 "credentials: a line is not NAME base64"
    (umask 077 && base64 -d <<<"$b64" >"$new/$name") || die 2 "credential $name: not base64"
    n=$((n + 1))
  done
  [[ $n -gt 0 ]] || die 2 "credentials of $1: none on stdin"
  for f in "$new"/* "$dir"/*; do
    if [[ -f $f ]] && ! cmp -s "$new/${f##*/}" "$dir/${f##*/}" && [[ $changed != *" ${f##*/}"* ]]; then changed+=" ${f##*/}"; fi
  done
  # The folder swapped whole: a name no longer sent is gone.
  rm -rf "$dir.old"
  if [[ -d $dir ]]; then mv -T "$dir" "$dir.old"; fi
  mv -T "$new" "$dir"
  rm -rf "$dir.old"
  echo "credentials of $1: $n in place,${changed:+ changed:}${changed:- none changed}"
}

[[ $(id -u) -eq 0 ]] || die 1 "run it as root (sudo)"
cmd=${1:-}
[[ $# -eq 0 ]] || shift
case $cmd in
  release) release "$@" ;;
  switch) switch "$@" ;;
  ports) ports "$@" ;;
  solver-port) solver_port "$@" ;;
  prune) prune "$@" ;;
  credentials) credentials "$@" ;;
  *) die 2 "usage: captcha-pipeline-install release|switch|ports|solver-port|prune|credentials ..." ;;
esac
