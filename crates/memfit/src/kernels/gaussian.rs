//! Gaussian log-densities of a tile of rows under every mixture component
//! (by GEMM tiles with the precision Cholesky factors), and the log-sum-exp
//! that turns them into responsibilities.
//!
//! Reference: scikit-learn's `_estimate_log_gaussian_prob` (the same
//! quantities, computed there with `n × d` temporaries per component).

use faer::linalg::matmul::matmul;
use faer::linalg::matmul::triangular::{matmul as tri_matmul, BlockStructure};
use faer::prelude::ReborrowMut;
use faer::{Accum, MatMut, MatRef, Par};

use rayon::prelude::*;

use crate::dtype::Real;
use crate::plan::TILE_ROWS;

/// The E-step's precision factors.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(bound = "T: crate::dtype::Real")]
pub(crate) enum Prec<T> {
    /// `K` upper-triangular `d × d` factors side by side: row-major
    /// `(d, K·d)`, factor `k` in columns `k·d .. (k+1)·d`, zeros below the
    /// diagonal; and `μ_k U_k` per component, `(K, d)`.
    Full(Vec<T>, Vec<f64>),
    /// One upper-triangular factor and `μ_k U` per component, `(K, d)`.
    Tied(Vec<T>, Vec<f64>),
    /// `(K, d)` precision standard deviations `1 / σ_kj`.
    Diag(Vec<f64>),
    /// `(K,)` values `1 / σ_k`.
    Spherical(Vec<f64>),
}

/// Parameters as the E-step uses them.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(bound = "T: crate::dtype::Real")]
pub(crate) struct Estep<T> {
    pub(crate) k: usize,
    pub(crate) d: usize,
    /// `ln π_k`.
    pub(crate) log_weights: Vec<f64>,
    /// Means in shifted coordinates, `f64` and compute type.
    pub(crate) means: Vec<f64>,
    pub(crate) means_t: Vec<T>,
    /// `Σ_j ln U_jj` per component.
    pub(crate) log_det: Vec<f64>,
    pub(crate) prec: Prec<T>,
}

impl<T> Estep<T> {
    /// Whether [`log_prob_tile`] takes any number of whole tiles at once
    /// (wide full covariances: each factor is then used for all of them
    /// while it is in cache; every row's value is the same as tile by tile).
    pub(crate) fn takes_many_tiles(&self) -> bool {
        matches!(self.prec, Prec::Full(..)) && self.d > STACKED_MAX_FEATURES
    }
}

/// `eˣ`, or 0 where it would be subnormal (`x < −708`): such terms change
/// neither a log-sum-exp (they are below one ulp of its largest term, 1) nor
/// any M-step sum (they are far below the mixtures' negligible responsibility, 1e-32), and
/// libm's underflow path costs ten times a normal `exp`.
#[inline(always)]
pub(crate) fn exp_or_zero(x: f64) -> f64 {
    if x < -708.0 {
        0.0
    } else {
        x.exp()
    }
}

/// Clears the upper halves of the vector registers (`vzeroupper`) before
/// libm's `exp`, whose legacy-SSE entry otherwise pays a state-transition
/// penalty on every call after the AVX-512 GEMM kernels ran on this thread.
#[inline(always)]
pub(crate) fn clear_upper_vector_state() {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        // SAFETY: the CPU supports AVX, which is all `vzeroupper` needs.
        unsafe { std::arch::x86_64::_mm256_zeroupper() };
    }
}

/// The first largest of the values `v` and its index, as numpy's `argmax`
/// (NaN never wins); `(-inf, 0)` when every value is `-inf`.
#[inline]
pub(crate) fn first_max(v: &[f64]) -> (f64, usize) {
    let (mut max, mut at) = (f64::NEG_INFINITY, 0);
    for (c, &x) in v.iter().enumerate() {
        if x > max {
            (max, at) = (x, c);
        }
    }
    (max, at)
}

/// `sum` plus a row's `w log p(x_i)`; a row of weight 0 adds nothing, even
/// at `log p = -inf`.
#[inline]
pub(crate) fn add_weighted_log_norm(sum: f64, log_norm: f64, w: f64) -> f64 {
    if log_norm == f64::NEG_INFINITY {
        if w != 0.0 {
            sum + log_norm
        } else {
            sum
        }
    } else {
        sum + w * log_norm
    }
}

