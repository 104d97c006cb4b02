#!/usr/bin/env python3
"""Independent reader for MEGA v1 shards and .mega.index.json, written from docs/mega.md alone
(standard library only). Usage: mega_reader.py GOLDEN_DIR  (expects single/, sharded/, expected.json).
Validates the layout rules, header/footer CRCs, payload CRC-32/SHA-256, the index contract, and
compares every tensor's bytes with expected.json. Exit 0 when everything holds, 1 otherwise."""
import hashlib
import json
import os
import struct
import sys
import zlib

MAGIC = b"MEGA\x00\r\n\x1a"
BITS = {"F4": 4, "F6_E2M3": 6, "F6_E3M2": 6}
for d in ("BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "F8_E4M3FNUZ", "F8_E5M2FNUZ"):
    BITS[d] = 8
for d in ("I16", "U16", "F16", "BF16"):
    BITS[d] = 16
for d in ("I32", "U32", "F32"):
    BITS[d] = 32
for d in ("C64", "F64", "I64", "U64"):
    BITS[d] = 64
SEG_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


class Bad(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Bad(msg)


def align_up(x, a):
    return (x + a - 1) & ~(a - 1)


class Cur:
    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def take(self, n):
        check(self.pos + n <= len(self.buf), "truncated section")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b

    def u(self, fmt):
        size = struct.calcsize(fmt)
        return struct.unpack("<" + fmt, self.take(size))[0]


def key_ok(k):
    return 0 < len(k.encode()) <= 1024 and all(s and set(s) <= SEG_OK for s in k.split("."))


def body(c, tag, depth):
    if tag == 1:
        return c.take(c.u("Q")).decode("utf-8")
    if tag == 2:
        return c.u("Q")
    if tag == 3:
        return c.u("q")
    if tag == 4:
        return c.u("d")
    if tag == 5:
        b = c.u("B")
        check(b in (0, 1), "bool byte not 0/1")
        return bool(b)
    if tag == 6:
        return bytes(c.take(c.u("Q")))
    if tag == 7:
        check(depth <= 4, "arrays nested too deep")
        et = c.u("B")
        check(1 <= et <= 7, "bad element tag")
        return [body(c, et, depth + 1) for _ in range(c.u("Q"))]
    raise Bad("unknown tag %d" % tag)


def section(buf, count):
    c, out, prev = Cur(buf), {}, None
    for _ in range(count):
        kb = bytes(c.take(c.u("I")))
        check(prev is None or kb > prev, "keys not strictly ascending")
        k = kb.decode("utf-8")
        check(key_ok(k), "bad key syntax %r" % k)
        out[k] = body(c, c.u("B"), 1)
        prev = kb
    check(c.pos == len(buf), "trailing bytes in section")
    return out


def read_shard(path):
    return read_shard_bytes(open(path, "rb").read())


def read_shard_bytes(data):
    check(len(data) >= 128 and data[:8] == MAGIC, "bad magic or short file")
    major, minor, flags = struct.unpack_from("<HHI", data, 8)
    (align, mcount, tcount, moff, msize, doff, dsize, poff, psize, foff, fsize) = struct.unpack_from(
        "<11Q", data, 0x10)
    hcrc, fcrc = struct.unpack_from("<II", data, 0x68)
    check(major == 1 and flags & ~1 == 0, "version/flags")
    check(data[0x70:0x80] == bytes(16), "reserved bytes")
    check(align >= 8 and align <= 1 << 30 and align & (align - 1) == 0, "alignment")
    check(moff == 128 and doff == moff + msize, "section offsets")
    check(poff == align_up(doff + dsize, align), "payload offset")
    if flags & 1:
        check(foff == poff + psize and fsize >= 8, "footer placement")
        check(len(data) == foff + fsize, "file length")
    else:
        check(foff == 0 and fsize == 0 and fcrc == 0, "footer fields")
        check(len(data) == poff + psize, "file length")
    head = bytearray(data[:poff])
    head[0x68:0x6C] = bytes(4)
    check(zlib.crc32(bytes(head)) == hcrc, "header crc")
    check(data[doff + dsize:poff] == bytes(poff - doff - dsize), "padding not zero")
    md = section(data[moff:moff + msize], mcount)
    c, tensors, end = Cur(data[doff:doff + dsize]), [], 0
    for _ in range(tcount):
        name = bytes(c.take(c.u("I"))).decode("utf-8")
        dtype = bytes(c.take(c.u("B"))).decode("ascii")
        rank = c.u("I")
        check(rank <= 16, "rank")
        shape = [c.u("Q") for _ in range(rank)]
        off, length = c.u("Q"), c.u("Q")
        n = 1
        for s in shape:
            n *= s
        check(dtype in BITS and n * BITS[dtype] % 8 == 0, "dtype/shape of " + name)
        check(length == n * BITS[dtype] // 8, "length of " + name)
        check(off == align_up(end, align) and off + length <= psize, "placement of " + name)
        end = off + length
        tensors.append((name, dtype, shape, off, length))
    check(c.pos == dsize and end == psize, "directory/payload size")
    footer = {}
    if flags & 1:
        fb = data[foff:foff + fsize]
        check(zlib.crc32(fb) == fcrc, "footer crc")
        footer = section(fb[8:], struct.unpack_from("<Q", fb, 0)[0])
        check(all(k.startswith("mega.trust.") or k.split(".")[0] not in
                  ("general", "mega", "model", "tokenizer") for k in footer), "footer keys")
    payload = data[poff:poff + psize]
    check("%08x" % zlib.crc32(payload) == md["mega.hash.payload.crc32"], "payload crc32")
    check(hashlib.sha256(payload).hexdigest() == md["mega.hash.payload.sha256"], "payload sha256")
    check(md["mega.tensor.count"] == tcount and md["mega.payload.nbytes"] == psize, "counts")
    params = 0
    for _, _, shape, _, _ in tensors:
        n = 1
        for s in shape:
            n *= s
        params += n
    check(md["mega.parameter.count"] == params, "parameter count")
    check(md["mega.shard.payload.end"] - md["mega.shard.payload.begin"] == psize, "shard range")
    check(md["mega.shard.ordinal"] < md["mega.shard.count"], "ordinal")
    if md["mega.layout.tensor_order"] == "name":
        names = [t[0].encode() for t in tensors]
        check(names == sorted(names), "tensor order")
    return {"md": md, "footer": footer, "tensors": tensors, "payload": payload,
            "poff": poff, "size": len(data)}


def read_index(path):
    idx = json.load(open(path, encoding="utf-8"))
    md, shards, wm = idx["metadata"], idx["shards"], idx["weight_map"]
    check(md["mega.index.version"] == "1", "index version")
    check(int(md["mega.shard.count"]) == len(shards), "shard count")
    check(int(md["mega.tensor.count"]) == len(wm), "tensor count")
    nxt = 0
    for s in shards:
        check("/" not in s["file"] and s["file"].endswith(".mega"), "shard name")
        b, e = s["payload_range"]
        check(b == nxt and e >= b, "payload ranges")
        nxt = e
        check(sum(1 for f in wm.values() if f == s["file"]) == s["tensor_count"], "tensor counts")
    check(int(md["mega.payload.nbytes"]) == nxt, "payload total")
    return idx


def main(root):
    expected = {t["name"]: t for t in json.load(open(os.path.join(root, "expected.json")))["tensors"]}

    def compare(sh):
        for name, dtype, shape, off, length in sh["tensors"]:
            e = expected[name]
            got = hashlib.sha256(sh["payload"][off:off + length]).hexdigest()
            check((dtype, shape, got) == (e["dtype"], e["shape"], e["sha256"]), "tensor " + name)

    single = read_shard(os.path.join(root, "single", "model.mega"))
    check(len(single["tensors"]) == len(expected), "single tensor set")
    compare(single)
    tr = single["footer"]
    check(tr.get("mega.trust.signed_digest") == "sha256:" + single["md"]["mega.hash.payload.sha256"],
          "signed digest")
    print("single/model.mega: %d tensors, hashes ok, trust fields present (signature unchecked)"
          % len(single["tensors"]))

    sdir = os.path.join(root, "sharded")
    idx = read_index(os.path.join(sdir, "model.mega.index.json"))
    seen = set()
    params = 0
    for ordinal, s in enumerate(idx["shards"]):
        sh = read_shard(os.path.join(sdir, s["file"]))
        md = sh["md"]
        check(md["mega.shard.ordinal"] == ordinal and md["mega.shard.count"] == len(idx["shards"]),
              "shard position")
        check(md["mega.shard.payload.begin"] == s["payload_range"][0], "shard range vs index")
        check((sh["size"], sh["poff"]) == (s["nbytes"], s["payload_offset"]), "shard size vs index")
        check((md["mega.hash.payload.crc32"], md["mega.hash.payload.sha256"]) == (s["crc32"], s["sha256"]),
              "hashes vs index")
        for t in sh["tensors"]:
            check(idx["weight_map"][t[0]] == s["file"], "weight map")
            seen.add(t[0])
        params += md["mega.parameter.count"]
        compare(sh)
    check(seen == set(expected) and str(params) == idx["metadata"]["mega.parameter.count"], "aggregate")
    print("sharded: %d shards, %d tensors, index contract and hashes ok" % (len(idx["shards"]), len(seen)))

    # The reader must also reject: a flipped payload byte, a flipped header byte, a truncation.
    raw = open(os.path.join(root, "single", "model.mega"), "rb").read()
    poff = single["poff"]
    for what, mutated in (("payload crc32", raw[:poff] + bytes([raw[poff] ^ 1]) + raw[poff + 1:]),
                          ("header crc", raw[:130] + bytes([raw[130] ^ 1]) + raw[131:]),
                          ("file length", raw[:-1])):
        try:
            read_shard_bytes(mutated)
        except Bad as e:
            check(str(e) == what, "mutation rejected for the wrong reason: %s (want %s)" % (e, what))
        else:
            raise Bad("mutation not detected: " + what)
    print("mutations: payload, header and truncation rejected")


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except (Bad, KeyError, ValueError, UnicodeDecodeError, struct.error) as e:
        print("mega_reader: FAILED: %s: %s" % (type(e).__name__, e), file=sys.stderr)
        sys.exit(1)
