//! The fast candidates of the nearest-centre assignment: for each row, the
//! centre with the smallest ‖ĉ‖² − 2x̂·ĉ (the GEMM identity less its ‖x̂‖²
//! term, on values shifted to an origin) and the gap to the runner-up.
//! These are approximate; `assign.rs` certifies them with an error bound.
//!
//! Two kernels: a direct register kernel for narrow data (at most
//! `DIRECT_MAX_FEATURES` features), always in `f32` on transposed centres,
//! with an AVX-512 twin; and the argmin over GEMM product tiles for wider
//! data, in the compute type.

use multiversion::multiversion;

use crate::dtype::Real;

/// Centres handled per step of the direct kernel and of the vectorised
/// argmin (one SIMD register of `f32`).
pub const LANES: usize = 16;

/// Lane-wise running minimum and runner-up: `LANES` independent (value,
/// second value, index) triples updated with selects (no branches, so the
/// compiler vectorises it); the final reduction keeps the lowest index among
/// equal minima, so the result equals a scalar first-minimum scan.
#[derive(Clone, Copy)]
struct LaneMin<T> {
    value: [T; LANES],
    second: [T; LANES],
    index: [u32; LANES],
}

// Lane loops index several arrays in step, written so the compiler vectorises them.
#[allow(clippy::needless_range_loop)]
impl<T: Real> LaneMin<T> {
    #[inline(always)]
    fn new() -> Self {
        // Index 0 until a smaller value is seen: a row whose values are all
        // inf or NaN (overflow) still gets a valid label.
        let inf = T::from_f64(f64::INFINITY);
        LaneMin { value: [inf; LANES], second: [inf; LANES], index: [0; LANES] }
    }
    #[inline(always)]
    fn update(&mut self, v: &[T; LANES], base: u32) {
        for l in 0..LANES {
            let take = v[l] < self.value[l];
            let runner = if v[l] < self.second[l] { v[l] } else { self.second[l] };
            self.second[l] = if take { self.value[l] } else { runner };
            self.value[l] = if take { v[l] } else { self.value[l] };
            self.index[l] = if take { base + l as u32 } else { self.index[l] };
        }
    }
    /// The minimum, the lowest index holding it, and the second-smallest
    /// value (equal to the minimum when two centres share it).
    #[inline(always)]
    fn reduce(&self) -> (T, u32, T) {
        let mut min = self.value[0];
        for l in 1..LANES {
            min = if self.value[l] < min { self.value[l] } else { min };
        }
        let mut win = 0;
        let mut index = u32::MAX;
        for l in 0..LANES {
            if self.value[l] == min && self.index[l] < index {
                index = self.index[l];
                win = l;
            }
        }
        if index == u32::MAX {
            // Every value is NaN: no minimum, and no certified gap.
            return (min, 0, min);
        }
        let mut second = self.second[win];
        for l in 0..LANES {
            if l != win && self.value[l] < second {
                second = self.value[l];
            }
        }
        (min, index, second)
    }
}

/// How rows enter the direct kernel: x̂_f = fl₃₂(σ (x_f − m_f)), with the
/// origin `m` and σ = `scale`, a power of two (see `assign.rs`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Shift<'a> {
    pub(super) origin: &'a [f64],
    pub(super) scale: f64,
}

impl Shift<'_> {
    /// x̂_f for the value `v` of feature `f`.
    #[inline(always)]
    pub(super) fn apply(&self, f: usize, v: f64) -> f32 {
        ((v - self.origin[f]) * self.scale) as f32
    }
}

