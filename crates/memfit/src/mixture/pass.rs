//! The fused EM kernels over one read block: per-component log-densities by
//! GEMM tiles, log-sum-exp across components, responsibilities, and the
//! M-step's weighted sums, all within buffers of one block.
//!
//! E-step, per tile of 256 rows and component `k` (full): `D = X_t − μ_k`,
//! `Y = D U_k` (one triangular GEMM into a per-thread tile), `‖y_i‖²` summed
//! in `f64`; `log N(x_i | μ_k, Σ_k) = −½ (d ln 2π + ‖y_i‖²) + ln det U_k`.
//! Tied computes `X_t U` once per tile; diag and spherical use exact
//! differences. No `n × d` or `n × K` array exists beyond one block.
//!
//! M-step, per component (components are dealt to threads, so each
//! component's sums are added in row order whatever the thread count), per
//! tile: the rows with a non-negligible responsibility are gathered, centred
//! on the component's current mean (so that no `E[x²] − μ²` cancellation
//! occurs), and `N_k`, `Σ r x` and `Σ r x xᵀ` (one GEMM, lower triangle)
//! accumulated in `f64`.
//!
//! Reference: scikit-learn's `_estimate_log_gaussian_prob` and
//! `_estimate_gaussian_parameters` (same quantities, computed there with
//! `n × d` temporaries per component).

use faer::linalg::matmul::triangular::{matmul as tri_matmul, BlockStructure};
use faer::{Accum, MatMut, MatRef, Par};
use rayon::prelude::*;

use super::components::packed_len;
use super::params::CovarianceType;
use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::exec::Backend;
use crate::exec::Merge;
use crate::io::Source;
use crate::kernels::{stacked_group, Estep, STACKED_MAX_FEATURES};
use crate::plan::TILE_ROWS;

/// Responsibilities below this are skipped in the M-step (as are rows of
/// weight 0). Each skipped row changes `N_k` by less than 1e-32 times its
/// weight while `N_k` carries scikit-learn's floor of `10 ε ≈ 2.2e-15`
/// times the mean weight, so even a billion skipped rows of average weight
/// move any statistic by under 1e-8 of that floor; rows whose
/// responsibility underflows to exactly zero are the common case. The
/// weight does not enter the test: weights scaled alike (1e-300 or 1e200)
/// skip the same rows.
pub const NEGLIGIBLE_RESPONSIBILITY: f64 = 1e-32;

/// Sufficient statistics of one M-step, in `f64`, around `reference` means.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct Stats {
    /// `N_k = Σ_i w_i r_ik`, `(K,)`.
    pub(crate) nk: Vec<f64>,
    /// `Σ_i w_i r_ik (x_i − ref_k)`, `(K, d)`.
    #[serde(with = "crate::wire::f64_le")]
    pub(crate) s1: Vec<f64>,
    /// Second moments around `ref_k`: full `K` packed triangles, diag and
    /// spherical `(K, d)` squares, tied empty.
    #[serde(with = "crate::wire::f64_le")]
    pub(crate) s2: Vec<f64>,
    /// Means the sums are centred on, `(K, d)`, shifted coordinates.
    pub(crate) reference: Vec<f64>,
    /// Tied only: `Σ_i w_i x_i x_iᵀ` (row-major `d × d`, shifted coordinates),
    /// accumulated in passes where it is requested.
    #[serde(with = "crate::wire::f64_le")]
    pub(crate) scatter: Vec<f64>,
    /// `Σ_i w_i log p(x_i)` over the pass (E-step passes).
    pub(crate) log_likelihood: f64,
}

impl Stats {
    /// Zero sums for `k` components of `d` features centred on `reference`
    /// (`(k, d)`): second moments sized for `t` (tied needs none), and the
    /// tied data scatter with `scatter`.
    pub(crate) fn zeros(t: CovarianceType, k: usize, d: usize, reference: &[f64], scatter: bool) -> Self {
        Stats {
            nk: vec![0.0; k],
            s1: vec![0.0; k * d],
            s2: vec![0.0; if t == CovarianceType::Tied { 0 } else { super::components::cov_len(t, k, d) }],
            reference: reference.to_vec(),
            scatter: vec![0.0; if scatter { d * d } else { 0 }],
            log_likelihood: 0.0,
        }
    }

