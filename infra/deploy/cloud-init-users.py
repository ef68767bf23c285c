# What cloud-init's users-and-groups module would run for a user-data file, without running it:
# the real module (cc_users_groups) and the real Debian distro code, with every call that would
# touch the machine (useradd, groupadd, passwd, sudoers, authorized_keys) recorded instead.
# The user-data is merged over the package's /etc/cloud/cloud.cfg the way cloud-init merges them
# (user-data first; a top-level list such as `users` replaces the image's), so the image's
# `users: [default]` and its `default_user` (`debian`, passwordless sudo) count as on a real boot.
#
# Usage: python3 cloud-init-users.py <cloud.cfg> <user-data.yaml>
# Prints JSON: {"calls": [["useradd", ...], ["groupadd", ...], ...], "sudo": {"<user>": rules}, "keys": [...]}
import json
import sys

import yaml
from cloudinit import subp, util
from cloudinit.config import cc_users_groups
from cloudinit.distros import debian, ssh_util

calls = []
sudo = {}
keys = []


def record(args, *_a, **_k):
    calls.append([str(a) for a in args])
    return ("", "")


subp.subp = record
# A fresh Debian image: root is there, no other user or group of ours.
util.is_user = lambda name: name == "root"
util.is_group = lambda name: name == "root"
util.system_is_snappy = lambda: False
ssh_util.setup_user_keys = lambda ks, user, *_a, **_k: keys.append(user)
debian.Distro.write_sudo_rules = lambda _self, user, rules, *_a, **_k: sudo.__setitem__(user, rules)


class Cloud:
    def __init__(self, distro):
        self.distro = distro

    def get_public_ssh_keys(self):
        return ["ssh-ed25519 AAAA test"]


with open(sys.argv[1]) as f:
    base = yaml.safe_load(f)
with open(sys.argv[2]) as f:
    user_data = yaml.safe_load(f)
cfg = util.mergemanydict([user_data, base])
distro = debian.Distro("debian", cfg.get("system_info", {}), None)
cc_users_groups.handle("users_groups", cfg, Cloud(distro), None, [])
print(json.dumps({"calls": calls, "sudo": sudo, "keys": keys}))
