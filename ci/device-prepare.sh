#!/usr/bin/env bash
# Prepares what ci/device-check.sh needs on a lent GPU machine, which has no network, no model
# file and maybe no Rust toolchain, and receives the working tree plus at most 64 MiB in all
# (docs/runner.md "GPU check"). Run here, then on the machine with `carry: ["ci/.device"]`:
#
#   ci/device-prepare.sh [GGUF]        (default $MINIRUN_SMOLLM2_GGUF or ci/.cache/…)
#   device run: ci/device-check.sh     (carry ci/.device; it writes $OUT/device-check.txt)
#
# ci/.device/ (ignored by git) gets: the release binaries minirun-run, minirun-gguf,
# minirun-demo and kernels' bandwidth and prefill examples, stripped, in one gzip tar; the SmolLM2 GGUF's
# header (its first data_start bytes: metadata, tokenizer, tensor index; 1.7 MB), from which the
# check generates a model of the same shape and types (`minirun-gguf synth --like`); the Vulkan
# loader's .deb when apt can download it (the machine may lack libvulkan1); the commit.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-${MINIRUN_SMOLLM2_GGUF:-$PWD/ci/.cache/SmolLM2-135M-Instruct.Q4_1.gguf}}
: "${CARGO_TARGET_DIR:=$PWD/target}"
out=ci/.device
[ -f "$model" ] || { echo "device-prepare: $model not found (run ci/install, or pass the GGUF)" >&2; exit 1; }

echo "=== build (release)"
cargo build --release -q -p runner -p minirun-bins -p kernels \
    --bin minirun-run --bin minirun-gguf --bin minirun-demo --example bandwidth --example prefill
rm -rf "$out"
mkdir -p "$out/bin" "$out/debs"
for b in minirun-run minirun-gguf minirun-demo examples/bandwidth examples/prefill; do
    cp "$CARGO_TARGET_DIR/release/$b" "$out/bin/"
    strip "$out/bin/$(basename "$b")"
done
tar -C "$out" -czf "$out/bin.tar.gz" bin
rm -rf "$out/bin"

echo "=== the SmolLM2 header"
start=$("$CARGO_TARGET_DIR/release/minirun-gguf" info "$model" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["data_start"])')
head -c "$start" "$model" > "$out/smollm2.header.gguf"

echo "=== the Vulkan loader (optional)"
(cd "$out/debs" && apt-get download libvulkan1 > /dev/null 2>&1) \
    || echo "apt-get download libvulkan1 failed: the machine's own loader must do"
git rev-parse HEAD > "$out/commit"
git status --porcelain --untracked-files=no | grep -q . && echo "dirty" >> "$out/commit"

total=$(du -cb "$out" | tail -1 | cut -f1)
tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
echo "ci/.device: $((total / 1024)) KiB; tracked tree $((tree / 1024)) KiB; limit 65536 KiB"
if [ $((total + tree)) -gt $((60 * 1024 * 1024)) ]; then
    echo "device-prepare: over 60 MiB with the tree; the call would be refused" >&2
    exit 1
fi
echo "ready: device run 'ci/device-check.sh' with carry [\"ci/.device\"]"