/// A hand-vectorised direct kernel for a fixed number of rows and of
/// features: `(x, shift, transposed, norms, labels, gaps)` as
/// [`direct_argmin`]'s, for as many rows as `labels` holds.
pub(super) type DirectKernel<T> = unsafe fn(&[T], Shift<'_>, &[f32], &[f32], &mut [u32], &mut [f32]);

/// [`direct_argmin`] by a hand-vectorised twin's kernels for `d` features:
/// `group` on each `g` rows, `one` on the rest.
///
/// # Safety
/// The CPU must run the kernels; `width` is their vector width.
///
/// # Panics
/// If `norms.len()` is not a multiple of `width` or the slices are shorter
/// than stated.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn direct_by_groups<T: Real>(
    (group, one, g, width): (DirectKernel<T>, DirectKernel<T>, usize, usize),
    x: &[T],
    d: usize,
    shift: Shift<'_>,
    transposed: &[f32],
    norms: &[f32],
    labels: &mut [u32],
    gaps: &mut [f32],
) {
    let kp = norms.len();
    assert!(
        kp.is_multiple_of(width)
            && transposed.len() >= d * kp
            && x.len() >= labels.len() * d
            && shift.origin.len() >= d
            && gaps.len() >= labels.len()
    );
    let grouped = labels.len() / g * g;
    for r0 in (0..grouped).step_by(g) {
        let rows = r0..r0 + g;
        // SAFETY: the caller's contract; bounds asserted above.
        unsafe { group(&x[r0 * d..], shift, transposed, norms, &mut labels[rows.clone()], &mut gaps[rows]) };
    }
    for r in grouped..labels.len() {
        // SAFETY: as above.
        unsafe { one(&x[r * d..], shift, transposed, norms, &mut labels[r..=r], &mut gaps[r..=r]) };
    }
}

/// Defines `run`, a hand-vectorised twin's entry to [`direct_argmin`]:
/// when `available()` and `1 <= d <= 16`, runs `rows::<T, D, $group>` on
/// groups of rows and `rows::<T, D, 1>` on the rest, and returns whether
/// it ran. The module defines `available`, `rows` and `WIDTH`.
macro_rules! direct_twin {
    ($group:expr) => {
        $crate::kernels::argmin::direct_twin!(@arms $group; 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
    };
    (@arms $group:expr; $($d:literal)*) => {
        /// Runs this module's kernel for `d` features when the CPU has its
        /// instructions and `1 <= d <= 16`; returns whether it ran.
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
            let (group, one): (DirectKernel<T>, DirectKernel<T>) = match d {
                $($d => (rows::<T, $d, { $group }>, rows::<T, $d, 1>),)*
                _ => return false,
            };
            // SAFETY: `available()` checked the kernels' instructions.
            unsafe { direct_by_groups((group, one, $group, WIDTH), x, d, shift, transposed, norms, labels, gaps) };
            true
        }
    };
}
pub(super) use direct_twin;

/// Direct kernel for narrow data: for each row of `x` (row-major `(rows,
/// d)`), shifted and scaled by `shift` and rounded to `f32` (x̂), `‖ĉ‖² − 2x̂·ĉ` for [`LANES`]
/// centres at a time from the transposed centres (`d` rows of `norms.len()`
/// values, norms padded with `+inf`), with a lane-wise running minimum and
/// runner-up; writes labels (lowest index on ties) and gaps (runner-up −
/// best). Runs the AVX-512 twin when the CPU has it, else the AVX2 twin
/// (AVX2 and FMA), else a portable baseline.
///
/// # Panics
/// If `d` is 0 or above 16, or the slices are shorter than stated.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
pub(super) fn direct_argmin<T: Real>(
    x: &[T],
    d: usize,
    shift: Shift<'_>,
    transposed: &[f32],
    norms: &[f32],
    labels: &mut [u32],
    gaps: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if super::argmin_avx512::run(x, d, shift, transposed, norms, labels, gaps)
        || super::argmin_avx2::run(x, d, shift, transposed, norms, labels, gaps)
    {
        return;
    }
    // A const number of features lets the compiler keep every accumulator
    // in registers and unroll the feature loop.
    macro_rules! fixed {
        ($($n:literal)*) => {
            match d {
                $($n => direct_fixed::<T, $n>(x, shift, transposed, norms, labels, gaps),)*
                _ => unreachable!("direct kernel used for d = {d}"),
            }
        };
    }
    fixed!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);
}

