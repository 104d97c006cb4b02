#!/usr/bin/env bash
# Quantize throughput: minirun's encoders vs ggml's C reference encoders (what llama-quantize
# --pure runs) on the same decoded tensors of a real GGUF. Not a CI step (documented command);
# results are recorded in docs/bench/gguf-quantize.md.
# Usage: ci/bench/gguf_quantize_bench.sh [MODEL.gguf]   (needs $CI_CACHE/venv-gguf and
# $CI_CACHE/ggml-quants from ci/install.d/40-ggml-quants.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CI_CACHE:=$PWD/ci/.cache}"
model=${1:-$CI_CACHE/SmolLM2-135M-Instruct.Q4_1.gguf}
types="q4_0 q8_0 q4_K q5_K q6_K"
cargo run -q --release -p tooling --example gguf_quantize_bench -- "$model" $types
"$CI_CACHE/venv-gguf/bin/python" ci/bench/gguf_quantize_bench.py "$CI_CACHE/ggml-quants/libggml-quants.so" "$model" $types
