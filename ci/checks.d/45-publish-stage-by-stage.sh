#!/usr/bin/env bash
# Publication stage by stage, exactly as the hosted workflow (.github/workflows/publish.yml) runs it,
# in the distributed shape (docs/publish.md §9): ci/publish/step.sh PLAN STEP, first two workers —
# each in its own work directory, sharing only the hub and a records directory — run fetch →
# repack → gate → stage → candidate-upload for a disjoint unit slice; then the join, in a third
# work directory, runs fetch-root, finalize, stage, candidate-upload, promote and a consumer verify
# — against a local hub holding the generated checkpoint. Then every finished step is re-run and
# must change nothing in any work directory. The hub requires a planted token for writes, and
# afterwards no byte of it may appear anywhere the steps wrote: their stdout and stderr, the hub's
# log and store, every work directory (journals, reports, records, staging) and the consumer copy
# (issue 20 item 1).
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
export HF_TOKEN="hf_PLANTED_$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s' "$HF_TOKEN" > "$tmp/token"
mkdir -p "$tmp/out"
RUST_LOG=debug "$MINIRUN_BIN/minirun-hub" serve --init --root "$tmp/hub" --addr 127.0.0.1:0 \
    --token-file "$tmp/token" > "$tmp/serve.log" 2>&1 &
server=$!
for _ in $(seq 100); do grep -q 'listening on' "$tmp/serve.log" && break; sleep 0.1; done
export HF_ENDPOINT=$(grep -o 'http://[0-9.:]*' "$tmp/serve.log" | head -1)
export MINIRUN_RECORDS="$tmp/records"
i=0
for slice in "layers00..layers21" "layers22..layers42,mtp00,global00"; do
    i=$((i + 1))
    for step in fetch repack gate stage candidate-upload; do
        echo "=== $step [$slice]"
        MINIRUN_WORK_DIR="$tmp/worker$i" UNITS="$slice" ci/publish/step.sh "$plan" "$step" \
            > "$tmp/out/$step.$i.out" 2> "$tmp/out/$step.$i.err"
        tail -1 "$tmp/out/$step.$i.out"
    done
done
echo "=== handed to the join: $(du -sb "$MINIRUN_RECORDS" | cut -f1) B of records"
export MINIRUN_WORK_DIR="$tmp/join"
for step in fetch-root finalize stage candidate-upload promote verify; do
    echo "=== $step"
    ci/publish/step.sh "$plan" "$step" > "$tmp/out/$step.join.out" 2> "$tmp/out/$step.join.err"
    tail -1 "$tmp/out/$step.join.out"
done
touch "$tmp/marker"
sleep 1
i=0
for slice in "layers00..layers21" "layers22..layers42,mtp00,global00"; do
    i=$((i + 1))
    for step in fetch repack stage candidate-upload; do
        MINIRUN_WORK_DIR="$tmp/worker$i" UNITS="$slice" ci/publish/step.sh "$plan" "$step" > /dev/null
    done
done
for step in fetch-root finalize stage candidate-upload promote; do
    ci/publish/step.sh "$plan" "$step" > /dev/null
done
changed=$(find "$tmp/worker1" "$tmp/worker2" "$tmp/join" "$MINIRUN_RECORDS" -newer "$tmp/marker" \
    -not -path '*/consumer*' | head -5)
if [ -n "$changed" ]; then
    echo "re-running finished steps changed files: $changed" >&2
    exit 1
fi
# The planted token: nowhere but the file the hub reads it from.
leaks=$(grep -rlF --exclude=token "$HF_TOKEN" "$tmp" | head -5 || true)
if [ -n "$leaks" ]; then
    echo "the planted token appears in: $leaks" >&2
    exit 1
fi
echo "planted token: in none of $(find "$tmp" -type f | wc -l) files the steps and the hub wrote"
echo "publish stage by stage (distributed): every step passed; re-running finished steps changed nothing"