/// The portable direct kernel for `D` features (the AVX-512 kernel's twin).
#[inline(always)]
pub(super) fn direct_fixed<T: Real, const D: usize>(
    x: &[T],
    shift: Shift<'_>,
    transposed: &[f32],
    norms: &[f32],
    labels: &mut [u32],
    gaps: &mut [f32],
) {
    let rows = labels.len();
    let pairs = rows / 2 * 2;
    for r0 in (0..pairs).step_by(2) {
        let ((la, ga), (lb, gb)) = direct_two::<T, D>(&x[r0 * D..(r0 + 2) * D], shift, transposed, norms);
        (labels[r0], gaps[r0], labels[r0 + 1], gaps[r0 + 1]) = (la, ga, lb, gb);
    }
    if pairs < rows {
        let mut pad = [T::default(); 32];
        pad[..D].copy_from_slice(&x[pairs * D..(pairs + 1) * D]);
        pad[D..2 * D].copy_from_slice(&x[pairs * D..(pairs + 1) * D]);
        (labels[pairs], gaps[pairs]) = direct_two::<T, D>(&pad[..2 * D], shift, transposed, norms).0;
    }
}

/// The direct kernel's step for two rows of `D` features, sharing each load
/// of centres (register blocking): (label, gap) per row.
#[inline(always)]
#[allow(clippy::needless_range_loop)] // lane loops index several arrays in step
fn direct_two<T: Real, const D: usize>(
    x: &[T],
    shift: Shift<'_>,
    transposed: &[f32],
    norms: &[f32],
) -> ((u32, f32), (u32, f32)) {
    let kp = norms.len();
    let mut xa = [0.0f32; D];
    let mut xb = [0.0f32; D];
    for f in 0..D {
        xa[f] = -2.0 * shift.apply(f, x[f].to_f64());
        xb[f] = -2.0 * shift.apply(f, x[D + f].to_f64());
    }
    let mut ma = LaneMin::<f32>::new();
    let mut mb = LaneMin::<f32>::new();
    for c0 in (0..kp).step_by(LANES) {
        let n: [f32; LANES] = norms[c0..c0 + LANES].try_into().expect("LANES elements");
        let (mut acca, mut accb) = (n, n);
        for f in 0..D {
            let col: &[f32; LANES] = transposed[f * kp + c0..f * kp + c0 + LANES].try_into().expect("LANES elements");
            for l in 0..LANES {
                acca[l] += xa[f] * col[l];
                accb[l] += xb[f] * col[l];
            }
        }
        ma.update(&acca, c0 as u32);
        mb.update(&accb, c0 as u32);
    }
    let ((va, ia, sa), (vb, ib, sb)) = (ma.reduce(), mb.reduce());
    ((ia, sa - va), (ib, sb - vb))
}

/// Argmin over one GEMM tile (`kt` products per row, contiguous per row)
/// plus norms, merged with the running best and runner-up of earlier
/// centre tiles (`best`, `second`); `j0` is the tile's first centre.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
pub(super) fn tile_argmin<T: Real>(
    tile: &[T],
    norms: &[T],
    j0: usize,
    best: &mut [T],
    second: &mut [T],
    labels: &mut [u32],
) {
    const ROWS: usize = crate::plan::TILE_ROWS;
    let kt = norms.len();
    for (q, ((b, s), l)) in best.chunks_mut(ROWS).zip(second.chunks_mut(ROWS)).zip(labels.chunks_mut(ROWS)).enumerate()
    {
        tile_argmin_rows(&tile[q * ROWS * kt..], norms, j0, b, s, l);
    }
}

/// Per row of a GEMM tile (`norms.len()` products per row), over its first
/// `full` products plus `norms`: the minimum, the lowest index `j0 + j`
/// holding it, and the runner-up (portable twin of
/// `argmin_avx512::tile_mins` and `argmin_avx2::tile_mins`).
#[inline(always)]
fn lane_mins<T: Real>(tile: &[T], norms: &[T], full: usize, j0: usize, mins: &mut [(T, u32, T)]) {
    let kt = norms.len();
    for (i, m) in mins.iter_mut().enumerate() {
        let prods = &tile[i * kt..(i + 1) * kt];
        let mut lanes = LaneMin::<T>::new();
        for c0 in (0..full).step_by(LANES) {
            let mut v: [T; LANES] = prods[c0..c0 + LANES].try_into().expect("LANES elements");
            for (a, &b) in v.iter_mut().zip(&norms[c0..c0 + LANES]) {
                *a += b;
            }
            lanes.update(&v, (j0 + c0) as u32);
        }
        *m = lanes.reduce();
    }
}

/// A kernel of [`tile_mins_with`] for a fixed number of rows of element
/// type `E`: `(tile, kt, norms, full, j0, out)`.
pub(super) type TileKernel<E> = unsafe fn(&[E], usize, &[E], usize, usize, &mut [(E, u32, E)]);

