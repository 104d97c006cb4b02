#!/usr/bin/env bash
# Coverage-guided fuzzing, bounded for CI (issue 20 item 6; docs/fuzz.md): builds the libFuzzer
# targets of fuzz/ with the stable toolchain, replays every input that once crashed a target
# (fuzz/regressions/<target>/), then runs each target for MINIRUN_FUZZ_SECONDS (default 10) from
# a copy of its committed corpus. Any crash, timeout or memory blow-up fails the check. The long
# campaign is `ci/fuzz/campaign.sh` (docs/bench/fuzz.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${MINIRUN_FUZZ_SECONDS:-10}
cargo fmt --manifest-path fuzz/Cargo.toml -- --check
bin=$(ci/fuzz/build.sh)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# One target per core at a time (a libFuzzer run is one thread); each target's lines are
# printed in the targets file's order once all have run.
parallel=${MINIRUN_FUZZ_JOBS:-$(nproc)}
one() {
  local t=$1 max=$2 out="$work/$1.result"
  if [ -d "fuzz/regressions/$t" ]; then
    if ! "$bin/$t" -runs=1 fuzz/regressions/"$t"/* > "$work/$t.replay.log" 2>&1; then
      { echo "FAIL $t: a recorded regression crashes again"; tail -20 "$work/$t.replay.log"; } > "$out"
      return 1
    fi
  fi
  mkdir -p "$work/$t"
  cp -r "fuzz/corpus/$t/." "$work/$t/"
  if "$bin/$t" "$work/$t" -max_total_time="$secs" -max_len="$max" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$work/$t-" > "$work/$t.log" 2>&1; then
    echo "ok   $t: $(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) .*/\1 runs in \2 s/p' "$work/$t.log")" > "$out"
  else
    {
      echo "FAIL $t"; grep -E "panicked|ERROR|SUMMARY" -A4 "$work/$t.log" | head -20
      for a in "$work/$t"-*; do [ -e "$a" ] && echo "crash input (base64): $(base64 -w0 "$a" | head -c 2000)"; done
    } > "$out"
    return 1
  fi
}
targets=()
while read -r t max _; do
  case $t in ''|'#'*) continue ;; esac
  targets+=("$t")
  while [ "$(jobs -rp | wc -l)" -ge "$parallel" ]; do wait -n || true; done
  one "$t" "$max" &
done < ci/fuzz/targets
wait
fail=0
for t in "${targets[@]}"; do
  cat "$work/$t.result" 2> /dev/null || { echo "FAIL $t: no result"; fail=1; continue; }
  grep -q '^FAIL' "$work/$t.result" && fail=1
done
exit $fail
