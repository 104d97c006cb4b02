#!/usr/bin/env bash
# Kimi's tokenizer (issue 50 item 3): Python `tiktoken` 0.12.0 (venv-tiktoken), built as
# Moonshot's tokenization_kimi.py builds it, encodes the texts of ci/oracles/kimi_tokenizer.py
# over the generated K3 checkpoint's tiktoken.model exactly as
# ci/oracles/kimi_tokenizer.recorded.json says; runner/tests/kimi_tokenizer.rs holds minirun's
# conversion (runner::kimi::tokenizer) to the same file. A light reference: it runs live.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cargo build -q --locked --workspace --bin minirun-synth
"${CARGO_TARGET_DIR:-target}/debug/minirun-synth" kimi-k3 --out "$tmp/k3" > /dev/null 2> "$tmp/synth.err" \
    || { cat "$tmp/synth.err"; exit 1; }
"$CI_CACHE/venv-tiktoken/bin/python" ci/oracles/kimi_tokenizer.py "$tmp/k3/tiktoken.model" --check
