#!/usr/bin/env bash
# The runner benchmark over GGUF block formats (issue 16), not a CI step: SmolLM2-135M-Instruct
# re-encoded from the shipped Q4_1 file to Q4_0, Q5_0, Q5_1, Q8_0, Q6_K (`minirun-gguf quantize
# --pure --allow-requantize`) and Q4_K_M (llama-quantize's per-tensor mixture; tensors whose rows
# are not whole K-quant super-blocks fall back to other types, as llama-quantize does), one file
# for both engines. For each: prefill of the same 64-token prompt then DECODE greedy tokens,
# minirun-run resident (wgpu; Mesa lavapipe on a machine without a GPU) and llama.cpp on the CPU
# with 2 threads (llama-cpp-python 0.3.36 in ci/.cache/venv-llamacpp, built by
# ci/oracles/smollm2_llamacpp.sh; "not run" where absent), ROUNDS round-robin rounds, medians;
# plus every quantized matvec's GB/s against the adapter's read ceiling
# (kernels/examples/bandwidth.rs). Writes docs/bench/runner-formats.md.
#
#   ci/bench/runner_formats.sh [ROUNDS] [DECODE]      (default 5 rounds, 128 decode tokens)
#
# About 1.5 minutes a round. Needs the release binaries (cargo build --release -p runner
# -p minirun-bins --bin minirun-gguf; cargo build --release -p kernels --examples).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CARGO_TARGET_DIR:=$PWD/target}"
bin=$CARGO_TARGET_DIR/release
rounds=${1:-5}
decode=${2:-128}
source_model=${MINIRUN_SMOLLM2_GGUF:-ci/.cache/SmolLM2-135M-Instruct.Q4_1.gguf}
out=docs/bench/runner-formats.md
tmp=$(mktemp -d /tmp/minirun-formats.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$tmp}
ids=$(python3 -c "import json; print(','.join(map(str, json.load(open('ci/oracles/smollm2_llamacpp.recorded.json'))['bench_2_threads']['prompt_ids'])))")
venv=ci/.cache/venv-llamacpp
formats=(q4_0 q5_0 q5_1 q8_0 Q6_K Q4_K_M)

for f in "${formats[@]}"; do
    pure=--pure
    [ "$f" = Q4_K_M ] && pure= # llama-quantize's own per-tensor mixture
    "$bin/minirun-gguf" quantize --type "$f" $pure --allow-requantize "$source_model" \
        "$tmp/model-$f.gguf" > /dev/null
done

run_one() { # format engine -> "prefill decode rss_mib" or "-"
    local model=$tmp/model-$1.gguf rss=$tmp/rss
    case $2 in
        minirun)
            /usr/bin/time -f %M -o "$rss" "$bin/minirun-run" --model "$model" --prompt-ids "$ids" \
                -n $((decode + 1)) --ignore-eos --resident --json > "$tmp/out.json" 2> /dev/null
            python3 - "$tmp/out.json" "$rss" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(r["prompt_tokens"] / r["prefill_s"], r["decode_tokens_per_s"], int(open(sys.argv[2]).read().split()[-1]) // 1024)
PY
            ;;
        llamacpp)
            if [ ! -x "$venv/bin/python" ]; then echo "-"; return; fi
            /usr/bin/time -f %M -o "$rss" "$venv/bin/python" ci/bench/llamacpp_decode.py "$model" \
                "$ids" "$decode" --threads 2 > "$tmp/out.json" 2> /dev/null
            python3 - "$tmp/out.json" "$rss" <<'PY'
import json, sys
r = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
print(r["prefill_tokens_per_s"], r["decode_tokens_per_s"], int(open(sys.argv[2]).read().split()[-1]) // 1024)
PY
            ;;
    esac
}

for r in $(seq "$rounds"); do
    for f in "${formats[@]}"; do
        for e in minirun llamacpp; do
            res=$(run_one "$f" "$e")
            echo "$res" >> "$tmp/$f-$e"
            echo "round $r $f $e: $res" >&2
        done
    done
done
"$bin/examples/bandwidth" 32 5 > "$tmp/bandwidth.md" 2> /dev/null

python3 - "$tmp" "$out" "$rounds" "$decode" "${formats[@]}" <<'PY'
import os, statistics, sys
tmp, out, rounds, decode = sys.argv[1:5]
formats = sys.argv[5:]
def medians(f, e):
    ls = [l.split() for l in open(os.path.join(tmp, f"{f}-{e}")).read().splitlines()]
    if not ls or ls[0] == ["-"]:
        return None
    cols = list(zip(*[[float(x) for x in l] for l in ls]))
    return [statistics.median(c) for c in cols]
bw = open(os.path.join(tmp, "bandwidth.md")).read().splitlines()
lines = [
    "# Runner benchmark: SmolLM2-135M-Instruct in other GGUF block formats",
    "",
    f"Command: `ci/bench/runner_formats.sh {rounds} {decode}` (release build; {rounds} round-robin rounds, "
    "each running every format and engine once in turn; medians; peak RSS from GNU time). Models: the "
    "shipped Q4_1 file re-encoded by `minirun-gguf quantize --type F --pure --allow-requantize` "
    "(Q4_K_M: llama-quantize's mixture instead of `--pure`; rows that are not whole K-quant "
    "super-blocks fall back to other types), one file for both engines. Workload: prefill of the "
    "64-token prompt `bench_2_threads.prompt_ids` of ci/oracles/smollm2_llamacpp.recorded.json, then "
    f"{decode} greedy decode steps. Machine: 2 cores, no GPU; " + bw[0] + ".",
    "",
    "| format | file MB | minirun-run `--resident` prefill tok/s | decode tok/s | llama.cpp 0.3.36 CPU (2 threads) prefill tok/s | decode tok/s | decode × llama.cpp | minirun implied GB/s | minirun peak RSS MiB |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
]
for f in formats:
    mb = os.path.getsize(os.path.join(tmp, f"model-{f}.gguf")) / 1e6
    m, c = medians(f, "minirun"), medians(f, "llamacpp")
    cp, cd = (f"{c[0]:.1f}", f"{c[1]:.2f}") if c else ("not run", "")
    ratio = f"{m[1] / c[1]:.3f}×" if c else "–"
    lines.append(f"| {f} | {mb:.1f} | {m[0]:.1f} | {m[1]:.2f} | {cp} | {cd} | {ratio} | {m[1] * mb / 1e3:.2f} | {m[2]:.0f} |")
lines += ["", "minirun's prefill includes compiling its pipelines on the first forward (llvmpipe JIT-compiles "
          "each generated one-token module; several seconds for a model's set), which the one-token "
          "prefill on a CPU adapter does not amortise over a 64-token prompt.", "",
          bw[1], "",
          "Quantized matvec throughput (`cargo run --release -p kernels --example bandwidth -- 32 5`, "
          "K = 4096, ~32 MiB of weights, median of 5 submits of 8 dispatches), both row mappings, the "
          "uniform-input form and the unrolled module (— where the format has none at this K: the modules "
          "of the 4-element blocks, `fp8-e4m3-block`, affine, bf16 and f16, stop at K = 2048, which "
          "`… --example bandwidth -- 32 5 2048` measures):", ""]
lines += bw[3:]
open(out, "w").write("\n".join(lines) + "\n")
print(open(out).read())
PY
