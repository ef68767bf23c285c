#!/bin/bash
# nats-render-config TEMPLATE PASSWORDS OUTPUT
#
# Installed on NATS and witness hosts as /usr/local/lib/captcha-pipeline/nats-render-config and run
# as root by nats-server.service (ExecStartPre=+) before every start. Renders the server's config
# from the template cloud-init wrote (/etc/nats/nats.conf.tmpl, topology filled in by Terraform):
#   @@BCRYPT:<name>@@    -> the bcrypt hash (cost 11) of <name>'s password (a user of this server)
#   @@PASSWORD:<name>@@  -> the password itself (the other region's leaf user, in a leafnode remote URL)
# PASSWORDS holds `<name>=<password>` lines, mode 0600, owned by root (docs/deploy.md, "Secrets").
# The output (0640 root:nats) is checked with `nats-server -t` before it replaces the old one.
set -euo pipefail
umask 077

die() {
  echo "nats-render-config: $*" >&2
  exit 1
}

[[ $# -eq 3 ]] || die "usage: nats-render-config TEMPLATE PASSWORDS OUTPUT"
template=$1
passwords=$2
output=$3
nats_server=${NATS_SERVER_BIN:-/usr/local/bin/nats-server}

[[ -r $template ]] || die "$template: not readable"
[[ -r $passwords ]] || die "$passwords: not readable"
mode=$(stat -c '%a %U' "$passwords")
[[ $mode == "600 root" ]] || die "$passwords: must be mode 600 and owned by root (is: $mode)"
command -v htpasswd >/dev/null || die "htpasswd not found (Debian package apache2-utils)"

declare -A pw=()
while IFS= read -r line || [[ -n $line ]]; do
  [[ -z $line || $line == \#* ]] && continue
  name=${line%%=*}
  value=${line#*=}
  [[ $name =~ ^[a-z0-9_]+$ ]] || die "$passwords: bad name '$name' (lower-case letters, digits, _)"
  # URL-safe, as the dev stack makes them (18 random bytes, base64url): they go into leafnode URLs.
  [[ $value =~ ^[A-Za-z0-9_-]{16,}$ ]] || die "$passwords: the password of '$name' must be 16+ characters of A-Z a-z 0-9 _ -"
  pw[$name]=$value
done <"$passwords"

content=$(<"$template")
pattern='@@(BCRYPT|PASSWORD):([a-z0-9_]+)@@'
while [[ $content =~ $pattern ]]; do
  placeholder=${BASH_REMATCH[0]}
  kind=${BASH_REMATCH[1]}
  name=${BASH_REMATCH[2]}
  [[ -n ${pw[$name]:-} ]] || die "$passwords: no password for '$name' (the template names it)"
  if [[ $kind == BCRYPT ]]; then
    # -i: the password comes on stdin, never on a command line; the output is "x:<hash>".
    hash=$(printf '%s' "${pw[$name]}" | htpasswd -niBC 11 x)
    value=${hash#x:}
  else
    value=${pw[$name]}
  fi
  content=${content//"$placeholder"/"$value"}
done

tmp=$(mktemp "${output}.XXXXXX")
trap 'rm -f "$tmp"' EXIT
printf '%s\n' "$content" >"$tmp"
chown root:nats "$tmp"
chmod 0640 "$tmp"
"$nats_server" -t -c "$tmp" >/dev/null || die "$nats_server -t refused the rendered config (left unchanged: $output)"
mv -f "$tmp" "$output"
trap - EXIT
