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

/// Rows of a GEMM tile per group: their running minima form independent
/// chains.
const TILE_GROUP: usize = 4;

/// AVX-512 twin of the lane minima in `argmin.rs`'s `tile_argmin`: for
/// each row `i` of `out.len()` rows of `tile` (`kt = norms.len()` products
/// per row, contiguous), over its first `full` products plus `norms` (`full`
/// a multiple of 16), writes the minimum, the lowest index `j0 + j` holding
/// it, and the runner-up (equal to the minimum when two centres share it):
/// values that do not depend on how the centres are split into lanes.
/// Returns whether it ran (an AVX-512 CPU and `T` is `f32` or `f64`).
pub fn tile_mins<T: Real>(tile: &[T], norms: &[T], full: usize, j0: usize, out: &mut [(T, u32, T)]) -> bool {
    let kt = norms.len();
    assert!(full.is_multiple_of(WIDTH) && full <= kt && tile.len() >= out.len() * kt);
    if !available() {
        return false;
    }
    if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f64>() {
        // SAFETY: `T` is `f64` (checked above), so these are the same slices.
        let (tile, norms, out) = unsafe {
            (
                std::slice::from_raw_parts(tile.as_ptr().cast::<f64>(), tile.len()),
                std::slice::from_raw_parts(norms.as_ptr().cast::<f64>(), norms.len()),
                std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<(f64, u32, f64)>(), out.len()),
            )
        };
        let grouped = out.len() / TILE_GROUP * TILE_GROUP;
        for r0 in (0..grouped).step_by(TILE_GROUP) {
            // SAFETY: `available()` checked AVX-512F and AVX-512VL; bounds
            // asserted above.
            unsafe {
                tile_rows_f64::<TILE_GROUP>(&tile[r0 * kt..], kt, norms, full, j0, &mut out[r0..r0 + TILE_GROUP])
            };
        }
        for r in grouped..out.len() {
            // SAFETY: as above.
            unsafe { tile_rows_f64::<1>(&tile[r * kt..], kt, norms, full, j0, &mut out[r..=r]) };
        }
        return true;
    }
    if std::any::TypeId::of::<T>() != std::any::TypeId::of::<f32>() {
        return false;
    }
    // SAFETY: `T` is `f32` (checked above), so these are the same slices.
    let (tile, norms, out) = unsafe {
        (
            std::slice::from_raw_parts(tile.as_ptr().cast::<f32>(), tile.len()),
            std::slice::from_raw_parts(norms.as_ptr().cast::<f32>(), norms.len()),
            std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<(f32, u32, f32)>(), out.len()),
        )
    };
    let rows = out.len();
    let grouped = rows / TILE_GROUP * TILE_GROUP;
    for r0 in (0..grouped).step_by(TILE_GROUP) {
        // SAFETY: `available()` checked AVX-512F and AVX-512VL; bounds
        // asserted above.
        unsafe { tile_rows::<TILE_GROUP>(&tile[r0 * kt..], kt, norms, full, j0, &mut out[r0..r0 + TILE_GROUP]) };
    }
    for r in grouped..rows {
        // SAFETY: as above.
        unsafe { tile_rows::<1>(&tile[r * kt..], kt, norms, full, j0, &mut out[r..=r]) };
    }
    true
}

