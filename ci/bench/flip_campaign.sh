#!/usr/bin/env bash
# The bit-flip campaign (issue 47; not a CI step — CI runs the same test with 2 flips a kind):
# fetch and pull against a hub that inverts bits in one request kind's answers, candidate-upload
# + promote against a hub that inverts bits in one kind of upload body, each run repeated (the
# fault still armed) until it finishes, and every finished run compared with a clean run's
# result. Writes the table of outcomes per request kind to docs/bench/flip-campaign.md.
#
#   [FAULTS=100] ci/bench/flip_campaign.sh
#
# FAULTS is the number of flips each request kind gets at least (11 kinds send requests; the
# table says which workload sends each). About 45 minutes at FAULTS=100 on 2 cores. Run it in a
# checkout nobody edits meanwhile: the test reads plans/deepseek-v4.toml as it goes.
set -euo pipefail
cd "$(dirname "$0")/../.."
faults=${FAULTS:-100}
out=$PWD/docs/bench/flip-campaign.md
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
start=$(date +%s)
commit=$(git rev-parse --short HEAD)
MINIRUN_FLIP_FAULTS=$faults MINIRUN_FLIP_TABLE=$tmp \
    cargo test --locked -p minirun-bins --test publish \
    flips::bit_flips_in_every_request_kind_end_clean_or_named -- --exact --nocapture
secs=$(( $(date +%s) - start ))
{
    echo "# Bit-flip campaign"
    echo
    echo "Command: \`FAULTS=$faults ci/bench/flip_campaign.sh\` ($commit, $(date -u +%Y-%m-%d), ${secs} s on $(nproc) cores)."
    echo "Each run arms \`flip-KIND\` (docs/hub.md §5) on the hub its workload talks to — fetch of three"
    echo "V4 units in 1 MiB chunks, a pull of the promoted V4 release, or candidate-upload + promote of"
    echo "it — and repeats the workload, the fault still armed, until it finishes (at most 6 attempts);"
    echo "a finished run must equal a clean run's result byte for byte (fetched files, pulled files, the"
    echo "promoted tree). What each defence is: docs/fetch.md, \"Bytes no digest covers\"."
    echo
    cat "$tmp"
} > "$out"
echo "wrote $out"
