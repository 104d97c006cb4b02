#!/usr/bin/env bash
# Independent reader of the tile container (written only from docs/container.md) over every golden
# file, then over corrupted copies, which it must refuse: a flipped tile byte (digest), a flipped
# header byte, a truncated file.
set -euo pipefail
cd "$(dirname "$0")/../.."
golden=jobs/artifact/tests/golden/container
python3 ci/container_reader.py "$golden"/*.til
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
flip() { # flip(src, dst, offset)
    python3 -c 'import sys; b=bytearray(open(sys.argv[1],"rb").read()); b[int(sys.argv[3])]^=0x01; open(sys.argv[2],"wb").write(b)' "$@"
}
flip "$golden/v2-mxfp4-digests.til" "$tmp/tile-byte.til" $((16384 * 3 + 5))
flip "$golden/v3-fp8-block-128.til" "$tmp/header-rows.til" 24
flip "$golden/v2-affine-bf16-bias.til" "$tmp/flags.til" 12
# A v2 file whose digest table was moved (offset field updated) must still be accepted: readers
# follow `digest_table_offset`, they never assume it (docs/container.md §3.4).
python3 - "$golden/v2-mxfp4-digests.til" "$tmp/moved-table.ok" <<'PY'
import struct, sys
b = bytearray(open(sys.argv[1], "rb").read())
table = bytes(b[528:592]); b[528:592] = bytes(64); b[1000:1064] = table
struct.pack_into("<Q", b, 512, 1000)
open(sys.argv[2], "wb").write(b)
PY
python3 ci/container_reader.py "$tmp/moved-table.ok"
head -c 50000 "$golden/v1-mxfp4.til" > "$tmp/truncated.til"
python3 ci/container_reader.py --expect-fail "$tmp"/*.til
echo "container reader: goldens accepted, corrupted copies refused"
