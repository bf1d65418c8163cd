#!/usr/bin/env bash
# Install Debian's chromium for the docs site's browser check (tests/test_docs_site.py;
# `make browser`, run by `make test`), with apt-get as root. Already installed: does nothing.
# Not root, or no apt-get: says so and how to run the check, then exits 0 so that `make test`
# runs the rest (the check skips with the same reason), except in CI (CI set), where it fails.
set -euo pipefail
command -v chromium >/dev/null 2>&1 && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "[browser] chromium is not installed and this is not root with apt-get: the docs" \
         "site's browser check will skip. To run it, as root: make browser, then make test." >&2
    if [ -n "${CI:-}" ]; then exit 1; fi
    exit 0
fi
start=$(date +%s)
export DEBIAN_FRONTEND=noninteractive
apt_install() { apt-get install -y -q --no-install-recommends chromium; }
apt_install || { apt-get update -q && apt_install; }  # no or stale package lists
echo "[browser] installed chromium in $(( $(date +%s) - start )) s"
