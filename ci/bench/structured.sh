#!/usr/bin/env bash
# Structured output benchmark (issue 49 item 1's targets): a release minirun-serve with
# SmolLM2-135M-Instruct Q4_1, twenty JSON Schemas asked with and without response_format at
# temperature 0.8 (ci/bench/structured.py, the real openai client), the table written to $OUT
# with the server's peak RSS. Not a CI step.
#   ci/bench/structured.sh            # table to docs/bench/structured-output.table.md
#   BIN=path/to/minirun-serve OUT=table.md ci/bench/structured.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CI_CACHE:=$PWD/ci/.cache}"
model="${MINIRUN_SMOLLM2_GGUF:-$CI_CACHE/SmolLM2-135M-Instruct.Q4_1.gguf}"
out="${OUT:-docs/bench/structured-output.table.md}"
if [ -z "${BIN:-}" ]; then
    cargo build -q --release -p runner --bin minirun-serve
    BIN=${CARGO_TARGET_DIR:-target}/release/minirun-serve
fi
log=$(mktemp)
"$BIN" --model "$model" --port 0 -c 2048 > "$log" 2> "$log.err" &
pid=$!
trap 'kill $pid 2>/dev/null || true; rm -f "$log" "$log.err"' EXIT
url=
for _ in $(seq 1 600); do
    url=$(sed -n 's/^listening on \(http[^ ]*\).*/\1/p' "$log" | head -1)
    [ -n "$url" ] && break
    sleep 0.1
done
[ -n "$url" ] || { cat "$log.err"; exit 1; }
SERVE_URL="$url" SERVE_MODEL="$(basename "$model" .gguf)" OUT="$out" \
    "$CI_CACHE/venv-openai/bin/python" ci/bench/structured.py
rss=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
printf '| server peak RSS (MiB) | %d (one server, both arms) | |\n' $((rss / 1024)) >> "$out"
cat "$out"
