"""One llama.cpp timing for ci/bench/runner.sh: prefill of the given prompt ids, then DECODE
greedy steps (argmax on the host, as llama-cli's greedy sampler does), THREADS CPU threads or all
layers offloaded to the GPU backend the wheel was built with (--gpu). Prints one JSON line:
{"prefill_tokens_per_s": ..., "decode_tokens_per_s": ...}.

usage: llamacpp_decode.py MODEL IDS DECODE [--threads N] [--gpu]
"""
import json
import sys
import time

import llama_cpp
import numpy as np


def main():
    model, ids, decode = sys.argv[1], [int(i) for i in sys.argv[2].split(",")], int(sys.argv[3])
    threads = int(sys.argv[sys.argv.index("--threads") + 1]) if "--threads" in sys.argv else 2
    gpu_layers = -1 if "--gpu" in sys.argv else 0
    llm = llama_cpp.Llama(model_path=model, n_ctx=len(ids) + decode + 8, n_threads=threads,
                          n_batch=len(ids), n_gpu_layers=gpu_layers, seed=0, verbose=False)
    vocab = llm.n_vocab()

    def last_logits():
        # without logits_all, llama.cpp computes only the last position's row (as minirun does)
        return np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(vocab,))

    t0 = time.perf_counter()
    llm.eval(ids)
    prefill_s = time.perf_counter() - t0
    nxt = int(np.argmax(last_logits()))
    t1 = time.perf_counter()
    for _ in range(decode):
        llm.eval([nxt])
        nxt = int(np.argmax(last_logits()))
    decode_s = time.perf_counter() - t1
    print(json.dumps({"prefill_tokens_per_s": len(ids) / prefill_s,
                      "decode_tokens_per_s": decode / decode_s}))


if __name__ == "__main__":
    main()
