//! AVX-512 twin of the direct argmin kernel (see `argmin.rs`), picked at run
//! time when the CPU has AVX-512F and AVX-512VL. The portable,
//! compiler-vectorised kernel in `argmin.rs` is its reference twin: both
//! give each row's best centre under the GEMM identity and the gap to the
//! runner-up, which `assign.rs` checks against its error bound.

use std::arch::x86_64::*;

use super::argmin::{direct_by_groups, tile_mins_with, DirectKernel, Shift, TileKernels};
use crate::dtype::Real;

/// Centres per vector.
const WIDTH: usize = 16;

/// Whether this CPU can run the kernels of this module (checked once).
fn available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512vl"))
}

// Four rows per group: their running minima form independent chains.
super::argmin::direct_twin!(4);

/// `R` rows of the direct kernel (see [`super::argmin::direct_by_groups`]).
///
/// # Safety
/// The CPU must support AVX-512F and AVX-512VL; `norms.len()` is a multiple of [`WIDTH`], `transposed`
/// holds `D` rows of it, `x` holds `R * D` values, `labels` and `gaps` `R`.
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

/// AVX-512 twin of the lane minima in `argmin.rs`'s `tile_argmin` (see
/// [`super::argmin::tile_mins_with`]; `full` a multiple of 16). Returns
/// whether it ran (an AVX-512 CPU and `T` is `f32` or `f64`).
pub fn tile_mins<T: Real>(tile: &[T], norms: &[T], full: usize, j0: usize, out: &mut [(T, u32, T)]) -> bool {
    assert!(full.is_multiple_of(WIDTH));
    const KERNELS: TileKernels = TileKernels {
        group: TILE_GROUP,
        f32: (tile_rows_f32::<TILE_GROUP>, tile_rows_f32::<1>),
        f64: (tile_rows_f64::<TILE_GROUP>, tile_rows_f64::<1>),
    };
    // SAFETY: the kernels need AVX-512F and AVX-512VL, which `available` checked.
    available() && unsafe { tile_mins_with(&KERNELS, tile, norms, full, j0, out) }
}

/// Defines `$name::<R>`, the kernel of [`tile_mins`] for `R` rows of `$t`
/// tiles, `$w` centres per vector of type `$v` (indices in `$iv`), from
/// that width's intrinsics.
macro_rules! tile_rows {
    ($name:ident, $t:ty, $w:literal, $v:ty, $iv:ty, $set1:ident, $load:ident, $add:ident, $cmp:ident, $min:ident,
     $max:ident, $mov:ident, $reduce_min:ident, $iset1:ident, $iload:ident, $iadd:ident, $imov:ident, $icmpeq:ident,
     $istore:ident) => {
        /// A kernel of [`tile_mins`] (see [`super::argmin::TileKernel`]).
        ///
        /// # Safety
        /// The CPU must support AVX-512F and AVX-512VL; `tile` holds `R`
        /// rows of `kt` values, `norms` at least `full` values, `out` `R`.
        #[target_feature(enable = "avx512f,avx512vl")]
        #[allow(clippy::needless_range_loop)] // row loops index several arrays in step
        unsafe fn $name<const R: usize>(
            tile: &[$t],
            kt: usize,
            norms: &[$t],
            full: usize,
            j0: usize,
            out: &mut [($t, u32, $t)],
        ) {
            let mut best: [$v; R] = [$set1(<$t>::INFINITY); R];
            let mut second: [$v; R] = [$set1(<$t>::INFINITY); R];
            let mut best_idx: [$iv; R] = [$iset1(0); R];
            let mut first = [0i32; $w];
            for (l, v) in first.iter_mut().enumerate() {
                *v = (j0 + l) as i32;
            }
            // SAFETY: `first` holds exactly one index vector.
            let mut idx = unsafe { $iload(first.as_ptr().cast()) };
            let step = $iset1($w);
            let mut c0 = 0;
            while c0 < full {
                // SAFETY: c0 + $w <= full <= kt, and row r's values lie at
                // r * kt.. within `tile` (the caller's contract).
                let n = unsafe { $load(norms.as_ptr().add(c0)) };
                for r in 0..R {
                    let v = $add(unsafe { $load(tile.as_ptr().add(r * kt + c0)) }, n);
                    let lt = $cmp::<_CMP_LT_OQ>(v, best[r]);
                    // min(max(best, v), second): a NaN `v` leaves `second`.
                    second[r] = $min($max(best[r], v), second[r]);
                    best[r] = $mov(best[r], lt, v);
                    best_idx[r] = $imov(best_idx[r], lt, idx);
                }
                idx = $iadd(idx, step);
                c0 += $w;
            }
            for r in 0..R {
                let min = $reduce_min(best[r]);
                let at_min = $cmp::<_CMP_EQ_OQ>(best[r], $set1(min));
                let mut lanes = [0u32; $w];
                // SAFETY: `lanes` holds exactly one index vector.
                unsafe { $istore(lanes.as_mut_ptr().cast(), best_idx[r]) };
                let mut index = u32::MAX;
                for (l, &j) in lanes.iter().enumerate() {
                    if (at_min >> l) & 1 != 0 && j < index {
                        index = j;
                    }
                }
                if index == u32::MAX {
                    // Every value is NaN: no minimum, and no certified gap.
                    out[r] = (min, 0, min);
                    continue;
                }
                // Runner-up: the winning lane's own, or any other lane's best.
                let win = at_min & $icmpeq(best_idx[r], $iset1(index as i32));
                out[r] = (min, index, $reduce_min($mov(best[r], win, second[r])));
            }
        }
    };
}

tile_rows!(
    tile_rows_f32,
    f32,
    16,
    __m512,
    __m512i,
    _mm512_set1_ps,
    _mm512_loadu_ps,
    _mm512_add_ps,
    _mm512_cmp_ps_mask,
    _mm512_min_ps,
    _mm512_max_ps,
    _mm512_mask_mov_ps,
    _mm512_reduce_min_ps,
    _mm512_set1_epi32,
    _mm512_loadu_si512,
    _mm512_add_epi32,
    _mm512_mask_mov_epi32,
    _mm512_cmpeq_epi32_mask,
    _mm512_storeu_si512
);
tile_rows!(
    tile_rows_f64,
    f64,
    8,
    __m512d,
    __m256i,
    _mm512_set1_pd,
    _mm512_loadu_pd,
    _mm512_add_pd,
    _mm512_cmp_pd_mask,
    _mm512_min_pd,
    _mm512_max_pd,
    _mm512_mask_mov_pd,
    _mm512_reduce_min_pd,
    _mm256_set1_epi32,
    _mm256_loadu_si256,
    _mm256_add_epi32,
    _mm256_mask_mov_epi32,
    _mm256_cmpeq_epi32_mask,
    _mm256_storeu_si256
);
