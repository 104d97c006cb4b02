#!/usr/bin/env bash
# The runner benchmark (issue 16), not a CI step: SmolLM2-135M-Instruct Q4_1, prefill of the same
# 64-token prompt then DECODE greedy tokens, every engine in one run, ROUNDS round-robin rounds
# (each round runs every engine once, in turn), medians, peak RSS; plus the adapter's read ceiling
# and every quantized matvec's GB/s (kernels/examples/bandwidth.rs). Writes docs/bench/runner.md.
#
#   ci/bench/runner.sh [ROUNDS] [DECODE]      (default 5 rounds, 128 decode tokens)
#
# Engines: minirun-run resident and streamed (wgpu; Mesa lavapipe on a machine without a GPU),
# llama.cpp on the CPU with 2 threads (llama-cpp-python 0.3.36 in ci/.cache/venv-llamacpp, built
# by ci/oracles/smollm2_llamacpp.sh), and llama.cpp's Vulkan backend on the same adapter when
# ci/.cache/venv-llamacpp-vulkan holds llama-cpp-python 0.2.90 built with -DGGML_VULKAN=ON
# (ci/oracles/llamacpp_vulkan.sh builds it); an engine whose venv is absent is reported as
# "not run". About 3 minutes a round, most of it the Vulkan peer (~1 token/s). Needs the release binaries (cargo build --release -p runner -p kernels --examples).
# BASELINE=/path/to/an/older/minirun-run (BASELINE_LABEL=its commit) adds its resident and
# streamed runs to every round (before/after in one round-robin run); OUT=PAGE writes the table
# there instead of docs/bench/runner.md. BANDWIDTH=0 skips the adapter's read ceiling and the
# matvec table (the kernels crate's, unchanged by a runner change; about 40 minutes on lavapipe).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CARGO_TARGET_DIR:=$PWD/target}"
bin=$CARGO_TARGET_DIR/release
rounds=${1:-5}
decode=${2:-128}
model=${MINIRUN_SMOLLM2_GGUF:-ci/.cache/SmolLM2-135M-Instruct.Q4_1.gguf}
out=${OUT:-docs/bench/runner.md}
tmp=$(mktemp -d /tmp/minirun-runner.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$tmp}
ids=$(python3 -c "import json; print(','.join(map(str, json.load(open('ci/oracles/smollm2_llamacpp.recorded.json'))['bench_2_threads']['prompt_ids'])))")
cpu_venv=ci/.cache/venv-llamacpp
vk_venv=ci/.cache/venv-llamacpp-vulkan

engines=(resident streamed llamacpp-cpu llamacpp-vulkan)
[ -n "${BASELINE:-}" ] && engines=(baseline-resident baseline-streamed "${engines[@]}")
run_one() { # engine -> "prefill decode rss_mib" or "-"
    local e=$1 rss=$tmp/rss run=$bin/minirun-run
    case $e in
        resident|streamed|baseline-resident|baseline-streamed)
            local mode=--resident
            case $e in *streamed) mode=--stream ;; esac
            case $e in baseline-*) run=$BASELINE ;; esac
            /usr/bin/time -f %M -o "$rss" "$run" --model "$model" --prompt-ids "$ids" \
                -n $((decode + 1)) --ignore-eos $mode --json > "$tmp/out.json" 2> /dev/null
            python3 - "$tmp/out.json" "$rss" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(r["prompt_tokens"] / r["prefill_s"], r["decode_tokens_per_s"], int(open(sys.argv[2]).read().split()[-1]) // 1024)
PY
            ;;
        llamacpp-cpu|llamacpp-vulkan)
            local venv=$cpu_venv flag=
            [ "$e" = llamacpp-vulkan ] && venv=$vk_venv flag=--gpu
            if [ ! -x "$venv/bin/python" ]; then echo "-"; return; fi
            /usr/bin/time -f %M -o "$rss" "$venv/bin/python" ci/bench/llamacpp_decode.py "$model" \
                "$ids" "$decode" --threads 2 $flag > "$tmp/out.json" 2> /dev/null
            python3 - "$tmp/out.json" "$rss" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print(r["prefill_tokens_per_s"], r["decode_tokens_per_s"], int(open(sys.argv[2]).read().split()[-1]) // 1024)
PY
            ;;
    esac
}

for r in $(seq "$rounds"); do
    for e in "${engines[@]}"; do
        res=$(run_one "$e")
        echo "$res" >> "$tmp/$e"
        echo "round $r $e: $res" >&2
    done
done
if [ "${BANDWIDTH:-1}" != 0 ]; then
    "$bin/examples/bandwidth" 32 5 > "$tmp/bandwidth.md" 2> /dev/null
    python3 ci/bench/copy_bandwidth.py "$model" 5 > "$tmp/copy.txt"
