#!/usr/bin/env bash
# Records llama.cpp's convert_hf_to_gguf.py (inside the llama-cpp-python 0.3.36 sdist, with the
# sdist's own gguf-py) on the tiny random Qwen2 and Qwen3 checkpoints of tiny_qwen_ckpt.py, for
# --outtype f16, bf16 and f32, into ci/oracles/convert-hf.recorded.json (checkpoint file digests,
# every output tensor's payload sha256, every metadata value or its digest, producer versions).
# CI never runs this (no torch there): ci/checks.d/31-gguf-convert-parity.sh regenerates the
# checkpoints without torch and compares `minirun-gguf convert` with the record.
#
# Usage: ci/oracles/convert_hf.sh [WORK_DIR]   (default $CI_CACHE/convert-hf; GGML_SDIST as in
# llama_quantize.sh). Environments, created with exact pins when absent:
#   $CI_CACHE/venv-torch    torch 2.15.0 + transformers 5.24.0 (loads the checkpoints: a valid
#                           Qwen2ForCausalLM / Qwen3ForCausalLM with a forward pass)
#   $CI_CACHE/venv-convert  the script's own requirements (transformers 4.57.6, numpy 2.2.6,
#                           sentencepiece, protobuf 4) over venv-torch's torch (a .pth file): the
#                           script pins torch 2.11 from download.pytorch.org, which is not a
#                           registry reachable here. transformers 5.24 cannot be used for Qwen2:
#                           it forces Qwen2Tokenizer (its own pre-tokenizer) for model_type qwen2,
#                           whose hash the script does not know (docs/gguf.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
: "${CI_CACHE:=$repo/ci/.cache}"
work=${1:-$CI_CACHE/convert-hf}
real="${MINIRUN_SMOLLM2_GGUF:-$CI_CACHE/SmolLM2-135M-Instruct.Q4_1.gguf}"
gpy="$CI_CACHE/venv-gguf/bin/python"
sdist_version=0.3.36
sdist_sha=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
mkdir -p "$work"
if [ ! -x "$CI_CACHE/venv-torch/bin/python" ]; then
    python3 -m venv "$CI_CACHE/venv-torch"
    "$CI_CACHE/venv-torch/bin/pip" install -q torch==2.15.0 transformers==5.24.0 accelerate==1.15.0 \
        safetensors==0.8.0 numpy==2.4.6 sentencepiece==0.2.3
fi
vc="$CI_CACHE/venv-convert"
if [ ! -x "$vc/bin/python" ]; then
    python3 -m venv "$vc"
    ls -d "$CI_CACHE"/venv-torch/lib/python3*/site-packages > "$(ls -d "$vc"/lib/python3*/site-packages)/zz-venv-torch.pth"
    # The script's requirements, resolved here to: tokenizers 0.22.2, huggingface_hub 0.36.2.
    "$vc/bin/pip" install -q "transformers==4.57.6" "tokenizers==0.22.2" "huggingface_hub==0.36.2" \
        "numpy==2.2.6" "sentencepiece==0.2.3" "protobuf==4.25.9" "safetensors==0.8.0"
fi
src="$work/llama_cpp_python-$sdist_version"
if [ ! -d "$src/vendor/llama.cpp" ]; then
    if [ -n "${GGML_SDIST:-}" ]; then cp "$GGML_SDIST" "$work/"; else
        "$gpy" -m pip download -q --no-deps --no-binary llama-cpp-python --disable-pip-version-check \
            -d "$work" "llama-cpp-python==$sdist_version"
    fi
    tgz="$work/llama_cpp_python-$sdist_version.tar.gz"
    [ "$(sha256sum "$tgz" | cut -d' ' -f1)" = "$sdist_sha" ] || { echo "sdist sha256 mismatch"; exit 1; }
    tar -xzf "$tgz" -C "$work"
fi
ckpt="$work/ckpt"; ref="$work/ref"
mkdir -p "$ref"
"$gpy" ci/oracles/tiny_qwen_ckpt.py "$real" "$ckpt"
"$CI_CACHE/venv-torch/bin/python" - "$ckpt" <<'PY'
import sys, torch, transformers
from transformers import AutoModelForCausalLM
for a in ("qwen2", "qwen3"):
    m = AutoModelForCausalLM.from_pretrained(f"{sys.argv[1]}/{a}", dtype=torch.float32)
    out = m(torch.tensor([[1, 2, 3, 4]])).logits
    print(f"{a}: {type(m).__name__} loads in transformers {transformers.__version__}, logits {tuple(out.shape)}")
PY
script="$src/vendor/llama.cpp/convert_hf_to_gguf.py"
for a in qwen2 qwen3; do for t in f16 bf16 f32; do
    "$vc/bin/python" "$script" "$ckpt/$a" --outtype "$t" --outfile "$ref/$a-$t.gguf" >"$ref/$a-$t.log" 2>&1 \
        || { echo "convert_hf_to_gguf.py failed on $a $t (see $ref/$a-$t.log)"; exit 1; }
done; done
"$vc/bin/python" - "$work/meta.json" "$sdist_sha" "$sdist_version" "$(sha256sum "$script" | cut -d' ' -f1)" <<'PY'
import datetime, json, sys, platform
import numpy, torch, transformers, tokenizers
out, sdist_sha, ver, script_sha = sys.argv[1:]
json.dump({
    "note": "Outputs of llama.cpp's convert_hf_to_gguf.py on the tiny random checkpoints of ci/oracles/tiny_qwen_ckpt.py "
            "(recorded by ci/oracles/convert_hf.sh). ci/checks.d/31-gguf-convert-parity.sh regenerates the checkpoints "
            "(their file digests must match) and compares minirun-gguf convert tensor by tensor and key by key.",
    "producer": {"script": "vendor/llama.cpp/convert_hf_to_gguf.py (with the sdist's gguf-py)", "script_sha256": script_sha,
                 "pypi": f"llama-cpp-python=={ver}", "sdist_sha256": sdist_sha,
                 "command": "python convert_hf_to_gguf.py CKPT/{qwen2,qwen3} --outtype {f16,bf16,f32} --outfile REF/{arch}-{outtype}.gguf",
                 "python": platform.python_version(), "transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                 "torch": torch.__version__, "numpy": numpy.__version__, "date": datetime.date.today().isoformat(),
                 "box": "Debian 12 (bookworm) x86-64 project machine, 2 cores"},
}, open(out, "w"))
PY
"$gpy" ci/oracles/convert_parity.py record "$repo/ci/oracles/convert-hf.recorded.json" "$ckpt" "$ref" "$work/meta.json"
