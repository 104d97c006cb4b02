#!/usr/bin/env bash
# GPU check of the wgpu runner on a machine with a real adapter (< 5 minutes; not a CI step —
# CI runs on Mesa lavapipe). Reports the adapter, matvec GB/s on the SmolLM2-sized 49152 × 576 Q4_1
# matrix (the engine bench), the kernel and runner test suites under MINIRUN_REQUIRE_ADAPTER=1, and
# minirun-run prefill/decode tokens/s on SmolLM2-135M Q4_1, resident and streamed, and the
# DeepSeek V4 decode benchmark (tokens/s, bytes read per token; docs/runner-deepseek-v4.md).
# Usage: ci/device-check.sh [GGUF]   (default $MINIRUN_SMOLLM2_GGUF or ci/.cache/…)
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-${MINIRUN_SMOLLM2_GGUF:-$PWD/ci/.cache/SmolLM2-135M-Instruct.Q4_1.gguf}}
export MINIRUN_SMOLLM2_GGUF="$model" MINIRUN_REQUIRE_ADAPTER=1
if [ -z "${XDG_RUNTIME_DIR:-}" ]; then XDG_RUNTIME_DIR=$(mktemp -d); export XDG_RUNTIME_DIR; fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true
echo "=== build (release: runner, kernels)"
timeout 240 cargo build --release -p runner --bins --tests -q
echo "=== matvec GB/s (engine bench)"
timeout 60 cargo test --release -p runner --test integration engine::bench_q4_1_output_matrix -- --ignored --nocapture 2>&1 | grep -E "q4_1|adapter|test result" || true
echo "=== read ceiling and every quantized matvec's GB/s, both row mappings (kernels/examples/bandwidth.rs)"
timeout 120 cargo run --release -q -p kernels --example bandwidth -- 256 5 2>/dev/null || true
echo "=== tests on the adapter (kernels, engine, SmolLM2 streamed == resident; the long V4 suites stay on CI)"
timeout 120 cargo test --release -p kernels -q 2>&1 | grep -E "test result|FAILED|panicked" || true
timeout 120 cargo test --release -p runner -q --test integration -- engine:: smollm2_stream:: 2>&1 | grep -E "test result|FAILED|panicked" || true
if [ -f "$model" ]; then
    bin=${CARGO_TARGET_DIR:-target}/release/minirun-run
    for mode in --resident --stream; do
        echo "=== minirun-run $mode"
        timeout 60 "$bin" --model "$model" -p "The capital of France is" -n 128 --greedy --ignore-eos --stats $mode >/dev/null
    done
else
    echo "SKIPPED minirun-run: $model not found"
fi
echo "=== DeepSeek V4 (tiny generated artifact): decode tokens/s, bytes read and submits per token; resident (mHC residual on the host and on the device) vs streamed"
timeout 120 cargo test --release -p runner --test integration deepseek_bench:: -- --ignored --nocapture 2>&1 \
    | grep -E "mode|resident|streamed|reference|tokens/s|test result" || true
