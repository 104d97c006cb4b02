#!/usr/bin/env bash
# minirun-serve (issue 17 item 5) against the REAL `openai` Python client ($CI_CACHE/venv-openai,
# openai 3.57.0): SmolLM2-135M-Instruct Q4_1 on the wgpu engine (lavapipe without a GPU), behind
# an API key, with a queue of one. The pytest suite (ci/serve_openai/test_openai.py) covers
# streamed and non-streamed chat and completions, seeds, stop sequences, log-probabilities,
# frequency and presence penalties, structured output (json_schema, json_object, the grammar
# extension), a disconnect mid-stream,
# the error bodies, 401, 413 and 503, and a `.megakv` prompt cache loaded at start. Afterwards the key must not appear in anything the server
# printed. Then the verified DeepSeek V4 demo artifact is served and chatted with through the same
# client in DeepSeek's own chat encoding (ci/serve_openai/test_artifact.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${CI_CACHE:=$PWD/ci/.cache}"
model="${MINIRUN_SMOLLM2_GGUF:-$CI_CACHE/SmolLM2-135M-Instruct.Q4_1.gguf}"
py="$CI_CACHE/venv-openai/bin/python"
[ -x "$py" ] || { echo "missing $py (run ci/install.d/10-python.sh)"; exit 1; }
[ -f "$model" ] || { echo "missing $model (run ci/install.d/10-python.sh)"; exit 1; }

