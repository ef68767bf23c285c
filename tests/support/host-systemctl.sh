#!/bin/sh
# A stand-in for `systemctl` on the deploy test's hosts. They are network namespaces, and systemd
# cannot run inside one, so this script plays the part of the units in infra/deploy/systemd: the same
# binaries (gateway and recovery through `current`, solver@<version> from its release), the same
# EnvironmentFile= list, the unit's LoadCredential= lines (read from the real unit file in
# <host>/units: each credential copied at start into run/credentials/<unit>/, 0400 in a 0500
# folder, named as systemd names it, and CREDENTIALS_DIRECTORY set; the folder removed at stop),
# stop with SIGTERM then SIGKILL. It lives in <host>/bin; the host's tree is <host>/opt (releases),
# <host>/etc (env files, credentials/), <host>/run (pid files, logs, credentials of running units).
# Verbs: start, stop, restart, is-active [--quiet], enable, disable, daemon-reload.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
root="$here/opt"
etc="$here/etc"
run="$here/run"
mkdir -p "$run"

verb=${1:?verb}
shift
quiet=0
if [ "${1:-}" = "--quiet" ]; then quiet=1; shift; fi
if [ "${1:-}" = "--now" ]; then shift; fi
[ "$verb" = "daemon-reload" ] && exit 0
unit=${1:?unit}
name=${unit%.service}
extra=""
case $name in
  gateway | recovery)
    exe="$root/$name/current/$name"
    envs="$etc/common.env $etc/$name.env"
    unitfile="$here/units/$name.service"
    ;;
  solver@*)
    version=${name#solver@}
    exe="$root/solver/releases/$version/solver"
    envs="$etc/common.env $etc/solver.env $etc/solver@$version.env"
    extra="SOLVER_VERSION=$version"
    unitfile="$here/units/solver@.service"
    ;;
  *)
    echo "unknown unit $unit" >&2
    exit 5
    ;;
esac
pidfile="$run/$name.pid"
creds="$run/credentials/$unit"

# systemd's LoadCredential=ID:PATH, with the production /etc/captcha-pipeline mapped to the host's
# etc/: a file becomes credential ID; a folder, each of its files ID_<file>. A missing source
# fails the start, as under systemd.
load_credentials() {
  rm -rf "$creds"
  mkdir -p "$creds"
  [ -f "$unitfile" ] || return 0
  sed -n 's/^LoadCredential=//p' "$unitfile" | while IFS=: read -r id path; do
    path="$etc/${path#/etc/captcha-pipeline/}"
    if [ -d "$path" ]; then
      for f in "$path"/*; do
        if [ -f "$f" ]; then cp "$f" "$creds/${id}_${f##*/}"; fi
      done
    elif [ -f "$path" ]; then
      cp "$path" "$creds/$id"
    else
      echo "$unit: credential $id: $path is missing" >&2
      return 1
    fi
  done
  chmod 0400 "$creds"/* 2>/dev/null || true
  chmod 0500 "$creds"
}

is_active() {
  [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null
}

stop() {
  if is_active; then
    pid=$(cat "$pidfile")
    kill -TERM "$pid" 2>/dev/null || true
    i=0
    while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 300 ]; do
      sleep 0.1
      i=$((i + 1))
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
  rm -rf "$creds"
}

start() {
  if is_active; then return 0; fi
  load_credentials
  (
    set -a
    for f in $envs; do
      # shellcheck disable=SC1090 # the env files are the host's own, as systemd's EnvironmentFile=
      if [ -f "$f" ]; then . "$f"; fi
    done
    if [ -n "$extra" ]; then export "${extra?}"; fi
    CREDENTIALS_DIRECTORY=$creds
    set +a
    cd /
    exec setsid "$exe"
  ) </dev/null >>"$run/$name.log" 2>&1 &
  echo "$!" >"$pidfile"
}

case $verb in
  start) start ;;
  stop) stop ;;
  restart)
    stop
    start
    ;;
  is-active)
    if is_active; then
      [ "$quiet" = 1 ] || echo active
    else
      [ "$quiet" = 1 ] || echo inactive
      exit 3
    fi
    ;;
  enable | disable) exit 0 ;;
  *)
    echo "unsupported verb $verb" >&2
    exit 2
    ;;
esac
