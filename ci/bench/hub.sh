# Sourced by the benchmarks (real-size.sh, pull.sh, upload.sh): local minirun-hub servers, every
# one of them stopped on exit. Needs $bin (the binaries) and $tmp (the run's directory).
# `hub_serve ROOT` prints the URL of a hub serving ROOT. Each pid is appended to $tmp/hub.pids, a
# file rather than a shell array, so a server started inside `$(hub_serve …)` (a subshell) is
# still stopped by `hub_stop_all`; the last pid is also in $tmp/hub.pid for `hub_stop_last`.
hub_serve() {
    mkdir -p "$1"
    "$bin/minirun-hub" serve --init --root "$1" --addr 127.0.0.1:0 > "$1.out" 2> /dev/null &
    echo $! >> "$tmp/hub.pids"
    echo $! > "$tmp/hub.pid"
    for _ in $(seq 100); do grep -qs 'listening on' "$1.out" && break; sleep 0.1; done
    grep -o 'http://[0-9.:]*' "$1.out" | head -1
}

hub_stop() { # PID…: stop these servers and wait until they are gone
    local p
    for p in "$@"; do kill "$p" 2> /dev/null || true; done
    for p in "$@"; do while kill -0 "$p" 2> /dev/null; do sleep 0.05; done; done
}

hub_stop_last() { hub_stop "$(cat "$tmp/hub.pid" 2> /dev/null)"; }

hub_stop_all() {
    [ -f "$tmp/hub.pids" ] || return 0
    # shellcheck disable=SC2046 # one pid a line
    hub_stop $(cat "$tmp/hub.pids")
    rm -f "$tmp/hub.pids"
}
