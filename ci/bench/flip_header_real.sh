#!/usr/bin/env bash
# Every single-bit flip of one transfer of a real-shape header (issue 47's target; not a CI step:
# CI flips every bit of a tiny V4 layer shard's header, pipeline_v4::flips::every_single_bit_…).
# Generates `minirun-synth deepseek-v4 --shape real` (one main layer of upstream's per-layer
# dimensions with SCALE routed experts, 3.5 GB a shard at 256), imports it into a hub store at
# plans/tests/deepseek-v4-real-size.toml's pin, and flips each bit of layer 0's header in one
# transfer through the discovery read. Prints the bit count, header size and time.
#
#   [SCALE=256] ci/bench/flip_header_real.sh
#
# About 3 ms a bit on 2 cores (each bit is ~7 requests to an in-process hub): SCALE=16 (a ~20 KB
# header) takes minutes, SCALE=256 (~130 KB) hours.
# Needs ~2× the checkpoint in free disk under TMPDIR.
set -euo pipefail
cd "$(dirname "$0")/../.."
scale=${SCALE:-256}
plan=$PWD/plans/tests/deepseek-v4-real-size.toml
tmp=$(mktemp -d "${TMPDIR:-/tmp}/minirun-flip-real.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The dev profile the test runs in (workspace opt-level 1, dependencies 2): no release build.
cargo build --locked -p minirun-bins --bin minirun-synth --bin minirun-hub
bin=${CARGO_TARGET_DIR:-$PWD/target}/debug
"$bin/minirun-synth" deepseek-v4 --shape real --scale "$scale" --out "$tmp/ckpt" > /dev/null
read -r repo rev < <(python3 - "$plan" <<'PY'
import sys, tomllib
p = tomllib.load(open(sys.argv[1], "rb"))
s = p.get("source") or next(iter(p["sources"].values()))
print(s["repo"], s["revision"])
PY
)
"$bin/minirun-hub" import --root "$tmp/hub" --repo "$repo" --revision "$rev" "$tmp/ckpt" > /dev/null
shard=$(cd "$tmp/ckpt" && ls model-*.safetensors | sed -n 2p)
MINIRUN_FLIP_HUB_ROOT=$tmp/hub MINIRUN_FLIP_PLAN=$plan MINIRUN_FLIP_CKPT=$tmp/ckpt \
MINIRUN_FLIP_SHARD=$shard \
    cargo test --locked -p minirun-bins --test integration \
    pipeline_v4::flips::every_single_bit_flip_of_a_real_shape_header_ends_with_the_clean_header \
    -- --exact --ignored --nocapture
