//! CPU references of the dequantize-and-multiply kernels (`matmul_*.wgsl`), in the kernels' order.

use super::decode::WeightMatrix;
use super::{elements, lane_dot_chunked};
use crate::error::KernelError;

/// y[r] = Σ_k w(r, k) · x[k], f32 in the kernels' lane-then-tree order.
pub fn matvec(w: &WeightMatrix<'_>, x: &[f32]) -> Result<Vec<f32>, KernelError> {
    elements("x", w.k, x.len())?;
    let len = w.chunk_len();
    Ok((0..w.rows)
        .map(|r| {
            lane_dot_chunked(w.k / len, len, |n| {
                let k = w.chunk_k(n / len, n % len);
                (w.get(r, k), x.get(k).copied().unwrap_or(0.0))
            })
        })
        .collect())
}

/// y[t, r] for `tokens` row-major input vectors x[t, k]; per token bit-identical to [`matvec`].
pub fn matmul(w: &WeightMatrix<'_>, x: &[f32], tokens: usize) -> Result<Vec<f32>, KernelError> {
    let n = tokens.checked_mul(w.k).ok_or(KernelError::Overflow {
        what: "tokens × k"
    })?;
    elements("x", n, x.len())?;
    let mut y = Vec::with_capacity(tokens * w.rows);
    for t in 0..tokens {
        let xt = x.get(t * w.k..(t + 1) * w.k).unwrap_or(&[]);
        y.extend(matvec(w, xt)?);
    }
    Ok(y)
}

/// y[r] = Σ_k w(r, k) · x[k] summed sequentially in f64 (the values w(r, k) are the f32 ones).
pub fn matvec_f64(w: &WeightMatrix<'_>, x: &[f32]) -> Result<Vec<f64>, KernelError> {
    elements("x", w.k, x.len())?;
    Ok((0..w.rows)
        .map(|r| {
            (0..w.k)
                .map(|k| f64::from(w.get(r, k)) * f64::from(x.get(k).copied().unwrap_or(0.0)))
                .sum()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{Dtype, WeightFormat};

    #[test]
    fn tiny_f32_matvec_by_hand() {
        // W = [[1, 2, 3], [-1, 0.5, 4]], x = [2, -1, 0.25] → [2 - 2 + 0.75, -2 - 0.5 + 1] = [0.75, -1.5]
        let w: Vec<u8> = [1.0f32, 2.0, 3.0, -1.0, 0.5, 4.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let m = WeightMatrix::new(WeightFormat::Plain(Dtype::F32), 2, 3, &w, &[], &[])
            .expect("valid shape");
        let x = [2.0, -1.0, 0.25];
        assert_eq!(matvec(&m, &x).expect("x fits"), vec![0.75, -1.5]);
        assert_eq!(matvec_f64(&m, &x).expect("x fits"), vec![0.75, -1.5]);
        assert!(matvec(&m, &x[..2]).is_err());
    }

    #[test]
    fn tiny_q8_0_matvec_by_hand() {
        // one row of 32: d = 0.5, q[j] = j - 16 ; x = 1 everywhere → 0.5 · Σ (j - 16) = 0.5 · -16 = -8
        let mut block = vec![0x00, 0x38];
        block.extend((0..32).map(|j| (j as i8 - 16) as u8));
        let m = WeightMatrix::new(WeightFormat::Q8_0, 1, 32, &block, &[], &[]).expect("valid");
        assert_eq!(matvec(&m, &[1.0; 32]).expect("x fits"), vec![-8.0]);
    }

    #[test]
    fn matmul_rows_equal_matvec_per_token() {
        let w: Vec<u8> = (0..6u16)
            .flat_map(|i| {
                half::bf16::from_f32(f32::from(i) * 0.37 - 1.0)
                    .to_bits()
                    .to_le_bytes()
            })
            .collect();
        let m =
            WeightMatrix::new(WeightFormat::Plain(Dtype::Bf16), 2, 3, &w, &[], &[]).expect("valid");
        let x = [0.3, -2.0, 1.5, 7.0, 0.125, -0.5];
        let y = matmul(&m, &x, 2).expect("x fits");
        assert_eq!(&y[..2], matvec(&m, &x[..3]).expect("fits").as_slice());
        assert_eq!(&y[2..], matvec(&m, &x[3..]).expect("fits").as_slice());
    }
}
