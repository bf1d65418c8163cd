#!/usr/bin/env bash
# Install Slurm and munge for the cluster tests (tests/test_cluster.py; `make slurm`, run by
# `make test`): Debian's slurm-wlm (slurmctld, slurmd and the clients) and munge, with
# apt-get as root. Nothing is configured or started here: the tests write their own
# slurm.conf and munge key into a temporary directory and start (and stop) their own daemons.
# Already installed: does nothing. Not root, or no apt-get: says so and how to run the
# cluster tests, then exits 0 so that `make test` runs the rest (the cluster tests skip with
# the same reason), except in CI (CI set), where it fails: CI runs them.
set -euo pipefail
PATH=$PATH:/usr/sbin:/sbin  # the daemons' home, not on every user's PATH
missing=()
for prog in munged slurmctld slurmd srun scontrol sinfo squeue scancel; do
    command -v "$prog" >/dev/null 2>&1 || missing+=("$prog")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "[slurm] Slurm is not installed (${missing[*]} not found) and this is not root with" \
         "apt-get: the cluster tests (tests/test_cluster.py) will skip. To run them, as root:" \
         "make slurm (apt-get install slurm-wlm munge), then make test." >&2
    if [ -n "${CI:-}" ]; then exit 1; fi
    exit 0
fi

start=$(date +%s)
# The packages' postinst scripts would start system-wide munged / slurmctld / slurmd (with
# /etc's configuration): policy-rc.d 101 keeps them stopped. A container usually has one.
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\n# tools/install_slurm.sh: start no service while installing\nexit 101\n' \
        > /usr/sbin/policy-rc.d
    chmod 755 /usr/sbin/policy-rc.d
    trap 'rm -f /usr/sbin/policy-rc.d' EXIT
fi
export DEBIAN_FRONTEND=noninteractive
apt_install() { apt-get install -y -q --no-install-recommends slurm-wlm munge; }
# a fresh machine may have no package lists yet, or stale ones
apt_install || { apt-get update -q && apt_install; }
echo "[slurm] installed $(slurmd -V) and munge in $(( $(date +%s) - start )) s"
