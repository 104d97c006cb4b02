#!/usr/bin/env bash
# One publication step per invocation, the plan as the only input (docs/publish.md §8):
#   ci/publish/step.sh PLAN STEP
# STEP: fetch | repack | gate (for UNITS, a matrix slice; default all units) | finalize |
#       gate-release (the whole-release gate) | stage | candidate-upload | promote | verify
# Environment: MINIRUN_BIN (directory of the minirun-* binaries, default target/release),
# HF_ENDPOINT and HF_TOKEN (the hub), MINIRUN_WORK_DIR (default: the plan's work_dir),
# UNITS (a unit selection such as `layers00..layers14`), MINIRUN_VERIFY (see below). Every step resumes from its journals, so a
# failed step is re-run alone.
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
case "$step" in
fetch) exec "$bin/minirun-fetch" "${common[@]}" "${ep[@]}" "${units[@]}" "${verify[@]}" ;;
repack) exec "$bin/minirun-repack" "${common[@]}" "${units[@]}" "${verify[@]}" ;;
gate) exec "$bin/minirun-gate" "${common[@]}" "${units[@]}" ;;
finalize) exec "$bin/minirun-repack" "${common[@]}" --finalize ;;
gate-release) exec "$bin/minirun-gate" "${common[@]}" ;;
stage) exec "$bin/minirun-stage" "${common[@]}" ;;
candidate-upload) exec "$bin/minirun-candidate-upload" "${common[@]}" "${ep[@]}" ;;
promote) exec "$bin/minirun-promote" "${common[@]}" "${ep[@]}" ;;
verify)
    repo=$(sed -n 's/^repo *= *"\(.*-minirun\)"/\1/p' "$plan" | head -1)
    dir="${MINIRUN_WORK_DIR:-.}/consumer"
    exec "$bin/minirun-verify" "${ep[@]}" pull "$repo" --dir "$dir" ;;
*) echo "unknown step \`$step\`" >&2; exit 64 ;;
esac
