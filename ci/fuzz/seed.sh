#!/usr/bin/env bash
# Seed the fuzz corpora (fuzz/corpus/<target>/) from the golden files, the real plans, a freshly
# generated demo publication and the small GGUF files gguf-py writes
# (docs/fuzz.md "Corpora"). Files are named by their SHA-256 prefix, so re-seeding adds nothing
# twice. The committed corpora are these seeds merged with what campaigns found (`-merge=1`).
#
#   ci/fuzz/seed.sh [DEMO_BIN]    # DEMO_BIN: minirun-demo to generate with (default target/debug)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
demo_bin=${1:-${CARGO_TARGET_DIR:-$root/target}/debug/minirun-demo}
corpus=$root/fuzz/corpus
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# add TARGET FILE [SELECTOR [MAX_BYTES]]: one seed, optionally behind a selector byte and cut.
add() {
  local t=$1 f=$2 sel=${3:-} max=${4:-1048576} tmp
  tmp=$(mktemp -p "$work")
  { [ -n "$sel" ] && printf "\\x$(printf %02x "$sel")"; head -c "$max" "$f"; } > "$tmp"
  mkdir -p "$corpus/$t"
  mv "$tmp" "$corpus/$t/seed-$(sha256sum "$tmp" | cut -c1-16)"
}
add_text() { local t=$1 sel=$2 text=$3 f; f=$(mktemp -p "$work"); printf '%s' "$text" > "$f"; add "$t" "$f" "$sel"; }

