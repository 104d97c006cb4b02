#!/usr/bin/env bash
# Build every minirun-* binary once and pack that build as a wheel (docs/install.md).
#
#   ci/dist/build.sh OUT_DIR     # prints the wheel's path on stdout; progress on stderr
#
# 1. `cargo install --locked --profile dist` of the two packages that hold binaries (jobs/bin: the
#    pipeline's fourteen tools; runner: minirun-run and minirun-serve) into OUT_DIR/root: one
#    release build (profile `dist` = `release` without debug info) in the workspace's target
#    directory (`target/dist`), the same one a user's `cargo install --locked --profile dist
#    --path …` makes, and the binaries the wheel carries byte for byte.
# 2. Each binary writes its man page and its completions (`--man`, `--completions SHELL`) into
#    OUT_DIR/root/share, the layout a Unix prefix uses.
# 3. Those exact files become a wheel the way ruff and uv ship theirs: the binaries under
#    `minirun-VERSION.data/scripts/` (pip, pipx and uv put them on PATH), the man pages and
#    completions under `.data/data/share/` (the venv's share/). `wheel pack` writes RECORD;
#    auditwheel finds the manylinux tag the binaries are consistent with (the highest glibc symbol
#    version they use, no shared library outside the policy) and `wheel tags` sets it.
# With MINIRUN_DIST_BUILT=DIR, step 1 is skipped and the binaries already in DIR are packed
# (the CI check packs the build the tests made; see ci/checks.d/65-wheel.sh).
# Needs $CI_CACHE/venv-dist (ci/install.d/10-python.sh: wheel, auditwheel, pinned).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: ci/dist/build.sh OUT_DIR}
py=${CI_CACHE:-$root/ci/.cache}/venv-dist/bin
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -1)
mkdir -p "$out"
out=$(cd "$out" && pwd)
prefix=$out/root
rm -rf "$prefix" "$out/wheel"
if [ -n "${MINIRUN_DIST_BUILT:-}" ]; then
    # Pack binaries already built there (ci/checks.d/65-wheel.sh: the tests' own build).
    echo "dist: packing the binaries in $MINIRUN_DIST_BUILT" >&2
    mkdir -p "$prefix/bin"
    cp -p "$MINIRUN_DIST_BUILT"/minirun-* "$prefix/bin/"
    rm -f "$prefix"/bin/minirun-*.d
else
    for pkg in jobs/bin runner; do
        echo "dist: cargo install --locked --profile dist --path $pkg" >&2
        cargo install --quiet --locked --profile dist --no-track --path "$root/$pkg" --root "$prefix" >&2
    done
fi
mkdir -p "$prefix/share/man/man1" "$prefix/share/bash-completion/completions" \
    "$prefix/share/zsh/site-functions" "$prefix/share/fish/vendor_completions.d"
for bin in "$prefix"/bin/minirun-*; do
    name=$(basename "$bin")
    "$bin" --man > "$prefix/share/man/man1/$name.1"
    "$bin" --completions bash > "$prefix/share/bash-completion/completions/$name"
    "$bin" --completions zsh > "$prefix/share/zsh/site-functions/_$name"
    "$bin" --completions fish > "$prefix/share/fish/vendor_completions.d/$name.fish"
done
tree=$out/wheel/minirun-$version
data=$tree/minirun-$version.data
info=$tree/minirun-$version.dist-info
mkdir -p "$data/scripts" "$data/data" "$info"
cp -p "$prefix"/bin/minirun-* "$data/scripts/"
cp -rp "$prefix/share" "$data/data/"
cat > "$info/METADATA" <<META
Metadata-Version: 2.1
Name: minirun
Version: $version
Summary: Publish very large quantized LLM checkpoints as byte-preserving artifacts, and run them (prebuilt minirun-* binaries)
License: Apache-2.0
Requires-Python: >=3.8
META
cat > "$info/WHEEL" <<META
Wheel-Version: 1.0
Generator: minirun ci/dist/build.sh
Root-Is-Purelib: false
Tag: py3-none-linux_$(uname -m)
META
"$py/python" -m wheel pack --dest-dir "$out/wheel" "$tree" >&2
raw=$(ls "$out"/wheel/minirun-"$version"-py3-none-linux_*.whl)
plat=$("$py/auditwheel" show --json "$raw" 2> /dev/null | "$py/python" -c 'import json, sys; print(json.load(sys.stdin)["overall_tag"])')
case $plat in
    manylinux_*) echo "dist: auditwheel: consistent with $plat" >&2 ;;
    *) "$py/auditwheel" show "$raw" >&2; echo "dist: no manylinux tag fits (overall: ${plat:-none})" >&2; exit 1 ;;
esac
"$py/python" -m wheel tags --remove --platform-tag "$plat" "$raw" >&2
ls "$out"/wheel/minirun-"$version"-py3-none-"$plat".whl
