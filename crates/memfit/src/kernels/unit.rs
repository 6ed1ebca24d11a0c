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
    unit_values(row, None);
}

/// [`unit_row`] for the stored values of a sparse row (`cols` their
/// strictly increasing columns): the same bits as [`unit_row`] on the
/// row with its zeros, whose squares change none of the partial sums.
pub fn unit_sparse_row<T: Real>(values: &mut [T], cols: &[u32]) {
    unit_values(values, Some(cols));
}

/// [`unit_row`] of `row`, its values in columns `cols` (all columns in
/// order when `None`).
fn unit_values<T: Real>(row: &mut [T], cols: Option<&[u32]>) {
    let sum_sq = |row: &[T], scale: f64| sum_sq(row, cols, scale);
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

/// `(Σ (x · scale)², Σ x²)` of a dense row, each in the fixed order of
/// [`unit_row`]'s sums (the bits of `sum_sq` at `scale` and at 1), in one
/// read of the row.
pub(crate) fn sq_norms(row: &[f64], scale: f64) -> (f64, f64) {
    let (mut scaled, mut plain) = ([0.0f64; 8], [0.0f64; 8]);
    let mut chunks = row.chunks_exact(8);
    for c in &mut chunks {
        for ((a, b), &v) in scaled.iter_mut().zip(plain.iter_mut()).zip(c) {
            let x = v * scale;
            *a += x * x;
            *b += v * v;
        }
    }
    for ((a, b), &v) in scaled.iter_mut().zip(plain.iter_mut()).zip(chunks.remainder()) {
        let x = v * scale;
        *a += x * x;
        *b += v * v;
    }
    let total = |acc: [f64; 8]| ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    (total(scaled), total(plain))
}

/// The largest `|x|` of `row` (0 for an empty row; NaN is skipped, as by
/// `f64::max`), in lanes that vectorise.
pub(crate) fn max_abs(row: &[f64]) -> f64 {
    let mut lanes = [0.0f64; 8];
    let mut chunks = row.chunks_exact(8);
    for c in &mut chunks {
        for (m, &v) in lanes.iter_mut().zip(c) {
            *m = if v.abs() > *m { v.abs() } else { *m };
        }
    }
    for (m, &v) in lanes.iter_mut().zip(chunks.remainder()) {
        *m = if v.abs() > *m { v.abs() } else { *m };
    }
    lanes.into_iter().fold(0.0, |a, b| if b > a { b } else { a })
}

/// `Σ (x · scale)²` in a fixed order: eight interleaved partial sums (the
/// value of column `j` in sum `j mod 8`, in column order), then their sum.
fn sum_sq<T: Real>(row: &[T], cols: Option<&[u32]>, scale: f64) -> f64 {
    let mut acc = [0.0f64; 8];
    if let Some(cols) = cols {
        for (v, &j) in row.iter().zip(cols) {
            let x = v.to_f64() * scale;
            acc[j as usize % 8] += x * x;
        }
        return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    }
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
    fn norms_and_largest_magnitudes_are_those_of_the_plain_loops() {
        for n in [0, 1, 7, 8, 9, 100] {
            let row: Vec<f64> = (0..n).map(|i| ((i * 7919) % 101) as f64 / 7.0 - 6.0).collect();
            assert_eq!(sq_norms(&row, 0.25), (sum_sq(&row, None, 0.25), sum_sq(&row, None, 1.0)));
            assert_eq!(max_abs(&row), row.iter().fold(0.0f64, |m, v| m.max(v.abs())));
        }
        assert_eq!(max_abs(&[1.0, f64::NAN, -3.0]), 3.0);
    }

    #[test]
    fn sparse_rows_get_the_dense_rows_bits() {
        let cols = [0u32, 3, 8, 9, 17, 30, 31];
        for s in [1.0, 1e-200, 1e200] {
            let mut values: Vec<f64> = cols.iter().map(|&j| (f64::from(j) * 0.37 + 0.1).sin() * s).collect();
            let mut dense = vec![0.0; 33];
            cols.iter().zip(&values).for_each(|(&j, &v)| dense[j as usize] = v);
            unit_sparse_row(&mut values, &cols);
            unit_row(&mut dense);
            for (&j, v) in cols.iter().zip(&values) {
                assert_eq!(v.to_bits(), dense[j as usize].to_bits());
            }
        }
    }

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
