"""ggml's C reference quantizers (libggml-quants.so from ci/oracles/build_ggml_quants.sh — the
functions llama-quantize --pure runs without an imatrix) timed on the same decoded tensors as
jobs/tooling/examples/gguf_quantize_bench.rs, single-threaded. One JSON line per type.
Usage: python gguf_quantize_bench.py LIBGGML_QUANTS MODEL.gguf TYPE..."""
import ctypes, json, os, sys, time
import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

lib = ctypes.CDLL(sys.argv[1], mode=os.RTLD_LAZY)
rd = gguf.GGUFReader(sys.argv[2])
decodable = {T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0}
for name in sys.argv[3:]:
    qt = T[name.upper()]
    bs, ts = gguf.GGML_QUANT_SIZES[qt]
    fn = getattr(lib, f"quantize_row_{name.lower()[:-1] + 'K' if name.lower().endswith('k') else name.lower()}_ref")
    fn.restype = None
    fn.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
    xs = []
    for t in rd.tensors:
        ne = [int(d) for d in t.shape]
        if len([d for d in ne if d != 1]) >= 2 and ne[0] % bs == 0 and t.tensor_type in decodable:
            xs.append(np.ascontiguousarray(gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(-1), np.float32))
    n = sum(x.size for x in xs)
    t0 = time.perf_counter()
    for x in xs:
        out = np.empty(x.size // bs * ts, np.uint8)
        fn(x.ctypes.data, out.ctypes.data, x.size)
    dt = time.perf_counter() - t0
    print(json.dumps({"impl": "ggml-quants.c", "type": name, "tensors": len(xs), "elements": n, "seconds_1t": round(dt, 4)}))
