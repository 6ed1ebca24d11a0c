//! Rows scaled to unit Euclidean norm, for cosine (spherical) k-means.

use crate::dtype::Real;

/// Rows whose largest magnitude lies outside `[2^-500, 2^500]` are scaled by
/// a power of two (exact) before their squares are summed, so that no finite
/// row overflows or underflows `f64`.
const BIG: f64 = 3.273_390_607_896_142e150; // 2^500
const SMALL: f64 = 1.0 / BIG;

/// Divides `row` by its Euclidean norm: each value becomes `x / ‖x‖` computed
/// in `f64` (the norm from the values as `f64`, with an exact power-of-two
/// scale when they are very large or very small) and rounded once to `T`.
/// A row of zeros, and a row holding a value that is not finite (for the
/// non-finite check to name), are left as they are.
pub fn unit_row<T: Real>(row: &mut [T]) {
    let mut largest = 0.0f64;
    for v in row.iter() {
        let a = v.to_f64().abs();
        if !a.is_finite() {
            return;
        }
        largest = largest.max(a);
    }
    if largest == 0.0 {
        return;
    }
    let scale = if largest > BIG {
        1.0 / BIG / BIG
    } else if largest < SMALL {
        BIG * BIG
    } else {
        1.0
    };
    let norm = row.iter().map(|v| (v.to_f64() * scale).powi(2)).sum::<f64>().sqrt();
    for v in row.iter_mut() {
        *v = T::from_f64(v.to_f64() * scale / norm);
    }
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
