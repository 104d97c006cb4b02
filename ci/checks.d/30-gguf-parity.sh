#!/usr/bin/env bash
# minirun-gguf against gguf-py 0.19.0 (legacy-quant byte parity per tensor, K-quant layout via
# gguf-py's dequantizer, reader parity on the real SmolLM2 file) and against ggml's own
# ggml-quants.c (every target byte-identical to quantize_row_*_ref; the compiled object is a
# fixture built by ci/install.d/40-ggml-quants.sh and verified against its manifest first), and
# --fp-contract fast against the same source built with -mfma -ffp-contract=fast.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CI_CACHE:?}"
py="$CI_CACHE/venv-gguf/bin/python"
real="${MINIRUN_SMOLLM2_GGUF:-$CI_CACHE/SmolLM2-135M-Instruct.Q4_1.gguf}"
[ -x "$py" ] || { echo "missing $py (run ci/install.d/10-python.sh)"; exit 1; }
[ -f "$real" ] || { echo "missing $real (run ci/install.d/10-python.sh)"; exit 1; }
cargo build -q --workspace --bin minirun-gguf
cargo build -q --workspace --example gguf_decode_low_bits
bin="${CARGO_TARGET_DIR:-target}/debug/minirun-gguf"
export MINIRUN_DECODE_LOW_BITS="${CARGO_TARGET_DIR:-target}/debug/examples/gguf_decode_low_bits"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
oracle="$CI_CACHE/ggml-quants"
[ -f "$oracle/manifest.json" ] || { echo "missing $oracle/manifest.json (run ci/install.d/40-ggml-quants.sh)"; exit 1; }
"$py" ci/oracles/check_fixture.py "$oracle/manifest.json"
"$py" ci/oracles/gguf_parity.py "$bin" "$real" "$work" "$oracle/libggml-quants.so" "$oracle/libggml-quants-fma.so"
