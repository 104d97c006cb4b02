"""Check the DeepSeek V4 reference fixture without torch (ci/checks.d/50-deepseek-v4-fixture.sh).
Usage: python deepseek_v4_check.py FIXTURE_DIR CHECKPOINT_DIR  (exit 0 ok, 1 a finding).

- logits.npy: the digest and shape recorded in reference.json; argmax of rows 0..15 = the 16 greedy
  tokens; the recorded argmax and top-2 margins re-derive from the array;
- the counters prove the hard paths (compressed entries of both ratios, indexer selecting fewer
  than the visible entries, window evictions, the CSA bias applied in every call);
- CHECKPOINT_DIR (a fresh minirun-synth deepseek-v4 output) has exactly the recorded files, bytes
  and SHA-256, so the fixture belongs to the code that CI builds."""
import hashlib, json, os, sys

import numpy as np

fx, ck = sys.argv[1], sys.argv[2]
ref = json.load(open(os.path.join(fx, "reference.json")))
bad = []


def sha(p):
    return hashlib.sha256(open(p, "rb").read()).hexdigest()


lp = os.path.join(fx, ref["logits"]["path"])
if sha(lp) != ref["logits"]["sha256"]:
    bad.append(f"{lp}: sha256 differs from reference.json")
rows = np.load(lp)
vocab = json.load(open(os.path.join(ck, "config.json")))["vocab_size"]
steps = len(ref["greedy_tokens"])
if rows.dtype != np.float32 or rows.shape != (steps + 1, vocab) or list(rows.shape) != ref["logits"]["shape"]:
    bad.append(f"{lp}: {rows.dtype} {rows.shape}, wanted float32 ({steps + 1}, {vocab})")
else:
    am = [int(i) for i in rows.argmax(-1)]
    if am[:steps] != ref["greedy_tokens"] or am != ref["argmax_per_row"]:
        bad.append(f"{lp}: argmax {am} vs greedy {ref['greedy_tokens']}")
    s = np.sort(rows.astype(np.float64), -1)
    m = s[:, -1] - s[:, -2]
    if not np.allclose(m, ref["top2_margin_per_row"], rtol=0, atol=1e-6):
        bad.append(f"{lp}: top-2 margins do not re-derive")
if len(ref["prompt"]["ids"]) < 300 or ref["prompt"]["length"] != len(ref["prompt"]["ids"]):
    bad.append("prompt shorter than 300 tokens")

c = ref["counters"]
after = c["compressed_entries_per_layer_after_decode"]
n = len(ref["prompt"]["ids"]) + steps
want = {"4": n // 4, "128": n // 128, "indexer_4": n // 4}
for k, v in want.items():
    if not after[k] or set(after[k]) != {v}:
        bad.append(f"counters: ratio {k} entries {sorted(set(after[k]))}, wanted {v} in every layer")
if want["128"] < 1 or c["indexer_queries_selecting_fewer_than_visible"] < 1:
    bad.append("counters: the indexer never dropped a visible entry / no ratio-128 entry")
if c["indexer_queries_with_more_visible_than_topk"] < 1 or c["indexer_valid_selections"] < 1:
    bad.append("counters: the indexer never had more visible entries than index_topk")
if min(c["window_evicted_per_layer_after_decode"]) < 1 or c["window_masked_pairs_prefill"] < 1:
    bad.append("counters: the sliding window never evicted")
if c["attention_mask_not_tensor_calls"] != 0 or c["csa_block_bias_applied_calls"] < 1:
    bad.append("counters: a call ran without a tensor mask (the CSA indexer bias was not applied)")

dz = np.load(os.path.join(fx, ref["decisions"]["path"]))
for k in ("indexer", "moe"):
    g = dz[f"{k}_gap"].astype(np.float64)
    g = g[np.isfinite(g)]
    if g.size != ref["decisions"][k]["decisions"] or float(g.min()) != ref["decisions"][k]["min_gap"]:
        bad.append(f"decisions.npz: {k} gaps do not re-derive the recorded statistics")
if dz["indexer_picks"].shape != (len(after["4"]), n, 4) or dz["moe_experts"].shape[1] != n:
    bad.append(f"decisions.npz: shapes {dz['indexer_picks'].shape} {dz['moe_experts'].shape}")

files = {f: None for f in os.listdir(ck) if os.path.isfile(os.path.join(ck, f))}
rec = ref["checkpoint"]["files"]
if sorted(files) != sorted(rec):
    bad.append(f"{ck}: files {sorted(set(files) ^ set(rec))} differ from the recorded set")
for f, e in sorted(rec.items()):
    p = os.path.join(ck, f)
    if os.path.isfile(p) and (os.path.getsize(p) != e["bytes"] or sha(p) != e["sha256"]):
        bad.append(f"{p}: differs from the checkpoint the reference ran on (regenerate the fixture "
                   f"with ci/oracles/deepseek_v4_transformers.sh)")
for b in bad:
    print(b)
print("deepseek-v4 fixture: " + ("verified" if not bad else f"{len(bad)} finding(s)")
      + f" ({len(rec)} checkpoint files, logits {list(rows.shape)}, transformers "
      + ref["producer"]["transformers"] + ")")
sys.exit(1 if bad else 0)
