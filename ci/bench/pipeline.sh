#!/usr/bin/env bash
# Pipeline benchmarks (not a CI step), each against a peer measured in the same run:
#  - fetch: minirun-fetch vs huggingface_hub.snapshot_download vs parallel curl downloads of the
#    same files, each written to disk with the same durability (fsync) and hashed (SHA-256), from
#    minirun-hub on loopback → docs/bench/fetch.md
#  - repack vs `cp` of the same bytes (+ sync), and gate vs `openssl dgst -sha256` run in
#    parallel on all cores over the bytes the gate hashes → docs/bench/repack-gate.md
#
#   [REPEAT=5] ci/bench/pipeline.sh [SCALE] [--wide]
#
# Tools that are compared run round-robin, REPEAT rounds; each table row is a tool's median run.
#
# SCALE 64 ≈ 2.4 GB of the tiny dimensions (256 experts of 64 KiB per layer: 35k files, 42 % of
# the release is 16 KiB alignment padding) → docs/bench/{fetch,repack-gate}.md.
# `14 --wide` ≈ 2.4 GB with real-sized experts (14 per layer of 1 MiB + 64 KiB scales, as
# upstream's 2048-wide experts) → docs/bench/{fetch,repack-gate}-wide.md.
#
# Needs the release binaries (cargo build --release --workspace) and $CI_CACHE/venv-hf2.
# Cleans up its temp dir (the disk is shared).
set -euo pipefail
cd "$(dirname "$0")/../.."
scale=${1:-64}
wide=()
suffix=
if [ "${2:-}" = --wide ]; then wide=(--wide); suffix=-wide; fi
out=docs/bench/fetch$suffix.md
out2=docs/bench/repack-gate$suffix.md
mkdir -p docs/bench
: "${CI_CACHE:=$PWD/ci/.cache}"
: "${CARGO_TARGET_DIR:=$PWD/target}"
bin=$CARGO_TARGET_DIR/release
py=$CI_CACHE/venv-hf2/bin/python
tmp=$(mktemp -d /tmp/minirun-bench.XXXXXX)
trap 'kill "${hub_pid:-0}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
rev=60d8d70770c6776ff598c94bb586a859a38244f1
repo=deepseek-ai/DeepSeek-V4-Flash

