#!/usr/bin/env bash
# The DeepSeek V4 part of the runner benchmark (issue 16), not a CI step: the verified artifact
# minirun-demo publishes and pulls (generated weights, tiny dimensions), prefill of the first
# 32 ids of the transformers fixture's prompt then DECODE greedy tokens (EOS ignored), resident and
# streamed at two expert-cache sizes, ROUNDS round-robin rounds (each runs every configuration
# once, in turn), medians, peak RSS, the expert cache's counters. Writes docs/bench/runner-v4.md.
# Every run is the device placement (residual, router, experts, attention and the greedy pick
# on the device; a prefill is device steps), the only one minirun-run has; resident runs twice,
# as lavapipe is set up and with LP_NUM_THREADS=0 (Mesa's compute on the calling thread, no
# hand-off to its thread pool a dispatch), the profile of what a dispatch costs there.
#
#   ci/bench/runner_v4.sh [ROUNDS] [DECODE]      (default 5 rounds, 16 decode tokens)
#
# Needs the release binaries (cargo build --release -p runner -p minirun-bins --bin minirun-run --bin minirun-demo). About a minute a round.
# BASELINE=/path/to/an/older/minirun-run adds its resident run to every round (before/after in
# one round-robin run); OUT=PAGE writes the table there instead of docs/bench/runner-v4.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CARGO_TARGET_DIR:=$PWD/target}"
bin=$CARGO_TARGET_DIR/release
rounds=${1:-5}
decode=${2:-16}
out=${OUT:-docs/bench/runner-v4.md}
tmp=$(mktemp -d /tmp/minirun-runner-v4.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$tmp}

"$bin/minirun-demo" --work-dir "$tmp/demo" --generate 0 > "$tmp/demo.log" 2>&1 \
    || { tail -20 "$tmp/demo.log"; exit 1; }
artifact=$tmp/demo/demo/consumer
ids=$(python3 -c "import json; print(','.join(map(str, json.load(open('ci/oracles/deepseek_v4/reference.json'))['prompt']['ids'][:32])))")
experts=$(du -cb "$artifact"/layers*/*.ffn.experts.* | tail -1 | cut -f1)

configs=(resident resident-inline stream-all stream-small)
[ -n "${BASELINE:-}" ] && configs=(baseline "${configs[@]}")
run_one() { # config -> "prefill decode rss_mib hits misses tile_reads"
    local c=$1 flags=(--resident) run=$bin/minirun-run env=()
    case $c in
        baseline) run=$BASELINE ;;
        resident-inline) env=(LP_NUM_THREADS=0) ;;
        stream-all) flags=(--stream --expert-cache-mib 1024) ;;
        stream-small) flags=(--stream --expert-cache-mib 4) ;;
    esac
    env "${env[@]}" /usr/bin/time -f %M -o "$tmp/rss" "$run" --artifact "$artifact" --prompt-ids "$ids" \
        -n $((decode + 1)) --ignore-eos "${flags[@]}" --json > "$tmp/out.json" 2> /dev/null
    python3 - "$tmp/out.json" "$tmp/rss" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
c = r.get("expert_cache") or {"hits": 0, "misses": 0}
rss = int(open(sys.argv[2]).read().split()[-1]) // 1024
print(r["prompt_tokens"] / r["prefill_s"], r["decode_tokens_per_s"], rss, c["hits"], c["misses"], r["tile_reads"])
PY
}

for r in $(seq "$rounds"); do
    for c in "${configs[@]}"; do
        res=$(run_one "$c")
        echo "$res" >> "$tmp/$c"
        echo "round $r $c: $res" >&2
    done
done

python3 - "$tmp" "$out" "$rounds" "$decode" "$experts" "${BASELINE_LABEL:-}" <<'PY'
import os, statistics, sys
tmp, out, rounds, decode, experts, baseline = sys.argv[1:7]
decode = int(decode)
names = {}
if os.path.exists(os.path.join(tmp, "baseline")):
    names["baseline"] = f"baseline: {baseline or 'an older minirun-run'}, resident"
names |= {
    "resident": "minirun-run `--artifact` resident (wgpu; the device placement: 1 submit and 4 bytes a greedy step, a prefill token 1 submit)",
    "resident-inline": "resident, `LP_NUM_THREADS=0` (lavapipe's compute on one thread: no hand-off a dispatch)",
    "stream-all": "`--stream --expert-cache-mib 1024` (every expert fits)",
    "stream-small": "`--stream --expert-cache-mib 4`",
}
lines = [
    "# Runner benchmark: the DeepSeek V4 demo artifact",
    "",
    f"Command: `ci/bench/runner_v4.sh {rounds} {decode}` (release build; {rounds} round-robin rounds; "
    "medians; peak RSS from GNU time). Workload: the verified artifact `minirun-demo` publishes and "
    "pulls (generated weights at tiny dimensions, "
    f"{int(experts) / 2**20:.1f} MiB of routed-expert containers), prefill of the first 32 ids of "
    f"the transformers fixture's prompt, then {decode + 1} greedy tokens (the first is the "
    "prefill's). Machine: 2 cores, no GPU (Mesa lavapipe). Issue 16's target: decode ≥ 10× the "
    "1.4 tokens/s measured before it, i.e. ≥ 14 tokens/s.",
    "",
    "| configuration | prefill tok/s | decode tok/s (min–max) | × target | expert hits / misses (run) | tile reads (run) | peak RSS MiB |",
    "|---|---:|---:|---:|---:|---:|---:|",
]
for c, name in names.items():
    rows = [[float(x) for x in l.split()] for l in open(os.path.join(tmp, c)).read().splitlines()]
    cols = list(zip(*rows))
    med = [statistics.median(x) for x in cols]
    lines.append(
        f"| {name} | {med[0]:.2f} | {med[1]:.2f} ({min(cols[1]):.2f}–{max(cols[1]):.2f}) | "
        f"{med[1] / 14:.2f}× | {med[3]:.0f} / {med[4]:.0f} | {med[5]:.0f} | {med[2]:.0f} |"
    )
open(out, "w").write("\n".join(lines) + "\n")
print(open(out).read())
PY
