#!/usr/bin/env bash
# Build a finished, gated K3- or H3-style release from the generated checkpoint (not a CI step;
# the same flow is tested by `cargo test -p minirun-bins --test integration pipeline_styles::`):
#
#   ci/styles/release.sh kimi-k3|minimax-h3 WORK_DIR [SCALE]
#
# minirun-synth FAMILY → minirun-hub import (each upstream repository of the style plan, at its
# pinned revision) → minirun-hub serve on loopback → minirun-fetch → minirun-repack → minirun-gate
# with plans/tests/FAMILY-style.toml. The release is WORK_DIR/release (tile containers: mxfp4 for
# K3, affine with bf16 scales/biases for H3; plain streams; manifests; index.json), the gate
# report WORK_DIR/reports/gate.json; exits with the gate's code (0 PASS). Uses the binaries in
# $CARGO_TARGET_DIR/debug (building them with `cargo build -p minirun-bins --bins` first).
# SCALE (default 1) grows the checkpoint; the checked-in plans expect scale 1 (H3: 2 blocks).
set -euo pipefail
cd "$(dirname "$0")/../.."
family=${1:?usage: ci/styles/release.sh kimi-k3|minimax-h3 WORK_DIR [SCALE]}
work=${2:?usage: ci/styles/release.sh kimi-k3|minimax-h3 WORK_DIR [SCALE]}
scale=${3:-1}
plan=plans/tests/$family-style.toml
[ -f "$plan" ] || { echo "error: no style plan \`$plan\`" >&2; exit 64; }
: "${CARGO_TARGET_DIR:=$PWD/target}"
cargo build -q -p minirun-bins --bins
bin=$CARGO_TARGET_DIR/debug
tmp=$(mktemp -d /tmp/minirun-style.XXXXXX)
trap 'kill "${hub_pid:-0}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
# `repo = …` / `revision = …` of the plan's sources, in order (one `[source]` or several).
mapfile -t repos < <(sed -n 's/^repo = "\(.*\)"/\1/p' "$plan" | grep -v -- '-minirun$')
mapfile -t revs < <(sed -n 's/^revision = "\(.*\)"/\1/p' "$plan")
"$bin/minirun-synth" "$family" --out "$tmp/ckpt" --scale "$scale" > /dev/null
declare -A seen
for i in "${!repos[@]}"; do
    repo=${repos[$i]}
    [ -n "${seen[$repo]:-}" ] && continue
    seen[$repo]=1
    case $family/$repo in
        kimi-k3/*) dir=$tmp/ckpt ;;
        minimax-h3/*MLX*) dir=$tmp/ckpt/pipenetwork--MiniMax-H3-MLX-8bit ;;
        minimax-h3/*) dir=$tmp/ckpt/MiniMaxAI--MiniMax-H3 ;;
    esac
    "$bin/minirun-hub" import --root "$tmp/hub" --repo "$repo" --revision "${revs[$i]}" "$dir" > /dev/null
done
"$bin/minirun-hub" serve --init --root "$tmp/hub" --addr 127.0.0.1:0 > "$tmp/hub.out" 2> /dev/null &
hub_pid=$!
for _ in $(seq 100); do grep -q listening "$tmp/hub.out" && break; sleep 0.1; done
url=$(sed -n 's/^listening on //p' "$tmp/hub.out")
"$bin/minirun-fetch" --plan "$plan" --work-dir "$work" --endpoint "$url"
"$bin/minirun-repack" --plan "$plan" --work-dir "$work"
"$bin/minirun-gate" --plan "$plan" --work-dir "$work"
