#!/usr/bin/env bash
# Build the libFuzzer targets of fuzz/ with the pinned stable toolchain (docs/fuzz.md).
#
# cargo-fuzz needs a nightly compiler for its sanitizer flags; libFuzzer's coverage does not: the
# SanitizerCoverage pass and its options are stable `-C` flags, and libfuzzer-sys builds libFuzzer
# itself with the system C++ compiler. An explicit --target keeps these flags off build scripts
# and proc macros. Prints the directory holding the target binaries.
#
#   ci/fuzz/build.sh            # release build (debug assertions and overflow checks on)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
triple=$(rustc -vV | sed -n 's/^host: //p')
target_dir=${CARGO_TARGET_DIR:-$root/target}/fuzz
flags=(
  -Cpasses=sancov-module
  -Cllvm-args=-sanitizer-coverage-level=4
  -Cllvm-args=-sanitizer-coverage-inline-8bit-counters
  -Cllvm-args=-sanitizer-coverage-pc-table
  -Cllvm-args=-sanitizer-coverage-trace-compares
  --cfg=fuzzing
)
RUSTFLAGS="${flags[*]}" CARGO_TARGET_DIR=$target_dir CARGO_INCREMENTAL=0 \
  cargo build --locked --release --manifest-path "$root/fuzz/Cargo.toml" --target "$triple" --bins >&2
echo "$target_dir/$triple/release"
