//! AVX-512 twin of the eight-lane sums of squared differences in
//! `assign.rs` ([`super::exact_sq_dist`] and the certification's row norm),
//! picked at run time when the CPU has AVX-512F: the same lanes, the same
//! operations in the same order (a subtraction in `f64`, a multiplication
//! by the scale, a multiplication and then an addition, never fused), so the
//! same bits as the portable loop, which the compiler vectorises poorly for
//! `f32` rows.

use std::any::TypeId;
use std::arch::x86_64::*;

use crate::dtype::Real;

/// Whether this CPU can run the kernel of this module (checked once).
fn available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| is_x86_feature_detected!("avx512f"))
}

/// For every full group of eight values, `acc[l] += ((x[8q + l] − c[8q + l])
/// · scale)²` in `f64`, the group `q` ascending; the values past the last
/// full group are left to the caller. Returns whether it ran (an AVX-512 CPU
/// and `T` is `f32` or `f64`).
///
/// # Panics
/// If `c` is shorter than `x`'s full groups.
#[inline]
pub fn sq_diff_lanes<T: Real>(x: &[T], c: &[f64], scale: f64, acc: &mut [f64; 8]) -> bool {
    let full = x.len() / 8 * 8;
    assert!(c.len() >= full);
    if !available() {
        return false;
    }
    if TypeId::of::<T>() == TypeId::of::<f32>() {
        // SAFETY: `T` is `f32`; AVX-512F checked; bounds asserted above.
        unsafe { lanes_f32(x.as_ptr().cast::<f32>(), c.as_ptr(), full, scale, acc) };
    } else if TypeId::of::<T>() == TypeId::of::<f64>() {
        // SAFETY: `T` is `f64`; as above.
        unsafe { lanes_f64(x.as_ptr().cast::<f64>(), c.as_ptr(), full, scale, acc) };
    } else {
        return false;
    }
    true
}

/// [`sq_diff_lanes`] for `f32` rows.
///
/// # Safety
/// AVX-512F; `x` and `c` hold `full` values, a multiple of 8.
#[target_feature(enable = "avx512f")]
unsafe fn lanes_f32(x: *const f32, c: *const f64, full: usize, scale: f64, acc: &mut [f64; 8]) {
    let s = _mm512_set1_pd(scale);
    // SAFETY: `acc` is eight f64; every load is below `full` (the contract).
    unsafe {
        let mut a = _mm512_loadu_pd(acc.as_ptr());
        for q in (0..full).step_by(8) {
            let v = _mm512_cvtps_pd(_mm256_loadu_ps(x.add(q)));
            let t = _mm512_mul_pd(_mm512_sub_pd(v, _mm512_loadu_pd(c.add(q))), s);
            a = _mm512_add_pd(a, _mm512_mul_pd(t, t));
        }
        _mm512_storeu_pd(acc.as_mut_ptr(), a);
    }
}

/// [`sq_diff_lanes`] for `f64` rows.
///
/// # Safety
/// As [`lanes_f32`].
#[target_feature(enable = "avx512f")]
unsafe fn lanes_f64(x: *const f64, c: *const f64, full: usize, scale: f64, acc: &mut [f64; 8]) {
    let s = _mm512_set1_pd(scale);
    // SAFETY: as in `lanes_f32`.
    unsafe {
        let mut a = _mm512_loadu_pd(acc.as_ptr());
        for q in (0..full).step_by(8) {
            let t = _mm512_mul_pd(_mm512_sub_pd(_mm512_loadu_pd(x.add(q)), _mm512_loadu_pd(c.add(q))), s);
            a = _mm512_add_pd(a, _mm512_mul_pd(t, t));
        }
        _mm512_storeu_pd(acc.as_mut_ptr(), a);
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};

    use super::*;

    /// The same bits as the portable eight-lane loop, for `f32` and `f64`
    /// rows, with a scale and without.
    #[test]
    fn lanes_match_the_portable_loop() {
        fn portable<T: Real>(x: &[T], c: &[f64], scale: f64) -> [f64; 8] {
            let mut acc = [0.5f64; 8];
            for (p, q) in x.chunks_exact(8).zip(c.chunks_exact(8)) {
                for l in 0..8 {
                    let t = (p[l].to_f64() - q[l]) * scale;
                    acc[l] += t * t;
                }
            }
            acc
        }
        fn check<T: Real>(x: &[T], c: &[f64], scale: f64) {
            let mut acc = [0.5f64; 8];
            if sq_diff_lanes(x, c, scale, &mut acc) {
                assert_eq!(acc.map(f64::to_bits), portable(x, c, scale).map(f64::to_bits));
            }
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        for _ in 0..300 {
            let d = rng.random_range(0..100);
            let x: Vec<f64> = (0..d).map(|_| rng.random::<f64>() * 1e3 - 5e2).collect();
            let c: Vec<f64> = (0..d).map(|_| rng.random::<f64>() * 1e3 - 5e2).collect();
            let x32: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            for scale in [1.0, 2f64.powi(-9), 2f64.powi(40)] {
                check(&x, &c, scale);
                check(&x32, &c, scale);
            }
        }
    }
}
