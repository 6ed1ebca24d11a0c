//! AVX2 twins of the direct argmin kernel and of the GEMM tiles' lane
//! minima (see `argmin.rs`), picked at run time when the CPU has AVX2 and
//! FMA but not AVX-512 (which runs `argmin_avx512.rs`). The compiler does
//! not vectorise the portable kernels' lane-wise minima for AVX2: their
//! selects on three arrays ran as scalar compares, 15× slower than these
//! blends (2,000,000 × 3, k = 200: 2.20 against 0.137 s per Lloyd
//! iteration). The direct kernel gives each row's best centre under the
//! GEMM identity and the gap to the runner-up, which `assign.rs` checks
//! against its error bound; the tile minima are the portable ones' bits.

use std::arch::x86_64::*;

use super::argmin::{direct_by_groups, tile_mins_with, DirectKernel, Shift, TileKernels};
use crate::dtype::Real;

/// Centres per vector.
const WIDTH: usize = 8;

/// Rows per group: their running minima form independent chains (two rows'
/// minima, runners-up, indices and sums fill half of the 16 registers).
const GROUP: usize = 2;

/// Whether this CPU can run the kernels of this module (checked once).
fn available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
}

super::argmin::direct_twin!(GROUP);

/// `R` rows of the direct kernel (see [`super::argmin::direct_by_groups`]).
///
/// # Safety
/// The CPU must support AVX2 and FMA; `norms.len()` is a multiple of [`WIDTH`], `transposed`
/// holds `D` rows of it, `x` holds `R * D` values, `labels` and `gaps` `R`.
#[target_feature(enable = "avx2,fma")]
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
    let mut best = [_mm256_set1_ps(f32::INFINITY); R];
    let mut second = [_mm256_set1_ps(f32::INFINITY); R];
    // Index 0 until a smaller value is seen: a row whose values are all inf
    // or NaN (overflow) still gets a valid label. Indices are held as the
    // bits of f32 lanes, for the blends.
    let mut best_idx = [_mm256_setzero_ps(); R];
    let mut idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let step = _mm256_set1_epi32(WIDTH as i32);
    // The rows' shifted values times −2.
    let mut xs = [[_mm256_setzero_ps(); D]; R];
    for r in 0..R {
        for f in 0..D {
            xs[r][f] = _mm256_set1_ps(-2.0 * shift.apply(f, x[r * D + f].to_f64()));
        }
    }
    let mut c0 = 0;
    while c0 < kp {
        // SAFETY: c0 + WIDTH <= kp and f * kp + c0 + WIDTH <= D * kp
        // (asserted by the caller), so every load is in bounds.
        let n = unsafe { _mm256_loadu_ps(norms.as_ptr().add(c0)) };
        let mut acc = [n; R];
        for f in 0..D {
            let col = unsafe { _mm256_loadu_ps(transposed.as_ptr().add(f * kp + c0)) };
            for r in 0..R {
                acc[r] = _mm256_fmadd_ps(xs[r][f], col, acc[r]);
            }
        }
        let lanes = _mm256_castsi256_ps(idx);
        for r in 0..R {
            let lt = _mm256_cmp_ps::<_CMP_LT_OQ>(acc[r], best[r]);
            // min(max(best, v), second): a NaN `v` leaves `second` (each
            // returns its second operand where one is NaN).
            second[r] = _mm256_min_ps(_mm256_max_ps(best[r], acc[r]), second[r]);
            best[r] = _mm256_blendv_ps(best[r], acc[r], lt);
            best_idx[r] = _mm256_blendv_ps(best_idx[r], lanes, lt);
        }
        idx = _mm256_add_epi32(idx, step);
        c0 += WIDTH;
    }
    for r in 0..R {
        let (mut b, mut s, mut i) = ([0.0f32; WIDTH], [0.0f32; WIDTH], [0u32; WIDTH]);
        // SAFETY: each array holds exactly one vector.
        unsafe {
            _mm256_storeu_ps(b.as_mut_ptr(), best[r]);
            _mm256_storeu_ps(s.as_mut_ptr(), second[r]);
            _mm256_storeu_ps(i.as_mut_ptr().cast(), best_idx[r]);
        }
        // Another lane at the minimum gives a gap of 0.
        let (min, chosen, runner_up) = reduce(&b, &s, &i);
        labels[r] = chosen;
        gaps[r] = runner_up - min;
    }
}

/// Rows of a GEMM tile per group: their running minima form independent
/// chains (four rows' minima, runners-up and indices in 12 registers).
const TILE_GROUP: usize = 4;

