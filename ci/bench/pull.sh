#!/usr/bin/env bash
# The consumer pull benchmark (issue 18; not a CI step): `minirun-verify pull` against
# huggingface_hub.snapshot_download (its default 8 workers) of the same promoted release from the
# same minirun-hub on loopback, round-robin, medians, peak RSS → docs/bench/pull.md.
#
#   [REPEAT=5] ci/bench/pull.sh [WIDE_SCALE]
#
# Releases: the demo release (`minirun-demo`: the generated DeepSeek V4 release, ~1,850 files)
# and, when WIDE_SCALE is given, the release of `minirun-synth deepseek-v4 --wide --scale
# WIDE_SCALE` published by the same stages (ci/publish/step.sh). minirun-verify fsyncs every file
# and checks every digest (SHA-256 / git blob SHA-1) as it writes; snapshot_download writes the
# files (it checks no digest of its own); a third row adds to it a `sha256sum` pass over what it
# wrote, as a consumer that verifies would. Needs the release binaries
# (cargo build --release -p minirun-bins) and $CI_CACHE/venv-hf2.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CI_CACHE:=$PWD/ci/.cache}"
: "${CARGO_TARGET_DIR:=$PWD/target}"
bin=$CARGO_TARGET_DIR/release
py=$CI_CACHE/venv-hf2/bin/python
wide=${1:-}
repeat=${REPEAT:-5}
out=docs/bench/pull.md
tmp=$(mktemp -d /tmp/minirun-pull.XXXXXX)
# shellcheck source=ci/bench/hub.sh
. ci/bench/hub.sh
trap 'hub_stop_all; rm -rf "$tmp"' EXIT
repo=minirun/DeepSeek-V4-Flash-minirun


# The demo release.
"$bin/minirun-demo" --work-dir "$tmp/demo" --generate 0 > /dev/null 2>&1
releases=("demo|$(hub_serve "$tmp/demo/demo/hub")")
# The wide release: synth → upstream hub → every stage → a target hub.
if [ -n "$wide" ]; then
    "$bin/minirun-synth" deepseek-v4 --wide --scale "$wide" --out "$tmp/ckpt" > /dev/null
    "$bin/minirun-hub" import --root "$tmp/up" --repo deepseek-ai/DeepSeek-V4-Flash \
        --revision 60d8d70770c6776ff598c94bb586a859a38244f1 "$tmp/ckpt" > /dev/null
    rm -rf "$tmp/ckpt"
    up=$(hub_serve "$tmp/up")
    mkdir -p "$tmp/target"
    tgt=$(hub_serve "$tmp/target")
    for s in fetch repack gate stage; do
        HF_ENDPOINT=$up MINIRUN_BIN=$bin MINIRUN_WORK_DIR=$tmp/wide ci/publish/step.sh plans/deepseek-v4.toml $s > /dev/null 2>&1
    done
    for s in candidate-upload promote; do
        HF_ENDPOINT=$tgt HF_TOKEN=bench MINIRUN_BIN=$bin MINIRUN_WORK_DIR=$tmp/wide ci/publish/step.sh plans/deepseek-v4.toml $s > /dev/null 2>&1
    done
    rm -rf "$tmp/wide"
    releases+=("wide-$wide|$tgt")
fi

measure() { # NAME CMD... → "NAME wall cpu rss_kib load"
    local name=$1; shift
    sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
    local load; load=$(cut -d' ' -f1 /proc/loadavg)
    /usr/bin/time -f "%e %U %S %M" -o "$tmp/time" "$@" > "$tmp/log" 2>&1 || { cat "$tmp/log" >&2; exit 1; }
    read -r wall user sys rss < <(tail -n 1 "$tmp/time")
    echo "$name $wall $(echo "$user + $sys" | bc) $rss $load"
}

snap='import sys
from huggingface_hub import snapshot_download
snapshot_download(sys.argv[1], revision="main", local_dir=sys.argv[2], max_workers=8)'

{
    echo "# Consumer pull benchmark"
    echo
    echo "Command: \`ci/bench/pull.sh${wide:+ $wide}\` on $(nproc) cores, $(date -u +%Y-%m-%d), REPEAT=$repeat. One \`minirun-hub\` on loopback per release. Each round runs every tool once, in turn, into an empty directory; each row is the tool's median run by wall time, with its fastest and slowest. \`minirun-verify pull\` fsyncs every file and checks its digest as it writes it (then records evidence); \`snapshot_download\` (huggingface_hub in ci/.cache/venv-hf2, \`HF_HUB_DISABLE_XET=1\`, 8 workers) checks no digest; the third row adds a \`sha256sum\` of every file it wrote."
    echo
    echo "| release | files | MB | tool | wall s | wall min–max | MB/s | CPU s | peak RSS MiB | snapshot_download wall ÷ this | load at start |"
    echo "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"
} > "$tmp/table"
for rel in "${releases[@]}"; do
    name=${rel%%|*} url=${rel#*|}
    declare -A runs=()
    for _ in $(seq "$repeat"); do
        rm -rf "$tmp/a"; runs[minirun]+="$(measure minirun-verify-pull "$bin/minirun-verify" --endpoint "$url" pull $repo --dir "$tmp/a" --json)"$'\n'
        rm -rf "$tmp/b"; runs[snap]+="$(measure snapshot_download env HF_ENDPOINT="$url" HF_HUB_DISABLE_XET=1 HF_HUB_DISABLE_TELEMETRY=1 HF_HUB_DISABLE_PROGRESS_BARS=1 HF_HOME="$tmp/hf" "$py" -c "$snap" $repo "$tmp/b")"$'\n'
        rm -rf "$tmp/c"; runs[snaph]+="$(measure snapshot_download+sha256sum bash -c 'env HF_ENDPOINT="$1" HF_HUB_DISABLE_XET=1 HF_HUB_DISABLE_TELEMETRY=1 HF_HUB_DISABLE_PROGRESS_BARS=1 HF_HOME="$2/hf" "$3" -c "$4" "$5" "$2/c" && cd "$2/c" && find . -type f -not -path "./.cache/*" -print0 | xargs -0 -P 8 -n 64 sha256sum > /dev/null' _ "$url" "$tmp" "$py" "$snap" $repo)"$'\n'
    done
    files=$(find "$tmp/a" -type f -not -path '*/.minirun-evidence/*' | wc -l)
    bytes=$(find "$tmp/a" -type f -not -path '*/.minirun-evidence/*' -printf '%s\n' | awk '{s+=$1} END {printf "%.0f", s}')
    med() { printf '%s' "${runs[$1]}" | sort -k2,2n | sed -n "$(( (repeat + 1) / 2 ))p"; }
    span() { printf '%s' "${runs[$1]}" | sort -k2,2n | awk 'NR==1{a=$2} {b=$2} END {print a "–" b}'; }
    base=$(med snap | awk '{print $2}')
    for t in minirun snap snaph; do
        set -- $(med $t)
        echo "| $name | $files | $(echo "scale=1; $bytes / 1000000" | bc) | $1 | $2 | $(span $t) | $(echo "scale=1; $bytes / $2 / 1000000" | bc) | $3 | $(( $4 / 1024 )) | $(echo "scale=2; $base / $2" | bc) | $5 |" >> "$tmp/table"
    done
    unset runs
done
mkdir -p docs/bench
cp "$tmp/table" "$out"
cat "$out"