    /// Bytes of [`Self::zeros`] (with the scatter).
    pub(crate) fn bytes(t: CovarianceType, k: usize, d: usize) -> u64 {
        let s2 = if t == CovarianceType::Tied { d * d } else { super::components::cov_len(t, k, d) };
        ((k + 2 * k * d + s2) * 8) as u64
    }
}

/// What the sums of a pass are centred on and hold.
pub(crate) struct Sums<'a> {
    pub(crate) t: CovarianceType,
    pub(crate) reference: &'a [f64],
    pub(crate) scatter: bool,
}

impl Sums<'_> {
    /// Zero sums for `k` components of `d` features.
    pub(crate) fn zeros(&self, k: usize, d: usize) -> Stats {
        Stats::zeros(self.t, k, d, self.reference, self.scatter)
    }
}

impl Merge for Stats {
    fn merge(&mut self, next: &Self) {
        let add = |a: &mut [f64], b: &[f64]| a.iter_mut().zip(b).for_each(|(a, b)| *a += b);
        add(&mut self.nk, &next.nk);
        add(&mut self.s1, &next.s1);
        add(&mut self.s2, &next.s2);
        add(&mut self.scatter, &next.scatter);
        self.log_likelihood += next.log_likelihood;
    }

    fn clear(&mut self) {
        self.nk.fill(0.0);
        self.s1.fill(0.0);
        self.s2.fill(0.0);
        self.scatter.fill(0.0);
        self.log_likelihood = 0.0;
    }
}

/// The error for row `row` of `x`, whose log-likelihood `value` is not
/// finite: it has zero density under every component. For `new_rows`
/// scored against a fitted model (see [`zero_density_ok`]) the value is
/// NaN: the model's parameters overflow for the row, which no setting of
/// the scoring changes.
pub(crate) fn zero_density(x: &Source<'_>, row: usize, value: f64, new_rows: bool) -> Error {
    if new_rows {
        return Error::param(
            "X",
            format!(
                "{}: row {row} has log-likelihood {value} under the model: its parameters overflow for this row (a damaged model, or a row far outside the scale it was fitted on)",
                x.name().display()
            ),
        );
    }
    Error::param_with(
        "X",
        format!("{}: row {row} has zero density under every component (log-likelihood {value})", x.name().display()),
        vec![
            crate::error::Remedy::RescaleData,
            crate::error::Remedy::RaiseRegCovar { example: None },
            crate::error::Remedy::CheckInitScale,
        ],
    )
}

/// Whether a row's log-likelihood `v` is accepted: finite, or `-inf` (zero
/// density under every component) for `new_rows`, scored against a fitted
/// model as scikit-learn scores them.
pub(crate) fn zero_density_ok(v: f64, new_rows: bool) -> bool {
    v.is_finite() || (new_rows && v == f64::NEG_INFINITY)
}

/// Rows gathered per M-step product (full covariances): the gathered rows
/// of a tile are multiplied in fixed batches of this many.
const GATHER_ROWS: usize = 64;

/// Per-thread M-step buffer: gathered rows centred on the component's
/// reference and scaled by `√(w r)`, `(≤ GATHER_ROWS, d)`; for tied, a tile
/// converted to `f64` and its weighted copy (2 tiles of rows).
struct MTile {
    g: Vec<f64>,
}

/// Buffers for one block's E- and M-steps, and the backend that runs them.
pub(crate) struct Workspace<T> {
    backend: Backend,
    t: CovarianceType,
    k: usize,
    d: usize,
    /// `(block_rows, K)` log-densities, then responsibilities.
    pub(crate) resp: Vec<f64>,
    /// `log p(x_i)` per row of the block.
    pub(crate) log_norm: Vec<f64>,
    tile_ll: Vec<f64>,
    e_tiles: Vec<Vec<T>>,
    m_tiles: Vec<MTile>,
}