/// `R` rows of [`tile_mins`].
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512VL; `tile` holds `R` rows of
/// `kt` values, `norms` at least `full` values.
#[target_feature(enable = "avx512f,avx512vl")]
#[inline]
#[allow(clippy::needless_range_loop)] // row loops index several arrays in step
unsafe fn tile_rows<const R: usize>(
    tile: &[f32],
    kt: usize,
    norms: &[f32],
    full: usize,
    j0: usize,
    out: &mut [(f32, u32, f32)],
) {
    let mut best = [_mm512_set1_ps(f32::INFINITY); R];
    let mut second = [_mm512_set1_ps(f32::INFINITY); R];
    let mut best_idx = [_mm512_set1_epi32(0); R];
    let base = j0 as i32;
    let mut idx = _mm512_setr_epi32(
        base,
        base + 1,
        base + 2,
        base + 3,
        base + 4,
        base + 5,
        base + 6,
        base + 7,
        base + 8,
        base + 9,
        base + 10,
        base + 11,
        base + 12,
        base + 13,
        base + 14,
        base + 15,
    );
    let step = _mm512_set1_epi32(WIDTH as i32);
    let mut c0 = 0;
    while c0 < full {
        // SAFETY: c0 + WIDTH <= full <= kt, and row r's values lie at
        // r * kt.. within `tile` (the caller's contract).
        let n = unsafe { _mm512_loadu_ps(norms.as_ptr().add(c0)) };
        for r in 0..R {
            let v = _mm512_add_ps(unsafe { _mm512_loadu_ps(tile.as_ptr().add(r * kt + c0)) }, n);
            let lt = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(v, best[r]);
            // min(max(best, v), second): a NaN `v` leaves `second` as it is.
            second[r] = _mm512_min_ps(_mm512_max_ps(best[r], v), second[r]);
            best[r] = _mm512_mask_mov_ps(best[r], lt, v);
            best_idx[r] = _mm512_mask_mov_epi32(best_idx[r], lt, idx);
        }
        idx = _mm512_add_epi32(idx, step);
        c0 += WIDTH;
    }
    for r in 0..R {
        let min = _mm512_reduce_min_ps(best[r]);
        let at_min = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(best[r], _mm512_set1_ps(min));
        let mut lanes = [0u32; WIDTH];
        let mut index = u32::MAX;
        // SAFETY: `lanes` holds exactly one vector of u32.
        unsafe { _mm512_storeu_si512(lanes.as_mut_ptr().cast(), best_idx[r]) };
        for (l, &j) in lanes.iter().enumerate() {
            if at_min & (1 << l) != 0 && j < index {
                index = j;
            }
        }
        if index == u32::MAX {
            // Every value is NaN: no minimum, and no certified gap.
            out[r] = (min, 0, min);
            continue;
        }
        // Runner-up: the winning lane's own, or any other lane's best.
        let win = at_min & _mm512_cmpeq_epi32_mask(best_idx[r], _mm512_set1_epi32(index as i32));
        let runner_up = _mm512_reduce_min_ps(_mm512_mask_mov_ps(best[r], win, second[r]));
        out[r] = (min, index, runner_up);
    }
}

/// [`tile_rows`] for `f64` tiles (eight centres per vector).
///
/// # Safety
/// As [`tile_rows`].
#[target_feature(enable = "avx512f,avx512vl")]
#[inline]
#[allow(clippy::needless_range_loop)] // row loops index several arrays in step
unsafe fn tile_rows_f64<const R: usize>(
    tile: &[f64],
    kt: usize,
    norms: &[f64],
    full: usize,
    j0: usize,
    out: &mut [(f64, u32, f64)],
) {
    const W: usize = 8;
    let mut best = [_mm512_set1_pd(f64::INFINITY); R];
    let mut second = [_mm512_set1_pd(f64::INFINITY); R];
    let mut best_idx = [_mm256_set1_epi32(0); R];
    let base = j0 as i32;
    let mut idx = _mm256_setr_epi32(base, base + 1, base + 2, base + 3, base + 4, base + 5, base + 6, base + 7);
    let step = _mm256_set1_epi32(W as i32);
    let mut c0 = 0;
    while c0 < full {
        // SAFETY: c0 + W <= full <= kt, and row r's values lie at r * kt..
        // within `tile` (the caller's contract).
        let n = unsafe { _mm512_loadu_pd(norms.as_ptr().add(c0)) };
        for r in 0..R {
            let v = _mm512_add_pd(unsafe { _mm512_loadu_pd(tile.as_ptr().add(r * kt + c0)) }, n);
            let lt = _mm512_cmp_pd_mask::<_CMP_LT_OQ>(v, best[r]);
            second[r] = _mm512_min_pd(_mm512_max_pd(best[r], v), second[r]);
            best[r] = _mm512_mask_mov_pd(best[r], lt, v);
            best_idx[r] = _mm256_mask_mov_epi32(best_idx[r], lt, idx);
        }
        idx = _mm256_add_epi32(idx, step);
        c0 += W;
    }
    for r in 0..R {
        let min = _mm512_reduce_min_pd(best[r]);
        let at_min = _mm512_cmp_pd_mask::<_CMP_EQ_OQ>(best[r], _mm512_set1_pd(min));
        let mut lanes = [0u32; W];
        let mut index = u32::MAX;
        // SAFETY: `lanes` holds exactly one 256-bit vector of u32.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), best_idx[r]) };
        for (l, &j) in lanes.iter().enumerate() {
            if at_min & (1 << l) != 0 && j < index {
                index = j;
            }
        }
        if index == u32::MAX {
            out[r] = (min, 0, min);
            continue;
        }
        let win = at_min & _mm256_cmpeq_epi32_mask(best_idx[r], _mm256_set1_epi32(index as i32));
        let runner_up = _mm512_reduce_min_pd(_mm512_mask_mov_pd(best[r], win, second[r]));
        out[r] = (min, index, runner_up);
    }
}
