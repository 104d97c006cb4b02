"""compressed-tensors MXFP4 oracle: the package's own FP4 pack/unpack, E8M0 scale encode/decode,
MX scale choice, and the `mxfp4-pack-quantized` compressor's compress/decompress, called on
deterministic inputs and recorded as exact bits.

Usage: python compressed_tensors_mxfp4.py OUT_DIR [--command "..."]

OUT_DIR receives `reference.json` and `manifest.json` (the format ci/oracles/check_fixture.py
verifies). Every value comes from calling the installed package (CPU tensors, so its eager
fallbacks run; the Triton backends are only taken for CUDA/XPU tensors); nothing here
re-implements its arithmetic. Floats are recorded as 8-hex-digit f32 bit patterns (bf16 results
widened to f32 exactly), bytes as one lowercase hex string per tensor. See
docs/mxfp4-compressed-tensors.md.
"""
import argparse, hashlib, json, os, sys

import torch
import compressed_tensors
from compressed_tensors.compressors import BaseCompressor
from compressed_tensors.compressors.format import infer_module_format
from compressed_tensors.compressors.mx_utils import compress_mx_scale, decompress_mx_scale
from compressed_tensors.compressors.mxfp4.base import MXFP4PackedCompressor
from compressed_tensors.compressors.nvfp4.helpers import pack_fp4_to_uint8, unpack_fp4_from_uint8
from compressed_tensors.config import CompressionFormat
from compressed_tensors.quantization import preset_name_to_scheme
from compressed_tensors.quantization.utils.helpers import calculate_qparams

# The 16 E2M1 values in code order 0..15 (code 8 is -0.0): the inputs of the pack section.
FP4_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
              -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]
# e8m0 bytes of the decompress section's 4x2 groups: both ends of the range, around 1.0, and two
# whose largest products overflow to inf (253, 254). 255 (NaN in OCP) is left out on purpose.
DECOMPRESS_SCALES = [0, 1, 126, 127, 128, 200, 253, 254]


def lcg(seed):
    """Deterministic 31-bit LCG (glibc constants); yields ints in [0, 2^31)."""
    x = seed
    while True:
        x = (x * 1103515245 + 12345) % (1 << 31)
        yield x


def f32_bits(t):
    """Exact f32 bit patterns (hex) of a float tensor (bf16/f16 widen to f32 exactly)."""
    t = t.detach().to(torch.float32).contiguous().flatten()
    return ["%08x" % (v & 0xFFFFFFFF) for v in t.view(torch.int32).tolist()]


def hexbytes(t):
    assert t.dtype == torch.uint8, t.dtype
    return bytes(t.contiguous().flatten().tolist()).hex()


def section_unpack():
    a = torch.arange(256, dtype=torch.int32).to(torch.uint8).reshape(1, 256)
    out = unpack_fp4_from_uint8(a, 1, 512)  # default dtype bfloat16, as decompress uses it
    return {
        "function": "compressed_tensors.compressors.nvfp4.helpers.unpack_fp4_from_uint8",
        "call": "unpack_fp4_from_uint8(bytes 0..255 as uint8 [1, 256], m=1, n=512) (default dtype)",
        "output_dtype": str(out.dtype),
        "layout": "values[2*b] and values[2*b+1] are the two elements unpacked from byte b",
        "values_f32_bits": f32_bits(out),
        "values": [repr(v) for v in out.to(torch.float32).flatten().tolist()],
    }


def section_pack():
    # every (even, odd) pair of FP4 codes (i, j) in row-major order: pair p = 16 i + j
    vals = [v for i in range(16) for j in range(16) for v in (FP4_VALUES[i], FP4_VALUES[j])]
    out = {}
    for dt in (torch.float32, torch.bfloat16):
        x = torch.tensor(vals, dtype=torch.float32).to(dt).reshape(1, 512)
        packed = pack_fp4_to_uint8(x)
        out[str(dt).replace("torch.", "")] = hexbytes(packed)
    if len(set(out.values())) != 1:
        sys.exit("pack_fp4_to_uint8 gave different bytes for float32 and bfloat16 inputs")
    return {
        "function": "compressed_tensors.compressors.nvfp4.helpers.pack_fp4_to_uint8",
        "call": "pack_fp4_to_uint8(x [1, 512]) for x in float32 and bfloat16 (same bytes)",
        "fp4_values_by_code": [repr(v) for v in FP4_VALUES],
        "input_rule": "element 2p = fp4_values_by_code[p // 16], element 2p+1 = "
                      "fp4_values_by_code[p % 16], p = 0..255",
        "input_f32_bits": f32_bits(torch.tensor(vals, dtype=torch.float32)),
        "packed_hex": out["float32"],
        "input_dtypes": sorted(out),
    }


