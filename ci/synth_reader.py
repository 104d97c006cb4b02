#!/usr/bin/env python3
"""Independent reader of a `minirun-synth deepseek-v4` checkpoint, written from
../shared/design/models.md §1 and formats.md §1-4 only (json + numpy, no safetensors package).

Checks: every shard's header (contiguous offsets, dtype sizes, file length); the index (every
tensor mapped to the shard holding it, total_size = sum of data bytes); the layer -> shard map;
FP8 e4m3 weights with e8m0 128x128 block scales (finite codes, block max in the top octave,
dequantized std ~ 1/sqrt(fan_in)); MXFP4 I8 experts (low nibble first, e8m0 per 32, std);
tid2eid (distinct valid expert ids); config compress_ratios; tokenizer special-token ids.
Exit status 1 with a message on the first failure."""
import json
import math
import os
import sys

import numpy as np

SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E8M0": 1, "I16": 2, "U16": 2, "F16": 2,
         "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}


def fail(msg):
    print(f"synth reader: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def e4m3_table():
    t = np.zeros(256, dtype=np.float64)
    for b in range(256):
        s = -1.0 if b & 0x80 else 1.0
        e = (b >> 3) & 0xF
        m = b & 7
        if b & 0x7F == 0x7F:
            t[b] = np.nan
        elif e == 0:
            t[b] = s * m * 2.0 ** -9
        else:
            t[b] = s * (1 + m / 8) * 2.0 ** (e - 7)
    return t


E4M3 = e4m3_table()
E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6])


def read_shard(path):
    data = open(path, "rb").read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    base = 8 + n
    meta = header.pop("__metadata__", None)
    if meta != {"format": "pt"}:
        fail(f"{path}: metadata {meta}")
    end = 0
    tensors = {}
    for name, t in sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"])):
        b, e = t["data_offsets"]
        if b != end:
            fail(f"{path}: `{name}` starts at {b}, previous ended at {end}")
        if e - b != math.prod(t["shape"]) * SIZES[t["dtype"]]:
            fail(f"{path}: `{name}` size mismatch")
        end = e
        tensors[name] = (t["dtype"], t["shape"], data[base + b:base + e])
    if base + end != len(data):
        fail(f"{path}: file is {len(data)} bytes, header says {base + end}")
    return tensors, end


def main(root):
    cfg = json.load(open(os.path.join(root, "config.json")))
    layers = cfg["num_hidden_layers"]
    n_exp = cfg["n_routed_experts"]
    ratios = cfg["compress_ratios"]
    if len(ratios) != layers + 1 or ratios[:2] != [0, 0] or ratios[-1] != 0:
        fail(f"compress_ratios {ratios}")
    index = json.load(open(os.path.join(root, "model.safetensors.index.json")))
    shards = sorted({f for f in index["weight_map"].values()})
    if len(shards) != layers + 3:
        fail(f"{len(shards)} shards")
    total = 0
    all_t = {}
    for f in shards:
        tensors, size = read_shard(os.path.join(root, f))
        total += size
        for name, t in tensors.items():
            if index["weight_map"].get(name) != f:
                fail(f"index maps `{name}` to {index['weight_map'].get(name)}, found in {f}")
            all_t[name] = t
    if total != index["metadata"]["total_size"] or len(all_t) != len(index["weight_map"]):
        fail("index total_size / tensor count mismatch")
    of = f"-of-{layers + 3:05d}.safetensors"
    for layer in range(layers):
        if index["weight_map"][f"layers.{layer}.attn_norm.weight"] != f"model-{layer + 2:05d}{of}":
            fail(f"layer {layer} not in shard {layer + 2}")
    if index["weight_map"]["embed.weight"] != f"model-00001{of}":
        fail("embed.weight not in shard 1")
    if index["weight_map"]["mtp.0.e_proj.weight"] != f"model-{layers + 3:05d}{of}":
        fail("mtp not in the last shard")
    n_fp8 = n_fp4 = 0
    for name, (dt, shape, raw) in all_t.items():
        if dt == "F8_E4M3":
            rows, cols = shape
            q = E4M3[np.frombuffer(raw, dtype=np.uint8)].reshape(rows, cols)
            sdt, sshape, sraw = all_t[name[:-len("weight")] + "scale"]
            if sdt != "F8_E8M0" or sshape != [-(-rows // 128), -(-cols // 128)]:
                fail(f"`{name}` scale {sdt} {sshape}")
            if np.isnan(q).any():
                fail(f"`{name}` has NaN codes")
            s = 2.0 ** (np.frombuffer(sraw, dtype=np.uint8).astype(np.float64) - 127).reshape(sshape)
            blocks = np.abs(q).reshape(rows // 128, 128, cols // 128, 128).max(axis=(1, 3))
            if blocks.min() < 224 or blocks.max() > 448:
                fail(f"`{name}` block maxima {blocks.min()}..{blocks.max()}")
            w = q * np.repeat(np.repeat(s, 128, 0), 128, 1)
            if abs(w.std() * math.sqrt(cols) - 1) > 0.15:
                fail(f"`{name}` std {w.std()} for fan-in {cols}")
            n_fp8 += 1
        elif dt == "I8":
            rows, half = shape
            b = np.frombuffer(raw, dtype=np.uint8).reshape(rows, half)
            codes = np.stack([b & 0xF, b >> 4], axis=-1).reshape(rows, half * 2)
            sdt, sshape, sraw = all_t[name[:-len("weight")] + "scale"]
            if sdt != "F8_E8M0" or sshape != [rows, half * 2 // 32]:
                fail(f"`{name}` scale {sdt} {sshape}")
            s = 2.0 ** (np.frombuffer(sraw, dtype=np.uint8).astype(np.float64) - 127).reshape(sshape)
            w = E2M1[codes] * np.repeat(s, 32, 1)
            if abs(w.std() * math.sqrt(half * 2) - 1) > 0.25:
                fail(f"`{name}` std {w.std()}")
            if (np.abs(E2M1[codes]).reshape(rows, -1, 32).max(axis=2) < 3).any():
                fail(f"`{name}` has a group whose max code is below 3")
            n_fp4 += 1
        elif dt == "I64":
            ids = np.frombuffer(raw, dtype="<i8").reshape(shape)
            if ids.min() < 0 or ids.max() >= n_exp or (ids[:, 0] == ids[:, 1]).any():
                fail(f"`{name}` invalid expert ids")
    tok = json.load(open(os.path.join(root, "tokenizer.json")))
    specials = {t["content"]: t["id"] for t in tok["added_tokens"]}
    if specials.get("<｜begin▁of▁sentence｜>") != cfg["bos_token_id"] or \
            specials.get("<｜end▁of▁sentence｜>") != cfg["eos_token_id"]:
        fail(f"special token ids {specials}")
    print(f"synth reader: {len(shards)} shards, {len(all_t)} tensors, {n_fp8} FP8 and {n_fp4} MXFP4 "
          f"weights checked")


if __name__ == "__main__":
    if sys.argv[1] == "--expect-fail":
        try:
            main(sys.argv[2])
        except SystemExit as e:
            if e.code == 1:
                print("synth reader: corrupted copy refused, as expected")
                sys.exit(0)
        print("synth reader: FAIL: a corrupted checkpoint was accepted", file=sys.stderr)
        sys.exit(1)
    main(sys.argv[1])