/// Turns the log-densities `v` of a tile (`r`, row-major `(rows, k)`) into
/// responsibilities in place, writes each row's `log p(x_i)` into
/// `log_norm` and its label into `labels` (when not empty), and returns
/// `Σ_i w_i log p(x_i)` summed in row order (`w` all ones when `None`; see
/// [`add_weighted_log_norm`]).
///
/// Per row, with the first largest value `M` ([`first_max`], also the
/// label: numpy's `argmax` of the log-densities, as scikit-learn's
/// `predict`): `S = Σ_k e^(v_k − M)` added in component order, `log p = M +
/// ln S`, responsibilities `e^(v_k − M) · (1 / S)`. The grouped E-step
/// (`mixture::groups`) computes the same bits one group of components at a
/// time. A row of zero density under every component (every log-density
/// `-inf`) gets `log p = -inf` and NaN responsibilities, as scikit-learn's.
pub(crate) fn log_sum_exp_rows(
    r: &mut [f64],
    k: usize,
    log_norm: &mut [f64],
    labels: &mut [u32],
    w: Option<&[f64]>,
) -> f64 {
    clear_upper_vector_state();
    let mut sum = 0.0;
    for (i, (row, l)) in r.chunks_mut(k).zip(log_norm.iter_mut()).enumerate() {
        let (max, at) = first_max(row);
        if let Some(label) = labels.get_mut(i) {
            *label = at as u32;
        }
        let w = w.map_or(1.0, |w| w[i]);
        if max == f64::NEG_INFINITY {
            row.fill(f64::NAN);
            *l = f64::NEG_INFINITY;
            sum = add_weighted_log_norm(sum, *l, w);
            continue;
        }
        // One exp per component.
        let mut s = 0.0;
        for v in row.iter_mut() {
            *v = exp_or_zero(*v - max);
            s += *v;
        }
        *l = max + s.ln();
        let inv = 1.0 / s;
        for v in row.iter_mut() {
            *v *= inv;
        }
        sum = add_weighted_log_norm(sum, *l, w);
    }
    sum
}

/// Partial sums of [`lane_sum`]: a sum of `d` terms is `LANES` interleaved
/// running sums (term `j` goes to lane `j mod LANES`), added pairwise at the
/// end. The order is fixed, so every machine and thread count gives the same
/// bits, and the lanes vectorise where one running sum cannot (each add
/// waits for the previous one).
const LANES: usize = 8;

#[inline(always)]
fn fold_lanes(q: [f64; LANES]) -> f64 {
    ((q[0] + q[4]) + (q[1] + q[5])) + ((q[2] + q[6]) + (q[3] + q[7]))
}

/// `Σ_j f(v_j)` in [`LANES`] interleaved partial sums.
#[inline(always)]
fn lane_sum<T: Copy>(v: &[T], f: impl Fn(T) -> f64) -> f64 {
    let mut q = [0.0f64; LANES];
    let mut chunks = v.chunks_exact(LANES);
    for c in &mut chunks {
        for l in 0..LANES {
            q[l] += f(c[l]);
        }
    }
    for (l, &x) in chunks.remainder().iter().enumerate() {
        q[l] += f(x);
    }
    fold_lanes(q)
}

/// `Σ_j f(a_j, b_j)` in [`LANES`] interleaved partial sums.
#[inline(always)]
fn lane_sum2<T: Copy>(a: &[T], b: &[f64], f: impl Fn(T, f64) -> f64) -> f64 {
    let mut q = [0.0f64; LANES];
    let (mut ca, mut cb) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    for (x, y) in (&mut ca).zip(&mut cb) {
        for l in 0..LANES {
            q[l] += f(x[l], y[l]);
        }
    }
    for (l, (&x, &y)) in ca.remainder().iter().zip(cb.remainder()).enumerate() {
        q[l] += f(x, y);
    }
    fold_lanes(q)
}

/// Full covariances with at most this many features use the stacked dense
/// GEMM E-step (one product for a group of components); wider data use one
/// triangular product per component on `x − μ_k`, which halves the work.
pub const STACKED_MAX_FEATURES: usize = 128;

