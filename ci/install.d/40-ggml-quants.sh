#!/usr/bin/env bash
# ggml's reference quantizers, compiled from the llama-cpp-python 0.3.36 sdist on PyPI, as the
# byte-parity oracle of `minirun-gguf quantize` (all targets, K-quants included). Idempotent: a
# built object whose fixture manifest verifies is kept (ci/oracles/build_ggml_quants.sh).
set -euo pipefail
: "${CI_CACHE:?}"
cd "$(dirname "$0")/../.."
PYTHON="$CI_CACHE/venv-gguf/bin/python" bash ci/oracles/build_ggml_quants.sh "$CI_CACHE/ggml-quants"
