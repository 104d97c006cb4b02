#!/usr/bin/env bash
# One publication step per invocation, the plan as the only input (docs/publish.md §8–§9):
#   ci/publish/step.sh PLAN STEP
# STEP: fetch | repack | gate (for UNITS, a matrix slice; default all units) | finalize |
#       gate-release (the whole-release gate) | stage | candidate-upload | promote | verify |
#       fetch-root (only the root files: the distributed join) |
#       slices (the worker slices that fit MINIRUN_DISK_BUDGET, as JSON; with MINIRUN_SLICE=I, only
#       slice I's selection — empty past the last slice; with MINIRUN_SLICE=all, every selection,
#       a line each) |
#       window (a disk-budgeted run on one machine, docs/publish.md §12: every slice that fits
#       MINIRUN_DISK_BUDGET in turn — fetch with the budget reserved, repack, gate, stage, upload
#       of its objects and records, reclaim — then the join's steps in the same work directory)
# Environment: MINIRUN_BIN (directory of the minirun-* binaries, default target/release),
# HF_ENDPOINT and HF_TOKEN (the hub), MINIRUN_WORK_DIR (default: the plan's work_dir),
# UNITS (a unit selection such as `layers00..layers14`), MINIRUN_VERIFY (see below),
# MINIRUN_RECORDS (the distributed shape, docs/publish.md §9: a directory of unit records shared
# by the workers and the join). With MINIRUN_RECORDS, a worker (UNITS set) stages its slice and
# `candidate-upload` uploads its LFS objects and writes its records; the join (UNITS unset)
# finalizes, stages and uploads the candidate from the records. Every step resumes from its
# journals, so a failed step is re-run alone. MINIRUN_DISK_BUDGET (e.g. 100G; default the plan's
# `[run] disk_budget`) and MINIRUN_MAX_SLICES (the matrix's width) size the `slices` step.
# MINIRUN_UPSTREAM_ENDPOINT: the hub fetch and slices read the upstream from (default HF_ENDPOINT).
set -euo pipefail
plan="$1"
step="$2"
bin="${MINIRUN_BIN:-target/release}"
common=(--plan "$plan")
[ -n "${MINIRUN_WORK_DIR:-}" ] && common+=(--work-dir "$MINIRUN_WORK_DIR")
[ -n "${HF_ENDPOINT:-}" ] && ep=(--endpoint "$HF_ENDPOINT") || ep=()
upstream="${MINIRUN_UPSTREAM_ENDPOINT:-${HF_ENDPOINT:-}}"
[ -n "$upstream" ] && up=(--endpoint "$upstream") || up=()
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
fetch) exec "$bin/minirun-fetch" "${common[@]}" "${up[@]}" "${units[@]}" "${verify[@]}" ;;
repack) exec "$bin/minirun-repack" "${common[@]}" "${units[@]}" "${verify[@]}" ;;
gate) exec "$bin/minirun-gate" "${common[@]}" "${units[@]}" ;;
finalize) exec "$bin/minirun-repack" "${common[@]}" --finalize "${records[@]}" ;;
fetch-root) exec "$bin/minirun-fetch" "${common[@]}" "${up[@]}" --root-files-only ;;
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
    cut=("$bin/minirun-plan" slices "$plan" "${up[@]}")
    [ -n "${MINIRUN_DISK_BUDGET:-}" ] && cut+=(--disk-budget "$MINIRUN_DISK_BUDGET")
    [ -n "${MINIRUN_MAX_SLICES:-}" ] && cut+=(--max-slices "$MINIRUN_MAX_SLICES")
    [ -n "${MINIRUN_WINDOW:-}" ] && cut+=(--window)
    if [ -z "${MINIRUN_SLICE:-}" ]; then exec "${cut[@]}" --json; fi
    if [ "$MINIRUN_SLICE" = all ]; then exec "${cut[@]}" --lines; fi
    lines=$("${cut[@]}" --lines)
    sed -n "$((MINIRUN_SLICE + 1))p" <<<"$lines" ;;
window)
    # the budget: MINIRUN_DISK_BUDGET, else the plan's `[run] disk_budget` (which slices reads)
    cut=(env MINIRUN_WINDOW=1 MINIRUN_MAX_SLICES='' "$0" "$plan" slices)
    budget="${MINIRUN_DISK_BUDGET:-}"
    if [ -z "$budget" ]; then
        budget=$(MINIRUN_SLICE='' "${cut[@]}" | grep -o '"disk_budget": *[0-9]*' | grep -o '[0-9]*$') ||
            { echo "window: set MINIRUN_DISK_BUDGET (e.g. 100G) or the plan's \`[run] disk_budget\`" >&2; exit 64; }
    fi
    work="${MINIRUN_WORK_DIR:-$(sed -n 's/^work_dir *= *"\(.*\)"/\1/p' "$plan" | head -1)}"
    rec="${MINIRUN_RECORDS:-$work/records}"
    # every slice at once (no matrix width: one machine takes them in turn)
    lines=$(MINIRUN_SLICE=all MINIRUN_DISK_BUDGET="$budget" "${cut[@]}")
    while IFS= read -r s; do
        [ -n "$s" ] || continue
        echo "window: slice $s" >&2
        "$bin/minirun-fetch" "${common[@]}" "${up[@]}" --units "$s" --disk-budget "$budget"
        "$bin/minirun-repack" "${common[@]}" --units "$s"
        "$bin/minirun-gate" "${common[@]}" --units "$s"
        "$bin/minirun-stage" "${common[@]}" --units "$s"
        "$bin/minirun-candidate-upload" "${common[@]}" "${ep[@]}" --units "$s" --records "$rec" --reclaim
    done <<<"$lines"
    echo "window: the join" >&2
    for s in fetch-root finalize stage candidate-upload promote; do
        UNITS='' MINIRUN_RECORDS="$rec" "$0" "$plan" "$s"
    done ;;
*) echo "unknown step \`$step\`" >&2; exit 64 ;;
esac
