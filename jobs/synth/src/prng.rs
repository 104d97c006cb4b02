//! The generator's random numbers: SplitMix64 seeding a xoshiro256** stream, and an
//! approximately Gaussian sampler built from integer sums only.
//!
//! Why no libm: `sin`/`cos`/`ln`/`exp` may differ in the last bit between platforms and libm
//! versions, and the generator promises byte-identical files everywhere (docs/synth.md). The
//! Gaussian is therefore Irwin–Hall: the sum of eight 16-bit uniforms, centred and scaled by
//! exact power-of-two and one constant multiply, plus a rare ×4 outlier so block maxima look like
//! real weights (heavier tails than a pure Gaussian). Only integer ops and IEEE-754 basic
//! arithmetic (correctly rounded everywhere) are used.

/// SplitMix64 (Vigna): expands a 64-bit seed into well-mixed words.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// Start from `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }
    /// Next word.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// xoshiro256** (Blackman–Vigna), seeded through SplitMix64.
#[derive(Debug, Clone)]
pub struct Rng {
    s: [u64; 4],
}

/// sqrt(12/8): scales the Irwin–Hall sum of 8 unit uniforms to unit variance.
const IRWIN_HALL_8_SCALE: f32 = 1.224_744_9;

impl Rng {
    /// A stream for `seed`.
    pub fn new(seed: u64) -> Self {
        let mut sm = SplitMix64::new(seed);
        let s = [sm.next_u64(), sm.next_u64(), sm.next_u64(), sm.next_u64()];
        Self { s }
    }

    /// An independent stream for a named purpose (a tensor name): the seed mixed with an FNV-1a
    /// hash of the label, so adding or reordering tensors never shifts another tensor's values.
    pub fn for_label(seed: u64, label: &str) -> Self {
        let mut h = 0xCBF2_9CE4_8422_2325u64;
        for b in label.as_bytes() {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01B3);
        }
        Self::new(seed ^ h.rotate_left(17) ^ 0x5EED_0000_0000_0000)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let result = self.s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, n)` for `n > 0` (Lemire's multiply-shift; bias < 2^-32 for small n).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n.max(1))) >> 64) as u64
    }

    /// Uniform in `[0, 1)` with 24 bits.
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 * (1.0 / 16_777_216.0)
    }

    /// Approximately standard normal: Irwin–Hall(8), unit variance, range about ±4.9, and with
    /// probability 1/2048 multiplied by 4 (an outlier).
    pub fn gauss(&mut self) -> f32 {
        let a = self.next_u64();
        let b = self.next_u64();
        let mut sum: i64 = 0;
        for w in [a, b] {
            sum += (w & 0xFFFF) as i64
                + ((w >> 16) & 0xFFFF) as i64
                + ((w >> 32) & 0xFFFF) as i64
                + (w >> 48) as i64;
        }
        // Centre: 8 uniforms of mean 32767.5 → 262140; scale 2^-16 to unit uniforms.
        let centred = (2 * sum - 524_280) as f32 * (1.0 / 131_072.0);
        let mut g = centred * IRWIN_HALL_8_SCALE;
        if (a ^ b.rotate_left(11)) & 0x7FF == 0 {
            g *= 4.0;
        }
        g
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values_pin_the_streams() {
        // SplitMix64 reference output for seed 1234567 (Vigna's splitmix64.c).
        let mut sm = SplitMix64::new(1_234_567);
        assert_eq!(sm.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(sm.next_u64(), 3_203_168_211_198_807_973);
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let xs: Vec<u64> = (0..8).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..8).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(
            Rng::for_label(7, "a").next_u64(),
            Rng::for_label(7, "b").next_u64()
        );
    }

    #[test]
    fn gauss_moments_look_normal() {
        let mut r = Rng::new(42);
        let n = 200_000;
        let (mut s1, mut s2, mut s4, mut big) = (0f64, 0f64, 0f64, 0u32);
        for _ in 0..n {
            let g = f64::from(r.gauss());
            s1 += g;
            s2 += g * g;
            s4 += g * g * g * g;
            if g.abs() > 5.0 {
                big += 1;
            }
        }
        let mean = s1 / n as f64;
        let var = s2 / n as f64;
        let kurt = s4 / n as f64 / (var * var);
        assert!(mean.abs() < 0.02, "mean {mean}");
        assert!((var - 1.0).abs() < 0.05, "var {var}");
        assert!(kurt > 2.9 && kurt < 4.5, "kurtosis {kurt}");
        assert!(big > 10 && big < 200, "outliers {big}");
        let u: Vec<u64> = (0..1000).map(|_| r.below(6)).collect();
        assert!(u.iter().all(|x| *x < 6) && (0..6).all(|k| u.contains(&k)));
    }
}
