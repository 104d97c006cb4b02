"""Convert parity against llama.cpp's convert_hf_to_gguf.py, by recorded digests.

record REC CKPT_DIR REF_DIR META_JSON : describe the reference outputs REF_DIR/{qwen2,qwen3}-{f16,bf16,f32}.gguf
    (whole-file sha256, every tensor's type/dims/payload sha256, every metadata key's type and value or
    value digest, in file order) and the checkpoint files they came from, into REC (META_JSON: producer info).
check REC CKPT_DIR OURS_DIR : the regenerated checkpoint must match the record; then every tensor of
    OURS_DIR/<same names> must be byte-identical by name, and every metadata key equal in type and value,
    except the documented differences (ALLOWED); the whole-file comparison is reported.

Runs under gguf-py 0.19.0 + numpy ($CI_CACHE/venv-gguf); no torch.
"""
import hashlib, json, os, sys
import numpy as np
import gguf

ARCHS = ("qwen2", "qwen3")
OUTTYPES = ("f16", "bf16", "f32")
CKPT_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
# Keys llama.cpp's loader does not use for computation, and why they differ (docs/gguf.md "Convert parity"):
ALLOWED = {
    "general.name": "the script title-cases the directory name through gguf-py's Metadata heuristics; ours is the directory name",
}

def sha(b):
    return hashlib.sha256(b).hexdigest()

def describe(path):
    rd = gguf.GGUFReader(path)
    b = open(path, "rb").read()
    tensors = [{"name": t.name, "type": t.tensor_type.name, "dims": [int(d) for d in t.shape],
                "sha256": sha(np.asarray(t.data).tobytes())} for t in rd.tensors]
    meta = []
    for k, f in rd.fields.items():
        if k.startswith("GGUF."):
            continue
        v = f.contents()
        s = json.dumps(v, ensure_ascii=False)
        entry = {"key": k, "type": [gguf.GGUFValueType(t).name for t in f.types]}
        if len(s) > 200:
            entry["n"] = len(v) if isinstance(v, (list, str)) else None
            entry["sha256"] = sha(s.encode())
        else:
            entry["value"] = v
        meta.append(entry)
    return {"bytes": len(b), "sha256": sha(b), "tensors": tensors, "metadata": meta}

def ckpt_digests(d):
    out = {}
    for a in ARCHS:
        for f in CKPT_FILES:
            b = open(os.path.join(d, a, f), "rb").read()
            out[f"{a}/{f}"] = {"bytes": len(b), "sha256": sha(b)}
    return out

mode = sys.argv[1]
if mode == "record":
    rec, ckpt, ref, meta = sys.argv[2:6]
    outs = {f"{a}-{t}.gguf": describe(os.path.join(ref, f"{a}-{t}.gguf")) for a in ARCHS for t in OUTTYPES}
    doc = json.load(open(meta))
    doc.update({"checkpoint": ckpt_digests(ckpt), "outputs": outs})
    json.dump(doc, open(rec, "w"), indent=1, ensure_ascii=False)
    open(rec, "a").write("\n")
    print(f"recorded {len(outs)} reference outputs in {rec}")
    sys.exit(0)

rec, ckpt, ours = sys.argv[2:5]
r = json.load(open(rec))
failures = []
got = ckpt_digests(ckpt)
for k, v in r["checkpoint"].items():
    if got.get(k) != v:
        failures.append(f"regenerated checkpoint file {k} is {got.get(k)}, recorded {v}")
if failures:
    print("\n".join("FAIL: " + f for f in failures)); sys.exit(1)
for name, ref in r["outputs"].items():
    d = describe(os.path.join(ours, name))
    rt = {t["name"]: t for t in ref["tensors"]}
    ot = {t["name"]: t for t in d["tensors"]}
    same = 0
    for n in sorted(set(rt) | set(ot)):
        if rt.get(n) == ot.get(n):
            same += 1
        else:
            failures.append(f"{name}: tensor {n}: ours {ot.get(n)}, convert_hf_to_gguf.py {rt.get(n)}")
    rm = {m["key"]: m for m in ref["metadata"]}
    om = {m["key"]: m for m in d["metadata"]}
    equal, allowed = 0, []
    for k in list(rm) + [k for k in om if k not in rm]:
        if rm.get(k) == om.get(k):
            equal += 1
        elif k in ALLOWED:
            allowed.append(k)
        else:
            failures.append(f"{name}: metadata {k}: ours {str(om.get(k))[:200]}, convert_hf_to_gguf.py {str(rm.get(k))[:200]}")
    order_t = [t["name"] for t in ref["tensors"]] == [t["name"] for t in d["tensors"]]
    order_k = [m["key"] for m in ref["metadata"] if m["key"] not in ALLOWED] == [m["key"] for m in d["metadata"] if m["key"] not in ALLOWED]
    whole = "IDENTICAL" if d["sha256"] == ref["sha256"] else "not identical"
    if allowed == ["general.name"] and isinstance(rm["general.name"].get("value"), str):
        # Put the script's general.name into our file: is everything else the same bytes?
        ours_b = open(os.path.join(ours, name), "rb").read()
        key = b"general.name"
        i = ours_b.index(len(key).to_bytes(8, "little") + key + (8).to_bytes(4, "little"))
        j = i + 8 + len(key) + 4
        n = int.from_bytes(ours_b[j:j + 8], "little")
        theirs = rm["general.name"]["value"].encode()
        if len(theirs) == n:
            patched = ours_b[:j + 8] + theirs + ours_b[j + 8 + n:]
            ok = sha(patched) == ref["sha256"]
            whole = ("IDENTICAL once general.name is set to the script's value" if ok else "not identical even with the script's general.name")
            if not ok:
                failures.append(f"{name}: with general.name patched, the file still differs from convert_hf_to_gguf.py's")
    print(f"[convert parity] {name}: {same}/{len(rt)} tensors byte-identical (by name), {equal}/{len(rm)} metadata keys equal, "
          f"documented differences: {', '.join(allowed) or 'none'}; tensor order {'same' if order_t else 'differs'}, "
          f"key order {'same' if order_k else 'differs'}; whole file {whole}")
    if len(ot) != len(rt) or same == 0:
        failures.append(f"{name}: compared {same} tensors")
if failures:
    print("\n".join("FAIL: " + f for f in failures))
    sys.exit(1)
print("convert parity: every tensor payload and every loader-read metadata value equals convert_hf_to_gguf.py's")
