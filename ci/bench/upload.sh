#!/usr/bin/env bash
# The upload benchmark (issue 18; not a CI step): `minirun-candidate-upload` against
# huggingface_hub's `upload_large_folder` of the same staged release to the same minirun-hub on
# loopback, round-robin, medians, peak RSS, bytes on the loopback → docs/bench/upload.md.
#
#   [REPEAT=5] ci/bench/upload.sh [WIDE_SCALE]
#
# Releases: the demo release (`minirun-demo`'s staged tree, ~1,850 files) and, when WIDE_SCALE is
# given, the staged tree of `minirun-synth deepseek-v4 --wide --scale WIDE_SCALE` (fetch, repack,
# gate, stage by ci/publish/step.sh). Each tool runs three times per round against a hub created
# empty for it: a first upload, a re-run with its local state kept (minirun: the candidate journal;
# upload_large_folder: its `.cache/huggingface/upload` metadata), and a re-run with that state
# removed (both then ask the hub which objects it holds). huggingface_hub 0.36 (ci/.cache/
# venv-hf036): 1.x and later upload folders through Xet only, which minirun-hub does not serve;
# 0.36 with HF_HUB_DISABLE_XET=1 uses the LFS basic transfer, the protocol candidate-upload speaks.
# `num_workers=8`, as candidate-upload's 8 concurrent transfers. Bytes are the loopback
# interface's received bytes during the run (requests and answers; /proc/net/dev), so another
# process on loopback would show there. Needs the release binaries (cargo build --release -p
# minirun-bins) and $CI_CACHE/venv-hf036.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CI_CACHE:=$PWD/ci/.cache}"
: "${CARGO_TARGET_DIR:=$PWD/target}"
bin=$CARGO_TARGET_DIR/release
py=$CI_CACHE/venv-hf036/bin/python
wide=${1:-}
repeat=${REPEAT:-5}
out=docs/bench/upload.md
plan=plans/deepseek-v4.toml
tmp=$(mktemp -d /tmp/minirun-upload.XXXXXX)
# shellcheck source=ci/bench/hub.sh
. ci/bench/hub.sh
trap 'hub_stop_all; rm -rf "$tmp"' EXIT
repo=minirun/DeepSeek-V4-Flash-minirun

lo_bytes() { awk '$1 == "lo:" {print $2}' /proc/net/dev; }

# The demo's work directory holds a staged release; the wide one is built by the stages.
"$bin/minirun-demo" --work-dir "$tmp/demo" --generate 0 > /dev/null 2>&1
releases=("demo|$tmp/demo")
if [ -n "$wide" ]; then
    "$bin/minirun-synth" deepseek-v4 --wide --scale "$wide" --out "$tmp/ckpt" > /dev/null
    "$bin/minirun-hub" import --root "$tmp/up" --repo deepseek-ai/DeepSeek-V4-Flash \
        --revision 60d8d70770c6776ff598c94bb586a859a38244f1 "$tmp/ckpt" > /dev/null
    rm -rf "$tmp/ckpt"
    up=$(hub_serve "$tmp/up")
    for s in fetch repack gate stage; do
        HF_ENDPOINT=$up MINIRUN_BIN=$bin MINIRUN_WORK_DIR=$tmp/wide ci/publish/step.sh $plan $s > /dev/null 2>&1
    done
    hub_stop_last
    rm -rf "$tmp/up" "$tmp/wide/upstream" "$tmp/wide/release"
    releases+=("wide-$wide|$tmp/wide")
fi

measure() { # NAME CMD... → "NAME wall cpu rss_kib load lo_bytes"; the command's stdout in $tmp/log
    local name=$1; shift
    sync
    local load lo0 lo1; load=$(cut -d' ' -f1 /proc/loadavg); lo0=$(lo_bytes)
    /usr/bin/time -f "%e %U %S %M" -o "$tmp/time" "$@" > "$tmp/log" 2> "$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
    lo1=$(lo_bytes)
    read -r wall user sys rss < <(tail -n 1 "$tmp/time")
    echo "$name $wall $(echo "$user + $sys" | bc) $rss $load $((lo1 - lo0))"
}

ulf='import sys
from huggingface_hub import HfApi
HfApi().upload_large_folder(repo_id=sys.argv[1], folder_path=sys.argv[2], repo_type="model", num_workers=8, print_report=False)'

