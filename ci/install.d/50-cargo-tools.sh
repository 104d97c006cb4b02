#!/usr/bin/env bash
# Cargo tools the checks use, pinned and built from crates.io with their lock files into
# $CI_CACHE/cargo-tools (about a minute once; a second run finds them and sends nothing):
#   cargo-machete 0.9.2 — unused dependencies (ci/checks.d/15-unused-deps.sh)
set -euo pipefail
: "${CI_CACHE:?}"
root="$CI_CACHE/cargo-tools"
if [ "$("$root/bin/cargo-machete" --version 2>/dev/null)" != "0.9.2" ]; then
    cargo install cargo-machete --version 0.9.2 --locked --root "$root"
fi
echo "cargo tools ready in $root"
