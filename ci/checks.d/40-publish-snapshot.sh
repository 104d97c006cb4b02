#!/usr/bin/env bash
# The demo publishes the generated DeepSeek V4 release to a local hub (fetch → repack → gate →
# stage → candidate-upload → promote → consumer verify); then the reference client,
# huggingface_hub.snapshot_download (venv-hf2, plain LFS: HF_HUB_DISABLE_XET=1), downloads the
# promoted public branch, which must reproduce the release byte for byte (docs/publish.md §7).
set -euo pipefail
cd "$(dirname "$0")/../.."
py="${CI_CACHE:-ci/.cache}/venv-hf2/bin/python"
target="${CARGO_TARGET_DIR:-target}"
cargo build -q --workspace --bin minirun-demo --bin minirun-hub
tmp=$(mktemp -d)
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
"$target/debug/minirun-demo" --work-dir "$tmp/w"
"$target/debug/minirun-hub" serve --root "$tmp/w/demo/hub" --addr 127.0.0.1:0 > "$tmp/serve.log" 2>&1 &
server=$!
for _ in $(seq 100); do grep -q 'listening on' "$tmp/serve.log" && break; sleep 0.1; done
url=$(grep -o 'http://[0-9.:]*' "$tmp/serve.log" | head -1)
HF_ENDPOINT="$url" HF_HUB_DISABLE_XET=1 HF_HOME="$tmp/hf" HF_HUB_DISABLE_PROGRESS_BARS=1 "$py" - "$tmp/snap" <<'PY'
import sys
from huggingface_hub import snapshot_download
snapshot_download("minirun/DeepSeek-V4-Flash-minirun", revision="main", local_dir=sys.argv[1], token="ci")
PY
# The public branch = the release + the release record (+ the platform-managed .gitattributes).
diff -r -x .gitattributes -x .minirun -x .cache "$tmp/snap" "$tmp/w/release"
test -s "$tmp/snap/.minirun/release.json"
echo "publish: snapshot_download of the promoted branch reproduces the release byte for byte"
