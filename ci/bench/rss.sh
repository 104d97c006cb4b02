#!/usr/bin/env bash
# Peak RSS of fetch, repack and gate against model size (issue 5: "peak RSS independent of model
# size"), not a CI step. Generates the --wide DeepSeek V4 checkpoint at each SCALE (experts per
# layer: the bytes grow linearly with it), serves it with minirun-hub on loopback, runs the three
# stages once each and records their peak RSS → docs/bench/rss.md.
#
#   ci/bench/rss.sh [SCALE...]        (default: 4 14 28, about 1, 2.5 and 5 GB)
#
# Needs the release binaries (cargo build --release --workspace). Cleans up its temp dir.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CARGO_TARGET_DIR:=$PWD/target}"
bin=$CARGO_TARGET_DIR/release
scales=("$@")
[ ${#scales[@]} -gt 0 ] || scales=(4 14 28)
tmp=$(mktemp -d /tmp/minirun-rss.XXXXXX)
trap 'kill "${hub_pid:-0}" 2>/dev/null || true; rm -rf "$tmp"' EXIT
rev=60d8d70770c6776ff598c94bb586a859a38244f1
repo=deepseek-ai/DeepSeek-V4-Flash
out=docs/bench/rss.md

# Peak RSS in MiB of one command (GNU time's maximum resident set size).
peak() {
    /usr/bin/time -f "%M" -o "$tmp/rss" "$@" > /dev/null 2>&1
    echo $(( $(tail -n 1 "$tmp/rss") / 1024 ))
}

rows=()
for s in "${scales[@]}"; do
    rm -rf "$tmp/ckpt" "$tmp/hub" "$tmp/w"
    "$bin/minirun-synth" deepseek-v4 --out "$tmp/ckpt" --scale "$s" --wide > /dev/null
    bytes=$(du -sb --apparent-size "$tmp/ckpt" | cut -f1)
    "$bin/minirun-hub" import --root "$tmp/hub" --repo $repo --revision $rev "$tmp/ckpt" > /dev/null
    rm -rf "$tmp/ckpt"
    "$bin/minirun-hub" serve --init --root "$tmp/hub" --addr 127.0.0.1:0 > "$tmp/hub.out" 2> /dev/null &
    hub_pid=$!
    for _ in $(seq 100); do grep -q listening "$tmp/hub.out" && break; sleep 0.1; done
    url=$(sed -n 's/^listening on //p' "$tmp/hub.out")
    plan=(--plan plans/deepseek-v4.toml --work-dir "$tmp/w")
    f=$(peak "$bin/minirun-fetch" "${plan[@]}" --endpoint "$url")
    r=$(peak "$bin/minirun-repack" "${plan[@]}")
    g=$(peak "$bin/minirun-gate" "${plan[@]}")
    [ -f "$tmp/w/reports/gate.json" ] || { echo "gate wrote no report at scale $s" >&2; exit 1; }
    tensors=$(find "$tmp/w/release" -name '*.til' | wc -l)
    files=$(find "$tmp/w/release" -type f | wc -l)
    kill "$hub_pid"; wait "$hub_pid" 2> /dev/null || true
    rows+=("| $s | $bytes | $files | $tensors | $f | $r | $g |")
done
{
    echo "# Peak RSS against model size"
    echo
    echo "Command: \`ci/bench/rss.sh ${scales[*]}\` on $(nproc) cores, $(date -u +%Y-%m-%d). Checkpoint: \`minirun-synth deepseek-v4 --scale SCALE --wide\` (real-sized 2048-wide experts; SCALE experts per layer, so the bytes grow linearly with SCALE), served by \`minirun-hub\` on loopback; one run of each stage; peak RSS from GNU time."
    echo
    echo "| scale | checkpoint bytes | release files | containers | fetch peak RSS MiB | repack peak RSS MiB | gate peak RSS MiB |"
    echo "|---:|---:|---:|---:|---:|---:|---:|"
    printf '%s\n' "${rows[@]}"
} > "$out"
cat "$out"