/// One instruction set's kernels of [`tile_mins_with`]: for `f32` and
/// `f64` tiles, (a kernel of `group` rows, a kernel of one row).
pub(super) struct TileKernels {
    pub(super) group: usize,
    pub(super) f32: (TileKernel<f32>, TileKernel<f32>),
    pub(super) f64: (TileKernel<f64>, TileKernel<f64>),
}

/// The lane minima of [`lane_mins`] by hand-vectorised `kernels`: for each
/// row `i` of `out.len()` rows of `tile` (`kt = norms.len()` products per
/// row, contiguous), over its first `full` products plus `norms`, the
/// minimum, the lowest index `j0 + j` holding it, and the runner-up (equal
/// to the minimum when two centres share it): values that do not depend on
/// how the centres are split into lanes. Returns whether it ran (`T` is
/// `f32` or `f64`).
///
/// # Safety
/// The CPU must run `kernels`; `full` must be a multiple of their vector
/// width.
pub(super) unsafe fn tile_mins_with<T: Real>(
    kernels: &TileKernels,
    tile: &[T],
    norms: &[T],
    full: usize,
    j0: usize,
    out: &mut [(T, u32, T)],
) -> bool {
    let kt = norms.len();
    assert!(full <= kt && tile.len() >= out.len() * kt);
    /// `s` as a slice of `B`.
    ///
    /// # Safety
    /// `A` must be `B`.
    unsafe fn same<A, B>(s: &[A]) -> &[B] {
        // SAFETY: `A` is `B` (the contract): the same slice.
        unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<B>(), s.len()) }
    }
    /// `s` as a mutable slice of `B`.
    ///
    /// # Safety
    /// `A` must be `B`.
    unsafe fn same_mut<A, B>(s: &mut [A]) -> &mut [B] {
        // SAFETY: as in `same`.
        unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<B>(), s.len()) }
    }
    /// Runs `group` on each `g` rows of `out`, `one` on the rest.
    ///
    /// # Safety
    /// As [`tile_mins_with`].
    unsafe fn by_groups<E>(
        (group, one, g): (TileKernel<E>, TileKernel<E>, usize),
        tile: &[E],
        norms: &[E],
        full: usize,
        j0: usize,
        out: &mut [(E, u32, E)],
    ) {
        let kt = norms.len();
        let grouped = out.len() / g * g;
        for r0 in (0..grouped).step_by(g) {
            // SAFETY: the caller's contract; bounds checked above.
            unsafe { group(&tile[r0 * kt..], kt, norms, full, j0, &mut out[r0..r0 + g]) };
        }
        for r in grouped..out.len() {
            // SAFETY: as above.
            unsafe { one(&tile[r * kt..], kt, norms, full, j0, &mut out[r..=r]) };
        }
    }
    let t = std::any::TypeId::of::<T>();
    if t == std::any::TypeId::of::<f32>() {
        // SAFETY: `T` is `f32`; the CPU runs the kernels (the contract).
        unsafe {
            let (tile, norms, out) = (same::<T, f32>(tile), same::<T, f32>(norms), same_mut::<_, (f32, u32, f32)>(out));
            by_groups((kernels.f32.0, kernels.f32.1, kernels.group), tile, norms, full, j0, out);
        }
    } else if t == std::any::TypeId::of::<f64>() {
        // SAFETY: `T` is `f64`; as above.
        unsafe {
            let (tile, norms, out) = (same::<T, f64>(tile), same::<T, f64>(norms), same_mut::<_, (f64, u32, f64)>(out));
            by_groups((kernels.f64.0, kernels.f64.1, kernels.group), tile, norms, full, j0, out);
        }
    } else {
        return false;
    }
    true
}

