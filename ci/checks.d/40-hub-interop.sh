#!/usr/bin/env bash
# Interop of `minirun-hub serve` with the REAL huggingface_hub client, in both pinned venvs
# ($CI_CACHE/venv-hf2: 2.4.0, $CI_CACHE/venv-hf036: 0.36.2). Each version runs the same pytest
# suite (ci/hub_interop/test_interop.py) twice: LFS served directly (200) and LFS redirected (302)
# to the CDN-like second port. The server requires a bearer token (--token-file), pages model
# listings at 2 per page and offers multipart LFS uploads above 1 MiB. HF_ENDPOINT is set in the
# environment before Python imports huggingface_hub (it is read at import time).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CI_CACHE:=$PWD/ci/.cache}"

# Same feature set as `cargo test --workspace`, so nothing already built is rebuilt.
cargo build -q --workspace --bin minirun-hub
target=${CARGO_TARGET_DIR:-$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')}
bin="$target/debug/minirun-hub"

work=$(mktemp -d)
# Each server's pid goes to a file: start_server runs in a command substitution's subshell, where
# a shell array would be lost (the servers outlived the check before).
cleanup() {
    for f in "$work"/*.pid; do
        [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

token="hf_interop_$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$token" > "$work/token"

start_server() { # $1 = name, $2.. = extra flags; prints the endpoint
    local name=$1; shift
    "$bin" serve --init --root "$work/$name" --addr 127.0.0.1:0 --token-file "$work/token" \
        --lfs-chunk-size 1048576 --list-page-size 2 "$@" > "$work/$name.out" 2> "$work/$name.log" &
    echo $! > "$work/$name.pid"
    for _ in $(seq 1 100); do
        if grep -q '^listening on ' "$work/$name.out" 2>/dev/null; then
            sed -n 's/^listening on //p' "$work/$name.out" | head -1
            return 0
        fi
        sleep 0.1
    done
    echo "minirun-hub ($name) did not start:" >&2
    cat "$work/$name.log" >&2
    return 1
}

direct=$(start_server direct)
cdn=$(start_server cdn --cdn-addr 127.0.0.1:0)

fail=0
for venv in hf2 hf036; do
    py="$CI_CACHE/venv-$venv/bin/python"
    [ -x "$py" ] || { echo "missing $py (run ci/install.d/10-python.sh)"; exit 1; }
    case $venv in hf2) expect=2.4.0 ;; hf036) expect=0.36.2 ;; esac
    for mode in direct cdn; do
        endpoint=$direct
        [ "$mode" = cdn ] && endpoint=$cdn
        echo "--- huggingface_hub $expect, LFS $mode, $endpoint"
        home="$work/home-$venv-$mode"
        mkdir -p "$home"
        if ! env HF_ENDPOINT="$endpoint" HF_TOKEN="$token" HF_HOME="$home" HF_HUB_DISABLE_XET=1 \
            HF_HUB_DISABLE_TELEMETRY=1 HF_HUB_DISABLE_PROGRESS_BARS=1 HF_HUB_DISABLE_IMPLICIT_TOKEN=1 \
            INTEROP_TAG="$venv-$mode" EXPECT_HF_VERSION="$expect" \
            "$py" -m pytest -q -p no:cacheprovider ci/hub_interop/test_interop.py; then
            fail=1
        fi
    done
done

# The suite exercised both LFS transfers and the CDN hop, and the token never reached a log.
grep -q 'PUT /lfs-upload/[0-9a-f]*/part/' "$work/direct.log" || { echo "no multipart LFS upload seen"; fail=1; }
grep -Eq 'PUT /lfs-upload/[0-9a-f]{64}$' "$work/direct.log" || { echo "no basic LFS upload seen"; fail=1; }
grep -q 'CDN GET' "$work/cdn.log" || { echo "no CDN download seen"; fail=1; }
if grep -q 'auth=yes' "$work/cdn.log"; then echo "a client sent the token to the CDN origin"; fail=1; fi
if grep -qF "$token" "$work"/*.log "$work"/*.out; then echo "token found in server output"; fail=1; fi
exit $fail
