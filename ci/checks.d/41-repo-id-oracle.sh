#!/usr/bin/env bash
# The repository-id oracle: every row of jobs/names/tests/repo_ids.json through huggingface_hub's
# own validate_repo_id (the pinned venv-hf2), which must give the row's `hub` verdict. The Rust
# side (`cargo test -p names --test repo_ids`) checks the `ours` column against
# names::check_repo_id and that the two differ only where the row says why (docs/names.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
py="${CI_CACHE:-ci/.cache}/venv-hf2/bin/python"
[ -x "$py" ] || { echo "missing $py (run ci/install.d/10-python.sh)"; exit 1; }
"$py" - jobs/names/tests/repo_ids.json <<'PY'
import json
import sys

import huggingface_hub
from huggingface_hub.utils import HFValidationError, validate_repo_id

cases = json.load(open(sys.argv[1], encoding="utf-8"))["cases"]
wrong = []
for case in cases:
    try:
        validate_repo_id(case["id"])
        verdict = True
    except HFValidationError:
        verdict = False
    if verdict != case["hub"]:
        wrong.append(f"{case['id']!r}: validate_repo_id {'accepts' if verdict else 'refuses'} it, the table says {case['hub']}")
for line in wrong:
    print(line)
print(f"repo ids: {len(cases) - len(wrong)}/{len(cases)} rows agree with huggingface_hub {huggingface_hub.__version__} validate_repo_id")
sys.exit(1 if wrong else 0)
PY
