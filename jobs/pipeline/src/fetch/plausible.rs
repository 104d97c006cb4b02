//! Arrival checks: properties that real tensor data has for its dtype, checked on every blob the
//! fetch stage receives, before it is journaled as proven.
//!
//! A hash proves that bytes are the bytes the hub stores; it cannot prove that we asked for the right
//! bytes (a wrong data-section base offset, an off-by-some range). These checks catch that class of
//! bug: a read that lands in the safetensors JSON header, or off the element/group grid of the
//! tensor, produces values no real checkpoint contains. Each rule is chosen so that every valid
//! tensor passes — norms (all ≈ 1.0), mostly-zero tensors, `tid2eid` expert ids — and the negative
//! controls (the same tensor read without the data-section base offset, and reads shifted off the
//! element grid into other data of the same dtype) are rejected. See `docs/fetch.md`.
//!
//! What these checks cannot do: tell one well-aligned tensor of a dtype from another well-aligned
//! tensor of the same dtype and distribution. That is what the whole-file LFS SHA-256 (verified
//! whenever the fetched ranges cover a file) is for.

use std::fmt;

/// What a blob is expected to hold, beyond its safetensors dtype string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Content {
    /// Plain data of the tensor's dtype.
    Plain,
    /// `I8`/`U8` bytes holding two OCP e2m1 codes each, in groups of `group` elements per e8m0
    /// scale (MXFP4 experts).
    E2m1Packed {
        /// Elements per shared scale (32 for OCP MX).
        group: u32,
    },
    /// FP8 e4m3 weights quantized on `block`×`block` tiles with power-of-two scales: every
    /// non-zero block uses the top of the e4m3 range.
    Fp8Block {
        /// Block edge (128 for DeepSeek).
        block: u32,
    },
}

/// Why a blob does not look like real data of its dtype.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Implausible {
    /// The dtype string the blob was checked as.
    pub dtype: String,
    /// The rule that failed, with the numbers that broke it.
    pub reason: String,
}

impl fmt::Display for Implausible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bytes do not look like {} data: {}",
            self.dtype, self.reason
        )
    }
}

impl std::error::Error for Implausible {}

/// Largest magnitude a plausible float weight/activation parameter may have (2^32).
const MAX_FLOAT_EXPONENT: i32 = 32;
/// `tid2eid` and similar index tensors hold small non-negative ids.
const MAX_INDEX_VALUE: i64 = 1 << 20;
/// Smallest e4m3 magnitude code a non-zero quantized block may peak at (0x70 = 128.0; the
/// power-of-two rule puts every block peak in (224, 448], code 0x76..=0x7E).
const FP8_BLOCK_PEAK_MIN: u8 = 0x70;
/// Share of non-zero e2m1 groups that must peak at magnitude ≥ 3.0 (codes 5..=7): power-of-two
/// MX scales put every group's largest element at 3.0..6.0 (UE8M0 `ceil(log2(amax/6))` rule, as
/// DeepSeek's converters use) or 4.0..6.0 (OCP `floor(log2 amax) - 2`).
const E2M1_PEAK_SHARE_PERMILLE: usize = 990;
/// Smallest e2m1 magnitude code a non-zero MX group peaks at (code 5 = 3.0; `check_e2m1` tests
/// its bit pattern 0b101 directly).
const E2M1_PEAK_MIN: u8 = 5;

fn fail(dtype: &str, reason: String) -> Result<(), Implausible> {
    Err(Implausible {
        dtype: dtype.to_string(),
        reason,
    })
}

