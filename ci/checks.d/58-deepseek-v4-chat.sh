#!/usr/bin/env bash
# DeepSeek V4 chat format (issue 17 item 7): DeepSeek's own renderer (deepseek-recipe, venv-dsrecipe)
# renders the fixed conversations exactly as ci/oracles/deepseek_v4_chat.recorded.json says;
# runner/tests/deepseek_chat.rs holds minirun's encoder to the same file, byte for byte.
set -euo pipefail
cd "$(dirname "$0")/../.."
"$CI_CACHE/venv-dsrecipe/bin/python" ci/oracles/deepseek_v4_chat.py --check