impl<T: Real> Workspace<T> {
    /// Bytes held per block row (responsibilities and `log p`).
    pub(crate) fn bytes_per_row(k: usize) -> u64 {
        (k * 8 + 8 + 1) as u64
    }

    /// Bytes held per thread for tiles of `tile_rows` rows (at most
    /// [`TILE_ROWS`]): the E-step buffer in the compute type and the M
    /// gather buffer (the full M-step's `d × d` products are
    /// [`super::components::CholWork`]'s matrices).
    pub(crate) fn bytes_per_thread(
        t: CovarianceType,
        k: usize,
        d: usize,
        tile_rows: usize,
        compute_bytes: usize,
    ) -> u64 {
        (Self::e_tile_len(t, k, d, tile_rows) * compute_bytes + Self::gather_rows(t, tile_rows) * d * 8) as u64
    }

    /// Elements of a per-thread E-step buffer: for full covariances two
    /// `tile_rows × d` tiles, or the stacked product of a group of
    /// components; for tied one tile; diag and spherical need none.
    fn e_tile_len(t: CovarianceType, k: usize, d: usize, tile_rows: usize) -> usize {
        tile_rows
            * match t {
                CovarianceType::Full if d <= STACKED_MAX_FEATURES => (2 * d).max(stacked_group(k, d) * d),
                CovarianceType::Full => 2 * d,
                CovarianceType::Tied => d,
                CovarianceType::Diag | CovarianceType::Spherical => 0,
            }
    }

    fn gather_rows(t: CovarianceType, tile_rows: usize) -> usize {
        match t {
            CovarianceType::Full => GATHER_ROWS,
            CovarianceType::Tied => 2 * tile_rows,
            CovarianceType::Diag | CovarianceType::Spherical => 0,
        }
    }

    /// Buffers for blocks of `block_rows` rows and tiles of `tile_rows` rows
    /// (at most [`TILE_ROWS`]; fewer only when the data have fewer rows).
    pub(crate) fn new(
        t: CovarianceType,
        k: usize,
        d: usize,
        block_rows: usize,
        tile_rows: usize,
        threads: usize,
    ) -> Self {
        let threads = threads.max(1);
        Workspace {
            backend: Backend::Cpu,
            t,
            k,
            d,
            resp: vec![0.0; block_rows * k],
            log_norm: vec![0.0; block_rows],
            tile_ll: vec![0.0; block_rows.div_ceil(TILE_ROWS)],
            e_tiles: (0..threads).map(|_| vec![T::default(); Self::e_tile_len(t, k, d, tile_rows)]).collect(),
            m_tiles: (0..threads).map(|_| MTile { g: vec![0.0; Self::gather_rows(t, tile_rows) * d] }).collect(),
        }
    }