/// Check `bytes` (one tensor's data, or a prefix of whole rows of it) against the properties real
/// data of `dtype` has. `shape` is the tensor's full shape (used by block rules).
pub fn check(
    dtype: &str,
    content: Content,
    shape: &[u64],
    bytes: &[u8],
) -> Result<(), Implausible> {
    match (dtype, content) {
        (_, Content::E2m1Packed { group }) => check_e2m1(dtype, group, bytes),
        ("F8_E4M3", Content::Fp8Block { block }) => {
            check_e4m3(dtype, bytes)?;
            check_fp8_blocks(dtype, block, shape, bytes)
        }
        ("F8_E4M3", _) => check_e4m3(dtype, bytes),
        ("F8_E8M0", _) => check_e8m0(dtype, bytes),
        ("BF16", _) => check_floats(dtype, exponent_fields::<2>(bytes, 7, 0xFF), 127, 0xFF),
        ("F16", _) => check_floats(dtype, exponent_fields::<2>(bytes, 10, 0x1F), 15, 0x1F),
        ("F32", _) => check_floats(dtype, exponent_fields::<4>(bytes, 23, 0xFF), 127, 0xFF),
        ("I64", _) => check_index(
            dtype,
            bytes
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])),
        ),
        ("I32", _) => check_index(
            dtype,
            bytes
                .chunks_exact(4)
                .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]]))),
        ),
        // U8/I8/U32 (MLX packed words) and the rest: any bit pattern is valid data.
        _ => Ok(()),
    }
}

/// Counts of the exponent fields of little-endian floats of `W` bytes (2 or 4) whose exponent
/// starts at bit `shift` and is `mask` wide: one pass, no per-element branching.
struct ExponentCounts {
    /// Elements seen.
    n: usize,
    /// Elements per exponent field value (at most 256 values).
    per_field: [usize; 256],
}

fn exponent_fields<const W: usize>(bytes: &[u8], shift: u32, mask: u32) -> ExponentCounts {
    let mut lanes = [[0u32; 256]; 2];
    let mut per_field = [0usize; 256];
    let mut n = 0usize;
    // u32 lane counters are flushed well before they can overflow.
    for block in bytes.chunks(W << 24) {
        let elems = block.chunks_exact(W);
        n += elems.len();
        for (i, e) in elems.enumerate() {
            let mut word = [0u8; 4];
            word.iter_mut().zip(e).for_each(|(w, b)| *w = *b);
            let field = ((u32::from_le_bytes(word) >> shift) & mask & 0xFF) as u8;
            lanes[i & 1][usize::from(field)] += 1;
        }
        for lane in &mut lanes {
            for (t, c) in per_field.iter_mut().zip(lane.iter_mut()) {
                *t += *c as usize;
                *c = 0;
            }
        }
    }
    ExponentCounts { n, per_field }
}

/// No Inf/NaN (exponent field all ones) and no finite magnitude above 2^MAX_FLOAT_EXPONENT;
/// zeros and subnormals (field 0) are always plausible.
fn check_floats(
    dtype: &str,
    counts: ExponentCounts,
    bias: i32,
    all_ones: u32,
) -> Result<(), Implausible> {
    let n = counts.n;
    let nonfinite = counts
        .per_field
        .get(all_ones as usize)
        .copied()
        .unwrap_or(0);
    let (mut huge, mut max_exp) = (0usize, i32::MIN);
    for (field, &c) in counts.per_field.iter().enumerate() {
        let x = field as i32 - bias;
        if c > 0 && field != 0 && field as u32 != all_ones && x > MAX_FLOAT_EXPONENT {
            huge += c;
            max_exp = max_exp.max(x);
        }
    }
    if nonfinite > 0 {
        return fail(dtype, format!("{nonfinite} of {n} values are Inf or NaN"));
    }
    if huge > 0 {
        return fail(
            dtype,
            format!("{huge} of {n} values exceed 2^{MAX_FLOAT_EXPONENT} (largest 2^{max_exp})"),
        );
    }
    Ok(())
}

fn check_index(dtype: &str, values: impl Iterator<Item = i64>) -> Result<(), Implausible> {
    let (mut bad, mut n, mut worst) = (0usize, 0usize, 0i64);
    for v in values {
        n += 1;
        if !(0..MAX_INDEX_VALUE).contains(&v) {
            bad += 1;
            worst = v;
        }
    }
    if bad > 0 {
        return fail(
            dtype,
            format!("{bad} of {n} index values outside [0, {MAX_INDEX_VALUE}) (e.g. {worst})"),
        );
    }
    Ok(())
}

/// Eight copies of byte `b` in a word.
const fn splat(b: u8) -> u64 {
    0x0101_0101_0101_0101 * b as u64
}

/// Per byte of `x`, bit 7 set iff `(byte & mask) != 0` (`mask` < 0x80: no carry leaves a byte).
const fn any_bits(x: u64, mask: u8) -> u64 {
    ((x & splat(mask)) + splat(0x7F)) & splat(0x80)
}

