#!/usr/bin/env bash
# One pipeline stage, with the plan as its only input: the unit of a CI step.
#
#   ci/pipeline/run-stage.sh STAGE PLAN [UNITS]
#
# STAGE: fetch | repack | finalize | gate | stage | candidate-upload | promote.
# WORK_DIR (default: the plan's) and HF_ENDPOINT / HF_TOKEN come from the environment. Every stage
# resumes from the journals in WORK_DIR, so a failed step is re-run alone. Exit codes are the
# stages' own (gate: 0 PASS, 1 FAIL, 2 INCONCLUSIVE, 77 SKIP).
set -euo pipefail
stage=${1:?stage}; plan=${2:?plan}; units=${3:-}
bin=${MINIRUN_BIN:-target/release}
args=(--plan "$plan")
[ -n "${WORK_DIR:-}" ] && args+=(--work-dir "$WORK_DIR")
case "$stage" in
    fetch) [ -n "${HF_ENDPOINT:-}" ] && args+=(--endpoint "$HF_ENDPOINT") ;;
esac
case "$stage" in
    fetch|repack|gate) [ -n "$units" ] && args+=(--units "$units") ;;
esac
case "$stage" in
    finalize) exec "$bin/minirun-repack" "${args[@]}" --finalize ;;
    fetch|repack|gate|stage|candidate-upload|promote) exec "$bin/minirun-$stage" "${args[@]}" ;;
    *) echo "unknown stage: $stage" >&2; exit 64 ;;
esac
