#!/bin/sh
# A stand-in for `systemctl` on the deploy test's hosts. They are network namespaces, and systemd
# cannot run inside one, so this script plays the part of the units in infra/deploy/systemd: the same
# binaries (gateway and recovery through `current`, solver@<version> from its release), the same
# EnvironmentFile= list, stop with SIGTERM then SIGKILL. It lives in <host>/bin; the host's tree is
# <host>/opt (releases), <host>/etc (env files), <host>/run (pid files and logs).
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
    ;;
  solver@*)
    version=${name#solver@}
    exe="$root/solver/releases/$version/solver"
    envs="$etc/common.env $etc/solver.env $etc/solver@$version.env"
    extra="SOLVER_VERSION=$version"
    ;;
  *)
    echo "unknown unit $unit" >&2
    exit 5
    ;;
esac
pidfile="$run/$name.pid"

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
}

start() {
  if is_active; then return 0; fi
  (
    set -a
    for f in $envs; do
      # shellcheck disable=SC1090 # the env files are the host's own, as systemd's EnvironmentFile=
      if [ -f "$f" ]; then . "$f"; fi
    done
    if [ -n "$extra" ]; then export "${extra?}"; fi
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