/// How many bytes of `bytes` a bytewise predicate holds for, eight at a time: `flags` maps a
/// little-endian word to the predicate's result in bit 7 of each byte (and must give no flag for
/// a zero byte: the tail is zero-padded). The flags are summed in byte lanes (no popcount on
/// baseline x86-64), folded before a lane can overflow.
fn count_bytes(bytes: &[u8], flags: impl Fn(u64) -> u64) -> usize {
    let word = |w: &[u8]| {
        let mut b = [0u8; 8];
        b.iter_mut().zip(w).for_each(|(d, s)| *d = *s);
        u64::from_le_bytes(b)
    };
    let mut n = 0usize;
    // At most 254 whole words and one tail word per block: a lane sums to at most 255.
    for block in bytes.chunks(8 * 254) {
        let mut lanes = 0u64;
        let mut words = block.chunks_exact(8);
        for w in &mut words {
            lanes += (flags(word(w)) >> 7) & splat(1);
        }
        lanes += (flags(word(words.remainder())) >> 7) & splat(1);
        let pairs = (lanes & 0x00FF_00FF_00FF_00FF) + ((lanes >> 8) & 0x00FF_00FF_00FF_00FF);
        n += (pairs.wrapping_mul(0x0001_0001_0001_0001) >> 48) as usize;
    }
    n
}

fn check_e4m3(dtype: &str, bytes: &[u8]) -> Result<(), Implausible> {
    let (mut nan, mut nonzero, mut negative) = (0usize, 0usize, 0usize);
    // One cache-resident block at a time, three word-wide counts over it.
    for b in bytes.chunks(1 << 16) {
        // NaN: the low seven bits all set (adding one reaches bit 7).
        nan += count_bytes(b, |x| (x & splat(0x7F)) + splat(0x01));
        nonzero += count_bytes(b, |x| any_bits(x, 0x7F));
        // Negative non-zero: the sign bit and a non-zero magnitude.
        negative += count_bytes(b, |x| x & any_bits(x, 0x7F));
    }
    if nan > 0 {
        return fail(
            dtype,
            format!(
                "{nan} of {} bytes are e4m3 NaN codes (0x7F/0xFF)",
                bytes.len()
            ),
        );
    }
    // Weights are centred: both signs occur. (ASCII — a read landing in the JSON header — never
    // sets the sign bit.)
    if nonzero >= 64 && (negative * 100 < nonzero || negative * 100 > nonzero * 99) {
        return fail(
            dtype,
            format!("{negative} of {nonzero} non-zero values are negative"),
        );
    }
    Ok(())
}

fn check_fp8_blocks(
    dtype: &str,
    block: u32,
    shape: &[u64],
    bytes: &[u8],
) -> Result<(), Implausible> {
    let (Some(&cols), true) = (shape.last(), shape.len() == 2 && block > 0) else {
        return Ok(());
    };
    let (Ok(cols), Ok(block)) = (usize::try_from(cols), usize::try_from(block)) else {
        return Ok(());
    };
    if cols == 0 {
        return Ok(());
    }
    let rows = bytes.len() / cols;
    let (mut low, mut blocks) = (0usize, 0usize);
    // Peak magnitude code per block column, over the rows of one block row at a time.
    let mut peaks = vec![0u8; cols.div_ceil(block)];
    let whole = bytes.get(..rows * cols).unwrap_or(&[]);
    for block_row in whole.chunks(cols * block) {
        peaks.iter_mut().for_each(|p| *p = 0);
        for row in block_row.chunks_exact(cols) {
            for (p, seg) in peaks.iter_mut().zip(row.chunks(block)) {
                *p = seg.iter().fold(*p, |m, &b| m.max(b & 0x7F));
            }
        }
        for &peak in &peaks {
            if peak != 0 {
                blocks += 1;
                if peak < FP8_BLOCK_PEAK_MIN {
                    low += 1;
                }
            }
        }
    }
    if low > 0 {
        return fail(
            dtype,
            format!(
                "{low} of {blocks} non-zero {block}x{block} blocks peak below e4m3 code \
                 {FP8_BLOCK_PEAK_MIN:#04x}; block-scaled weights use the top of the range"
            ),
        );
    }
    Ok(())
}

