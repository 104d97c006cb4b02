#!/usr/bin/env bash
# Chat templates (issue 17): transformers' own renderer (venv-chat) renders the recorded real
# templates for the fixed conversations exactly as ci/oracles/chat_templates.recorded.json says;
# runner/tests/chat_templates.rs holds minijinja's rendering to the same file, byte for byte.
set -euo pipefail
cd "$(dirname "$0")/../.."
TRANSFORMERS_VERBOSITY=error "$CI_CACHE/venv-chat/bin/python" ci/oracles/chat_templates.py --check
