#!/usr/bin/env bash
# minirun-gguf against gguf-py 0.19.0: legacy-quant byte parity per tensor, K-quant layout via
# gguf-py's dequantizer, and reader parity on the real SmolLM2 file (ci/oracles/gguf_parity.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CI_CACHE:?}"
py="$CI_CACHE/venv-gguf/bin/python"
real="${MINIRUN_SMOLLM2_GGUF:-$CI_CACHE/SmolLM2-135M-Instruct.Q4_1.gguf}"
[ -x "$py" ] || { echo "missing $py (run ci/install.d/10-python.sh)"; exit 1; }
[ -f "$real" ] || { echo "missing $real (run ci/install.d/10-python.sh)"; exit 1; }
cargo build -q -p minirun-bins --bin minirun-gguf
bin="${CARGO_TARGET_DIR:-target}/debug/minirun-gguf"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" ci/oracles/gguf_parity.py "$bin" "$real" "$work"
