#!/usr/bin/env bash
# Publication stage by stage, exactly as the hosted workflow (.github/workflows/publish.yml) runs it:
# ci/publish/step.sh PLAN STEP, first fetch → repack → gate for two disjoint unit slices (the
# matrix), then the join: finalize, the whole-release gate, stage, candidate-upload, promote and a
# consumer verify — against a local hub holding the generated checkpoint. Then every finished step
# is re-run and must change nothing in the work directory.
set -euo pipefail
cd "$(dirname "$0")/../.."
target="${CARGO_TARGET_DIR:-target}"
cargo build -q --workspace --bins
export MINIRUN_BIN="$target/debug"
tmp=$(mktemp -d)
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
plan=plans/deepseek-v4.toml
"$MINIRUN_BIN/minirun-synth" deepseek-v4 --out "$tmp/ckpt" > /dev/null
"$MINIRUN_BIN/minirun-hub" import --root "$tmp/hub" --repo deepseek-ai/DeepSeek-V4-Flash \
    --revision 60d8d70770c6776ff598c94bb586a859a38244f1 "$tmp/ckpt" > /dev/null
"$MINIRUN_BIN/minirun-hub" serve --init --root "$tmp/hub" --addr 127.0.0.1:0 > "$tmp/serve.log" 2>&1 &
server=$!
for _ in $(seq 100); do grep -q 'listening on' "$tmp/serve.log" && break; sleep 0.1; done
export HF_ENDPOINT=$(grep -o 'http://[0-9.:]*' "$tmp/serve.log" | head -1)
export MINIRUN_WORK_DIR="$tmp/work"
for slice in "layers00..layers21" "layers22..layers42,mtp00,global00"; do
    for step in fetch repack gate; do
        echo "=== $step [$slice]"
        UNITS="$slice" ci/publish/step.sh "$plan" "$step" | tail -1
    done
done
for step in finalize gate-release stage candidate-upload promote verify; do
    echo "=== $step"
    ci/publish/step.sh "$plan" "$step" | tail -1
done
touch "$tmp/marker"
sleep 1
for step in fetch finalize gate-release stage candidate-upload promote; do
    ci/publish/step.sh "$plan" "$step" > /dev/null
done
changed=$(find "$MINIRUN_WORK_DIR" -newer "$tmp/marker" -not -path '*/consumer*' | head -5)
if [ -n "$changed" ]; then
    echo "re-running finished steps changed files: $changed" >&2
    exit 1
fi
echo "publish stage by stage: every step passed; re-running finished steps changed nothing"
