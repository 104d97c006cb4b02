#!/usr/bin/env bash
# Whole-file quantize throughput and peak RSS: `minirun-gguf quantize --pure` (its library call,
# release build of the tooling crate: examples/gguf_quantize_file.rs) against llama.cpp's
# `llama-quantize --pure` (built by ci/oracles/llama_quantize.sh) on the same f16 input — SmolLM2
# dequantized to f16 by our own quantize (270 MB). Both outputs must have the same SHA-256.
# Not a CI step; results in docs/bench/gguf-quantize.md.
# Usage: ci/bench/gguf_quantize_file.sh [LLAMA_QUANTIZE] [THREADS]   (default $CI_CACHE/llama-quantize/build/bin/llama-quantize, 2)
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CI_CACHE:=$PWD/ci/.cache}"
lq=${1:-$CI_CACHE/llama-quantize/build/bin/llama-quantize}
threads=${2:-2}
real="${MINIRUN_SMOLLM2_GGUF:-$CI_CACHE/SmolLM2-135M-Instruct.Q4_1.gguf}"
cargo build -q --release -p tooling --example gguf_quantize_file
ours="${CARGO_TARGET_DIR:-target}/release/examples/gguf_quantize_file"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
"$ours" "$real" "$work/in-f16.gguf" f16 --pure --allow-requantize >/dev/null
echo "input: SmolLM2 as f16, $(stat -c %s "$work/in-f16.gguf") bytes; $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
echo "| type | llama-quantize s | llama-quantize peak RSS MiB | minirun s | minirun peak RSS MiB | minirun / llama | same SHA-256 |"
echo "|---|---|---|---|---|---|---|"
for t in ${TYPES:-q4_0 q8_0 q4_K q6_K f32}; do
    cat "$work/in-f16.gguf" > /dev/null   # page cache warm for both
    /usr/bin/time -f "%e %M" -o "$work/t1" "$lq" --pure "$work/in-f16.gguf" "$work/l.gguf" "$t" "$threads" >/dev/null 2>&1
    /usr/bin/time -f "%e %M" -o "$work/t2" "$ours" "$work/in-f16.gguf" "$work/m.gguf" "$t" --pure >/dev/null
    read -r ls lr < "$work/t1"; read -r ms mr < "$work/t2"
    same=$([ "$(sha256sum < "$work/l.gguf")" = "$(sha256sum < "$work/m.gguf")" ] && echo yes || echo NO)
    awk -v t="$t" -v ls="$ls" -v lr="$lr" -v ms="$ms" -v mr="$mr" -v s="$same" \
        'BEGIN { printf "| %s | %.2f | %.0f | %.2f | %.0f | %.2f× | %s |\n", t, ls, lr/1024, ms, mr/1024, ms/ls, s }'
    rm -f "$work/l.gguf" "$work/m.gguf"
done
