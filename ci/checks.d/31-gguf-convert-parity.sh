#!/usr/bin/env bash
# `minirun-gguf convert` against llama.cpp's convert_hf_to_gguf.py, by recorded digests: the tiny
# random Qwen2/Qwen3 checkpoints are regenerated without torch (ci/oracles/tiny_qwen_ckpt.py, from
# the cached SmolLM2 GGUF's tokenizer), converted to f16/bf16/f32, and every tensor payload and
# metadata value is compared with ci/oracles/convert-hf.recorded.json (written by
# ci/oracles/convert_hf.sh; llama.cpp and torch never run in CI).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CI_CACHE:?}"
py="$CI_CACHE/venv-gguf/bin/python"
real="${MINIRUN_SMOLLM2_GGUF:-$CI_CACHE/SmolLM2-135M-Instruct.Q4_1.gguf}"
[ -x "$py" ] || { echo "missing $py (run ci/install.d/10-python.sh)"; exit 1; }
[ -f "$real" ] || { echo "missing $real (run ci/install.d/10-python.sh)"; exit 1; }
cargo build -q --workspace --bin minirun-gguf
bin="${CARGO_TARGET_DIR:-target}/debug/minirun-gguf"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" ci/oracles/tiny_qwen_ckpt.py "$real" "$work/ckpt" >/dev/null
mkdir -p "$work/ours"
for a in qwen2 qwen3; do for t in f16 bf16 f32; do
    "$bin" convert "$work/ckpt/$a" "$work/ours/$a-$t.gguf" --outtype "$t" >/dev/null
done; done
"$py" ci/oracles/convert_parity.py check ci/oracles/convert-hf.recorded.json "$work/ckpt" "$work/ours"
