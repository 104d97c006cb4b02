#!/usr/bin/env bash
# The DeepSeek V4 transformers reference fixture (ci/oracles/deepseek_v4/, produced offline by
# ci/oracles/deepseek_v4_transformers.sh; CI has no torch): its files match the recorded manifest,
# its logits/argmax/margins/counters are self-consistent and prove the hard paths, and the default
# checkpoint that minirun-synth writes today is byte-identical to the one the reference ran on.
# Then §3 of docs/deepseek-v4-reference.md, written out in float64 numpy, must reproduce the
# recorded float64 rows and every recorded choice. The comparison with our runner is a runner test.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CI_CACHE:?}"
py="$CI_CACHE/venv-gguf/bin/python"
[ -x "$py" ] || { echo "missing $py (run ci/install.d/10-python.sh)"; exit 1; }
"$py" ci/oracles/check_fixture.py ci/oracles/deepseek_v4/manifest.json
cargo build -q --workspace --bin minirun-synth
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"${CARGO_TARGET_DIR:-target}/debug/minirun-synth" deepseek-v4 --out "$work/ckpt" >/dev/null
"$py" ci/oracles/deepseek_v4_check.py ci/oracles/deepseek_v4 "$work/ckpt"
# docs/deepseek-v4-reference.md §3 in float64 numpy against the recorded transformers rows/choices
"$py" ci/oracles/deepseek_v4_numpy.py "$work/ckpt" ci/oracles/deepseek_v4
