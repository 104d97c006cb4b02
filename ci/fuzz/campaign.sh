#!/usr/bin/env bash
# The fuzz campaign (docs/fuzz.md): every target of ci/fuzz/targets for RUNS executions, JOBS at a
# time, starting from the committed corpus; new inputs that add coverage are merged back into
# fuzz/corpus/<target>, which is then distilled to the smallest set keeping every edge
# (`-merge=1 -use_counters=0` into an empty directory), and the table of executions, time and
# crashes is written to docs/bench/fuzz.md. A crash stops its target; its input is kept under
# target/fuzz/crashes/.
#
#   ci/fuzz/campaign.sh [RUNS] [JOBS] [TARGET...]    # defaults: 10000000 runs, 2 jobs, all targets
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
runs=${1:-10000000}
jobs=${2:-2}
shift $(( $# > 2 ? 2 : $# ))
bin=$("$root/ci/fuzz/build.sh")
out=${CARGO_TARGET_DIR:-$root/target}/fuzz/campaign
rm -rf "$out" "${out%/campaign}/crashes"; mkdir -p "$out" "${out%/campaign}/crashes"
mapfile -t rows < <(grep -v '^#' "$root/ci/fuzz/targets" | awk 'NF {print $1, $2}')
if [ $# -gt 0 ]; then
  mapfile -t rows < <(printf '%s\n' "${rows[@]}" | grep -wF -f <(printf '%s\n' "$@"))
fi

one() {
  local t=$1 max=$2 new=$out/$1.new
  mkdir -p "$new" "$root/fuzz/corpus/$t"
  local start=$SECONDS rc=0
  "$bin/$t" "$new" "$root/fuzz/corpus/$t" -runs="$runs" -max_len="$max" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="${out%/campaign}/crashes/$t-" \
    > "$out/$t.log" 2>&1 || rc=$?
  echo "$rc $((SECONDS - start))" > "$out/$t.rc"
  local min=$out/$t.min
  mkdir -p "$min"
  if "$bin/$t" -merge=1 -use_counters=0 -max_len="$max" "$min" "$root/fuzz/corpus/$t" "$new" \
      > "$out/$t.merge.log" 2>&1 && [ -n "$(ls -A "$min")" ]; then
    rm -rf "$root/fuzz/corpus/$t" && mv "$min" "$root/fuzz/corpus/$t"
  fi
}
export -f one; export root bin out runs
printf '%s\n' "${rows[@]}" | xargs -P "$jobs" -L 1 bash -c 'one "$@"' _

table=$root/docs/bench/fuzz.md
{
  echo "# Fuzz campaign"
  echo
  echo "Command: \`ci/fuzz/campaign.sh $runs $jobs\` ($(date -u +%Y-%m-%d), $(nproc) cores, $(rustc -V | cut -d' ' -f1-2), libFuzzer through libfuzzer-sys; builds with debug assertions and overflow checks). Each target starts from its committed corpus (fuzz/corpus/), runs until RUNS executions or its first crash; the corpus files counted after the run are the committed ones: what it started from and what it found, distilled to the fewest inputs that keep every edge."
  echo
  echo "| target | executions | seconds | executions/s | crashes | corpus files | coverage (edges) | max_len |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
  for row in "${rows[@]}"; do
    set -- $row
    t=$1; max=$2; log=$out/$t.log
    read -r rc secs < "$out/$t.rc"
    done_runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log" | tail -1)
    [ -n "$done_runs" ] || done_runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    crashes=$([ "$rc" = 0 ] && echo 0 || echo "1 (exit $rc)")
    files=$(find "$root/fuzz/corpus/$t" -type f | wc -l)
    rate=$(( ${done_runs:-0} / (secs > 0 ? secs : 1) ))
    echo "| $t | ${done_runs:-?} | $secs | $rate | $crashes | $files | ${cov:-?} | $max |"
  done
} > "$table"
cat "$table"
! grep -q '(exit' "$table"
