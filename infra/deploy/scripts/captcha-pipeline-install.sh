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
#   credentials <app>                the app's credentials, `<NAME> <base64 of the value>` lines on
#                                    stdin (never arguments: a command line is visible to every
#                                    user), into $ETC/credentials/<app>/NAME, 0600 root:root, in a
#                                    0700 root folder; rollout's other regions' under regions/. The
#                                    units hand them over with LoadCredential= (infra/deploy/systemd).
#                                    A name no longer sent is removed. Prints names, never a value.
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

# One credential: its value (base64 on the line read) into a fresh 0600 file renamed over the old.
# Sets put_changed=1 when the value changed.
put_changed=0
put_credential() {
  local dir=$1 name=$2 b64=$3 file new
  file="$dir/$name"
  new="$dir/.${name//\//_}.new"
  rm -f "$new"
  (
    umask 077
    base64 -d <<<"$b64" >"$new" 2>/dev/null
  ) || {
    rm -f "$new"
    die 2 "credential $name: not base64"
  }
  chown root:root "$new"
  chmod 0600 "$new"
  put_changed=0
  if [[ -f $file ]] && cmp -s "$new" "$file"; then
    rm -f "$new"
  else
    mv -f "$new" "$file"
    put_changed=1
  fi
}

credentials() {
  [[ $# -eq 1 ]] || die 2 "usage: credentials <app>   (<NAME> <base64> lines on stdin)"
  local app=$1 dir name b64 count=0 bytes=0 changed=() kept=() f rel
  check_app "$app"
  dir="$ETC/credentials/$app"
  install -d -m 0700 -o root -g root "$ETC/credentials" "$dir"
  if [[ $app == rollout ]]; then install -d -m 0700 -o root -g root "$dir/regions"; fi
  while IFS=' ' read -r name b64 || [[ -n $name ]]; do
    [[ -n $name ]] || continue
    if [[ $app == rollout ]]; then
      [[ $name =~ ^(regions/)?[A-Z][A-Z0-9_]{0,63}$ ]] || die 2 "credential name: a setting's (NAME or regions/NAME), got '$name'"
    else
      [[ $name =~ ^[A-Z][A-Z0-9_]{0,63}$ ]] || die 2 "credential name: a setting's (NAME), got '$name'"
    fi
    [[ $b64 =~ ^[A-Za-z0-9+/]*=*$ ]] || die 2 "credential $name: not base64"
    bytes=$((bytes + ${#b64}))
    # systemd loads at most 1 MB of credentials per unit.
    [[ $bytes -le 1000000 ]] || die 2 "credentials of $app: more than systemd's 1 MB"
    put_credential "$dir" "$name" "$b64"
    if [[ $put_changed -eq 1 ]]; then changed+=("$name"); fi
    kept+=("$name")
    count=$((count + 1))
  done
  [[ $count -gt 0 ]] || die 2 "credentials of $app: none on stdin"
  for f in "$dir"/* "$dir"/regions/*; do
    [[ -f $f ]] || continue
    rel=${f#"$dir"/}
    if [[ " ${kept[*]} " != *" $rel "* ]]; then
      rm -f "$f"
      changed+=("$rel (removed)")
    fi
  done
  if [[ ${#changed[@]} -gt 0 ]]; then
    echo "credentials of $app: $count in place, changed: ${changed[*]}"
  else
    echo "credentials of $app: $count in place, none changed"
  fi
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