"$bin/minirun-synth" deepseek-v4 --out "$tmp/ckpt" --scale "$scale" "${wide[@]}" > /dev/null
"$bin/minirun-hub" import --root "$tmp/hub" --repo $repo --revision $rev "$tmp/ckpt" > /dev/null
"$bin/minirun-hub" serve --init --root "$tmp/hub" --addr 127.0.0.1:0 > "$tmp/hub.out" 2> /dev/null &
hub_pid=$!
for _ in $(seq 100); do grep -q listening "$tmp/hub.out" && break; sleep 0.1; done
url=$(sed -n 's/^listening on //p' "$tmp/hub.out")
bytes=$(du -sb --apparent-size "$tmp/ckpt"/*.safetensors | awk '{s+=$1} END {printf "%.0f", s}')

# One measured command: wall seconds, CPU seconds (user+sys), peak RSS (KiB), and the 1-minute
# load average when it started (the machine may be shared: a high load slows every tool).
measure() {
    local name=$1; shift
    sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true
    local load; load=$(cut -d' ' -f1 /proc/loadavg)
    /usr/bin/time -f "%e %U %S %M" -o "$tmp/time.$name" "$@" > "$tmp/log.$name" 2>&1
    read -r wall user sys rss < <(tail -n 1 "$tmp/time.$name")
    echo "$name $wall $(echo "$user + $sys" | bc) $rss $load"
}

# REPEAT rounds; each round runs every tool of the group once, in order (round-robin, so a
# change in the machine's load hits every tool alike). For each ID, in order, prints the median
# run by wall time with that tool's fastest and slowest wall appended. Tool ID is described by
# label_ID (its name), reset_ID (evaluated before each run: removes that run's outputs) and
# cmd_ID (an array: the command).
repeat=${REPEAT:-5}
rr() {
    local i id label reset cmd
    declare -A runs=()
    for i in $(seq "$repeat"); do
        for id in "$@"; do
            eval "label=\$label_$id; reset=\$reset_$id; cmd=(\"\${cmd_$id[@]}\")"
            eval "$reset"
            runs[$id]+="$(measure "$label" "${cmd[@]}")"$'\n'
        done
    done
    for id in "$@"; do
        local sorted; sorted=$(printf '%s' "${runs[$id]}" | sort -k2,2n)
        echo "$(echo "$sorted" | sed -n "$(( (repeat + 1) / 2 ))p") $(echo "$sorted" | head -n1 | cut -d' ' -f2) $(echo "$sorted" | tail -n1 | cut -d' ' -f2)"
    done
}

label_fetch=minirun-fetch
reset_fetch='rm -rf "$tmp/w1"'
cmd_fetch=("$bin/minirun-fetch" --plan plans/deepseek-v4.toml --work-dir "$tmp/w1" --endpoint "$url")
label_snap=snapshot_download
reset_snap='rm -rf "$tmp/w2"'
cmd_snap=(env HF_ENDPOINT="$url" HF_HUB_DISABLE_XET=1 HF_HUB_DISABLE_TELEMETRY=1 "$py" -c '
import hashlib, os, sys
from huggingface_hub import snapshot_download
d = snapshot_download(sys.argv[1], revision=sys.argv[2], local_dir=sys.argv[3], allow_patterns=["*.safetensors"], max_workers=8)
for f in sorted(os.listdir(d)):
    p = os.path.join(d, f)
    if f.endswith(".safetensors"):
        fd = os.open(p, os.O_RDONLY); os.fsync(fd); os.close(fd)
        h = hashlib.sha256(open(p, "rb").read()).hexdigest()
' $repo $rev "$tmp/w2")
label_curl=curl-parallel
reset_curl='rm -rf "$tmp/w3"; mkdir -p "$tmp/w3"'
cmd_curl=(bash -c '
cd "$1"; url=$2; rev=$3; repo=$4; shift 4
printf "%s\n" "$@" | xargs -P 8 -I{} sh -c "curl -sf -o {} $url/$repo/resolve/$rev/{} && sync {} && openssl dgst -sha256 {} > /dev/null"
' _ "$tmp/w3" "$url" $rev $repo $(cd "$tmp/ckpt" && ls *.safetensors))
# minirun-fetch runs first in each round, so the last round leaves its work dir for repack.
g1=$(rr fetch snap curl)
mapfile -t results <<< "$g1"
{
    echo "# Fetch benchmark"
    echo
    echo "Command: \`ci/bench/pipeline.sh $scale${wide[*]:+ ${wide[*]}}\` on $(nproc) cores, $(date -u +%Y-%m-%d). Checkpoint: \`minirun-synth deepseek-v4 --scale $scale${wide[*]:+ ${wide[*]}}\`, $bytes bytes of safetensors in 46 shards, served by \`minirun-hub\` on loopback. Every tool writes to disk, fsyncs and hashes (SHA-256) what it fetched."
    echo
    echo "The tools ran in $repeat rounds, each round running every tool once in turn. Each row is the tool's median run by wall time (its CPU, peak RSS and load), with its fastest and slowest wall time."
    echo
    echo "| tool | wall s | wall min–max | MB/s | CPU s | peak RSS MiB | minirun-fetch throughput ÷ this tool's | load at start |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    base=$(echo "${results[0]}" | awk '{print $2}')
    for r in "${results[@]}"; do
        set -- $r
        echo "| $1 | $2 | $6–$7 | $(echo "scale=1; $bytes / $2 / 1000000" | bc) | $3 | $(( $4 / 1024 )) | $(echo "scale=2; $2 / $base" | bc) | $5 |"
    done
    echo
    echo "Negative controls recorded in the fetch journals of that run (docs/fetch.md):"
    echo
    "$py" - "$tmp/w1/ledger/fetch" <<'PY'
import collections, json, pathlib, sys
n = collections.Counter()
for p in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    for c in json.loads(p.read_text())["extra"]["negative_controls"]:
        n[(c["control"], c.get("rejected_by") or ("not run" if not c["ran"] else "not rejected"))] += 1
print("| control | decided by | count |\n|---|---|---:|")
for (control, by), k in sorted(n.items()):
    print(f"| {control} | {by} | {k} |")
PY
} > "$out"
cat "$out"

# ---- repack vs cp, gate vs openssl ------------------------------------------------------------
plan=(--plan plans/deepseek-v4.toml --work-dir "$tmp/w1")
label_repack=minirun-repack
reset_repack='rm -rf "$tmp/w1/release" "$tmp/w1/ledger/repack"'
cmd_repack=("$bin/minirun-repack" "${plan[@]}")
label_cpu=cp
reset_cpu='rm -rf "$tmp/cp-copy"'
cmd_cpu=(bash -c 'cp -r "$1" "$2" && sync -f "$2"' _ "$tmp/w1/upstream" "$tmp/cp-copy")
# The same anchor over what repack writes: the release's files (one per tensor) and bytes (16 KiB
# container alignment included), so the ratio isolates repack's own work from the layout's cost.
# It runs after repack in each round, so the release it copies exists.
label_cpr=cp-release
reset_cpr='rm -rf "$tmp/cp-release"'
cmd_cpr=(bash -c 'cp -r "$1" "$2" && sync -f "$2"' _ "$tmp/w1/release" "$tmp/cp-release")
g2=$(rr repack cpu cpr)
mapfile -t g2 <<< "$g2"
rp=${g2[0]} cpm=${g2[1]} cpr=${g2[2]}
rm -rf "$tmp/cp-copy" "$tmp/cp-release"
rel_bytes=$(du -sb --apparent-size "$tmp/w1/release" | cut -f1)
src_bytes=$(du -sb --apparent-size "$tmp/w1/upstream" | cut -f1)
rel_files=$(find "$tmp/w1/release" -type f | wc -l)
# The gate hashes every release byte once (read-back) and again as it reads the tiles with their
# digests (containers), and reads the upstream bytes it compares; the anchor hashes the same count.
til_bytes=$(find "$tmp/w1/release" -name '*.til' -printf '%s\n' | awk '{s+=$1} END {printf "%.0f", s}')
hashed=$((rel_bytes + til_bytes))
label_gate=minirun-gate
reset_gate='rm -rf "$tmp/w1/reports"'
cmd_gate=("$bin/minirun-gate" "${plan[@]}")
label_ossl=openssl-parallel
reset_ossl=:
cmd_ossl=(bash -c '
n=$(nproc); cd "$1"; find release -type f -print0 | xargs -0 -P "$n" -n 64 openssl dgst -sha256 > /dev/null
find release -name "*.til" -print0 | xargs -0 -P "$n" -n 64 openssl dgst -sha256 > /dev/null' _ "$tmp/w1")
g3=$(rr gate ossl)
mapfile -t g3 <<< "$g3"
gt=${g3[0]} ossl=${g3[1]}
{
    echo "# Repack and gate benchmark"
    echo
    echo "Command: \`ci/bench/pipeline.sh $scale${wide[*]:+ ${wide[*]}}\` on $(nproc) cores, $(date -u +%Y-%m-%d), same run as $out. Release: $rel_bytes bytes ($til_bytes in tile containers) from $src_bytes fetched bytes. The gate reads back and hashes every release byte, reads every container tile again with its SHA-256 while comparing it with the upstream bytes, and reads those; the anchor hashes $hashed bytes with \`openssl dgst -sha256\` on all cores."
    echo
    echo "The steps ran in $repeat rounds (repack, cp of the upstream, cp of the release; then gate, openssl), each round running every step once in turn. Each row is the step's median run by wall time, with its fastest and slowest wall time."
    echo
    echo "| step | wall s | wall min–max | MB/s | CPU s | peak RSS MiB | ratio (peer wall ÷ ours) | load at start |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|"
    row() { # row LABEL BYTES RATIO_BASE(wall or empty) FIELDS...
        local label=$1 b=$2 base=$3; shift 3
        local ratio=""; [ -n "$base" ] && ratio=$(echo "scale=2; $2 / $base" | bc)
        echo "| $label | $2 | $6–$7 | $(echo "scale=1; $b / $2 / 1000000" | bc) | $3 | $(( $4 / 1024 )) | $ratio | $5 |"
    }
    rw=$(echo "$rp" | cut -d' ' -f2); gw=$(echo "$gt" | cut -d' ' -f2)
    row minirun-repack "$rel_bytes" "" $rp
    row "cp -r + sync of the fetched upstream (46 files)" "$src_bytes" "$rw" $cpm
    row "cp -r + sync of the release ($rel_files files, same bytes)" "$rel_bytes" "$rw" $cpr
    row minirun-gate "$hashed" "" $gt
    row "openssl dgst -sha256, parallel" "$hashed" "$gw" $ossl
} > "$out2"
cat "$out2"