/// Columns per panel of the wide E-step's product `(x − μ_k) U_k`: each
/// panel is one dense GEMM over the rows of `U_k` above its bottom edge, so
/// a fraction `b / (d + b)` of its flops multiply zeros; narrower panels
/// waste less but run at a lower GEMM rate. Measured on 2 AMD EPYC cores
/// (`PANELS=1 cargo run --release --example gemm_gflops -- d`): 32 is best
/// up to d ≈ 784, 64 above.
fn triangular_panel(d: usize) -> usize {
    if d <= 640 {
        32
    } else {
        64
    }
}

/// Components per stacked GEMM: the product tile has at most 1024 columns.
pub(crate) fn stacked_group(k: usize, d: usize) -> usize {
    (1024 / d.max(1)).clamp(1, k.max(1))
}

/// Weighted log-densities `ln π_k + log N(x_i | μ_k, Σ_k)` of the rows of
/// block `xb` (row-major `(rows, d)`) into `out` (row-major `(rows, K)`),
/// [`TILE_ROWS`] rows at a time (or a worker's whole share, when
/// [`Estep::takes_many_tiles`]) on every worker, one E-step buffer of
/// `bufs` each: every row's value is the same for any number of workers.
pub(crate) fn log_prob_block<T: Real>(xb: &[T], es: &Estep<T>, bufs: &mut [Vec<T>], out: &mut [f64]) {
    let (k, d) = (es.k, es.d);
    let rows = xb.len() / d.max(1);
    let n_tiles = rows.div_ceil(TILE_ROWS);
    let per = n_tiles.div_ceil(bufs.len().max(1)).max(1) * TILE_ROWS;
    bufs.par_iter_mut().zip(out[..rows * k].par_chunks_mut(per * k)).enumerate().for_each(|(w, (buf, out))| {
        let step = if es.takes_many_tiles() { out.len() } else { TILE_ROWS * k };
        for (t, o) in out.chunks_mut(step.max(1)).enumerate() {
            let r0 = w * per + t * step / k.max(1);
            let r = o.len() / k;
            log_prob_tile(&xb[r0 * d..(r0 + r) * d], es, buf, o);
        }
    });
}

