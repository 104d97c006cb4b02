#!/usr/bin/env bash
# Re-derives the DeepSeek V4 reference fixture ci/oracles/deepseek_v4/{logits.npy,reference.json}:
# builds minirun-synth, generates the default tiny V4 checkpoint (seed 0, scale 1), dequantizes it
# exactly to float32 and runs transformers' eager DeepseekV4ForCausalLM on it in float32 (and f64
# for the noise figure). Creates the venv with exact pins if absent (torch is a ~1 GB download).
# Not a CI step (CI has no torch): ci/checks.d/50-deepseek-v4-fixture.sh re-checks the digests.
# Takes ~6 min on 2 cores. See docs/deepseek-v4-reference.md. Usage:
#   ci/oracles/deepseek_v4_transformers.sh [CHECKPOINT_DIR] [VENV_DIR]
# defaults: a fresh `minirun-synth deepseek-v4` output in a temp dir; $CI_CACHE/venv-torch
# ($CI_CACHE defaults to ci/.cache).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${CI_CACHE:-$root/ci/.cache}
venv=${2:-$cache/venv-torch}
py=${PYTHON:-python3}
pins=(torch==2.15.0 transformers==5.24.0 accelerate==1.15.0 safetensors==0.8.0 numpy==2.4.6)
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" - <<'PY' 2>/dev/null
import sys, torch, transformers, accelerate, safetensors, numpy
want = {"torch": "2.15.0", "transformers": "5.24.0", "accelerate": "1.15.0",
        "safetensors": "0.8.0", "numpy": "2.4.6"}
got = {"torch": torch.__version__.split("+")[0], "transformers": transformers.__version__,
       "accelerate": accelerate.__version__, "safetensors": safetensors.__version__,
       "numpy": numpy.__version__}
sys.exit(got != want)
PY
then
    "$py" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "${pins[@]}"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -n "${1:-}" ]; then
    ckpt=$1
    synth="(checkpoint directory given: $1)"
else
    (cd "$root" && cargo build -q -p minirun-bins --bin minirun-synth)
    "${CARGO_TARGET_DIR:-$root/target}/debug/minirun-synth" deepseek-v4 --out "$work/ckpt" >/dev/null
    ckpt=$work/ckpt
    synth="minirun-synth deepseek-v4 --out DIR (defaults: --seed 0 --scale 1)"
fi
"$venv/bin/python" "$here/deepseek_v4_transformers.py" "$ckpt" "$here/deepseek_v4" \
    --work "$work/f32" --synth-command "$synth"
