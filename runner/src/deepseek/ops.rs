//! Scalar operations of the V4 forward pass, each written the way transformers 5.24's
//! `modeling_deepseek_v4.py` computes it (f64 inside, f32 out): RMSNorm (weighted and
//! unweighted), the interleaved partial RoPE on the trailing `rope_dim` channels (and its
//! conjugate, the de-rotation of the attention output), `sqrt(softplus)`, sigmoid, SiLU.

/// `x · rsqrt(mean(x²) + eps) · w` (w = None: the unweighted norm).
pub fn rmsnorm(x: &[f32], w: Option<&[f32]>, eps: f64) -> Vec<f32> {
    let ms = x.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / x.len().max(1) as f64;
    let r = 1.0 / (ms + eps).sqrt();
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            let g = w.and_then(|w| w.get(i)).map_or(1.0, |&g| f64::from(g));
            (f64::from(v) * r * g) as f32
        })
        .collect()
}

/// Rotates the trailing `2 · inv_freq.len()` channels of `x` in place at `pos`, pairing channels
/// (2i, 2i+1) of that slice with frequency `inv_freq[i]`; `inverse` uses −sin (de-rotation).
pub fn rope(x: &mut [f32], inv_freq: &[f32], pos: usize, inverse: bool) {
    let rd = 2 * inv_freq.len();
    let Some(start) = x.len().checked_sub(rd) else {
        return;
    };
    for (i, &f) in inv_freq.iter().enumerate() {
        // torch: freqs = position (f32) · inv_freq (f32), rounded to f32, then cos/sin.
        let angle = f64::from(pos as f32 * f);
        let (s, c) = angle.sin_cos();
        let s = if inverse { -s } else { s };
        let a = start + 2 * i;
        let (x0, x1) = (f64::from(x[a]), f64::from(x[a + 1]));
        x[a] = (x0 * c - x1 * s) as f32;
        x[a + 1] = (x1 * c + x0 * s) as f32;
    }
}

/// torch `softplus` (β 1, threshold 20) then `sqrt`.
pub fn sqrt_softplus(v: f64) -> f64 {
    let sp = if v > 20.0 { v } else { v.exp().ln_1p() };
    sp.sqrt()
}

pub fn sigmoid(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

pub fn silu(v: f64) -> f64 {
    v * sigmoid(v)
}

/// In-place softmax of f64 logits (−∞ entries get weight 0).
pub fn softmax(v: &mut [f64]) {
    let m = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !m.is_finite() {
        return;
    }
    let mut sum = 0.0;
    for x in v.iter_mut() {
        *x = (*x - m).exp();
        sum += *x;
    }
    for x in v.iter_mut() {
        *x /= sum;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rope_then_inverse_is_identity_and_pairs_adjacent_channels() {
        let mut x: Vec<f32> = (0..8).map(|i| i as f32 * 0.25 - 1.0).collect();
        let orig = x.clone();
        let f = [1.0f32, 0.5];
        rope(&mut x, &f, 3, false);
        // the first 4 channels (nope) are untouched
        assert_eq!(&x[..4], &orig[..4]);
        // channels 4,5 rotate by 3 rad
        let (s, c) = 3f64.sin_cos();
        let want4 = (f64::from(orig[4]) * c - f64::from(orig[5]) * s) as f32;
        assert_eq!(x[4], want4);
        rope(&mut x, &f, 3, true);
        for (a, b) in x.iter().zip(&orig) {
            assert!((a - b).abs() < 1e-6);
        }
    }

    #[test]
    fn softplus_threshold_and_values() {
        assert!((sqrt_softplus(0.0) - 2f64.ln().sqrt()).abs() < 1e-15);
        assert_eq!(sqrt_softplus(25.0), 5.0);
    }
}
