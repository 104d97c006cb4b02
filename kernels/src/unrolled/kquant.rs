//! K-quant super-blocks in the unrolled matvec (docs/kernels.md "Unrolled matvec"): Q4_K, Q5_K
//! and Q6_K decode through `chunk_weights`, a loop into a private array that llvmpipe takes
//! seconds a pipeline to unroll, and their 256-element super-blocks keep each sub-block's scale
//! in a header away from its codes, so no `block_dot(words…)` in the `.wgsl` fits them. Instead
//! the generator writes each weight out here: every byte it reads is a constant shift of a word
//! the row's code loaded once (in memory order, `emit_rows`' loader), and each weight is
//! `chunk_weights`' own expression over those bytes, accumulated with `fma(w, x, acc)` in the
//! chunk's order. Sub-block s of super-block b is 32-element block 8b + s, so it updates partial
//! group (8b + s) mod 16 exactly as the 32-element formats' blocks do.

use std::fmt::Write as _;

/// Which K-quant a super-block is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KQuant {
    Q4K,
    Q5K,
    Q6K,
}

/// The bytes of one super-block starting at byte `at` of a row group, read through `word` (which
/// loads the group's words as they are first needed and names them).
struct Bytes<'a> {
    at: usize,
    word: &'a mut dyn FnMut(&mut String, usize) -> String,
}

impl Bytes<'_> {
    /// The u32 value of byte `i` of the super-block.
    fn byte(&mut self, out: &mut String, i: usize) -> String {
        let a = self.at + i;
        let w = (self.word)(out, a / 4);
        format!("(({w} >> {}u) & 0xffu)", (a % 4) * 8)
    }

    /// The f32 of the f16 at bytes `i`, `i + 1` (`f16_from_bits`, the looped kernels'
    /// conversion).
    fn half(&mut self, out: &mut String, i: usize) -> String {
        let (lo, hi) = (self.byte(out, i), self.byte(out, i + 1));
        format!("f16_from_bits({lo} | ({hi} << 8u))")
    }
}

/// Emits super-block `b` of row `name` (partial groups `{name}_0` .. `{name}_15`), its first
/// byte at byte `at` of the row group.
pub(super) fn emit_block(
    out: &mut String,
    kq: KQuant,
    at: usize,
    word: &mut dyn FnMut(&mut String, usize) -> String,
    name: &str,
    b: usize,
) {
    let mut bytes = Bytes { at, word };
    let v = format!("{name}_k{b}");
    let (d, dmin) = match kq {
        KQuant::Q6K => (bytes.half(out, 208), String::new()),
        _ => (bytes.half(out, 0), bytes.half(out, 2)),
    };
    let _ = writeln!(out, "    let {v}d = {d};");
    if kq != KQuant::Q6K {
        let _ = writeln!(out, "    let {v}m = {dmin};");
    }
    for s in 0..8 {
        let group = (8 * b + s) % super::GROUPS;
        if kq != KQuant::Q6K {
            let (sc, mn) = scale_min(out, &mut bytes, s);
            let _ = writeln!(out, "    let {v}s{s} = {v}d * f32({sc});");
            let _ = writeln!(out, "    let {v}n{s} = {v}m * f32({mn});");
        }
        for t in 0..4 {
            let comp = ["x", "y", "z", "w"][t];
            if kq == KQuant::Q6K {
                // scales[8h + l/16 + 2t'] with h = s / 4, t' = s % 4, l = 8t (l/16 = t/2)
                let sb = bytes.byte(out, 192 + 8 * (s >> 2) + (t >> 1) + 2 * (s & 3));
                let _ = writeln!(
                    out,
                    "    let {v}s{s}_{t} = {v}d * f32(bitcast<i32>({sb} << 24u) >> 24u);"
                );
            }
            for i in 0..8 {
                let w = weight(out, &mut bytes, kq, &v, s, t, i);
                let e = 256 * b + 32 * s + 8 * t + i;
                let acc = format!("{name}_{group}.{comp}");
                let _ = writeln!(out, "    {acc} = fma({w}, xv({e}u), {acc});");
            }
        }
    }
}

/// Sub-block `s`'s 6-bit scale and min (ggml `get_scale_min_k4` over `scales[12]` at byte 4).
fn scale_min(out: &mut String, bytes: &mut Bytes<'_>, s: usize) -> (String, String) {
    let mut sc = |out: &mut String, j: usize| bytes.byte(out, 4 + j);
    if s < 4 {
        (
            format!("({} & 63u)", sc(out, s)),
            format!("({} & 63u)", sc(out, s + 4)),
        )
    } else {
        let (a, lo, hi) = (sc(out, s + 4), sc(out, s - 4), sc(out, s));
        (
            format!("(({a} & 15u) | (({lo} >> 6u) << 4u))"),
            format!("(({a} >> 4u) | (({hi} >> 6u) << 4u))"),
        )
    }
}

/// Weight i of chunk t of sub-block s, with `chunk_weights`' expression.
fn weight(
    out: &mut String,
    bytes: &mut Bytes<'_>,
    kq: KQuant,
    v: &str,
    s: usize,
    t: usize,
    i: usize,
) -> String {
    let l = 8 * t + i; // the element's index in its sub-block
    match kq {
        KQuant::Q4K | KQuant::Q5K => {
            let qs_at = if kq == KQuant::Q4K { 16 } else { 48 };
            let low = bytes.byte(out, qs_at + 32 * (s >> 1) + l);
            let mut q = format!("(({low} >> {}u) & 0xfu)", 4 * (s & 1));
            if kq == KQuant::Q5K {
                let h = bytes.byte(out, 16 + l);
                q = format!("({q} | ((({h} >> {s}u) & 1u) << 4u))");
            }
            format!("{v}s{s} * f32({q}) - {v}n{s}")
        }
        KQuant::Q6K => {
            let (h, tq) = (s >> 2, s & 3);
            let lo = bytes.byte(out, 64 * h + 32 * (tq & 1) + l);
            let hi = bytes.byte(out, 128 + 32 * h + l);
            let q = format!(
                "((({lo} >> {}u) & 0xfu) | ((({hi} >> {}u) & 3u) << 4u))",
                4 * (tq >> 1),
                2 * tq
            );
            format!("{v}s{s}_{t} * (f32({q}) - 32.0)")
        }
    }
}
