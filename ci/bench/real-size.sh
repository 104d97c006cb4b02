#!/usr/bin/env bash
# Real-size run (issue 19 item 2; not a CI step: it writes ~35 GB): a generated checkpoint with
# the real per-layer dimensions through every publication stage — fetch → repack → gate → stage →
# candidate-upload → promote → verify (the consumer pull) — against minirun-hub on loopback, each
# stage's wall time, CPU time and peak RSS recorded, then the same publication as disk-budgeted
# windows (`ci/publish/step.sh PLAN window`, issue 52) at about 2x and 4x the largest unit →
# docs/bench/real-size.md.
#
#   ci/bench/real-size.sh [CASE...]      CASE = FAMILY:SCALE, default: v4:256 k3:16 k3:252
#
# v4:E = `minirun-synth deepseek-v4 --shape real --scale E` run by
# plans/tests/deepseek-v4-real-size.toml (one main layer + MTP at hidden 4096, E experts of
# 13,369,344 B each: 3.5 GB per shard at upstream's 256). k3:E = `minirun-synth kimi-k3 --shape
# real --scale E` run by plans/tests/kimi-k3-real-size.toml (dense layer 0 + one MoE layer of E
# experts of 17,547,264 B at hidden 7168; E = 252 makes that shard 5.26 GB, past 4 GiB and past
# K3's largest file, 5,240,799,232 B). One case at a time; each is removed before the next.
#
# Needs the release binaries (cargo build --release --workspace) and ~5× the checkpoint in free
# disk under TMPDIR (upstream hub, fetched bytes, release, target hub, consumer copy; staging is
# hard links).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CARGO_TARGET_DIR:=$PWD/target}"
bin=$CARGO_TARGET_DIR/release
cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(v4:256 k3:16 k3:252)
out=${OUT:-docs/bench/real-size.md}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/minirun-real-size.XXXXXX")
# shellcheck source=ci/bench/hub.sh
. ci/bench/hub.sh
trap 'hub_stop_all; rm -rf "$tmp"' EXIT
steps=(fetch repack gate stage candidate-upload promote verify)

# The work directory's disk use (allocated bytes, hard links once; the consumer's copy that
# `verify` pulls into it left out), sampled every 0.2 s until killed; the largest in $tmp/peak.
sample() {
    local peak=0 n
    while :; do
        n=$(du -s -B1 --exclude=consumer "$tmp/w" 2> /dev/null | cut -f1) || n=0
        if [ "${n:-0}" -gt "$peak" ]; then peak=$n; echo "$peak" > "$tmp/peak"; fi
        sleep 0.2
    done
}

