#!/usr/bin/env bash
# Install without a Rust toolchain (issue 51 item 2; docs/install.md). ci/dist/build.sh packs the
# sixteen minirun-* binaries as a manylinux wheel, which is installed with pip into a fresh venv
# and used with cargo, rustc and every C compiler absent from PATH: each binary resolves to the
# venv and is byte for byte the build that was packed, prints its version, has its man page and
# bash completion installed, and the demo publishes, verifies and generates from the wheel alone
# (no checkout: its plan is compiled in).
#
# Which build is packed (MINIRUN_WHEEL_BUILD):
#   test (default; what CI runs)  the binaries `cargo test --workspace` already built (dev
#                                 profile, target/debug): no second compile, so CI stays within
#                                 its hour; everything above but the optimisation level is checked
#   dist                          the wheel that ships: `cargo install --locked --profile dist` of
#                                 jobs/bin and runner (~11 min of 2 cores from nothing)
set -euo pipefail
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
start=$(date +%s)
target=${CARGO_TARGET_DIR:-target}
dist=$work/dist
case ${MINIRUN_WHEEL_BUILD:-test} in
    test)
        # the feature set of `cargo test --workspace`: nothing it built is built again
        cargo build -q --locked --workspace --bins
        whl=$(MINIRUN_DIST_BUILT="$target/debug" ci/dist/build.sh "$dist") ;;
    dist) whl=$(ci/dist/build.sh "$dist") ;;
    *) echo "MINIRUN_WHEEL_BUILD is test or dist"; exit 1 ;;
esac
echo "wheel: packed in $(( $(date +%s) - start )) s"
echo "wheel: $(basename "$whl"), $(du -m "$whl" | cut -f1) MiB"
python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --no-index --disable-pip-version-check "$whl"

# A PATH with the system's tools but no Rust toolchain and no C compiler or linker.
bare=$work/bare-path
mkdir "$bare"
for d in /usr/local/bin /usr/bin /bin; do
    for f in "$d"/*; do
        n=$(basename "$f")
        case $n in
            cargo* | rustc | rustdoc | rustup | rust-* | cc | c++ | c89* | c99* | cpp* | gcc* | g++* | clang* | *-linux-gnu-* | ld | ld.* | as) continue ;;
        esac
        [ -e "$bare/$n" ] || ln -s "$f" "$bare/$n"
    done
done
export PATH="$work/venv/bin:$bare"
for tool in cargo rustc cc gcc ld; do
    if command -v "$tool" > /dev/null; then echo "FAIL: $tool is still on PATH"; exit 1; fi
done

n=0
for built in "$dist"/root/bin/minirun-*; do
    name=$(basename "$built")
    got=$(command -v "$name")
    [ "$got" = "$work/venv/bin/$name" ] || { echo "FAIL: $name resolves to ${got:-nothing}"; exit 1; }
    cmp -s "$built" "$got" || { echo "FAIL: the wheel's $name is not the build that was packed"; exit 1; }
    said=$("$name" --version)
    [ "$said" = "$name $version" ] || { echo "FAIL: $name --version said: $said"; exit 1; }
    grep -q "^\.TH $name 1" "$work/venv/share/man/man1/$name.1" || { echo "FAIL: no man page for $name"; exit 1; }
    bash -c ". '$work/venv/share/bash-completion/completions/$name' && complete -p $name" > /dev/null \
        || { echo "FAIL: the bash completion of $name does not load"; exit 1; }
    n=$((n + 1))
done
[ "$n" -eq 16 ] || { echo "FAIL: the wheel carries $n binaries, not 16"; exit 1; }
echo "wheel: 16 binaries on PATH from the venv, each the build that was packed, with man page and completions"

cd "$work"
HOME="$work/home" minirun-demo --work-dir "$work/demo" --generate 2 > "$work/demo.out" 2> "$work/demo.err" \
    || { cat "$work/demo.err"; echo "FAIL: the demo from the wheel"; exit 1; }
grep -q "consumer verdict Verified" "$work/demo.out" || { cat "$work/demo.out"; exit 1; }
grep -q "^demo: generated 2 tokens" "$work/demo.out" || { cat "$work/demo.out" "$work/demo.err"; exit 1; }
test -s "$work/demo/demo/plan.toml"
echo "wheel: the demo published, verified and generated from the wheel alone; the check took $(( $(date +%s) - start )) s"
