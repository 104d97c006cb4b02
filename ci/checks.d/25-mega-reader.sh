#!/usr/bin/env bash
# Independent MEGA reader (ci/mega_reader.py, stdlib Python written from docs/mega.md) over the
# golden files the Rust writer froze: layout rules, CRCs, payload hashes, index contract.
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 ci/mega_reader.py jobs/artifact/tests/golden/mega