golden=$root/jobs/artifact/tests/golden
for f in "$golden"/container/*.til; do
  add container_header "$f" "" 16384
  add container_file "$f"
done
for f in "$golden"/index-*.json; do add index_json "$f"; done
for f in "$golden"/mega/single/*.mega "$golden"/mega/sharded/*.mega; do add mega "$f" 0; done
add mega "$golden/mega/sharded/model.mega.index.json" 1
add mega "$golden/megakv/tiny.megakv" 2
add mega "$golden/megakv/sections.megakv" 2
for f in "$root"/plans/*.toml; do add plan "$f"; done

"$demo_bin" --work-dir "$work/demo" --generate 0 > "$work/demo.log" 2>&1
d=$work/demo
for u in global00 layers00 layers10 mtp00; do
  [ -d "$d/release/$u" ] || continue
  add unit_manifest "$d/release/$u/manifest.json"
  add tensor_map "$d/release/$u/tensors.json"
  add ledger "$d/ledger/fetch/$u.json" 0
  add ledger "$d/ledger/repack/$u.json" 0
done
for f in $(ls "$d"/release/layers10/*.til | head -4); do add container_file "$f"; add container_header "$f" "" 16384; done
add index_json "$d/release/index.json"
add ledger "$d/ledger/candidate/release.json" 0
add release_record "$d/demo/consumer/.minirun/release.json"
add safetensors "$d/demo/checkpoint/model.safetensors.index.json" 1
for f in $(ls "$d"/demo/checkpoint/*.safetensors | head -3); do
  # the header: 8-byte length, then that many bytes of JSON
  n=$(python3 -c "import struct,sys; print(8 + struct.unpack('<Q', open(sys.argv[1],'rb').read(8))[0])" "$f")
  add safetensors "$f" 0 "$n"
done
# a chunk log of three records (CRC-32 over each record's first 99 bytes)
python3 - "$work/chunks.log" <<'PY'
import sys, zlib, hashlib
out = b"minirun-chunk-log v1\n"
for i in range(3):
    body = f"{i * 1048576:016x} {1048576:016x} {hashlib.sha256(bytes([i])).hexdigest()} ".encode()
    out += body + f"{zlib.crc32(body):08x}\n".encode()
open(sys.argv[1], "wb").write(out)
PY
add ledger "$work/chunks.log" 1

# Small GGUF files written by gguf-py (the independent writer CI installs in venv-gguf): every
# metadata value type, arrays, and tensors of several ggml types.
"$root/ci/.cache/venv-gguf/bin/python" - "$work" <<'PY'
import sys, numpy as np, gguf
for i, (arch, types) in enumerate([("llama", ["F32", "F16"]), ("qwen2", ["Q8_0", "Q4_0"])]):
    w = gguf.GGUFWriter(f"{sys.argv[1]}/seed{i}.gguf", arch)
    w.add_block_count(2)
    w.add_context_length(128)
    w.add_uint8("t.u8", 7); w.add_int8("t.i8", -7); w.add_uint16("t.u16", 700); w.add_int16("t.i16", -700)
    w.add_uint32("t.u32", 70000); w.add_int32("t.i32", -70000); w.add_float32("t.f32", 0.5)
    w.add_uint64("t.u64", 1 << 40); w.add_int64("t.i64", -(1 << 40)); w.add_float64("t.f64", 0.25)
    w.add_bool("t.bool", True); w.add_string("t.str", "héllo")
    w.add_array("tokenizer.ggml.tokens", ["<s>", "a", "b"]); w.add_array("t.arr", [1, 2, 3])
    for j, t in enumerate(types):
        qt = getattr(gguf.GGMLQuantizationType, t)
        data = np.arange(64, dtype=np.float32).reshape(2, 32) / 64
        if t in ("Q8_0", "Q4_0"):
            q = gguf.quants.quantize(data, qt)
            w.add_tensor(f"blk.{j}.w", q, raw_shape=q.shape, raw_dtype=qt)
        else:
            w.add_tensor(f"blk.{j}.w", data.astype(np.float16 if t == "F16" else np.float32))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
PY
for f in "$work"/seed*.gguf; do add gguf "$f"; done

# Hub answers (hub-protocol.md shapes) and request bodies.
oid=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
add_text hub_client 0 '{"id":"o/r","sha":"0123456789abcdef0123456789abcdef01234567","private":false,"siblings":[{"rfilename":"a.bin","size":3,"lfs":{"sha256":"'$oid'","size":3}}]}'
add_text hub_client 1 '[{"type":"file","oid":"0123456789abcdef0123456789abcdef01234567","size":3,"path":"a.bin","lfs":{"oid":"'$oid'","size":3,"pointerSize":130}},{"type":"directory","oid":"0123456789abcdef0123456789abcdef01234567","size":0,"path":"d"}]'
add_text hub_client 2 '{"branches":[{"name":"main","ref":"refs/heads/main","targetCommit":"0123456789abcdef0123456789abcdef01234567"}],"tags":[],"converts":[]}'
add_text hub_client 3 '[{"id":"o/r","modelId":"o/r","sha":"0123456789abcdef0123456789abcdef01234567","private":false}]'
add_text hub_client 4 '{"commitUrl":"http://h/o/r/commit/0123456789abcdef0123456789abcdef01234567","commitOid":"0123456789abcdef0123456789abcdef01234567","commitMessage":"m","hookOutput":"","success":true}'
add_text hub_client 5 '{"url":"http://h/o/r","name":"o/r","id":"x"}'
add_text hub_client 6 '{"files":[{"path":"a.bin","uploadMode":"lfs","shouldIgnore":false,"oid":null}],"commitOid":"0123456789abcdef0123456789abcdef01234567"}'
add_text hub_client 7 '{"transfer":"basic","objects":[{"oid":"0000000000000000000000000000000000000000000000000000000000000000","size":3,"actions":{"upload":{"href":"http://h/u"}}},{"oid":"'$oid'","size":0}],"hash_algo":"sha256"}'
add_text hub_client 8 '{"errors":[{"message":"m1"},{"message":"m2"}]}'
add_text hub_client 9 '<http://h/api/models/o/r/tree/main?cursor=x>; rel="next", <http://h/p>; rel="prev"'
add_text hub_client 10 '30'
add_text hub_client 11 '"api";r=0;t=7'
add_text hub_server 0 '{"key":"header","value":{"summary":"s","description":""}}
{"key":"file","value":{"path":"a.txt","content":"aGk=","encoding":"base64"}}
{"key":"lfsFile","value":{"path":"b.bin","algo":"sha256","oid":"'$oid'","size":0}}
{"key":"deletedFile","value":{"path":"c.txt"}}
{"key":"deletedFolder","value":{"path":"d"}}'
add_text hub_server 1 '{"operation":"upload","transfers":["basic","multipart"],"objects":[{"oid":"'$oid'","size":4096}],"hash_algo":"sha256"}'
add_text hub_server 2 '{"files":[{"path":"a.bin","size":3,"sample":"aGk="}],"gitIgnore":"*.tmp\n"}'
add_text hub_server 3 '{"name":"other","organization":"fuzz","type":"model","private":false}'
echo "seeded: $(find "$corpus" -type f | wc -l) files in $corpus" >&2