/// AVX2 twin of the lane minima in `argmin.rs`'s `tile_argmin` (see
/// [`super::argmin::tile_mins_with`]; `full` a multiple of 8). Returns
/// whether it ran (an AVX2 CPU with FMA, and `T` is `f32` or `f64`).
pub fn tile_mins<T: Real>(tile: &[T], norms: &[T], full: usize, j0: usize, out: &mut [(T, u32, T)]) -> bool {
    assert!(full.is_multiple_of(WIDTH));
    const KERNELS: TileKernels = TileKernels {
        group: TILE_GROUP,
        f32: (tile_rows_f32::<TILE_GROUP>, tile_rows_f32::<1>),
        f64: (tile_rows_f64::<TILE_GROUP>, tile_rows_f64::<1>),
    };
    // SAFETY: the kernels need AVX2, which `available` checked.
    available() && unsafe { tile_mins_with(&KERNELS, tile, norms, full, j0, out) }
}

/// The minimum of lanes `b` (never NaN: a NaN never compares below), the
/// lowest index `i` of a lane holding it, and the runner-up: that lane's
/// `s`, or any other lane's `b`; as the portable `LaneMin::reduce`.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // lane loops index several arrays in step
fn reduce<E: Copy + PartialOrd, const W: usize>(b: &[E; W], s: &[E; W], i: &[u32; W]) -> (E, u32, E) {
    let mut min = b[0];
    for &v in &b[1..] {
        min = if v < min { v } else { min };
    }
    let (mut index, mut win) = (u32::MAX, 0);
    for l in 0..W {
        if b[l] == min && i[l] < index {
            (index, win) = (i[l], l);
        }
    }
    if index == u32::MAX {
        return (min, 0, min);
    }
    let mut second = s[win];
    for l in 0..W {
        if l != win && b[l] < second {
            second = b[l];
        }
    }
    (min, index, second)
}

/// Defines `$name::<R>`, the kernel of [`tile_mins`] for `R` rows of `$t`
/// tiles, `$w` centres per vector of type `$v`, indices held as the bits
/// of `$v` lanes of integers `$i`, from that width's intrinsics.
macro_rules! tile_rows {
    ($name:ident, $t:ty, $w:literal, $v:ty, $i:ty, $set1:ident, $load:ident, $store:ident, $add:ident, $cmp:ident,
     $min:ident, $max:ident, $blend:ident, $from_bits:ident, $iadd:ident, $iset1:ident) => {
        /// A kernel of [`tile_mins`] (see [`super::argmin::TileKernel`]).
        ///
        /// # Safety
        /// The CPU must support AVX2; `tile` holds `R` rows of `kt`
        /// values, `norms` at least `full` values, `out` `R`.
        #[target_feature(enable = "avx2,fma")]
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
            let mut best_idx: [$v; R] = [$from_bits($iset1(0)); R];
            let mut first = [0 as $i; $w];
            for (l, v) in first.iter_mut().enumerate() {
                *v = (j0 + l) as $i;
            }
            // SAFETY: `first` holds exactly one vector of indices.
            let mut idx = unsafe { _mm256_loadu_si256(first.as_ptr().cast()) };
            let step = $iset1($w);
            let mut c0 = 0;
            while c0 < full {
                // SAFETY: c0 + $w <= full <= kt, and row r's values lie at
                // r * kt.. within `tile` (the caller's contract).
                let n = unsafe { $load(norms.as_ptr().add(c0)) };
                let lanes = $from_bits(idx);
                for r in 0..R {
                    let v = $add(unsafe { $load(tile.as_ptr().add(r * kt + c0)) }, n);
                    let lt = $cmp::<_CMP_LT_OQ>(v, best[r]);
                    // min(max(best, v), second): a NaN `v` leaves `second`.
                    second[r] = $min($max(best[r], v), second[r]);
                    best[r] = $blend(best[r], v, lt);
                    best_idx[r] = $blend(best_idx[r], lanes, lt);
                }
                idx = $iadd(idx, step);
                c0 += $w;
            }
            for r in 0..R {
                let (mut b, mut s, mut i) = ([0.0 as $t; $w], [0.0 as $t; $w], [0 as $i; $w]);
                // SAFETY: each array holds exactly one vector.
                unsafe {
                    $store(b.as_mut_ptr(), best[r]);
                    $store(s.as_mut_ptr(), second[r]);
                    $store(i.as_mut_ptr().cast(), best_idx[r]);
                }
                out[r] = reduce(&b, &s, &i.map(|j| j as u32));
            }
        }
    };
}

tile_rows!(
    tile_rows_f32,
    f32,
    8,
    __m256,
    i32,
    _mm256_set1_ps,
    _mm256_loadu_ps,
    _mm256_storeu_ps,
    _mm256_add_ps,
    _mm256_cmp_ps,
    _mm256_min_ps,
    _mm256_max_ps,
    _mm256_blendv_ps,
    _mm256_castsi256_ps,
    _mm256_add_epi32,
    _mm256_set1_epi32
);
tile_rows!(
    tile_rows_f64,
    f64,
    4,
    __m256d,
    i64,
    _mm256_set1_pd,
    _mm256_loadu_pd,
    _mm256_storeu_pd,
    _mm256_add_pd,
    _mm256_cmp_pd,
    _mm256_min_pd,
    _mm256_max_pd,
    _mm256_blendv_pd,
    _mm256_castsi256_pd,
    _mm256_add_epi64,
    _mm256_set1_epi64x
);