    /// The workspace with its log-densities computed on `backend` (the CPU
    /// by default; the other operations run on the host either way).
    pub(crate) fn on(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// Weighted log-densities `ln π_k + log N(x_i | μ_k, Σ_k)` of block `xb`
    /// (row-major `(rows, d)`) under `es`'s components into
    /// `resp[..rows × K]`, on the workspace's backend.
    ///
    /// # Errors
    /// A device backend's device errors.
    pub(crate) fn log_densities(&mut self, xb: &[T], es: &Estep<T>) -> Result<()> {
        let rows = xb.len() / self.d;
        self.backend.ops::<T>().log_prob_block(xb, es, &mut self.e_tiles, &mut self.resp[..rows * self.k])
    }

    /// Works on `k` components from now on (at most the number it was
    /// created for: its buffers are kept).
    pub(crate) fn set_components(&mut self, k: usize) {
        self.k = k;
    }

    /// E-step of block `xb` (row-major `(rows, d)`, first row `start`):
    /// responsibilities in `resp[..rows × K]`, `log p(x_i)` in
    /// `log_norm[..rows]`, labels in `labels[..rows]` when given; adds `Σ_i w_i log p(x_i)` over the block to
    /// `total` (summed per fixed tile, then tile by tile in order, so that
    /// the total does not depend on the block size).
    ///
    /// With `new_rows` (rows scored against a fitted model), a row of zero
    /// density under every component is scikit-learn's: log-likelihood
    /// `-inf`, responsibilities NaN.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] when a row has zero density under every
    /// component (its log-likelihood is not finite), unless `new_rows`
    /// (then only for a NaN log-likelihood).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn e_step(
        &mut self,
        x: &Source<'_>,
        xb: &[T],
        start: usize,
        wb: Option<&[f64]>,
        es: &Estep<T>,
        total: &mut f64,
        labels: Option<&mut [u32]>,
        new_rows: bool,
    ) -> Result<()> {
        let (k, d) = (self.k, self.d);
        let rows = xb.len() / d;
        let n_tiles = rows.div_ceil(TILE_ROWS);
        self.log_densities(xb, es)?;
        let (resp, log_norm) = (&mut self.resp[..rows * k], &mut self.log_norm[..rows]);
        let mut label_tiles: Vec<&mut [u32]> = match labels {
            Some(l) => l[..rows].chunks_mut(TILE_ROWS).collect(),
            None => (0..n_tiles).map(|_| &mut [][..]).collect(),
        };
        let backend = self.backend.ops::<T>();
        self.tile_ll[..n_tiles]
            .par_iter_mut()
            .zip(resp.par_chunks_mut(TILE_ROWS * k))
            .zip(log_norm.par_chunks_mut(TILE_ROWS))
            .zip(label_tiles.par_iter_mut())
            .enumerate()
            .for_each(|(t, (((ll, r), ln), lb))| {
                *ll = backend.log_sum_exp_rows(r, k, ln, lb, wb.map(|w| &w[t * TILE_ROWS..]));
            });
        if let Some(i) = self.log_norm[..rows].iter().position(|&v| !zero_density_ok(v, new_rows)) {
            return Err(zero_density(x, start + i, self.log_norm[i], new_rows));
        }
        for s in &self.tile_ll[..n_tiles] {
            *total += s;
        }
        Ok(())
    }

