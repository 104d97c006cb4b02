"""An independent float64 numpy implementation of docs/deepseek-v4-reference.md §3 (no torch), run
cache-free over the fixture's prompt + greedy tokens and compared with the recorded pure-float64
transformers rows (`logits_f64.npy`) and decisions (`decisions.npz`). It proves that the page
describes what transformers computes, operation by operation.

Usage: python deepseek_v4_numpy.py CHECKPOINT_DIR FIXTURE_DIR  (exit 0 agree, 1 a finding)."""
import json, os, sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from deepseek_v4_transformers import dequantize_dir, inv_freq_f64  # noqa: E402

EPS = 1e-6


def rms(x, w=None):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS)
    return y if w is None else y * w


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def softmax(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=axis, keepdims=True)


def rope(x, ang, sign=1.0):
    """Interleaved rotation of the last 2·ang.shape[-1] dims; `ang` broadcasts against x[..., :n]."""
    n = ang.shape[-1]
    c, s = np.cos(ang), sign * np.sin(ang)
    r = x[..., -2 * n:]
    a, b = r[..., 0::2], r[..., 1::2]
    out = x.copy()
    out[..., -2 * n::2] = a * c - b * s
    out[..., -2 * n + 1::2] = b * c + a * s
    return out


class V4:
    def __init__(self, ckpt):
        self.cfg = json.load(open(os.path.join(ckpt, "config.json")))
        self.w = {k: v.astype(np.float64) if v.dtype != np.int64 else v for k, v in dequantize_dir(ckpt).items()}
        c = self.cfg
        self.n = c["num_hidden_layers"]
        self.ratios = c["compress_ratios"][: self.n]
        rp = {"partial_rotary_factor": c["qk_rope_head_dim"] / c["head_dim"]}
        self.inv = {
            "main": inv_freq_f64({**rp, "rope_type": "default", "rope_theta": c["rope_theta"]}, c["head_dim"]),
            "compress": inv_freq_f64({**rp, **c["rope_scaling"], "rope_type": c["rope_scaling"]["type"],
                                      "rope_theta": c["compress_rope_theta"]}, c["head_dim"]),
        }
        self.decisions = {"indexer": {}, "moe": {}}

    def hc(self, X, p):
        w = self.w
        T, N, H = X.shape
        f = rms(X.reshape(T, N * H))
        m = f @ w[p + "_fn"].T
        base, scale = w[p + "_base"], w[p + "_scale"]
        pre = sigmoid(m[:, :N] * scale[0] + base[:N]) + EPS
        post = 2 * sigmoid(m[:, N:2 * N] * scale[1] + base[N:2 * N])
        C = (m[:, 2 * N:] * scale[2] + base[2 * N:]).reshape(T, N, N)
        C = softmax(C, -1) + EPS
        C = C / (C.sum(-2, keepdims=True) + EPS)
        for _ in range(self.cfg["hc_sinkhorn_iters"] - 1):
            C = C / (C.sum(-1, keepdims=True) + EPS)
            C = C / (C.sum(-2, keepdims=True) + EPS)
        return pre, post, C, (pre[:, :, None] * X).sum(1)

    def compress(self, x, p, ratio, d, inv):
        w = self.w
        T = x.shape[0]
        nw = T // ratio
        c = (x @ w[p + "wkv.weight"].T)[: nw * ratio].reshape(nw, ratio, -1)
        g = (x @ w[p + "wgate.weight"].T)[: nw * ratio].reshape(nw, ratio, -1) + w[p + "ape"]
        if ratio == 4:
            kv = np.zeros((nw, 2 * ratio, d))
            gg = np.full((nw, 2 * ratio, d), -np.inf)
            kv[:, ratio:], gg[:, ratio:] = c[..., d:], g[..., d:]
            kv[1:, :ratio], gg[1:, :ratio] = c[:-1, :, :d], g[:-1, :, :d]
        else:
            kv, gg = c, g
        e = (softmax(gg, 1) * kv).sum(1)
        e = rms(e, w[p + "norm.weight"])
        pos = np.arange(nw, dtype=np.float64) * ratio
        return rope(e, pos[:, None] * inv)

    def attention(self, L, x, ang, inv):
        w, c = self.w, self.cfg
        p = f"layers.{L}.attn."
        T = x.shape[0]
        nh, D, W = c["num_attention_heads"], c["head_dim"], c["sliding_window"]
        qr = rms(x @ w[p + "wq_a.weight"].T, w[p + "q_norm.weight"])
        q = rope(rms((qr @ w[p + "wq_b.weight"].T).reshape(T, nh, D)), ang[:, None, :])
        kv = rope(rms(x @ w[p + "wkv.weight"].T, w[p + "kv_norm.weight"]), ang)
        t = np.arange(T)
        win = (t[None, :] <= t[:, None]) & (t[None, :] > t[:, None] - W)
        keys, bias = kv, np.where(win, 0.0, -np.inf)
        ratio = self.ratios[L]
        if ratio:
            E = self.compress(x, p + "compressor.", ratio, D, inv)
            visible = np.arange(E.shape[0])[None, :] < ((t + 1) // ratio)[:, None]
            if ratio == 4:
                K = self.compress(x, p + "indexer.compressor.", 4, c["index_head_dim"], inv)
                nI, dI = c["index_n_heads"], c["index_head_dim"]
                qI = rope((qr @ w[p + "indexer.wq_b.weight"].T).reshape(T, nI, dI), ang[:, None, :])
                sc = np.maximum(np.einsum("thd,wd->thw", qI, K), 0) * dI ** -0.5
                wt = (x @ w[p + "indexer.weights_proj.weight"].T) * nI ** -0.5
                score = np.einsum("thw,th->tw", sc, wt)
                score = np.where(visible, score, -np.inf)
                k = min(c["index_topk"], K.shape[0])
                order = np.argsort(-score, axis=1, kind="stable")[:, :k]
                picked = np.zeros_like(visible)
                np.put_along_axis(picked, order, True, axis=1)
                sel = picked & visible
                self.decisions["indexer"][L] = (sel,)
            else:
                sel = visible
            keys = np.concatenate([kv, E], 0)
            bias = np.concatenate([bias, np.where(sel, 0.0, -np.inf)], 1)
        lg = np.einsum("thd,sd->ths", q, keys) * D ** -0.5 + bias[:, None, :]
        sink = w[p + "attn_sink"][None, :, None]
        M = np.maximum(lg.max(-1, keepdims=True), sink)
        e = np.exp(lg - M)
        prob = e / (e.sum(-1, keepdims=True) + np.exp(sink - M))
        o = rope(np.einsum("ths,sd->thd", prob, keys), ang[:, None, :], -1.0)
        G = c["o_groups"]
        wa = w[p + "wo_a.weight"]
        z = np.einsum("tgi,gri->tgr", o.reshape(T, G, -1), wa.reshape(G, -1, wa.shape[1])).reshape(T, -1)
        return z @ w[p + "wo_b.weight"].T

    def moe(self, L, x, ids):
        w, c = self.w, self.cfg
        p = f"layers.{L}.ffn."
        r = x @ w[p + "gate.weight"].T
        s = np.sqrt(np.where(r > 20, r, np.log1p(np.exp(np.minimum(r, 20)))))
        k = c["num_experts_per_tok"]
        if p + "gate.tid2eid" in w:
            idx = w[p + "gate.tid2eid"][ids]
        else:
            sb = s + w[p + "gate.bias"]
            idx = np.argsort(-sb, 1, kind="stable")[:, :k]
            srt = np.sort(sb, 1)[:, ::-1]
            self.decisions["moe"][L] = (np.sort(idx, 1), srt[:, k - 1] - srt[:, k])
        sw = np.take_along_axis(s, idx, 1)
        sw = sw / (sw.sum(1, keepdims=True) + 1e-20) * c["routed_scaling_factor"]
        lim = c["swiglu_limit"]

        def ffn(q, x):
            g = np.minimum(x @ w[q + "w1.weight"].T, lim)
            u = np.clip(x @ w[q + "w3.weight"].T, -lim, lim)
            return (g / (1 + np.exp(-g)) * u) @ w[q + "w2.weight"].T

        out = np.zeros_like(x)
        for e in range(c["n_routed_experts"]):
            hit = (idx == e)
            tok = np.nonzero(hit.any(1))[0]
            if tok.size:
                out[tok] += ffn(f"{p}experts.{e}.", x[tok]) * (sw * hit).sum(1)[tok, None]
        return out + ffn(p + "shared_experts.", x)

    def forward(self, ids):
        w = self.w
        ids = np.asarray(ids)
        T = len(ids)
        pos = np.arange(T, dtype=np.float64)
        X = np.repeat(w["embed.weight"][ids][:, None, :], self.cfg["hc_mult"], 1)
        for L in range(self.n):
            kind = "main" if self.ratios[L] == 0 else "compress"
            inv = self.inv[kind]
            ang = pos[:, None] * inv
            p = f"layers.{L}."
            pre, post, C, xin = self.hc(X, p + "hc_attn")
            a = self.attention(L, rms(xin, w[p + "attn_norm.weight"]), ang, inv)
            X = post[:, :, None] * a[:, None, :] + np.einsum("tjk,tjd->tkd", C, X)
            pre, post, C, xin = self.hc(X, p + "hc_ffn")
            o = self.moe(L, rms(xin, w[p + "ffn_norm.weight"]), ids)
            X = post[:, :, None] * o[:, None, :] + np.einsum("tjk,tjd->tkd", C, X)
        T, N, H = X.shape
        m = rms(X.reshape(T, N * H)) @ w["hc_head_fn"].T
        pre = sigmoid(m * w["hc_head_scale"] + w["hc_head_base"]) + EPS
        y = (pre[:, :, None] * X).sum(1)
        return rms(y, w["norm.weight"]) @ w["head.weight"].T


def main():
    ckpt, fx = sys.argv[1], sys.argv[2]
    ref = json.load(open(os.path.join(fx, "reference.json")))
    ids = ref["prompt"]["ids"] + ref["greedy_tokens"]
    model = V4(ckpt)
    logits = model.forward(ids)[len(ref["prompt"]["ids"]) - 1:]
    f64 = np.load(os.path.join(fx, "logits_f64.npy"))
    f32 = np.load(os.path.join(fx, "logits.npy")).astype(np.float64)
    d64 = float(np.abs(logits - f64).max())
    d32 = float(np.abs(logits - f32).max())
    dz = np.load(os.path.join(fx, "decisions.npz"))
    bad = []
    for li, L in enumerate(dz["moe_layers"]):
        if not np.array_equal(model.decisions["moe"][int(L)][0], dz["moe_experts"][li]):
            bad.append(f"router choices of layer {L} differ")
    for li, L in enumerate(dz["indexer_layers"]):
        sel = model.decisions["indexer"][int(L)][0]
        picks = dz["indexer_picks"][li]
        rec = np.zeros_like(sel)
        for t in range(sel.shape[0]):
            v = picks[t][picks[t] >= 0]
            rec[t, v[v < sel.shape[1]]] = True
        if not np.array_equal(sel, rec):
            bad.append(f"indexer choices of layer {L} differ")
    tol = float(os.environ.get("DSV4_NUMPY_TOL", "1e-9"))
    if d64 > tol:
        bad.append(f"max |numpy f64 - transformers f64| = {d64:.3g} > {tol:g}")
    for b in bad:
        print(b)
    print(f"deepseek-v4 numpy f64 (docs §3) vs transformers: max |diff| {d64:.3g} against the f64 rows, "
          f"{d32:.3g} against the f32 rows; decisions {'equal' if not bad else 'DIFFER'}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
