#!/usr/bin/env bash
# The distributed publication on a real scheduler (docs/publish.md §9 "On Slurm", ci/slurm/):
# a single-node Slurm started here (munged, slurmctld, slurmd, with a configuration this check
# writes) runs ci/slurm/submit.sh for the generated V4 checkpoint against a local hub: a job array
# of unit-slice workers cut by `minirun-plan slices`, and the join with afterok on the array. One
# array task's minirun-repack is SIGKILLed mid-run; the task requeues itself and resumes from its
# journals. The promoted tree must equal, path, size and oid of every file, what one machine
# running the stages in one work directory promotes to a second hub. The token lives in a file
# (HF_TOKEN_PATH) and must appear nowhere else, Slurm's state directory included. Every daemon this
# check started is stopped by its pid. Needs root (slurmd runs jobs as their user) and the
# slurm-wlm and munge packages (ci/install.d/00-apt.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "$(id -u)" -ne 0 ]; then
    echo "47-publish-slurm: needs root (a single-node slurmd runs the jobs); CI runs as root" >&2
    exit 1
fi
target="${CARGO_TARGET_DIR:-target}"
cargo build -q --workspace --bins
export MINIRUN_BIN="$PWD/$target/debug"
tmp=$(mktemp -d)
servers=()
stop_pidfile() { # PIDFILE: stop the daemon it names and wait for it
    local pid
    pid=$(cat "$1" 2> /dev/null) || return 0
    kill "$pid" 2> /dev/null || return 0
    for _ in $(seq 100); do kill -0 "$pid" 2> /dev/null || return 0; sleep 0.1; done
    kill -9 "$pid" 2> /dev/null || true
}
cleanup() {
    [ -f "$tmp/slurm.conf" ] && SLURM_CONF="$tmp/slurm.conf" scancel --quiet --user=root 2> /dev/null || true
    stop_pidfile "$tmp/run/slurmd.pid"
    stop_pidfile "$tmp/run/slurmctld.pid"
    stop_pidfile "$tmp/munge/munged.pid"
    [ ${#servers[@]} -gt 0 ] && kill "${servers[@]}" 2> /dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# --- the hubs: the upstream checkpoint in each, the token in a file -------------------------
plan=plans/deepseek-v4.toml
repo=$(sed -n 's/^repo *= *"\(.*-minirun\)"/\1/p' "$plan" | head -1)
"$MINIRUN_BIN/minirun-synth" deepseek-v4 --out "$tmp/ckpt" > /dev/null
token="hf_PLANTED_$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s' "$token" > "$tmp/token"
chmod 600 "$tmp/token"
export HF_TOKEN_PATH="$tmp/token"
unset HF_TOKEN
serve() { # NAME: a hub holding the upstream checkpoint; its URL in $tmp/NAME.url
    "$MINIRUN_BIN/minirun-hub" import --root "$tmp/$1" --repo deepseek-ai/DeepSeek-V4-Flash \
        --revision 60d8d70770c6776ff598c94bb586a859a38244f1 "$tmp/ckpt" > /dev/null
    "$MINIRUN_BIN/minirun-hub" serve --init --root "$tmp/$1" --addr 127.0.0.1:0 \
        --token-file "$tmp/token" > "$tmp/$1.log" 2>&1 &
    servers+=($!)
    for _ in $(seq 100); do grep -qs 'listening on' "$tmp/$1.log" && break; sleep 0.1; done
    grep -o 'http://[0-9.:]*' "$tmp/$1.log" | head -1 > "$tmp/$1.url"
}
serve hub
serve one
hub=$(cat "$tmp/hub.url")
one=$(cat "$tmp/one.url")

# --- a single-node Slurm ---------------------------------------------------------------------
# munged wants its socket's directory (and every one above it) open to all, its key private.
chmod 755 "$tmp"
mkdir -p "$tmp"/{munge,munge-key,state,spool,log,run}
chmod 755 "$tmp/munge"
chmod 700 "$tmp/munge-key"
dd if=/dev/urandom of="$tmp/munge-key/munge.key" bs=1024 count=1 2> /dev/null
chmod 400 "$tmp/munge-key/munge.key"
munged --key-file="$tmp/munge-key/munge.key" --socket="$tmp/munge/munge.socket" \
    --pid-file="$tmp/munge/munged.pid" --seed-file="$tmp/munge-key/seed" \
    --log-file="$tmp/munge-key/munged.log"
node=$(hostname -s)
cat > "$tmp/slurm.conf" << EOF
ClusterName=minirun-ci
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$tmp/munge/munge.socket
CredType=cred/munge
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/run/slurmctld.pid
SlurmdPidFile=$tmp/run/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MpiDefault=none
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=ci Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$tmp/slurm.conf"
slurmctld -f "$SLURM_CONF"
slurmd -f "$SLURM_CONF" -N "$node"
for _ in $(seq 100); do sinfo -h -o %t 2> /dev/null | grep -q idle && break; sleep 0.1; done
sinfo -h -o '%P %D %t' | grep -q idle || { echo "slurm did not come up" >&2; tail "$tmp/log/"*.log >&2; exit 1; }

# --- the publication through Slurm, one task killed mid-repack -------------------------------
t0=$(date +%s)
budget=$("$MINIRUN_BIN/minirun-plan" slices "$plan" --endpoint "$hub" --disk-budget 1T --json |
    python3 -c 'import json, sys; r = json.load(sys.stdin); print(r["fixed_bytes"] + sum(u["peak_bytes"] for u in r["units"]) // 3 + 1)')
export MINIRUN_SHARED="$tmp/shared" MINIRUN_WORK_ROOT="$tmp/work" MINIRUN_DISK_BUDGET="$budget"
export HF_ENDPOINT="$hub"
rc=0
HF_TOKEN="$token" ci/slurm/submit.sh "$plan" > /dev/null 2>&1 || rc=$?
[ "$rc" -eq 64 ] || { echo "submit.sh with HF_TOKEN set: exit $rc, not a refusal (64)" >&2; exit 1; }
ids=$(ci/slurm/submit.sh "$plan")
echo "submitted: $ids"
array=$(sed 's/.*array=\([0-9]*\).*/\1/' <<< "$ids")
join=$(sed 's/.*join=\([0-9]*\).*/\1/' <<< "$ids")
# Mid-repack: once the task's repack has written its first container, SIGKILL it.
victim=""
for _ in $(seq 3000); do
    victim=$(pgrep -f "minirun-repack .*$tmp/work/worker-1( |$)" | head -1 || true)
    if [ -n "$victim" ] && compgen -G "$tmp/work/worker-1/release/*/*.til" > /dev/null; then break; fi
    victim=""
    sleep 0.01
done
[ -n "$victim" ] || { echo "array task 1 was never seen mid-repack" >&2; cat "$tmp/shared/logs/"*.log >&2; exit 1; }
kill -9 "$victim"
echo "SIGKILLed minirun-repack of array task 1 (pid $victim) with $(find "$tmp/work/worker-1/release" -name '*.til' | wc -l) containers written"
# A requeued job waits out Slurm's requeue delay; let it start at once.
for _ in $(seq 600); do
    state=$(squeue -h -j "${array}_1" -o %T 2> /dev/null || true)
    if [ "$state" = PENDING ]; then scontrol update jobid="${array}_1" StartTime=now; break; fi
    sleep 0.1
done
for _ in $(seq 3000); do
    state=$(scontrol show job "$join" 2> /dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p')
    case $state in COMPLETED | FAILED | CANCELLED | TIMEOUT) break ;; esac
    sleep 0.2
done
echo "=== array task 1's log"
cat "$tmp/shared/logs/worker-1.log"
[ "$state" = COMPLETED ] || { echo "the join ended $state" >&2; cat "$tmp/shared/logs/join.log" >&2; exit 1; }
grep -q "repack killed by signal 9: requeueing task 1" "$tmp/shared/logs/worker-1.log"
grep -q "=== candidate-upload .* restart 1" "$tmp/shared/logs/worker-1.log"
echo "slurm publication: $(wc -l < "$tmp/shared/slices.txt") workers and the join in $(($(date +%s) - t0)) s"

# --- one machine, one work directory, the other hub -----------------------------------------
unset MINIRUN_RECORDS UNITS
for step in fetch repack gate stage candidate-upload promote; do
    HF_ENDPOINT="$one" MINIRUN_WORK_DIR="$tmp/one-run" ci/publish/step.sh "$plan" "$step" \
        > "$tmp/one-run.$step.log" 2>&1 || { cat "$tmp/one-run.$step.log" >&2; exit 1; }
done
python3 - "$hub" "$one" "$repo" << 'PY'
import json, sys, urllib.request
def tree(url):
    with urllib.request.urlopen(f"{url}/api/models/{sys.argv[3]}/tree/main?recursive=true") as r:
        return {e["path"]: (e.get("size"), e.get("oid"), (e.get("lfs") or {}).get("oid"))
                for e in json.load(r) if e.get("type") == "file" and e["path"] != ".gitattributes"}
slurm, one = tree(sys.argv[1]), tree(sys.argv[2])
if slurm != one:
    diff = sorted(set(slurm.items()) ^ set(one.items()))[:5]
    sys.exit(f"the Slurm publication differs from one machine's: {diff}")
print(f"the Slurm publication equals one machine's: {len(one)} files, path, size and oid")
PY
leaks=$(grep -rlF --exclude=token "$token" "$tmp" 2> /dev/null | head -5 || true)
if [ -n "$leaks" ]; then
    echo "the planted token appears in: $leaks" >&2
    exit 1
fi
echo "planted token: in none of the files Slurm, the hubs and the steps wrote"