fi

python3 - "$tmp" "$out" "$rounds" "$decode" "$model" "${BASELINE_LABEL:-an older build}" <<'PY'
import os, statistics, subprocess, sys
tmp, out, rounds, decode, model, base_label = sys.argv[1:7]
size = os.path.getsize(model)
rows = {}
for e in ["baseline-resident", "baseline-streamed", "resident", "streamed", "llamacpp-cpu", "llamacpp-vulkan"]:
    if not os.path.exists(os.path.join(tmp, e)):
        continue
    lines = [l.split() for l in open(os.path.join(tmp, e)).read().splitlines()]
    if not lines or lines[0] == ["-"]:
        rows[e] = None
        continue
    cols = list(zip(*[[float(x) for x in l] for l in lines]))
    rows[e] = [statistics.median(c) for c in cols] + [min(cols[1]), max(cols[1])]
names = {
    "baseline-resident": f"baseline: {base_label}, `--resident`",
    "baseline-streamed": f"baseline: {base_label}, `--stream`",
    "resident": "minirun-run `--resident` (wgpu)",
    "streamed": "minirun-run `--stream` (wgpu, 1 MiB tiles, ring of 8)",
    "llamacpp-cpu": "llama.cpp 0.3.36 CPU, 2 threads",
    "llamacpp-vulkan": "llama.cpp 0.2.90 Vulkan, all layers offloaded",
}
cpu = rows["llamacpp-cpu"]
vk = rows["llamacpp-vulkan"]
has_bw = os.path.exists(os.path.join(tmp, "bandwidth.md"))
bw = open(os.path.join(tmp, "bandwidth.md")).read() if has_bw else ""
adapter = bw.splitlines()[0] if has_bw else "the default wgpu adapter"
lines = [
    "# Runner benchmark: SmolLM2-135M-Instruct Q4_1",
    "",
    f"Command: `ci/bench/runner.sh {rounds} {decode}` (release build; {rounds} round-robin rounds, each "
    "running every engine once in turn; medians; peak RSS from GNU time). Workload: prefill of the "
    f"64-token prompt `bench_2_threads.prompt_ids` of ci/oracles/smollm2_llamacpp.recorded.json, then "
    f"{decode} greedy decode steps. Model file {size / 1e6:.1f} MB; a decode step reads about that many "
    "weight bytes. Machine: 2 cores, no GPU; " + adapter + ".",
    "",
    "| engine | prefill tok/s | decode tok/s (min–max) | × llama.cpp CPU decode | × llama.cpp Vulkan decode | implied GB/s | peak RSS MiB |",
    "|---|---:|---:|---:|---:|---:|---:|",
]
for e, name in names.items():
    if e not in rows:
        continue
    r = rows[e]
    if r is None:
        lines.append(f"| {name} | not run | | | | | |")
        continue
    ratio = f"{r[1] / cpu[1]:.3f}×" if cpu else "–"
    vratio = f"{r[1] / vk[1]:.1f}×" if vk else "–"
    lines.append(f"| {name} | {r[0]:.1f} | {r[1]:.2f} ({r[3]:.2f}–{r[4]:.2f}) | {ratio} | {vratio} | {r[1] * size / 1e9:.2f} | {r[2]:.0f} |")
if has_bw:
  ceiling = float(bw.splitlines()[1].split(":")[1].split()[0])
  copy = open(os.path.join(tmp, "copy.txt")).read().strip()
  lines += ["", f"Adapter read ceiling (`Kernel::StreamRead`, 32 MiB): **{ceiling:.2f} GB/s**. "
          f"The machine's copy bandwidth (`ci/bench/copy_bandwidth.py`, the streaming target's yardstick): {copy}.", "",
          "Quantized matvec throughput (`cargo run --release -p kernels --example bandwidth -- 32 5`, "
          "K = 4096, ~32 MiB of weights, median of 5 submits of 8 dispatches), both row mappings, the "
          "uniform-input form and the unrolled module (— where the format has none):", ""]
  lines += bw.splitlines()[3:]
lines += ["", "The DeepSeek V4 part (the demo's verified artifact, resident and streamed at two expert-cache "
          "sizes): `ci/bench/runner_v4.sh` → docs/bench/runner-v4.md. The same SmolLM2 workload in the "
          "other GGUF block formats against llama.cpp CPU, and the matvec table after every format got "
          "an unrolled form: `ci/bench/runner_formats.sh` → docs/bench/runner-formats.md."]
open(out, "w").write("\n".join(lines) + "\n")
print(open(out).read())
PY
