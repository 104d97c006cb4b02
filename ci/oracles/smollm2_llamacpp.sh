#!/usr/bin/env bash
# Re-derives ci/oracles/smollm2_llamacpp.recorded.json: builds llama-cpp-python 0.3.36 from its
# PyPI source distribution into a venv (~7-10 min on 2 cores; GGML_NATIVE=OFF because a native
# build dies with SIGILL on these CPUs, see ../shared/design/oracles.md), then runs
# smollm2_llamacpp.py on the SmolLM2 GGUF. Not a CI step: CI re-checks the recorded values only
# (runner/tests/llamacpp.rs). Usage:
#   ci/oracles/smollm2_llamacpp.sh [GGUF] [VENV_DIR]
# defaults: $MINIRUN_SMOLLM2_GGUF or ci/.cache/SmolLM2-135M-Instruct.Q4_1.gguf; ci/.cache/venv-llamacpp.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
gguf=${1:-${MINIRUN_SMOLLM2_GGUF:-$root/ci/.cache/SmolLM2-135M-Instruct.Q4_1.gguf}}
venv=${2:-$root/ci/.cache/venv-llamacpp}
py=${PYTHON:-python3}
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import llama_cpp, sys; sys.exit(llama_cpp.__version__ != "0.3.36")' 2>/dev/null; then
    "$py" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check numpy
    CMAKE_ARGS="-DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL=2 \
        "$venv/bin/pip" install -q --disable-pip-version-check --no-binary llama-cpp-python \
        "llama-cpp-python==0.3.36"
fi
"$venv/bin/python" "$here/smollm2_llamacpp.py" "$gguf" "$here/smollm2_llamacpp.recorded.json"