{
    echo "# Upload benchmark"
    echo
    echo "Command: \`ci/bench/upload.sh${wide:+ $wide}\` on $(nproc) cores, $(date -u +%Y-%m-%d), REPEAT=$repeat. Each round runs each tool three times against a \`minirun-hub\` on loopback created empty for it: **first** (an empty hub), **re-run** (local state kept: candidate-upload's journal, upload_large_folder's \`.cache/huggingface/upload\` metadata) and **re-run, state removed** (the tool must ask the hub). Each row is the median run by wall time with its fastest and slowest. \`minirun-candidate-upload\` takes the SHA-256 of every file from stage's journal; \`upload_large_folder\` (huggingface_hub 0.36, \`HF_HUB_DISABLE_XET=1\`, \`num_workers=8\`) hashes every file itself. *Loopback MB* is what the loopback interface carried during the run (requests and answers, median run); *objects sent* is candidate-upload's \`lfs_sent\` (from \`--json\`) of the median run."
    echo
    echo "| release | files | MB | tool | run | wall s | wall min–max | MB/s | CPU s | peak RSS MiB | loopback MB | objects sent | upload_large_folder wall ÷ this | load at start |"
    echo "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
} > "$tmp/table"
for rel in "${releases[@]}"; do
    name=${rel%%|*} work=${rel#*|}
    staged=$work/staging
    files=$(find "$staged" -type f | wc -l)
    bytes=$(find "$staged" -type f -printf '%s\n' | awk '{s+=$1} END {printf "%.0f", s}')
    # upload_large_folder writes its metadata inside the folder: it gets its own copy (a real
    # copy: hard links would change the staged files' identities, which stage's journal records).
    cp -r "$staged" "$tmp/ulf-src"
    declare -A runs=()
    for round in $(seq "$repeat"); do
        url=$(hub_serve "$tmp/hub-m$round")
        c=(env HF_TOKEN=bench "$bin/minirun-candidate-upload" --plan $plan --work-dir "$work" --endpoint "$url" --json)
        rm -rf "$work/ledger/candidate"
        runs[m1]+="$(measure candidate-upload "${c[@]}") $(jq .lfs_sent "$tmp/log")"$'\n'
        runs[m2]+="$(measure candidate-upload "${c[@]}") $(jq .lfs_sent "$tmp/log")"$'\n'
        rm -rf "$work/ledger/candidate"
        runs[m3]+="$(measure candidate-upload "${c[@]}") $(jq .lfs_sent "$tmp/log")"$'\n'
        hub_stop_last; rm -rf "$tmp/hub-m$round"
        url=$(hub_serve "$tmp/hub-u$round")
        u=(env HF_ENDPOINT="$url" HF_TOKEN=bench HF_HUB_DISABLE_XET=1 HF_HUB_DISABLE_TELEMETRY=1 HF_HUB_DISABLE_PROGRESS_BARS=1 HF_HOME="$tmp/hf" "$py" -c "$ulf" $repo "$tmp/ulf-src")
        rm -rf "$tmp/ulf-src/.cache"
        runs[u1]+="$(measure upload_large_folder "${u[@]}") -"$'\n'
        runs[u2]+="$(measure upload_large_folder "${u[@]}") -"$'\n'
        rm -rf "$tmp/ulf-src/.cache"
        runs[u3]+="$(measure upload_large_folder "${u[@]}") -"$'\n'
        hub_stop_last; rm -rf "$tmp/hub-u$round"
    done
    med() { printf '%s' "${runs[$1]}" | sort -k2,2n | sed -n "$(( (repeat + 1) / 2 ))p"; }
    span() { printf '%s' "${runs[$1]}" | sort -k2,2n | awk 'NR==1{a=$2} {b=$2} END {print a "–" b}'; }
    for r in 1 2 3; do
        base=$(med u$r | awk '{print $2}')
        case $r in 1) what=first ;; 2) what=re-run ;; 3) what="re-run, state removed" ;; esac
        for t in m u; do
            set -- $(med $t$r)
            rate=–; [ "$r" = 1 ] && rate=$(awk -v b="$bytes" -v w="$2" 'BEGIN {printf "%.1f", b / (w > 0.01 ? w : 0.01) / 1e6}')
            ratio=$(awk -v a="$base" -v w="$2" 'BEGIN {printf "%.2f", a / (w > 0.01 ? w : 0.01)}')
            echo "| $name | $files | $(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1e6}') | $1 | $what | $2 | $(span $t$r) | $rate | $3 | $(( $4 / 1024 )) | $(awk -v b="$6" 'BEGIN {printf "%.2f", b / 1e6}') | $7 | $ratio | $5 |" >> "$tmp/table"
        done
    done
    rm -rf "$tmp/ulf-src"
    unset runs
done
mkdir -p docs/bench
cp "$tmp/table" "$out"
cat "$out"