/// Weighted log-densities `ln π_k + log N(x_i | μ_k, Σ_k)` of the rows of
/// `xt` (row-major `(r, d)`; `r ≤ 256` unless [`Estep::takes_many_tiles`])
/// into `out` (row-major `(r, K)`); `buf` holds the caller's per-thread
/// E-step buffer (for one tile).
fn log_prob_tile<T: Real>(xt: &[T], es: &Estep<T>, buf: &mut [T], out: &mut [f64]) {
    let (k, d) = (es.k, es.d);
    let r = xt.len() / d;
    let c0 = -0.5 * d as f64 * (2.0 * std::f64::consts::PI).ln();
    let sq = |v: &[T]| lane_sum(v, |y| y.to_f64() * y.to_f64());
    match &es.prec {
        Prec::Full(u, mu_u) if d <= STACKED_MAX_FEATURES => {
            // Narrow data: one dense GEMM per group of components,
            // Y = X_t [U_a … U_b], then ‖y − μ_k U_k‖² (as scikit-learn).
            let group = stacked_group(k, d);
            let all = MatRef::from_row_major_slice(u, d, k * d);
            let yt = &mut buf[..r * group * d];
            for g0 in (0..k).step_by(group) {
                let g = group.min(k - g0);
                let y = &mut yt[..r * g * d];
                matmul(
                    MatMut::from_row_major_slice_mut(y, r, g * d),
                    Accum::Replace,
                    MatRef::from_row_major_slice(xt, r, d),
                    all.subcols(g0 * d, g * d),
                    T::from_f64(1.0),
                    Par::Seq,
                );
                for (i, row) in y.chunks_exact(g * d).enumerate() {
                    for (c, yc) in row.chunks_exact(d).enumerate() {
                        let comp = g0 + c;
                        let m = &mu_u[comp * d..(comp + 1) * d];
                        let q = lane_sum2(yc, m, |a, b| (a.to_f64() - b) * (a.to_f64() - b));
                        out[i * k + comp] = c0 + es.log_det[comp] + es.log_weights[comp] - 0.5 * q;
                    }
                }
            }
        }
        Prec::Full(u, _) => {
            let all = MatRef::from_row_major_slice(u, d, k * d);
            let t = r.min(TILE_ROWS);
            let (dt, yt) = buf.split_at_mut(t * d);
            let yt = &mut yt[..t * d];
            let b = triangular_panel(d);
            // Component by component over all the rows given, a tile at a
            // time: U_k stays in cache across the tiles.
            for c in 0..k {
                let mu = &es.means_t[c * d..(c + 1) * d];
                let uc = all.subcols(c * d, d);
                let base = c0 + es.log_det[c] + es.log_weights[c];
                for s0 in (0..r).step_by(TILE_ROWS) {
                    let s1 = (s0 + TILE_ROWS).min(r);
                    let m = s1 - s0;
                    let (dt, yt) = (&mut dt[..m * d], &mut yt[..m * d]);
                    for (row_d, row_x) in dt.chunks_exact_mut(d).zip(xt[s0 * d..s1 * d].chunks_exact(d)) {
                        for ((o, x), m) in row_d.iter_mut().zip(row_x).zip(mu) {
                            *o = *x - *m;
                        }
                    }
                    // Y = D U_k by column panels: panel [c0, c1) needs only the
                    // first c1 columns of D (U_k is upper triangular), one dense
                    // GEMM each. Measured faster than faer's triangular product
                    // (see `examples/gemm_gflops.rs` with PANELS=1).
                    let dm = MatRef::from_row_major_slice(dt, m, d);
                    let mut ym = MatMut::from_row_major_slice_mut(yt, m, d);
                    for p0 in (0..d).step_by(b) {
                        let p1 = (p0 + b).min(d);
                        matmul(
                            ym.rb_mut().subcols_mut(p0, p1 - p0),
                            Accum::Replace,
                            dm.subcols(0, p1),
                            uc.submatrix(0, p0, p1, p1 - p0),
                            T::from_f64(1.0),
                            Par::Seq,
                        );
                    }
                    for (i, y) in yt.chunks_exact(d).enumerate() {
                        out[(s0 + i) * k + c] = base - 0.5 * sq(y);
                    }
                }
            }
        }
        Prec::Tied(u, mu_u) => {
            let yt = &mut buf[..r * d];
            tri_matmul(
                MatMut::from_row_major_slice_mut(yt, r, d),
                BlockStructure::Rectangular,
                Accum::Replace,
                MatRef::from_row_major_slice(xt, r, d),
                BlockStructure::Rectangular,
                MatRef::from_row_major_slice(u, d, d),
                BlockStructure::TriangularUpper,
                T::from_f64(1.0),
                Par::Seq,
            );
            for (i, y) in yt.chunks_exact(d).enumerate() {
                for c in 0..k {
                    let m = &mu_u[c * d..(c + 1) * d];
                    let q = lane_sum2(y, m, |a, b| (a.to_f64() - b) * (a.to_f64() - b));
                    out[i * k + c] = c0 + es.log_det[c] + es.log_weights[c] - 0.5 * q;
                }
            }
        }
        Prec::Diag(pc) => {
            for (i, x) in xt.chunks_exact(d).enumerate() {
                for c in 0..k {
                    let (m, p) = (&es.means[c * d..(c + 1) * d], &pc[c * d..(c + 1) * d]);
                    let mut q = [0.0f64; LANES];
                    for ((x, m), p) in x.chunks(LANES).zip(m.chunks(LANES)).zip(p.chunks(LANES)) {
                        for l in 0..x.len() {
                            let v = (x[l].to_f64() - m[l]) * p[l];
                            q[l] += v * v;
                        }
                    }
                    let q = fold_lanes(q);
                    out[i * k + c] = c0 + es.log_det[c] + es.log_weights[c] - 0.5 * q;
                }
            }
        }
        Prec::Spherical(pc) => {
            for (i, x) in xt.chunks_exact(d).enumerate() {
                for c in 0..k {
                    let m = &es.means[c * d..(c + 1) * d];
                    let q = lane_sum2(x, m, |x, m| (x.to_f64() - m) * (x.to_f64() - m));
                    out[i * k + c] = c0 + es.log_det[c] + es.log_weights[c] - 0.5 * q * pc[c] * pc[c];
                }
            }
        }
    }
}