/// [`tile_argmin`] for at most [`crate::plan::TILE_ROWS`] rows.
#[inline(always)]
fn tile_argmin_rows<T: Real>(tile: &[T], norms: &[T], j0: usize, best: &mut [T], second: &mut [T], labels: &mut [u32]) {
    let kt = norms.len();
    let full = kt / LANES * LANES;
    let rows = labels.len();
    let mut mins = [(T::default(), 0u32, T::default()); crate::plan::TILE_ROWS];
    let mins = &mut mins[..rows];
    #[cfg(target_arch = "x86_64")]
    let done = super::argmin_avx512::tile_mins(tile, norms, full, j0, mins)
        || super::argmin_avx2::tile_mins(tile, norms, full, j0, mins);
    #[cfg(not(target_arch = "x86_64"))]
    let done = false;
    if !done {
        lane_mins(tile, norms, full, j0, mins);
    }
    for (i, ((b, s), label)) in best.iter_mut().zip(second.iter_mut()).zip(labels.iter_mut()).enumerate() {
        let prods = &tile[i * kt..(i + 1) * kt];
        let (mut bv, mut bj, mut sv) = mins[i];
        bj = if full == 0 { j0 as u32 } else { bj };
        for j in full..kt {
            let v = prods[j] + norms[j];
            if v < bv {
                sv = bv;
                bv = v;
                bj = (j0 + j) as u32;
            } else if v < sv {
                sv = v;
            }
        }
        // Earlier tiles hold lower indices, so they win ties.
        if j0 == 0 {
            (*b, *s, *label) = (bv, sv, bj);
        } else if bv < *b {
            *s = if sv < *b { sv } else { *b };
            (*b, *label) = (bv, bj);
        } else if bv < *s {
            *s = bv;
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use rand::{Rng, SeedableRng};

    use super::*;

    /// The hand-vectorised lane minima (AVX2, AVX-512; each where this CPU
    /// has it) give the portable ones' bits: random tiles, many ties (small
    /// integers), infinities and NaNs, any tile width.
    #[test]
    fn vectorised_tile_mins_match_the_portable_twin() {
        type Twin<E> = fn(&[E], &[E], usize, usize, &mut [(E, u32, E)]) -> bool;
        let twins: [(&str, Twin<f32>, Twin<f64>); 2] = [
            ("avx2", crate::kernels::argmin_avx2::tile_mins::<f32>, crate::kernels::argmin_avx2::tile_mins::<f64>),
            (
                "avx512",
                crate::kernels::argmin_avx512::tile_mins::<f32>,
                crate::kernels::argmin_avx512::tile_mins::<f64>,
            ),
        ];
        for (name, twin32, twin64) in twins {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
            for case in 0..400 {
                let kt = rng.random_range(1..300);
                let rows = rng.random_range(1..20);
                let full = kt / LANES * LANES;
                let j0 = rng.random_range(0..2000);
                let value = |rng: &mut rand_chacha::ChaCha8Rng| match (case % 4, rng.random_range(0..50)) {
                    (_, 0) => f32::INFINITY,
                    (3, 1) => f32::NAN,
                    (1, _) => rng.random_range(0..4) as f32,
                    _ => rng.random::<f32>() - 0.5,
                };
                let tile: Vec<f32> = (0..rows * kt).map(|_| value(&mut rng)).collect();
                let norms: Vec<f32> = (0..kt).map(|_| value(&mut rng)).collect();
                let mut fast = vec![(0.0f32, 0u32, 0.0f32); rows];
                let mut slow = fast.clone();
                if !twin32(&tile, &norms, full, j0, &mut fast) {
                    break; // not this CPU's
                }
                lane_mins(&tile, &norms, full, j0, &mut slow);
                for (f, s) in fast.iter().zip(&slow) {
                    let (f, s) = ((f.0.to_bits(), f.1, f.2.to_bits()), (s.0.to_bits(), s.1, s.2.to_bits()));
                    assert_eq!(f, s, "{name} case {case}");
                }
                // The same values in f64 (half the lanes per vector there).
                let tile: Vec<f64> = tile.iter().map(|&v| f64::from(v)).collect();
                let norms: Vec<f64> = norms.iter().map(|&v| f64::from(v)).collect();
                let mut fast = vec![(0.0f64, 0u32, 0.0f64); rows];
                let mut slow = fast.clone();
                assert!(twin64(&tile, &norms, full, j0, &mut fast));
                lane_mins(&tile, &norms, full, j0, &mut slow);
                for (f, s) in fast.iter().zip(&slow) {
                    let (f, s) = ((f.0.to_bits(), f.1, f.2.to_bits()), (s.0.to_bits(), s.1, s.2.to_bits()));
                    assert_eq!(f, s, "{name} f64 case {case}");
                }
            }
        }
    }
}
