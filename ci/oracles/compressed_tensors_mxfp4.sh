#!/usr/bin/env bash
# Re-derives the compressed-tensors MXFP4 reference fixture
# ci/oracles/compressed_tensors_mxfp4/{reference.json,manifest.json}: the package's own FP4
# pack/unpack, E8M0 scale encode/decode, MX scale choice and `mxfp4-pack-quantized`
# compress/decompress on deterministic inputs (CPU tensors). Creates the venv with exact pins if
# absent or mismatched (torch pulls CUDA libraries: measured ~2 min, ~3 GB downloaded, 5.6 GB on
# disk). Not a CI step (CI has no torch): ci/checks.d/57-compressed-tensors-fixture.sh re-checks
# the digests, and the tests `kernels --test integration compressed_tensors_mxfp4::` and
# `synth --test integration compressed_tensors_mxfp4::` compare our decoder and packer with the fixture.
# See docs/mxfp4-compressed-tensors.md. Usage:
#   ci/oracles/compressed_tensors_mxfp4.sh [VENV_DIR]
# default: $CI_CACHE/venv-ctensors ($CI_CACHE defaults to ci/.cache).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${CI_CACHE:-$root/ci/.cache}
venv=${1:-$cache/venv-ctensors}
py=${PYTHON:-python3}
pins=(torch==2.15.0 compressed-tensors==0.20.1)
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" - <<'PY' 2>/dev/null
import sys, torch, compressed_tensors
want = {"torch": "2.15.0", "compressed_tensors": "0.20.1"}
got = {"torch": torch.__version__.split("+")[0],
       "compressed_tensors": compressed_tensors.__version__}
sys.exit(got != want)
PY
then
    "$py" -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "${pins[@]}"
fi
cd "$root"
"$venv/bin/python" ci/oracles/compressed_tensors_mxfp4.py ci/oracles/compressed_tensors_mxfp4 \
    --command "bash ci/oracles/compressed_tensors_mxfp4.sh"
