#!/usr/bin/env bash
# Submit the distributed publication of PLAN to Slurm (ci/slurm/README.md):
#   ci/slurm/submit.sh PLAN [SBATCH_ARG...]
# cuts the units into slices that fit MINIRUN_DISK_BUDGET, else the plan's `[run] disk_budget`
# (`minirun-plan slices`, at most
# MINIRUN_MAX_SLICES), writes them to MINIRUN_SHARED/slices.txt, submits ci/slurm/worker.sbatch
# as a job array of one task per slice and ci/slurm/join.sbatch with afterok on the array, and
# prints `array=ID join=ID slices=N`. SBATCH_ARGs (a partition, an account, a time limit) go to
# both. Run from the repository root, on a login node that sees MINIRUN_SHARED.
# Environment: MINIRUN_SHARED (required), MINIRUN_DISK_BUDGET (e.g. 100G),
# MINIRUN_WORK_ROOT (default MINIRUN_SHARED/work; node-local scratch is better),
# MINIRUN_MAX_SLICES, MINIRUN_MAX_REQUEUES, MINIRUN_BIN (default target/release), HF_ENDPOINT,
# HF_TOKEN_PATH (a token file every node can read; HF_TOKEN itself is refused: Slurm saves a batch
# job's environment in its state directory).
set -euo pipefail
cd "$(dirname "$0")/../.."
plan=${1:?usage: ci/slurm/submit.sh PLAN [SBATCH_ARG...]}
shift
if [ -n "${HF_TOKEN:-}" ]; then
    echo "submit.sh: HF_TOKEN is set; put the token in a file only you can read and name it in HF_TOKEN_PATH (Slurm saves a batch job's environment in its state directory)" >&2
    exit 64
fi
: "${MINIRUN_SHARED:?set MINIRUN_SHARED to a directory every node sees}"
export MINIRUN_PLAN="$plan" MINIRUN_SHARED
export MINIRUN_WORK_ROOT="${MINIRUN_WORK_ROOT:-$MINIRUN_SHARED/work}"
export MINIRUN_BIN="${MINIRUN_BIN:-target/release}"
mkdir -p "$MINIRUN_SHARED/records"
MINIRUN_SLICE=all ci/publish/step.sh "$plan" slices > "$MINIRUN_SHARED/slices.txt.tmp"
mv "$MINIRUN_SHARED/slices.txt.tmp" "$MINIRUN_SHARED/slices.txt"
n=$(wc -l < "$MINIRUN_SHARED/slices.txt")
out="$MINIRUN_SHARED/logs"
mkdir -p "$out"
array=$(sbatch --parsable --export=ALL --array="0-$((n - 1))" -o "$out/worker-%a.log" "$@" \
    ci/slurm/worker.sbatch)
array=${array%%;*}
join=$(sbatch --parsable --export=ALL --dependency="afterok:$array" -o "$out/join.log" "$@" \
    ci/slurm/join.sbatch)
join=${join%%;*}
echo "array=$array join=$join slices=$n"
