#!/usr/bin/env bash
# Builds the same-driver peer of the runner benchmark (issue 16): llama.cpp's Vulkan backend from
# the llama-cpp-python 0.2.90 source distribution (0.3.36's Vulkan backend needs newer Vulkan
# headers than Debian 12's 1.3.239), into ci/.cache/venv-llamacpp-vulkan. Not a CI step: only
# ci/bench/runner.sh uses it. Needs Debian's libvulkan-dev, glslc and spirv-headers (installed here
# when missing) and mesa-vulkan-drivers (lavapipe). --no-cache-dir: otherwise pip silently reuses
# an earlier CPU-only wheel of the same version. About 10-15 min on 2 cores.
#   ci/oracles/llamacpp_vulkan.sh [VENV_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${1:-$root/ci/.cache/venv-llamacpp-vulkan}
py=${PYTHON:-python3}
pkgs=(libvulkan-dev glslc spirv-headers mesa-vulkan-drivers cmake)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ "${#missing[@]}" -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import llama_cpp, sys; sys.exit(llama_cpp.__version__ != "0.2.90")' 2>/dev/null; then
    rm -rf "$venv"
    "$py" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "numpy==2.3.5"
    CMAKE_ARGS="-DGGML_VULKAN=ON -DGGML_NATIVE=OFF" CMAKE_BUILD_PARALLEL_LEVEL=2 \
        "$venv/bin/pip" install -q --no-cache-dir --disable-pip-version-check \
        --no-binary llama-cpp-python "llama-cpp-python==0.2.90"
fi
"$venv/bin/python" -c 'import llama_cpp; print("llama-cpp-python", llama_cpp.__version__, "with Vulkan in", __import__("sys").prefix)'