fn check_e8m0(dtype: &str, bytes: &[u8]) -> Result<(), Implausible> {
    let nan = bytes.iter().filter(|&&b| b == 0xFF).count();
    if nan > 0 {
        return fail(
            dtype,
            format!("{nan} of {} scales are the e8m0 NaN code 0xFF", bytes.len()),
        );
    }
    // Scales of real weights are powers of two within a few dozen octaves of 1.0. Bytes below 0x40
    // (2^-63) are punctuation in ASCII, which a read landing in the JSON header always contains.
    if let Some(&b) = bytes.iter().find(|&&b| !(0x40..=0xBF).contains(&b)) {
        return fail(
            dtype,
            format!(
                "scale byte {b:#04x} (2^{}) is outside 2^-63..2^64",
                i32::from(b) - 127
            ),
        );
    }
    Ok(())
}

fn check_e2m1(dtype: &str, group: u32, bytes: &[u8]) -> Result<(), Implausible> {
    let group_bytes = (group as usize / 2).max(1);
    let (mut groups, mut peaked) = (0usize, 0usize);
    let whole = bytes
        .get(..bytes.len() / group_bytes * group_bytes)
        .unwrap_or(&[]);
    const _: () = assert!(E2M1_PEAK_MIN == 0b101, "the bit test below assumes code 5");
    for g in whole.chunks_exact(group_bytes) {
        // Whether any nibble of the group is non-zero, and whether any reaches magnitude code
        // E2M1_PEAK_MIN (5 = 0b101 or above: bit 2 and one of bits 0, 1), eight bytes at a time.
        let (mut any_nonzero, mut any_peak) = (0u64, 0u64);
        let mut words = g.chunks_exact(8);
        for w in &mut words {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            let x = u64::from_le_bytes(b);
            const ONES: u64 = 0x1111_1111_1111_1111;
            any_nonzero |= x & (ONES * 7);
            any_peak |= (x >> 2) & ((x >> 1) | x) & ONES;
        }
        for &b in words.remainder() {
            let x = u64::from(b);
            any_nonzero |= x & 0x77;
            any_peak |= (x >> 2) & ((x >> 1) | x) & 0x11;
        }
        if any_nonzero != 0 {
            groups += 1;
            // MX scaling puts each group's largest element at 3.0..6.0 (codes 5..=7).
            peaked += usize::from(any_peak != 0);
        }
    }
    // Per nibble position (low = element 2i, high = element 2i+1): non-zero and negative codes
    // (a negative non-zero code is above 0x8). Both positions hold identically distributed,
    // centred elements.
    let (mut nonzero, mut negative) = ([0usize; 2], [0usize; 2]);
    for b in whole.chunks(1 << 16) {
        nonzero[0] += count_bytes(b, |x| any_bits(x, 0x07));
        // Bit 3 (the low nibble's sign) moved to bit 7 of the same byte.
        negative[0] += count_bytes(b, |x| (x << 4) & any_bits(x, 0x07));
        nonzero[1] += count_bytes(b, |x| any_bits(x >> 4, 0x07));
        negative[1] += count_bytes(b, |x| x & any_bits(x >> 4, 0x07));
    }
    if groups > 0 && peaked * 1000 < groups * E2M1_PEAK_SHARE_PERMILLE {
        return fail(
            dtype,
            format!(
                "only {peaked} of {groups} non-zero {group}-element groups reach e2m1 magnitude 3.0; \
                 MX-scaled groups peak at 3.0..6.0 (reads off the group grid do not)"
            ),
        );
    }
    for (pos, name) in [(0, "low"), (1, "high")] {
        let (n, neg) = (nonzero[pos], negative[pos]);
        if n >= 64 && (neg * 20 < n || neg * 20 > n * 19) {
            return fail(
                dtype,
                format!("{neg} of {n} non-zero e2m1 codes in {name} nibbles are negative; weights are centred"),
            );
        }
    }
    Ok(())
}