def section_decompress_scale():
    e = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    s = decompress_mx_scale(e)
    return {
        "function": "compressed_tensors.compressors.mx_utils.decompress_mx_scale",
        "call": "decompress_mx_scale(uint8 0..255)",
        "output_dtype": str(s.dtype),
        "scale_f32_bits": f32_bits(s),
    }


def section_compress_scale():
    scales = []
    for k in (-127, -126, -100, -10, -3, -1, 0, 1, 2, 3, 10, 100, 126, 127):
        scales.append(2.0 ** k)
    # non-powers of two: floor(log2) is what the package stores
    for v in (0.75, 1.5, 1.9999999, 3.0, 5.0, 6.0, 0.3, 1e-20, 3.0e38, 1.5 * 2.0 ** -126):
        scales.append(v)
    x = torch.tensor(scales, dtype=torch.float32)
    b = compress_mx_scale(x, torch.uint8)
    return {
        "function": "compressed_tensors.compressors.mx_utils.compress_mx_scale",
        "call": "compress_mx_scale(float32 scales, torch.uint8)",
        "scale_f32_bits": f32_bits(x),
        "e8m0_hex": hexbytes(b),
    }


def mx_args():
    scheme = preset_name_to_scheme("MXFP4A16", ["Linear"])
    fmt = infer_module_format(torch.nn.Linear, scheme)
    if fmt != CompressionFormat.mxfp4_pack_quantized:
        sys.exit(f"MXFP4A16 infers format {fmt}, expected mxfp4-pack-quantized")
    scheme.format = fmt
    comp = BaseCompressor.get_value_from_registry(fmt.value)
    if comp is not MXFP4PackedCompressor:
        sys.exit(f"registry gives {comp} for {fmt.value}")
    return scheme, comp


def section_scale_choice(scheme):
    """The MX scale the package's qparams computation picks from a group's absolute maximum."""
    amax = [0.0]
    for k in (-100, -20, -3, -1, 0, 1, 2, 3, 7, 20, 100):
        for m in (1.0, 1.25, 1.5, 1.5 + 2.0 ** -23, 1.625, 1.75 - 2.0 ** -23, 1.75, 1.875,
                  2.0 - 2.0 ** -23):
            amax.append(m * 2.0 ** k)
    x = torch.tensor(amax, dtype=torch.float32)
    scale, _zp = calculate_qparams(-x, x, scheme.weights)
    b = compress_mx_scale(scale, torch.uint8)
    return {
        "function": "compressed_tensors.quantization.utils.helpers.calculate_qparams "
                    "(MX branch) then compress_mx_scale",
        "call": "calculate_qparams(min=-amax, max=amax, MXFP4A16 weights args) -> float scale; "
                "compress_mx_scale(scale, uint8)",
        "amax_f32_bits": f32_bits(x),
        "scale_f32_bits": f32_bits(scale),
        "e8m0_hex": hexbytes(b),
    }


