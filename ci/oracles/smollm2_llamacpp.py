"""Records llama.cpp's first-step logits for the five fixed SmolLM2 prompts.

Run by ci/oracles/smollm2_llamacpp.sh inside a venv holding llama-cpp-python 0.3.36 built with
GGML_NATIVE=OFF. For each prompt it records llama.cpp's own tokenization (add_bos as the file says:
none for SmolLM2), the argmax and the top-64 (token id, logit) pairs of the logits after the prompt,
plus an 8-token greedy continuation (informational), and a 2-thread CPU timing of prefill and
decode. runner/tests/smollm2_llamacpp.rs re-checks the Rust runner against the recorded values.

Usage: python smollm2_llamacpp.py MODEL.gguf OUT.json
"""

import hashlib
import json
import platform
import sys
import time

import numpy as np
import llama_cpp

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "Once upon a time, there was a",
    "The three primary colors are",
    "In 1969, Neil Armstrong",
]
TOP = 64
THREADS = 2


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main(model, out):
    llm = llama_cpp.Llama(model_path=model, n_ctx=256, n_threads=THREADS, n_batch=256,
                          logits_all=True, seed=0, verbose=False)
    records = []
    for prompt in PROMPTS:
        ids = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=False)
        llm.reset()
        llm.eval(ids)
        logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        order = np.argsort(-logits, kind="stable")[:TOP]
        greedy = []
        nxt = int(np.argmax(logits))
        for _ in range(8):
            greedy.append(nxt)
            llm.eval([nxt])
            nxt = int(np.argmax(np.array(llm.scores[llm.n_tokens - 1])))
        records.append({
            "prompt": prompt,
            "prompt_ids": [int(i) for i in ids],
            "argmax": int(np.argmax(logits)),
            "max_logit": float(logits.max()),
            "top_ids": [int(i) for i in order],
            "top_logits": [float(logits[i]) for i in order],
            "greedy_8": greedy,
        })
    # timing: prefill of a 64-token prompt, then 32 decode steps, 2 threads
    bench_ids = (llm.tokenize(b" ".join([p.encode() for p in PROMPTS]) * 4, add_bos=False))[:64]
    llm.reset()
    t0 = time.perf_counter()
    llm.eval(bench_ids)
    prefill_s = time.perf_counter() - t0
    nxt = int(np.argmax(np.array(llm.scores[llm.n_tokens - 1])))
    t1 = time.perf_counter()
    for _ in range(32):
        llm.eval([nxt])
        nxt = int(np.argmax(np.array(llm.scores[llm.n_tokens - 1])))
    decode_s = time.perf_counter() - t1
    doc = {
        "what": "llama.cpp logits after each prompt (first step): argmax and top-64 (id, logit)",
        "producer": {
            "command": "ci/oracles/smollm2_llamacpp.sh (python smollm2_llamacpp.py MODEL OUT)",
            "llama_cpp_python": llama_cpp.__version__,
            "build": "CMAKE_ARGS=-DGGML_NATIVE=OFF CMAKE_BUILD_PARALLEL_LEVEL=2 pip install --no-binary llama-cpp-python llama-cpp-python==0.3.36",
            "python": platform.python_version(),
            "numpy": np.__version__,
            "n_threads": THREADS,
            "kv_cache": "f16 (llama.cpp default)",
        },
        "model": {"file": model.rsplit("/", 1)[-1], "sha256": sha256(model)},
        "top": TOP,
        "prompts": records,
        "bench_2_threads": {
            "prefill_tokens": len(bench_ids),
            "prompt_ids": [int(i) for i in bench_ids],
            "prefill_tokens_per_s": len(bench_ids) / prefill_s,
            "decode_tokens": 32,
            "decode_tokens_per_s": 32 / decode_s,
            "note": "informational, not checked; this machine's CPU, other jobs running",
        },
    }
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print(json.dumps({r["prompt"]: r["argmax"] for r in records}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