    /// Adds block `xb`'s contribution with responsibilities `resp[..rows × K]`
    /// (from [`Self::e_step`] or an initialisation) to `stats`; `mats` holds
    /// one `d × d` product buffer per worker (full only).
    pub(crate) fn m_step(&mut self, xb: &[T], wb: Option<&[f64]>, stats: &mut Stats, mats: &mut [Vec<f64>]) {
        let (k, d, t) = (self.k, self.d, self.t);
        let rows = xb.len() / d;
        let workers = if t == CovarianceType::Full { mats.len().min(self.m_tiles.len()) } else { self.m_tiles.len() }
            .min(k)
            .max(1);
        let per = k.div_ceil(workers);
        let s2_per = match t {
            CovarianceType::Full => packed_len(d),
            CovarianceType::Tied => 0,
            CovarianceType::Diag | CovarianceType::Spherical => d,
        };
        // Deal contiguous component ranges to workers.
        let mut groups = Vec::with_capacity(workers);
        let (mut nk, mut s1, mut s2) = (&mut stats.nk[..], &mut stats.s1[..], &mut stats.s2[..]);
        let mut first = 0;
        while first < k {
            let cnt = per.min(k - first);
            let (a, rest) = std::mem::take(&mut nk).split_at_mut(cnt);
            nk = rest;
            let (b, rest) = std::mem::take(&mut s1).split_at_mut(cnt * d);
            s1 = rest;
            let (c, rest) = std::mem::take(&mut s2).split_at_mut(cnt * s2_per);
            s2 = rest;
            groups.push((first, a, b, c));
            first += cnt;
        }
        let resp = &self.resp[..rows * k];
        let reference = &stats.reference;
        let mut dummy: Vec<Vec<f64>> = Vec::new();
        let mats = if t == CovarianceType::Full { mats } else { &mut dummy[..] };
        let mats = mats.iter_mut().map(Some).chain(std::iter::repeat_with(|| None));
        let workers: Vec<_> = groups.into_iter().zip(self.m_tiles.iter_mut()).zip(mats).collect();
        workers.into_par_iter().for_each(|(((first, nk, s1, s2), mt), mut prod)| {
            for t0 in (0..rows).step_by(TILE_ROWS) {
                let t1 = (t0 + TILE_ROWS).min(rows);
                for (c, nk_c) in nk.iter_mut().enumerate() {
                    let comp = first + c;
                    let mu = &reference[comp * d..(comp + 1) * d];
                    let s1_c = &mut s1[c * d..(c + 1) * d];
                    let s2_c = &mut s2[c * s2_per..(c + 1) * s2_per];
                    let mut m = 0;
                    for i in t0..t1 {
                        let p = resp[i * k + comp];
                        let r = p * wb.map_or(1.0, |w| w[i]);
                        if p < NEGLIGIBLE_RESPONSIBILITY || r == 0.0 {
                            continue;
                        }
                        *nk_c += r;
                        let x = &xb[i * d..(i + 1) * d];
                        match t {
                            CovarianceType::Full => {
                                let sr = r.sqrt();
                                let g = &mut mt.g[m * d..(m + 1) * d];
                                for j in 0..d {
                                    let v = x[j].to_f64() - mu[j];
                                    g[j] = sr * v;
                                    s1_c[j] += r * v;
                                }
                                m += 1;
                                if m == GATHER_ROWS {
                                    add_gathered(&mt.g, m, d, prod.as_deref_mut().expect("full"), s2_c);
                                    m = 0;
                                }
                            }
                            CovarianceType::Tied => {
                                for j in 0..d {
                                    s1_c[j] += r * (x[j].to_f64() - mu[j]);
                                }
                            }
                            CovarianceType::Diag | CovarianceType::Spherical => {
                                for j in 0..d {
                                    let v = x[j].to_f64() - mu[j];
                                    s1_c[j] += r * v;
                                    s2_c[j] += r * v * v;
                                }
                            }
                        }
                    }
                    if m > 0 {
                        add_gathered(&mt.g, m, d, prod.as_deref_mut().expect("full"), s2_c);
                    }
                }
            }
        });
        if !stats.scatter.is_empty() {
            let par = Par::rayon(self.m_tiles.len());
            let mt = &mut self.m_tiles[0];
            for t0 in (0..rows).step_by(TILE_ROWS) {
                let t1 = (t0 + TILE_ROWS).min(rows);
                for (g, v) in mt.g.iter_mut().zip(&xb[t0 * d..t1 * d]) {
                    *g = v.to_f64();
                }
                let (xt, weighted) = mt.g.split_at_mut((t1 - t0) * d);
                self.backend.ops::<T>().scatter_tile(xt, wb.map(|w| &w[t0..t1]), d, weighted, &mut stats.scatter, par);
            }
        }
    }
}

/// Adds `Gᵀ G` of the first `m` gathered rows of `g` (row-major, `d`
/// columns) to the packed lower triangle `s2` through the product buffer
/// `prod` (`d × d`, lower triangle computed).
fn add_gathered(g: &[f64], m: usize, d: usize, prod: &mut [f64], s2: &mut [f64]) {
    let gm = MatRef::from_row_major_slice(&g[..m * d], m, d);
    tri_matmul(
        MatMut::from_row_major_slice_mut(prod, d, d),
        BlockStructure::TriangularLower,
        Accum::Replace,
        gm.transpose(),
        BlockStructure::Rectangular,
        gm,
        BlockStructure::Rectangular,
        1.0,
        Par::Seq,
    );
    let mut p = 0;
    for i in 0..d {
        for (dst, v) in s2[p..p + i + 1].iter_mut().zip(&prod[i * d..i * d + i + 1]) {
            *dst += v;
        }
        p += i + 1;
    }
}