def section_decompress(scheme, comp):
    rows, cols = 4, 64
    g = lcg(20261203)
    packed = torch.tensor([next(g) >> 23 for _ in range(rows * cols // 2)],
                          dtype=torch.int32).to(torch.uint8).reshape(rows, cols // 2)
    # make sure every nibble value appears in both halves of some byte
    flat = packed.flatten()
    for c in range(16):
        flat[c] = (c | (c << 4))
        flat[16 + c] = (c | ((15 - c) << 4))
    packed = flat.reshape(rows, cols // 2)
    scale = torch.tensor(DECOMPRESS_SCALES, dtype=torch.int32).to(torch.uint8)
    scale = scale.reshape(rows, cols // 32)
    sd = {"weight_packed": packed.clone(), "weight_scale": scale.clone()}
    out = comp.decompress(sd, scheme)
    w = out["weight"]
    return {
        "function": "BaseCompressor.get_value_from_registry('mxfp4-pack-quantized').decompress "
                    "(MXFP4PackedCompressor.decompress; the path CompressedTensorsDequantizer "
                    "takes)",
        "scheme": "preset MXFP4A16 (weights: num_bits 4, float, group strategy, group_size 32, "
                  "symmetric, scale_dtype uint8)",
        "rows": rows, "cols": cols,
        "weight_packed_hex": hexbytes(packed),
        "weight_scale_hex": hexbytes(scale),
        "weight_dtype": str(w.dtype),
        "weight_f32_bits": f32_bits(w),
        "weight_scale_out_dtype": str(out["weight_scale"].dtype),
        "weight_scale_out_f32_bits": f32_bits(out["weight_scale"]),
    }


def section_compress(scheme, comp):
    """Quantize a float32 [4, 64] weight with the package's own scale choice and compress it."""
    rows, cols = 4, 64
    ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]
    # per group: (exponent k, amax mantissa·4 placed at element 0, i.e. amax = lead * 2^k)
    groups = [(0, 6.0), (-3, 6.0), (5, 4.5), (-1, 6.5), (2, 7.0), (-10, 5.0), (0, 0.0), (3, 6.875)]
    g = lcg(7)
    w = []
    for k, lead in groups:
        s = 2.0 ** k
        blk = [lead * s]
        if lead == 0.0:
            blk += [0.0] * 31
        else:
            for t in ties:
                blk += [t * s, -t * s]
            while len(blk) < 32:
                u = (next(g) / 2.0 ** 31) * 2.0 - 1.0  # [-1, 1)
                blk.append(u * lead * s)
        w += blk
    # group (r, j) of the [4, 64] matrix is groups[2 r + j]
    weight = torch.tensor(w, dtype=torch.float32).reshape(rows, cols)
    amax = weight.abs().reshape(rows, cols // 32, 32).amax(dim=-1)
    scale, _zp = calculate_qparams(-amax, amax, scheme.weights)
    out = comp.compress({"weight": weight.clone(), "weight_scale": scale.clone()}, scheme)
    return {
        "function": "calculate_qparams (MX branch) for the per-group scale, then "
                    "MXFP4PackedCompressor.compress",
        "call": "compress({'weight': w float32 [4, 64], 'weight_scale': calculate_qparams(-amax, "
                "amax)}, MXFP4A16 scheme)",
        "rows": rows, "cols": cols,
        "weight_f32_bits": f32_bits(weight),
        "scale_f32_bits": f32_bits(scale),
        "weight_packed_hex": hexbytes(out["weight_packed"]),
        "weight_scale_hex": hexbytes(out["weight_scale"]),
    }


def dump(obj, indent=0):
    """JSON with lists of scalars on one line (small, diffable)."""
    pad = " " * indent
    if isinstance(obj, dict):
        items = [f'{pad} {json.dumps(k)}: {dump(v, indent + 1).lstrip()}' for k, v in obj.items()]
        return pad + "{\n" + ",\n".join(items) + "\n" + pad + "}"
    return pad + json.dumps(obj)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--command", default="python ci/oracles/compressed_tensors_mxfp4.py OUT_DIR")
    a = ap.parse_args()
    torch.set_num_threads(1)
    scheme, comp = mx_args()
    versions = {"compressed_tensors": compressed_tensors.__version__, "torch": torch.__version__}
    ref = {
        "what": "compressed-tensors mxfp4-pack-quantized reference "
                "(docs/mxfp4-compressed-tensors.md)",
        "producer": a.command,
        "versions": versions,
        "backend": "CPU tensors: the package's eager fallbacks (its Triton backends need CUDA/XPU "
                   "tensors)",
        "encoding": "f32 bit patterns as 8 hex digits; byte tensors as one hex string, row-major",
        "unpack": section_unpack(),
        "pack": section_pack(),
        "decompress_scale": section_decompress_scale(),
        "compress_scale": section_compress_scale(),
        "scale_choice": section_scale_choice(scheme),
        "decompress": section_decompress(scheme, comp),
        "compress": section_compress(scheme, comp),
    }
    os.makedirs(a.out, exist_ok=True)
    path = os.path.join(a.out, "reference.json")
    data = (dump(ref) + "\n").encode()
    with open(path, "wb") as f:
        f.write(data)
    v = f"compressed-tensors {versions['compressed_tensors']}, torch {versions['torch']}"
    manifest = {
        "what": "compressed-tensors MXFP4 reference fixture (docs/mxfp4-compressed-tensors.md)",
        "producer": a.command,
        "entries": [{
            "path": "reference.json",
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "compiler": v,
            "flags": "CPU eager fallbacks, 1 thread; " + a.command,
        }],
    }
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")
    print(f"wrote {path} ({len(data)} bytes) with {v}")


if __name__ == "__main__":
    main()