cargo build -q --workspace --bin minirun-serve --bin minirun-run
target=${CARGO_TARGET_DIR:-$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')}
bin="$target/debug/minirun-serve"

work=$(mktemp -d)
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
# listening OUT TRIES: the URL minirun-serve (pid $pid) prints on OUT once it listens.
listening() {
    local u
    for _ in $(seq 1 "$2"); do
        u=$(sed -n 's/^listening on \(http[^ ]*\).*/\1/p' "$1" | head -1)
        [ -n "$u" ] && { echo "$u"; return 0; }
        kill -0 "$pid" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
key="sk-minirun-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
printf '%s\n' "$key" > "$work/key"

# A prompt cache of the first question, made by minirun-run (-n 0: the prompt only) and loaded
# by the server at start: its first chat request feeds one token of the prompt.
"$target/debug/minirun-run" --model "$model" --chat -p "What is the capital of France?" -n 0 \
    --prompt-cache "$work/question.megakv" 2> "$work/run.err" || { cat "$work/run.err"; exit 1; }
"$bin" --model "$model" --port 0 --api-key-file "$work/key" --queue 1 -c 2048 --sse-ping 0.2 --drain-seconds 2 \
    --prompt-cache "$work/question.megakv" > "$work/out" 2> "$work/err" &
pid=$!
url=$(listening "$work/out" 600) || { echo "minirun-serve did not start:"; cat "$work/err"; exit 1; }
echo "--- minirun-serve at $url"

fail=0
SERVE_URL="$url" SERVE_MODEL="SmolLM2-135M-Instruct.Q4_1" SERVE_KEY_FILE="$work/key" \
    "$py" -m pytest -q -p no:cacheprovider ci/serve_openai/test_openai.py || fail=1

# SIGTERM while an answer far longer than --drain-seconds 2 streams: the server stops accepting,
# waits 2 s, then closes the connection (which cancels the generation) and exits 0 promptly;
# the client's stream ends without [DONE]. The key is never printed.
before=$(grep -c 'POST /v1/completions' "$work/err" || true)
"$py" - "$url" "$key" > "$work/long" 2>&1 <<'PY' &
import http.client, json, sys, urllib.parse
u = urllib.parse.urlparse(sys.argv[1])
c = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
body = {"model": "SmolLM2-135M-Instruct.Q4_1", "prompt": "Count to 2000: 1, 2, 3, 4, 5,",
        "max_tokens": 1800, "temperature": 0, "stream": True}
c.request("POST", "/v1/completions", body=json.dumps(body),
          headers={"Content-Type": "application/json", "Authorization": "Bearer " + sys.argv[2]})
r, data = c.getresponse(), b""
try:
    while chunk := r.read1(65536):
        data += chunk
except Exception as e:
    print("read ended:", type(e).__name__)
print("DONE" if b"data: [DONE]" in data else "CUT", data.count(b"data: {"))
PY
long=$!
for _ in $(seq 1 100); do
    [ "$(grep -c 'POST /v1/completions' "$work/err" || true)" -gt "$before" ] && break
    sleep 0.1
done
sleep 1
t0=$(date +%s)
kill -TERM "$pid"
if ! wait "$pid"; then echo "minirun-serve did not exit 0 on SIGTERM"; fail=1; fi
took=$(( $(date +%s) - t0 ))
pid=
wait "$long" || true
echo "--- SIGTERM with a long answer running: exit after ${took} s; client: $(tail -1 "$work/long")"
[ "$took" -le 15 ] || { echo "minirun-serve took ${took} s to stop with --drain-seconds 2"; fail=1; }
grep -q '^CUT [1-9]' "$work/long" || { echo "the long answer was not streaming, then cut: $(cat "$work/long")"; fail=1; }
grep -q 'drain-seconds' "$work/err" || { echo "no drain line in the server's log"; fail=1; }
if grep -qF "$key" "$work/out" "$work/err"; then echo "the API key appears in the server's output"; fail=1; fi
grep -q 'POST /v1/chat/completions 200' "$work/err" || { echo "no request log line"; fail=1; }
[ "$fail" -eq 0 ] || tail -40 "$work/err"

# serve_and_test NAME MODEL_ID TRIES TESTFILE ARGS…: start minirun-serve with ARGS, run the pytest
# file against it, stop it with SIGTERM (which must exit 0).
serve_and_test() {
    local name=$1 id=$2 tries=$3 tests=$4 url
    shift 4
    "$bin" --port 0 "$@" > "$work/sout" 2> "$work/serr" &
    pid=$!
    url=$(listening "$work/sout" "$tries") || { echo "minirun-serve ($name) did not start:"; cat "$work/serr"; exit 1; }
    echo "--- minirun-serve ($name) at $url"
    SERVE_URL="$url" SERVE_MODEL="$id" "$py" -m pytest -q -p no:cacheprovider "$tests" \
        || { fail=1; tail -40 "$work/serr"; }
    kill -TERM "$pid"; wait "$pid" || { echo "minirun-serve ($name) did not exit 0 on SIGTERM"; fail=1; }
    pid=
}

# Function calling through Jinja templates: SmolLM2 served with Qwen2.5's and Llama 3.1's
# templates (--chat-template-file), forced calls checked against their schemas
# (ci/serve_openai/test_tools.py).
for tmpl in Qwen-Qwen2.5-7B-Instruct meta-llama-Llama-3.1-8B-Instruct; do
    serve_and_test "$tmpl.jinja" "SmolLM2-135M-Instruct.Q4_1" 600 ci/serve_openai/test_tools.py \
        --model "$model" -c 2048 --chat-template-file "ci/oracles/chat_templates/$tmpl.jinja"
done

# The verified DeepSeek V4 demo artifact (minirun-demo's consumer copy), chatting in DeepSeek's
# own encoding through the same client (ci/serve_openai/test_artifact.py).
cargo build -q --workspace --bin minirun-demo
"$target/debug/minirun-demo" --work-dir "$work/demo" --generate 0 > "$work/demo.log" 2>&1 \
    || { tail -20 "$work/demo.log"; exit 1; }
serve_and_test artifact "minirun/DeepSeek-V4-Flash-minirun" 1200 ci/serve_openai/test_artifact.py \
    --artifact "$work/demo/demo/consumer" -c 256
exit $fail
