#!/usr/bin/env bash
# One publication step per invocation, the plan as the only input (docs/publish.md §8–§9):
#   ci/publish/step.sh PLAN STEP
# STEP: fetch | repack | gate (for UNITS, a matrix slice; default all units) | finalize |
#       gate-release (the whole-release gate) | stage | candidate-upload | promote | verify |
#       fetch-root (only the root files: the distributed join) |
#       slices (the worker slices that fit MINIRUN_DISK_BUDGET, as JSON; with MINIRUN_SLICE=I, only
#       slice I's selection — empty past the last slice; with MINIRUN_SLICE=all, every selection,
#       a line each)
# Environment: MINIRUN_BIN (directory of the minirun-* binaries, default target/release),
# HF_ENDPOINT and HF_TOKEN (the hub), MINIRUN_WORK_DIR (default: the plan's work_dir),
# UNITS (a unit selection such as `layers00..layers14`), MINIRUN_VERIFY (see below),
# MINIRUN_RECORDS (the distributed shape, docs/publish.md §9: a directory of unit records shared
# by the workers and the join). With MINIRUN_RECORDS, a worker (UNITS set) stages its slice and
# `candidate-upload` uploads its LFS objects and writes its records; the join (UNITS unset)
# finalizes, stages and uploads the candidate from the records. Every step resumes from its
# journals, so a failed step is re-run alone. MINIRUN_DISK_BUDGET (e.g. 100G; default the plan's
# `[run] disk_budget`) and MINIRUN_MAX_SLICES (the matrix's width) size the `slices` step.
set -euo pipefail
plan="$1"
step="$2"
bin="${MINIRUN_BIN:-target/release}"
common=(--plan "$plan")
[ -n "${MINIRUN_WORK_DIR:-}" ] && common+=(--work-dir "$MINIRUN_WORK_DIR")
[ -n "${HF_ENDPOINT:-}" ] && ep=(--endpoint "$HF_ENDPOINT") || ep=()
units=()
[ -n "${UNITS:-}" ] && units=(--units "$UNITS")
# MINIRUN_VERIFY=1: count finished units as done only after re-hashing their files — for a work
# directory copied from other machines (new inodes), whose journals then hold by content.
verify=()
[ -n "${MINIRUN_VERIFY:-}" ] && verify=(--verify)
records=()
[ -n "${MINIRUN_RECORDS:-}" ] && records=(--records "$MINIRUN_RECORDS")
slice=()
[ -n "${MINIRUN_RECORDS:-}" ] && [ -n "${UNITS:-}" ] && slice=(--units "$UNITS")
case "$step" in
fetch) exec "$bin/minirun-fetch" "${common[@]}" "${ep[@]}" "${units[@]}" "${verify[@]}" ;;
repack) exec "$bin/minirun-repack" "${common[@]}" "${units[@]}" "${verify[@]}" ;;
gate) exec "$bin/minirun-gate" "${common[@]}" "${units[@]}" ;;
finalize) exec "$bin/minirun-repack" "${common[@]}" --finalize "${records[@]}" ;;
fetch-root) exec "$bin/minirun-fetch" "${common[@]}" "${ep[@]}" --root-files-only ;;
gate-release) exec "$bin/minirun-gate" "${common[@]}" ;;
stage)
    if [ ${#slice[@]} -gt 0 ]; then exec "$bin/minirun-stage" "${common[@]}" "${slice[@]}"; fi
    exec "$bin/minirun-stage" "${common[@]}" "${records[@]}" ;;
candidate-upload) exec "$bin/minirun-candidate-upload" "${common[@]}" "${ep[@]}" "${slice[@]}" "${records[@]}" ;;
promote) exec "$bin/minirun-promote" "${common[@]}" "${ep[@]}" ;;
verify)
    repo=$(sed -n 's/^repo *= *"\(.*-minirun\)"/\1/p' "$plan" | head -1)
    dir="${MINIRUN_WORK_DIR:-.}/consumer"
    exec "$bin/minirun-verify" "${ep[@]}" pull "$repo" --dir "$dir" ;;
slices)
    cut=("$bin/minirun-plan" slices "$plan" "${ep[@]}")
    [ -n "${MINIRUN_DISK_BUDGET:-}" ] && cut+=(--disk-budget "$MINIRUN_DISK_BUDGET")
    [ -n "${MINIRUN_MAX_SLICES:-}" ] && cut+=(--max-slices "$MINIRUN_MAX_SLICES")
    if [ -z "${MINIRUN_SLICE:-}" ]; then exec "${cut[@]}" --json; fi
    if [ "$MINIRUN_SLICE" = all ]; then exec "${cut[@]}" --lines; fi
    lines=$("${cut[@]}" --lines)
    sed -n "$((MINIRUN_SLICE + 1))p" <<<"$lines" ;;
*) echo "unknown step \`$step\`" >&2; exit 64 ;;
esac
