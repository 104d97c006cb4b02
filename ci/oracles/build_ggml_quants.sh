#!/usr/bin/env bash
# Builds ggml's reference quantizers (ggml/src/ggml-quants.c from the llama-cpp-python 0.3.36
# source distribution on PyPI, the llama.cpp that `llama-quantize --pure` runs) into a shared
# object, and records the fixture manifest: path, bytes, sha256, the producer command, the
# compiler and flags, and the source's identity. Idempotent: an existing object whose manifest
# verifies is kept. Usage: build_ggml_quants.sh OUT_DIR   (CI: $CI_CACHE/ggml-quants);
# GGML_SDIST=/path/llama_cpp_python-0.3.36.tar.gz skips the download (sha256 still checked).
#
# Flags: -O2 -fPIC, no -march and no -ffp-contract: GCC's default is -ffp-contract=fast, but the
# x86-64 baseline ISA has no FMA instruction, so nothing is contracted — the arithmetic of an
# x86-64 llama.cpp built with GGML_NATIVE=OFF, and of `minirun-gguf quantize --fp-contract off`.
set -euo pipefail
out=${1:?usage: build_ggml_quants.sh OUT_DIR}
sdist_version=0.3.36
sdist_sha=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
mkdir -p "$out"
py=${PYTHON:-python3}
if [ -f "$out/manifest.json" ] && grep -q libggml-quants-fma.so "$out/manifest.json" && "$py" "$(dirname "$0")/check_fixture.py" "$out/manifest.json" >/dev/null 2>&1; then
    echo "ggml-quants oracle already built and verified in $out"; exit 0
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
if [ -n "${GGML_SDIST:-}" ]; then
    cp "$GGML_SDIST" "$tmp/"
else
    # --no-binary for this package only: its build dependencies may come as wheels.
    "$py" -m pip download -q --no-deps --no-binary llama-cpp-python --disable-pip-version-check \
        -d "$tmp" "llama-cpp-python==$sdist_version" || true
fi
tgz=$(ls "$tmp"/llama_cpp_python-$sdist_version.tar.gz 2>/dev/null || true)
[ -n "$tgz" ] || { echo "could not download llama_cpp_python-$sdist_version.tar.gz"; exit 1; }
got=$(sha256sum "$tgz" | cut -d' ' -f1)
if [ "$got" != "$sdist_sha" ]; then echo "sdist sha256 $got != $sdist_sha"; exit 1; fi
root="llama_cpp_python-$sdist_version/vendor/llama.cpp/ggml"
tar -xzf "$tgz" -C "$tmp" "$root/src" "$root/include"
src="$tmp/$root/src"
cc=${CC:-gcc}
ggml_sha=$(sha256sum "$src/ggml-quants.c" | cut -d' ' -f1)
# Two objects: the x86-64 baseline (no FMA instruction: nothing contracted, `--fp-contract off`)
# and the same source with -mfma -ffp-contract=fast (GCC contracts a*b+c into FMA where it can:
# the arithmetic `--fp-contract fast` models; the seed's "selectable arithmetic").
for variant in base fma; do
    flags="-O2 -fPIC -shared -std=gnu11 -DNDEBUG"
    lib=libggml-quants.so
    if [ "$variant" = fma ]; then flags="$flags -mfma -ffp-contract=fast"; lib=libggml-quants-fma.so; fi
    $cc $flags -ffile-prefix-map="$tmp"=/src -I"$src" -I"$tmp/$root/include" -o "$out/$lib" "$src/ggml-quants.c" -lm
    echo "$lib|$cc $flags -ffile-prefix-map=TMP=/src"
done > "$out/builds.txt"
"$py" - "$out" "$got" "$($cc --version | head -1)" "$ggml_sha" "$sdist_version" <<'PY'
import hashlib, json, os, sys, datetime
out, sdist_sha, cc, src_sha, ver = sys.argv[1:]
entries = []
for line in open(os.path.join(out, "builds.txt")).read().splitlines():
    lib, flags = line.split("|", 1)
    b = open(os.path.join(out, lib), "rb").read()
    entries.append({
        "path": lib, "bytes": len(b), "sha256": hashlib.sha256(b).hexdigest(),
        "producer": f"ci/oracles/build_ggml_quants.sh (compiles vendor/llama.cpp/ggml/src/ggml-quants.c of llama-cpp-python {ver})",
        "source": {"pypi": f"llama-cpp-python=={ver}", "sdist_sha256": sdist_sha, "ggml_quants_c_sha256": src_sha},
        "compiler": cc, "flags": flags,
        "ffp_contract": "fast, with FMA instructions (-mfma): contracted" if "-mfma" in flags else
                        "fast (GCC default) with no FMA in the x86-64 baseline ISA = uncontracted",
        "machine": os.uname().machine, "date": datetime.date.today().isoformat(),
    })
json.dump({"entries": entries}, open(os.path.join(out, "manifest.json"), "w"), indent=2)
PY
"$py" - "$out/manifest.json" "$(dirname "$0")/ggml-quants.recorded.json" <<'PY'
import json, sys
rec = json.load(open(sys.argv[2]))
for built in json.load(open(sys.argv[1]))["entries"]:
    if built["source"]["ggml_quants_c_sha256"] != rec["source"]["ggml_quants_c_sha256"]:
        sys.exit(f"ggml-quants.c sha256 {built['source']['ggml_quants_c_sha256']} is not the recorded source")
    same = [b for b in rec["builds"] if b["compiler"] == built["compiler"] and b["flags"] == built["flags"]]
    if same:
        if same[0]["sha256"] != built["sha256"]:
            sys.exit(f"recorded compiler {built['compiler']} built {built['path']} sha256 {built['sha256']}, the record says {same[0]['sha256']}")
        print(f"oracle build {built['path']} reproduces the recorded reference ({built['compiler']}, sha256 {built['sha256'][:16]}…)")
    else:
        print(f"NOTE: compiler '{built['compiler']}' with flags '{built['flags']}' is not recorded in ggml-quants.recorded.json; "
              f"this build (sha256 {built['sha256'][:16]}…) is used as the oracle but is not the recorded reference")
PY
echo "built $out/libggml-quants.so and $out/libggml-quants-fma.so"