/// The byte shift used by the "off the grid" negative control for a tensor of this kind: half an
/// element (multi-byte dtypes), half a group (e2m1), half a block row (FP8 blocks, which have no
/// sub-byte grid), or `None` where no shift can leave the grid.
pub fn grid_shift(dtype: &str, content: Content, shape: &[u64]) -> Option<usize> {
    match content {
        Content::E2m1Packed { group } => Some((group as usize / 4).max(1)),
        Content::Fp8Block { block } => {
            let cols = usize::try_from(*shape.last()?).ok()?;
            Some(cols.checked_mul(block as usize / 2)?)
        }
        Content::Plain => match dtype {
            "BF16" | "F16" => Some(1),
            "F32" | "I32" => Some(2),
            "I64" => Some(4),
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bf16(x: f32) -> [u8; 2] {
        ((x.to_bits() >> 16) as u16).to_le_bytes()
    }

    /// A tiny deterministic generator of centred values (no libm).
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                let mut acc = 0.0f32;
                for _ in 0..4 {
                    s = s
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    acc += ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5;
                }
                acc * 0.05
            })
            .collect()
    }

    #[test]
    fn norms_of_all_ones_and_zeros_pass() {
        let ones: Vec<u8> = (0..512).flat_map(|_| bf16(1.0)).collect();
        check("BF16", Content::Plain, &[512], &ones).unwrap();
        check("F32", Content::Plain, &[100], &[0u8; 400]).unwrap();
        check("BF16", Content::Plain, &[100], &[0u8; 200]).unwrap();
    }

    #[test]
    fn bf16_shifted_by_one_byte_is_rejected() {
        let v: Vec<u8> = values(4096, 7).into_iter().flat_map(bf16).collect();
        check("BF16", Content::Plain, &[4096], &v).unwrap();
        assert!(check("BF16", Content::Plain, &[4096], &v[1..v.len() - 1]).is_err());
    }

    #[test]
    fn json_header_bytes_are_rejected_for_every_dtype() {
        let header = br#"{"layers.0.attn.wq_a.weight":{"dtype":"F8_E4M3","shape":[1024,4096],"data_offsets":[0,4194304]},"__metadata__":{"format":"pt"}}"#.repeat(8);
        for (dt, content) in [
            ("BF16", Content::Plain),
            ("F32", Content::Plain),
            ("F8_E4M3", Content::Plain),
            ("F8_E8M0", Content::Plain),
            ("I64", Content::Plain),
            ("I8", Content::E2m1Packed { group: 32 }),
        ] {
            let n = header.len() / 8 * 8;
            assert!(
                check(dt, content, &[n as u64], &header[..n]).is_err(),
                "{dt} accepted JSON"
            );
        }
    }

    #[test]
    fn tid2eid_passes_and_shifted_tid2eid_fails() {
        let ids: Vec<u8> = (0..600i64).flat_map(|i| (i % 4).to_le_bytes()).collect();
        check("I64", Content::Plain, &[100, 6], &ids).unwrap();
        assert!(check("I64", Content::Plain, &[100, 6], &ids[4..ids.len() - 4]).is_err());
    }

    #[test]
    fn e8m0_nan_and_out_of_range_fail() {
        check("F8_E8M0", Content::Plain, &[4], &[0x70, 0x71, 0x72, 0x6F]).unwrap();
        assert!(check("F8_E8M0", Content::Plain, &[2], &[0x70, 0xFF]).is_err());
        assert!(check("F8_E8M0", Content::Plain, &[2], &[0x70, 0x22]).is_err());
    }

    #[test]
    fn e2m1_groups_peak_and_shift_breaks_the_grid() {
        // Groups of 32 codes: one element at magnitude 6.0 (code 7) or 4.0 (6), the rest small.
        let mut bytes = Vec::new();
        let mut s = 11u64;
        for g in 0..256 {
            let mut codes = [0u8; 32];
            for c in codes.iter_mut() {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1);
                *c = ((s >> 60) as u8 & 0x3) | (((s >> 50) as u8 & 1) << 3);
            }
            codes[(g * 7) % 32] = if g % 2 == 0 { 7 } else { 0xE };
            for pair in codes.chunks(2) {
                bytes.push(pair[0] | (pair[1] << 4));
            }
        }
        let c = Content::E2m1Packed { group: 32 };
        check("I8", c, &[256, 16], &bytes).unwrap();
        let shift = grid_shift("I8", c, &[256, 16]).unwrap();
        assert!(check("I8", c, &[256, 16], &bytes[shift..bytes.len() - 16 + shift]).is_err());
    }

    #[test]
    fn word_wide_byte_predicates_match_their_definitions() {
        // Every byte value at every position of a word (and in a zero-padded tail).
        for b in 0..=255u8 {
            for pos in 0..9 {
                let mut v = vec![0u8; 9];
                v[pos] = b;
                let one = |hit: bool| usize::from(hit);
                assert_eq!(count_bytes(&v, |x| any_bits(x, 0x7F)), one(b & 0x7F != 0));
                assert_eq!(
                    count_bytes(&v, |x| (x & splat(0x7F)) + splat(0x01)),
                    one(b & 0x7F == 0x7F)
                );
                assert_eq!(count_bytes(&v, |x| x & any_bits(x, 0x7F)), one(b > 0x80));
                assert_eq!(count_bytes(&v, |x| any_bits(x, 0x07)), one(b & 0x07 != 0));
                assert_eq!(
                    count_bytes(&v, |x| (x << 4) & any_bits(x, 0x07)),
                    one(b & 0x0F > 0x08)
                );
                assert_eq!(
                    count_bytes(&v, |x| any_bits(x >> 4, 0x07)),
                    one(b & 0x70 != 0)
                );
                assert_eq!(
                    count_bytes(&v, |x| x & any_bits(x >> 4, 0x07)),
                    one(b & 0xF0 > 0x80)
                );
            }
        }
    }

    #[test]
    fn e2m1_bitwise_group_rule_matches_the_nibble_definition() {
        // Every byte value as a one-byte group repeated: the group passes the peak rule exactly
        // when one of its nibbles has magnitude >= E2M1_PEAK_MIN.
        let c = Content::E2m1Packed { group: 32 };
        for b in 0..=255u8 {
            let peak = (b & 7).max((b >> 4) & 7);
            // One group of 16 identical bytes; signs are balanced by alternating sign bits.
            let g: Vec<u8> = (0..16)
                .map(|i| if i % 2 == 0 { b } else { b ^ 0x88 })
                .collect();
            let verdict = check("I8", c, &[1, 16], &g);
            if peak == 0 || peak >= E2M1_PEAK_MIN {
                assert!(verdict.is_ok(), "byte {b:#04x}: {verdict:?}");
            } else {
                assert!(verdict.is_err(), "byte {b:#04x} passed");
            }
        }
    }

    #[test]
    fn fp8_blocks_must_peak_high() {
        let (rows, cols) = (256usize, 256usize);
        let mut w = vec![0u8; rows * cols];
        for (i, b) in w.iter_mut().enumerate() {
            *b = ((i * 37 % 0x60) as u8) | if i % 3 == 0 { 0x80 } else { 0 };
        }
        let c = Content::Fp8Block { block: 128 };
        assert!(check("F8_E4M3", c, &[rows as u64, cols as u64], &w).is_err());
        for br in 0..2 {
            for bc in 0..2 {
                w[(br * 128 + 5) * cols + bc * 128 + 9] = 0x7B;
            }
        }
        check("F8_E4M3", c, &[rows as u64, cols as u64], &w).unwrap();
        assert!(check("F8_E4M3", Content::Plain, &[1], &[0x7F]).is_err());
    }
}

#[cfg(test)]
mod speed {
    /// `cargo test -p pipeline --release -- --ignored --nocapture check_speed`
    #[test]
    #[ignore]
    fn check_speed() {
        let mut s = 1u64;
        let data: Vec<u8> = (0..(256usize << 20))
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (s >> 56) as u8
            })
            .collect();
        for (dt, c) in [
            ("I8", super::Content::E2m1Packed { group: 32 }),
            ("F8_E4M3", super::Content::Plain),
            ("BF16", super::Content::Plain),
            ("F8_E8M0", super::Content::Plain),
        ] {
            let t = std::time::Instant::now();
            let r = super::check(dt, c, &[1, data.len() as u64], &data);
            println!(
                "{dt}: {:.2} GB/s ({})",
                data.len() as f64 / t.elapsed().as_secs_f64() / 1e9,
                r.is_ok()
            );
        }
    }
}
