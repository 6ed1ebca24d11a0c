//! Rows scaled to unit Euclidean norm, for cosine (spherical) k-means.

use crate::dtype::Real;

/// Rows whose largest magnitude lies outside `[2^-500, 2^500]` are scaled by
/// a power of two (exact) before their squares are summed, so that no finite
/// row overflows or underflows `f64`.
const BIG: f64 = 3.273_390_607_896_142e150; // 2^500
const SMALL: f64 = 1.0 / BIG;

/// Divides `row` by its Euclidean norm: each value `x` becomes `x / ‖x‖`
/// correctly rounded in `f64`, then rounded to `T` (so a row of one nonzero
/// value becomes exactly ±1), the squared norm summed in `f64` in
/// a fixed order (eight interleaved partial sums, so the result does not
/// depend on the machine). Rows whose squared norm leaves `[2^-1000,
/// 2^1000]` are first scaled by an exact power of two, which changes no
/// result: a row and its multiples by powers of two give the same values.
/// A row of zeros, and a row holding a value that is not finite (for the
/// non-finite check to name), are left as they are.
pub fn unit_row<T: Real>(row: &mut [T]) {
    let s = sum_sq(row, 1.0);
    let scale = if (SMALL * SMALL..=BIG * BIG).contains(&s) {
        1.0
    } else if row.iter().any(|v| !v.to_f64().is_finite()) {
        return;
    } else if s > 1.0 {
        1.0 / BIG / BIG
    } else if row.iter().all(|v| v.to_f64() == 0.0) {
        return;
    } else {
        BIG * BIG
    };
    let norm = if scale == 1.0 { s } else { sum_sq(row, scale) }.sqrt();
    for v in row.iter_mut() {
        *v = T::from_f64(v.to_f64() * scale / norm);
    }
}

/// `Σ (x · scale)²` in a fixed order: eight interleaved partial sums, then
/// their sum.
fn sum_sq<T: Real>(row: &[T], scale: f64) -> f64 {
    let mut acc = [0.0f64; 8];
    let mut chunks = row.chunks_exact(8);
    for c in &mut chunks {
        for (a, v) in acc.iter_mut().zip(c) {
            let x = v.to_f64() * scale;
            *a += x * x;
        }
    }
    for (a, v) in acc.iter_mut().zip(chunks.remainder()) {
        let x = v.to_f64() * scale;
        *a += x * x;
    }
    ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_get_unit_norm_at_any_magnitude() {
        for s in [1.0f64, 1e-300, 1e300] {
            let mut r = [3.0 * s, 4.0 * s];
            unit_row(&mut r);
            assert!((r[0] - 0.6).abs() < 3e-16 && (r[1] - 0.8).abs() < 3e-16, "{s}: {r:?}");
        }
        let mut sub = [5e-324f64, 0.0];
        unit_row(&mut sub);
        assert_eq!(sub, [1.0, 0.0]);
        let mut big = [f64::MAX, f64::MAX];
        unit_row(&mut big);
        assert!(big.iter().all(|v| (v - std::f64::consts::FRAC_1_SQRT_2).abs() < 2e-16), "{big:?}");
        let mut f = [1.0f32, 1.0, 1.0, 1.0];
        unit_row(&mut f);
        assert_eq!(f, [0.5f32; 4]);
        let mut zero = [0.0f64; 3];
        unit_row(&mut zero);
        assert_eq!(zero, [0.0; 3]);
        let mut bad = [1.0, f64::NAN, 2.0];
        unit_row(&mut bad);
        assert!(bad[0] == 1.0 && bad[1].is_nan() && bad[2] == 2.0);
        let mut inf = [1.0, f64::INFINITY];
        unit_row(&mut inf);
        assert_eq!(inf, [1.0, f64::INFINITY]);
    }
}
