#!/usr/bin/env bash
# Independent Python reader (json + numpy, written from models.md §1 / formats.md only) over the
# default `minirun-synth deepseek-v4` checkpoint: headers, index, shard map, FP8 and MXFP4 values.
set -euo pipefail
cd "$(dirname "$0")/../.."
py="$CI_CACHE/venv-gguf/bin/python"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cargo build -q --locked --workspace --bin minirun-synth
"${CARGO_TARGET_DIR:-target}/debug/minirun-synth" deepseek-v4 --out "$tmp/v4" > "$tmp/sums"
diff "$tmp/sums" jobs/synth/tests/golden/synth-deepseek-v4.sha256
(cd "$tmp/v4" && sha256sum -c --quiet "$OLDPWD/jobs/synth/tests/golden/synth-deepseek-v4.sha256")
"$py" ci/synth_reader.py "$tmp/v4"
# Negative control: one FP8 block scale bumped by 2^4 must be caught.
cp -r "$tmp/v4" "$tmp/bad"
"$py" - "$tmp/bad/model-00007-of-00046.safetensors" <<'PY'
import json, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
n = int.from_bytes(b[:8], "little")
off = json.loads(b[8:8 + n])["layers.5.attn.wq_a.scale"]["data_offsets"][0]
b[8 + n + off] += 4
open(p, "wb").write(b)
PY
"$py" ci/synth_reader.py --expect-fail "$tmp/bad"