# One stage: "wall cpu rss_kib peak_disk_bytes read_bytes written_bytes"; its output in
# $tmp/log.STEP, a failure stops the run. Read and written are getrusage's block counts (512 B
# units, GNU time's %I and %O) with the page cache dropped before the stage.
measure() {
    local step=$1; shift
    sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
    echo 0 > "$tmp/peak"
    sample & local sampler=$!
    local cmd=(ci/publish/step.sh "$plan" "$step")
    # `chain`: the unbounded run's fetch..promote as one command, the cache dropped once (the
    # windows' like-for-like peer)
    [ "$step" = chain ] && cmd=(bash -c 'for s in fetch repack gate stage candidate-upload promote; do
        ci/publish/step.sh "$0" "$s" || exit 1; done' "$plan")
    env "$@" /usr/bin/time -f "%e %U %S %M %I %O" -o "$tmp/time" \
        "${cmd[@]}" > "$tmp/log.$step" 2>&1 ||
        { kill $sampler 2> /dev/null; echo "$step failed:" >&2; tail -n 20 "$tmp/log.$step" >&2; exit 1; }
    sync
    kill $sampler 2> /dev/null || true; wait $sampler 2> /dev/null || true
    local after; after=$(du -s -B1 --exclude=consumer "$tmp/w" | cut -f1)
    local peak; peak=$(cat "$tmp/peak"); [ "$after" -gt "$peak" ] && peak=$after
    read -r wall user sys rss rd wr < <(tail -n 1 "$tmp/time")
    echo "$wall $(echo "$user + $sys" | bc) $rss $peak $((rd * 512)) $((wr * 512))"
}

g() { echo "scale=2; $1 / 1000000000" | bc; } # bytes → GB
rows=()
for c in "${cases[@]}"; do
    fam=${c%%:*} scale=${c#*:}
    case $fam in
    v4) family=deepseek-v4 plan=plans/tests/deepseek-v4-real-size.toml all=layers00..global00 ;;
    k3) family=kimi-k3 plan=plans/tests/kimi-k3-real-size.toml all=layer00..global ;;
    *) echo "unknown case \`$c\` (v4:SCALE or k3:SCALE)" >&2; exit 64 ;;
    esac
    repo=$(sed -n '/^\[source\]/,/^\[/s/^repo = "\(.*\)"/\1/p' "$plan")
    rev=$(sed -n 's/^revision = "\(.*\)"/\1/p' "$plan")
    rm -rf "${tmp:?}"/*
    t0=$(date +%s.%N)
    "$bin/minirun-synth" $family --shape real --scale "$scale" --out "$tmp/ckpt" > /dev/null
    gen_s=$(echo "$(date +%s.%N) - $t0" | bc)
    bytes=$(find "$tmp/ckpt" -type f -printf '%s\n' | awk '{s+=$1} END {printf "%.0f", s}')
    largest=$(find "$tmp/ckpt" -name '*.safetensors' -printf '%s\n' | sort -n | tail -n 1)
    "$bin/minirun-hub" import --root "$tmp/up" --repo "$repo" --revision "$rev" "$tmp/ckpt" > /dev/null
    rm -rf "$tmp/ckpt"
    up=$(hub_serve "$tmp/up")
    tgt=$(hub_serve "$tmp/target")
    gb=$(echo "scale=3; $bytes / 1000000000" | bc)
    # What `minirun-plan slices` predicts for one slice of every unit (docs/plan-tool.md), held
    # against the largest work dir any stage below reaches.
    predicted=$(HF_ENDPOINT="$up" "$bin/minirun-plan" slices "$plan" --disk-budget 1T --json |
        python3 -c 'import json, sys; print(json.load(sys.stdin)["slices"][0]["peak_bytes"])')
    max_disk=0
    for s in "${steps[@]}"; do
        case $s in
        fetch | repack | gate | stage) ep=$up ;;
        *) ep=$tgt ;;
        esac
        read -r wall cpu rss disk rd wr < <(measure "$s" HF_ENDPOINT="$ep" HF_TOKEN=bench \
            MINIRUN_BIN="$bin" MINIRUN_WORK_DIR="$tmp/w")
        per_gb=$(echo "scale=2; $wall / $gb" | bc)
        [ "$disk" -gt "$max_disk" ] && max_disk=$disk
        x=$(echo "scale=2; $disk / $bytes" | bc)
        rows+=("| $c | $gb | $largest | $s | $wall | $per_gb | $cpu | $((rss / 1024)) | $(g "$disk") | $x | $(g "$rd") | $(g "$wr") |")
    done
    # The consumer's copy is the checkpoint's bytes, republished: every upstream payload byte is
    # in it (containers re-tile them; the plain streams are verbatim).
    pulled=$(find "$tmp/w/consumer" -type f -printf '%s\n' | awk '{s+=$1} END {printf "%.0f", s}')
    # The distributed shape's hand-off at this size (docs/publish.md §9): one worker, in a fresh
    # work dir, runs every unit as its slice and writes the unit records (its LFS objects are
    # already on the target hub, so none is re-sent). The records are all a join receives.
    peak_disk=$(du -s -B1 "$tmp" | cut -f1)
    rm -rf "$tmp/w"
    t0=$(date +%s.%N)
    for s in fetch repack gate stage candidate-upload; do
        case $s in candidate-upload) ep=$tgt ;; *) ep=$up ;; esac
        env HF_ENDPOINT="$ep" HF_TOKEN=bench MINIRUN_BIN="$bin" MINIRUN_WORK_DIR="$tmp/wk" \
            MINIRUN_RECORDS="$tmp/records" UNITS="$all" ci/publish/step.sh "$plan" $s > "$tmp/log.rec" 2>&1 ||
            { echo "worker $s failed:" >&2; tail -n 20 "$tmp/log.rec" >&2; exit 1; }
    done
    worker_s=$(echo "$(date +%s.%N) - $t0" | bc)
    records=$(find "$tmp/records" -type f -printf '%s\n' | awk '{s+=$1} END {printf "%.0f", s}')
    share=$(echo "scale=4; 100 * $records / $pulled" | bc)
    rows+=("| $c | $gb | $largest | *(synth ${gen_s%.*} s; consumer copy $pulled B; one worker (${worker_s%.*} s) handed the join $records B of unit records = $share % of it; $((peak_disk / 1000000000)) GB on disk after verify, hubs and consumer copy included; \`minirun-plan slices\` predicted a peak work dir of $predicted B, measured $max_disk B)* | | | | | | | | |")
    rm -rf "$tmp/wk" "$tmp/records" "$tmp/w"
    # Disk-budgeted windows (docs/publish.md §12), each to a fresh target hub so every object is
    # sent again: at the smallest budget `minirun-plan slices` accepts (the fixed part and the
    # largest unit's peak: about 2x the largest unit) and at twice that (about 4x). The unbounded
    # run above is the peer: its fetch..promote wall time.
    read -r fixed largest_unit < <(HF_ENDPOINT="$up" "$bin/minirun-plan" slices "$plan" --window --disk-budget 1T --json |
        python3 -c 'import json, sys; v = json.load(sys.stdin); print(v["fixed_bytes"], max(u["peak_bytes"] for u in v["units"]))')
    staged_sum=$(printf '%s\n' "${rows[@]}" | awk -F'|' -v c=" $c " '$2 == c && $5 ~ /^ (fetch|repack|gate|stage|candidate-upload|promote) $/ {s += $6} END {print s}')
    tgt_c=$(hub_serve "$tmp/target-chain")
    read -r wall cpu rss disk rd wr < <(measure chain HF_ENDPOINT="$tgt_c" HF_TOKEN=bench \
        MINIRUN_UPSTREAM_ENDPOINT="$up" MINIRUN_BIN="$bin" MINIRUN_WORK_DIR="$tmp/w")
    hub_stop_last
    unbounded=$wall
    rows+=("| $c | $gb | $largest | unbounded, fetch..promote as one chain (cache dropped once; the stages above add up to $staged_sum s) | $wall | $(echo "scale=2; $wall / $gb" | bc) | $cpu | $((rss / 1024)) | $(g "$disk") | $(echo "scale=2; $disk / $bytes" | bc) | $(g "$rd") | $(g "$wr") |")
    rm -rf "$tmp/w" "$tmp/target-chain"
    for k in 1 2; do
        budget=$((k * (fixed + largest_unit)))
        tgt_w=$(hub_serve "$tmp/target-w$k")
        read -r wall cpu rss disk rd wr < <(measure window HF_ENDPOINT="$tgt_w" HF_TOKEN=bench \
            MINIRUN_UPSTREAM_ENDPOINT="$up" MINIRUN_BIN="$bin" MINIRUN_WORK_DIR="$tmp/w" \
            MINIRUN_DISK_BUDGET="$budget")
        hub_stop_last
        slices=$(grep -c '^window: slice ' "$tmp/log.window")
        per_gb=$(echo "scale=2; $wall / $gb" | bc)
        x=$(echo "scale=2; $disk / $bytes" | bc)
        over=$(echo "scale=2; $wall / $unbounded" | bc)
        rows+=("| $c | $gb | $largest | window, budget $budget B ($slices slices; ${over}x the unbounded chain's $unbounded s; peak $( [ "$disk" -le "$budget" ] && echo within || echo OVER) budget) | $wall | $per_gb | $cpu | $((rss / 1024)) | $(g "$disk") | $x | $(g "$rd") | $(g "$wr") |")
        rm -rf "$tmp/w" "$tmp/target-w$k"
    done
    hub_stop_all
done
{
    echo "# Real-size run"
    echo
    echo "Command: \`ci/bench/real-size.sh ${cases[*]}\` on $(nproc) cores, $(date -u +%Y-%m-%d), release build. Each case generates its checkpoint (\`minirun-synth FAMILY --shape real --scale E\`), imports it into one \`minirun-hub\` (upstream) and publishes it to another (target), both on loopback, running each stage once through \`ci/publish/step.sh\` with the page cache dropped before it; *GB* is the checkpoint (every file, 10^9 B), *largest* the largest upstream safetensors file in bytes, *s/GB* the stage's wall time per checkpoint GB, *peak RSS* GNU time's maximum resident set size, *peak work dir* the largest allocated size of the work directory (\`du -B1\`, hard links once, the consumer's copy left out) sampled every 0.2 s during the stage, *× checkpoint* that over the checkpoint's bytes, *read/written* the stage's block I/O (getrusage, GNU time's %I/%O × 512 B; what the page cache absorbed is not counted). \`verify\` is \`minirun-verify pull\` of the promoted release into a fresh directory (every file's digest checked). The last row of each case: the checkpoint's generation time, the bytes the consumer pulled, and the bytes of the unit records that the distributed shape hands its join for the same units (docs/publish.md §9: after the publication, one worker in a fresh work dir runs fetch → repack → gate → stage → candidate-upload over every unit as its slice; its objects are already on the hub, so none is re-sent), as a share of the release. The *window* rows: the whole publication again as one disk-budgeted \`ci/publish/step.sh PLAN window\` (docs/publish.md §12: slice by slice, fetch reserving each slice's peak, objects uploaded and the slice reclaimed, then the join in the same work directory) to a fresh target hub, at the smallest budget \`minirun-plan slices\` accepts (its fixed part plus the largest unit's peak, about twice the largest unit) and at twice that; the page cache is dropped once before it, and its wall time is set against the *unbounded chain* row: the same fetch..promote to a fresh target hub as one command with the cache dropped once, as the window has it (the per-stage rows drop it before each stage, which the window does not)."
    echo
    echo "| case | GB | largest file B | stage | wall s | s/GB | CPU s | peak RSS MiB | peak work dir GB | × checkpoint | read GB | written GB |"
    echo "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    printf '%s\n' "${rows[@]}"
} > "$out"
cat "$out"
