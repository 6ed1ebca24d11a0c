//! AVX-512 twin of the direct argmin kernel (see `argmin.rs`), picked at run
//! time when the CPU has AVX-512F and AVX-512VL. The portable,
//! compiler-vectorised kernel in `argmin.rs` is its reference twin: both
//! give each row's best centre under the GEMM identity and the gap to the
//! runner-up, which `assign.rs` checks against its error bound.

use std::arch::x86_64::*;

use super::argmin::Shift;
use crate::dtype::Real;

/// Centres per vector.
const WIDTH: usize = 16;

/// Whether this CPU can run the kernels of this module (checked once).
fn available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vl"))
}

macro_rules! dispatch {
    ($($d:literal)*) => {
        /// Runs the AVX-512 kernel for `d` features when the CPU has AVX-512
        /// and `1 <= d <= 16`; returns whether it ran.
        pub fn run<T: Real>(
            x: &[T],
            d: usize,
            shift: Shift<'_>,
            transposed: &[f32],
            norms: &[f32],
            labels: &mut [u32],
            gaps: &mut [f32],
        ) -> bool {
            if !available() {
                return false;
            }
            match d {
                // SAFETY: `available()` checked AVX-512F and AVX-512VL.
                $($d => unsafe { argmin::<T, $d>(x, shift, transposed, norms, labels, gaps) },)*
                _ => return false,
            }
            true
        }
    };
}

dispatch!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);

/// Best centre of each row of `x` (row-major, `D` features), shifted to
/// `shift` (see [`Shift`]), among the transposed centres (`D` rows of `norms.len()`
/// values) with squared norms `norms` (padded with `+inf`), by ‖c‖² − 2x̂·c
/// with fused multiply-adds; ties go to the lowest index. `gaps[i]` receives
/// the runner-up's value minus the best. Four rows go together so that their
/// running minima form independent chains.
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512VL ([`available`]).
///
/// # Panics
/// If `norms.len()` is not a multiple of the vector width or the slices are
/// shorter than stated.
#[target_feature(enable = "avx512f,avx512vl")]
unsafe fn argmin<T: Real, const D: usize>(
    x: &[T],
    shift: Shift<'_>,
    transposed: &[f32],
    norms: &[f32],
    labels: &mut [u32],
    gaps: &mut [f32],
) {
    let kp = norms.len();
    assert!(
        kp.is_multiple_of(WIDTH)
            && transposed.len() >= D * kp
            && x.len() >= labels.len() * D
            && shift.origin.len() >= D
            && gaps.len() >= labels.len()
    );
    let full = labels.len() / 4 * 4;
    for r0 in (0..full).step_by(4) {
        // SAFETY: same CPU features; bounds asserted above.
        unsafe {
            rows::<T, D, 4>(&x[r0 * D..], shift, transposed, norms, &mut labels[r0..r0 + 4], &mut gaps[r0..r0 + 4])
        };
    }
    for r in full..labels.len() {
        // SAFETY: as above.
        unsafe { rows::<T, D, 1>(&x[r * D..], shift, transposed, norms, &mut labels[r..=r], &mut gaps[r..=r]) };
    }
}

/// `R` rows of [`argmin`].
///
/// # Safety
/// As [`argmin`], and `x` holds `R * D` values, `labels` and `gaps` `R`.
#[target_feature(enable = "avx512f,avx512vl")]
#[inline]
#[allow(clippy::needless_range_loop)] // row and feature loops index several arrays in step
unsafe fn rows<T: Real, const D: usize, const R: usize>(
    x: &[T],
    shift: Shift<'_>,
    transposed: &[f32],
    norms: &[f32],
    labels: &mut [u32],
    gaps: &mut [f32],
) {
    let kp = norms.len();
    let mut best = [_mm512_set1_ps(f32::INFINITY); R];
    let mut second = [_mm512_set1_ps(f32::INFINITY); R];
    // Index 0 until a smaller value is seen: a row whose values are all inf
    // or NaN (overflow) still gets a valid label.
    let mut best_idx = [_mm512_set1_epi32(0); R];
    let mut idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    let step = _mm512_set1_epi32(WIDTH as i32);
    // The rows' shifted values times −2.
    let mut xs = [[_mm512_set1_ps(0.0); D]; R];
    for r in 0..R {
        for f in 0..D {
            xs[r][f] = _mm512_set1_ps(-2.0 * shift.apply(f, x[r * D + f].to_f64()));
        }
    }
    let mut c0 = 0;
    while c0 < kp {
        // SAFETY: c0 + WIDTH <= kp and f * kp + c0 + WIDTH <= D * kp
        // (asserted by the caller), so every load is in bounds.
        let n = unsafe { _mm512_loadu_ps(norms.as_ptr().add(c0)) };
        let mut acc = [n; R];
        for f in 0..D {
            let col = unsafe { _mm512_loadu_ps(transposed.as_ptr().add(f * kp + c0)) };
            for r in 0..R {
                acc[r] = _mm512_fmadd_ps(xs[r][f], col, acc[r]);
            }
        }
        for r in 0..R {
            let lt = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(acc[r], best[r]);
            second[r] = _mm512_min_ps(second[r], _mm512_max_ps(best[r], acc[r]));
            best[r] = _mm512_mask_mov_ps(best[r], lt, acc[r]);
            best_idx[r] = _mm512_mask_mov_epi32(best_idx[r], lt, idx);
        }
        idx = _mm512_add_epi32(idx, step);
        c0 += WIDTH;
    }
    for r in 0..R {
        let min = _mm512_reduce_min_ps(best[r]);
        let at_min = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(best[r], _mm512_set1_ps(min));
        let cand = _mm512_mask_mov_epi32(_mm512_set1_epi32(-1), at_min, best_idx[r]);
        let mut lanes = [0u32; WIDTH];
        // SAFETY: `lanes` holds exactly one vector of u32.
        unsafe { _mm512_storeu_si512(lanes.as_mut_ptr().cast(), cand) };
        let chosen = lanes.iter().copied().min().unwrap_or(0);
        // Runner-up: the winning lane's own, or any other lane's best
        // (another lane at the minimum gives a gap of 0).
        let win = at_min & _mm512_cmpeq_epi32_mask(best_idx[r], _mm512_set1_epi32(chosen as i32));
        let runner_up = _mm512_reduce_min_ps(_mm512_mask_mov_ps(best[r], win, second[r]));
        labels[r] = chosen;
        gaps[r] = runner_up - min;
    }
}
