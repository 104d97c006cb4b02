#!/usr/bin/env bash
# The compressed-tensors MXFP4 reference fixture (ci/oracles/compressed_tensors_mxfp4/, produced
# offline by ci/oracles/compressed_tensors_mxfp4.sh; CI has no torch): its files match the recorded
# manifest. The comparisons with our decoder and packer are the tests
# `cargo test -p kernels --test integration compressed_tensors_mxfp4::` and
# `cargo test -p synth --test integration compressed_tensors_mxfp4::` (docs/mxfp4-compressed-tensors.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CI_CACHE:?}"
py="$CI_CACHE/venv-gguf/bin/python"
[ -x "$py" ] || { echo "missing $py (run ci/install.d/10-python.sh)"; exit 1; }
"$py" ci/oracles/check_fixture.py ci/oracles/compressed_tensors_mxfp4/manifest.json
