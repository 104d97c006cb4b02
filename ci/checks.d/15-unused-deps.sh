#!/usr/bin/env bash
# No crate of the workspace declares a dependency it does not use (cargo-machete 0.9.2, installed
# by ci/install.d/50-cargo-tools.sh; docs/cli.md "Lints").
set -euo pipefail
cd "$(dirname "$0")/../.."
"${CI_CACHE:-ci/.cache}/cargo-tools/bin/cargo-machete"
