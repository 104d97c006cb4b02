#!/usr/bin/env bash
# GPU check of the wgpu runner on a lent machine (issue 16 item 5; about 3 minutes; not a CI
# step — CI runs on Mesa lavapipe). It needs only the tree and ci/.device, which
# ci/device-prepare.sh makes here and the device call carries (`carry: ["ci/.device"]`): no
# cargo, network or model file there (docs/runner.md "GPU check"). Reports on stdout and in
# $OUT/device-check.txt when OUT is set (the device tool's output folder):
#   - the adapter; its read ceiling (a plain streaming-read kernel) and every quantized matvec's
#     GB/s, with the fraction of REF_GBPS, the card's memory bandwidth (default 4800: an H200;
#     an H100 SXM is 3350);
#   - the prefill matmul (64 tokens) of the formats, tiled (the Lanes mapping's kernel) and untiled,
#     as weight GB/s: whether the shared-memory tiling pays on this card;
#   - minirun-run on a SmolLM2-shaped model generated from the carried header (the real file's
#     tokenizer, shapes and Q4_1 mixture, generated weights): prefill of the 64-token bench prompt
#     and 128 greedy decode steps, resident and streamed, with the per-step counters and the
#     bandwidth the decode implies;
#   - the DeepSeek V4 demo artifact (minirun-demo generates, publishes and pulls it there): 32
#     prompt ids then 16 decode steps, resident and streamed at two expert-cache sizes.
#
#   ci/device-check.sh            (REF_GBPS=3350 on an H100; BANDWIDTH_MIB=8 PREFILL_MIB=1 on
#                                  lavapipe, where 256 MiB a matrix takes minutes)
set -uo pipefail
cd "$(dirname "$0")/.."
dev=$PWD/ci/.device
if [ ! -f "$dev/bin.tar.gz" ]; then
    echo "device-check: no ci/.device/bin.tar.gz: run ci/device-prepare.sh here and carry ci/.device" >&2
    exit 1
fi
work=$(mktemp -d /tmp/device-check.XXXXXX)
tar -C "$work" -xzf "$dev/bin.tar.gz"
bin=$work/bin
export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$work}
if ! ldconfig -p | grep -q 'libvulkan\.so\.1'; then
    for f in "$dev"/debs/*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done
    ldconfig
fi
icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$icd" ]; then export VK_DRIVER_FILES=$icd; fi
report=${OUT:-$work}/device-check.txt
exec > >(tee "$report") 2>&1
ref=${REF_GBPS:-4800}

# prefill / decode tokens/s and the largest per-step counters of a `minirun-run --json --stats`
summary() {
    python3 - "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
model_bytes = float(sys.argv[2])
m = (r.get("per_step") or {}).get("max", {})
line = (f"prefill {r['prompt_tokens'] / r['prefill_s']:.1f} tok/s, decode {r['decode_tokens_per_s']:.2f} tok/s; "
        f"a step at most: {m.get('submits')} submits, {m.get('dispatches')} dispatches, "
        f"{m.get('bytes_read_back')} B read back, {m.get('bytes_uploaded')} B uploaded, "
        f"{m.get('tile_reads')} tile reads, {m.get('expert_misses')} expert misses; "
        f"device memory {(m.get('device_bytes') or 0) / 2**20:.0f} MiB")
if model_bytes > 0:
    line += f"; decode implies {r['decode_tokens_per_s'] * model_bytes / 1e9:.1f} GB/s of weights"
c = r.get("expert_cache")
if c:
    line += f"; expert cache {c['hits']} hits / {c['misses']} misses"
print(line)
PY
}

echo "device-check of $(cat "$dev/commit" | tr '\n' ' ')on $(hostname)"
command -v nvidia-smi > /dev/null \
    && nvidia-smi --query-gpu=name,memory.total,clocks.max.memory --format=csv,noheader
echo
mib=${BANDWIDTH_MIB:-256}
echo "=== read ceiling and every quantized matvec (kernels/examples/bandwidth.rs, $mib MiB, median of 5 submits); last columns: Lanes GB/s without and with subgroups ÷ $ref GB/s"
timeout 200 "$bin/bandwidth" "$mib" 5 2>&1 | awk -F'|' -v ref="$ref" '
    /^\| format/ { printf "%s Lanes / %s GB/s | + subgroups / %s GB/s |\n", $0, ref, ref; next }
    /^\|---/ { printf "%s---:|---:|\n", $0; next }
    /^\| [a-z0-9]/ { printf "%s %.1f %% | %.1f %% |\n", $0, 100 * $4 / ref, 100 * $6 / ref; next }
    /^stream_read/ { print; split($0, w, ": "); printf "(the ceiling is %.1f %% of %s GB/s)\n", 100 * w[2] / ref, ref; next }
    { print }'

echo
pmib=${PREFILL_MIB:-$mib}
echo "=== prefill matmul, 64 tokens, tiled vs untiled (kernels/examples/prefill.rs, $pmib MiB, median of 5 submits)"
timeout 150 "$bin/prefill" "$pmib" 5 64 2>&1

echo
echo "=== SmolLM2-shaped Q4_1 (generated from the carried header), 64-token prompt, 128 decode steps"
model=$work/smollm2.gguf
"$bin/minirun-gguf" synth --like "$dev/smollm2.header.gguf" --out "$model"
ids=$(python3 -c "import json; print(','.join(map(str, json.load(open('ci/oracles/smollm2_llamacpp.recorded.json'))['bench_2_threads']['prompt_ids'])))")
size=$(stat -c %s "$model")
for mode in --resident --stream; do
    if timeout 120 "$bin/minirun-run" --model "$model" --prompt-ids "$ids" -n 128 --greedy \
        --ignore-eos --json --stats $mode > "$work/run.json" 2> "$work/run.err"; then
        echo "minirun-run $mode: $(summary "$work/run.json" "$size")"
    else
        echo "minirun-run $mode FAILED: $(tail -3 "$work/run.err")"
    fi
done

echo
echo "=== DeepSeek V4 demo artifact (generated, published and pulled here), 32 prompt ids, 16 decode steps"
if timeout 180 "$bin/minirun-demo" --work-dir "$work/demo" --generate 0 > "$work/demo.log" 2>&1; then
    art=$work/demo/demo/consumer
    ids=$(python3 -c "import json; print(','.join(map(str, json.load(open('ci/oracles/deepseek_v4/reference.json'))['prompt']['ids'][:32])))")
    for flags in "--resident" "--stream --expert-cache-mib 1024" "--stream --expert-cache-mib 4"; do
        # (word splitting of $flags is intended)
        # shellcheck disable=SC2086
        if timeout 120 "$bin/minirun-run" --artifact "$art" --prompt-ids "$ids" -n 17 --ignore-eos \
            $flags --json --stats > "$work/run.json" 2> "$work/run.err"; then
            echo "minirun-run --artifact $flags: $(summary "$work/run.json" 0)"
        else
            echo "minirun-run --artifact $flags FAILED: $(tail -3 "$work/run.err")"
        fi
    done
else
    echo "minirun-demo FAILED: $(tail -5 "$work/demo.log")"
fi
echo
echo "device-check: done; report in $report"
