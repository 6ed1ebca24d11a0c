//! Mini-batch k-means: one step on a batch of rows held in memory.
//!
//! A step assigns every row of the batch to its exact nearest centre (the
//! kernel of the Lloyd passes, [`crate::kernels::assign_block`], or for a
//! batch of sparse (CSR) rows [`crate::kernels::assign_csr`], which gives
//! the labels of the rows with their zeros filled in), then moves
//! each centre that received rows to the weighted mean of the rows it has
//! absorbed so far: with `W_j` the weight it had absorbed before and `S_j`,
//! `s_j` the batch's weighted sum and weight for it,
//! `c_j ← (c_j W_j + S_j) / (W_j + s_j)`, computed as
//! `c_j + (S_j − s_j c_j) / (W_j + s_j)` (a centre whose rows all equal it
//! does not move), or as `S_j / s_j` when `W_j = 0` (a centre without
//! weight lands on its rows' mean however far it starts), and
//! `W_j ← W_j + s_j`. `S_j` is a
//! compensated `f64` sum ([`ClusterSums`]), so a step does not depend on the
//! thread count; the centres are rounded to the compute type, as Lloyd's.
//! Centres whose absorbed weight falls below a share of the largest are
//! named for reassignment (the caller draws the rows that replace them,
//! from its own random stream) and their weights are raised to the
//! smallest kept one.
//!
//! A sparse batch's sums have the bits of the same rows' dense sums (a
//! stored zero or a missing one adds nothing), so a step on sparse rows
//! moves the centres exactly as the step on the same rows densified. Its
//! work on the `n_clusters × n_features` buffers is limited to the columns
//! the batch stores values in: the transposed centres the kernel reads are
//! renewed at those columns only, and the sums are zeroed there only (and
//! read there only when the columns are few: elsewhere they are zero, and
//! a centre's value moves as the same formula with zero sums moves it, to
//! the bit). Centres are moved in parallel, each independently; the
//! squared change is summed per centre in a fixed order, then over the
//! centres in order.
//!
//! Reference: D. Sculley, "Web-scale k-means clustering", WWW 2010;
//! scikit-learn's `_mini_batch_step`, `_minibatch_update_dense` and
//! `_minibatch_update_sparse` for the update, the reassignment rule and
//! when it is checked.

use multiversion::multiversion;
use rayon::prelude::*;

use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::exec::{Backend, Block};
use crate::kernels::{first_non_finite, unit_row, ClusterSums, PreparedCenters, Scratch, SparseCenters, SparseScratch};
use crate::plan::{check_fits, Ledger, Plan, TILE_ROWS};

use super::plan::k_tile;

/// What a mini-batch fit carries from step to step besides its centres
/// (scikit-learn's `_counts` and `_n_since_last_reassign`; the centres,
/// its `cluster_centers_`, are the caller's, lent to each
/// [`MiniBatch::step`]).
#[derive(Debug, Clone)]
pub struct MiniBatch {
    /// Number of clusters `k`.
    pub n_clusters: usize,
    /// Number of features `d`.
    pub n_features: usize,
    /// Weight absorbed by each centre, `(n_clusters,)`.
    pub counts: Vec<f64>,
    /// Rows seen since reassignment was last checked.
    pub n_since_last_reassign: usize,
    /// Spherical k-means: each moved centre is scaled to unit norm (its
    /// rows are unit rows; see [`super::Metric::Cosine`]).
    pub unit_centers: bool,
    /// Centres kept in `f64` whatever the batch's type. Otherwise a step
    /// rounds them to it, as scikit-learn keeps `float32` centres for
    /// `float32` rows. For `float32` batches of values that `float64` rows
    /// would hold alike (integers up to 2²⁴, `float16`), this gives the
    /// `float64` rows' centres, to the bit.
    pub float64_centers: bool,
    /// The caller picks the light centres to replace: a step that checks
    /// reassignment returns every centre below the ratio in
    /// [`Step::to_reassign`] and leaves the counts and the cap (half the
    /// batch) to it. NumPy's front does, so that ties among the lightest
    /// fall as `np.argsort` orders them (scikit-learn's choice); otherwise
    /// the step picks the lightest, ties by index.
    pub caller_reassigns: bool,
}

/// What one [`MiniBatch::step`] measured.
#[derive(Debug, Clone, Default)]
pub struct Step {
    /// `Σ w_i ‖x_i − c_{label_i}‖²` over the batch, against the centres
    /// before the step, from exact `f64` differences.
    pub inertia: f64,
    /// `Σ ‖c_new − c_old‖²` over the centres the update moved (before any
    /// reassignment).
    pub centers_squared_diff: f64,
    /// Centres to replace by rows of the batch, in increasing order (empty
    /// unless reassignment was checked this step), at most `pool.len()`;
    /// with [`MiniBatch::caller_reassigns`], every centre below the ratio
    /// (the caller chooses among them).
    pub to_reassign: Vec<usize>,
    /// The batch rows (increasing) those centres may move to, one each,
    /// empty when there are none to move: every row, or for unit centres
    /// the rows with a nonzero value (a row of zeros would make a zero
    /// centre).
    pub pool: Vec<usize>,
}

/// A step's working buffers ([`MiniBatch::step_ledger`]: per-thread
/// distance tiles, or for sparse batches per-thread products, labels and
/// distances per row, per-cluster sums), made
/// once for a fit's batches and reused by each step: steps on batches of a
/// few thousand rows otherwise spend as long allocating and zeroing these
/// as computing.
#[derive(Debug)]
pub struct StepWork<T> {
    backend: Backend,
    n_clusters: usize,
    n_features: usize,
    rows: usize,
    tile_rows: usize,
    /// Centres per GEMM tile, as the tiles were sized.
    k_tile: usize,
    tiles: Vec<Scratch<T>>,
    sparse: Vec<SparseScratch<T>>,
    labels: Vec<u32>,
    dist: Vec<f64>,
    /// Zero between steps: each centre's row is zeroed as the update reads
    /// it (no pass over all `n_clusters × n_features` sums per step), and
    /// the whole set when a step failed between its sums and its update.
    sums: ClusterSums,
    sums_dirty: bool,
    moved: Vec<f64>,
    /// Sparse batches: the columns the batch stores values in (increasing),
    /// and a bit per column to find them (zero between steps).
    columns: Vec<u32>,
    column_bits: Vec<u64>,
    /// The previous step's prepared centres, renewed in place.
    prepared: Option<PreparedCenters<T>>,
}

impl<T: Real> StepWork<T> {
    /// Buffers for steps on up to `rows` rows with `n_clusters` centres of
    /// `n_features` on `threads` threads, of sparse (CSR) rows when
    /// `sparse` (the bytes [`MiniBatch::step_ledger`] counts).
    pub fn new(n_clusters: usize, n_features: usize, rows: usize, threads: usize, sparse: bool) -> Self {
        let (k, d) = (n_clusters, n_features);
        let tile_rows = rows.clamp(1, TILE_ROWS);
        let k_tile = k_tile(k, size_of::<T>());
        let threads = threads.max(1);
        StepWork {
            backend: Backend::Cpu,
            n_clusters: k,
            n_features: d,
            rows,
            tile_rows,
            k_tile,
            tiles: (0..if sparse { 0 } else { threads }).map(|_| Scratch::new(tile_rows, k, k_tile, d)).collect(),
            sparse: (0..if sparse { threads } else { 0 }).map(|_| SparseScratch::new(k, d)).collect(),
            labels: vec![0; rows],
            dist: vec![0.0; rows],
            sums: ClusterSums::new(k, d),
            sums_dirty: false,
            moved: vec![0.0; d * threads],
            columns: Vec::with_capacity(if sparse { d } else { 0 }),
            column_bits: vec![0; if sparse { d.div_ceil(64) } else { 0 }],
            prepared: None,
        }
    }

    /// Whether these buffers serve a step on `rows` rows of `state`'s
    /// shape, sparse or not, with the current thread count.
    fn serves(&self, state: &MiniBatch, rows: usize, sparse: bool) -> bool {
        let workers = if sparse { self.sparse.len() } else { self.tiles.len() };
        (self.n_clusters, self.n_features) == (state.n_clusters, state.n_features)
            && rows <= self.rows
            && workers >= rayon::current_num_threads().max(1)
    }
}

impl MiniBatch {
    /// Initial centres (row-major, rows of `d` values) as the steps hold
    /// them: each scaled to unit norm when `unit` (spherical k-means, see
    /// [`unit_row`]), then rounded to `T` (kept as `f64`).
    pub fn start_centers<T: Real>(centers: &mut [f64], d: usize, unit: bool) {
        for c in centers.chunks_exact_mut(d.max(1)) {
            if unit {
                unit_row(c);
            }
            for v in c.iter_mut() {
                *v = T::from_f64(*v).to_f64();
            }
        }
    }

    /// Bytes a step on `rows` rows of `n_features` holds beyond the batch,
    /// the centres and the counts, with `threads` threads computing in a
    /// type of `compute_bytes`, on sparse (CSR) rows when `sparse`: the
    /// prepared centres, per-thread distance tiles (sparse: products and
    /// one dense row), labels and distances per row, the reassignment
    /// pool, and the per-cluster sums with the moved centre: the buffers of
    /// [`StepWork`].
    pub fn step_ledger(
        n_clusters: usize,
        n_features: usize,
        rows: usize,
        threads: usize,
        compute_bytes: usize,
        sparse: bool,
    ) -> Ledger {
        let (k, d) = (n_clusters, n_features);
        let k_tile = k_tile(k, compute_bytes);
        let tile_rows = rows.clamp(1, TILE_ROWS);
        let mut led = Ledger::default();
        led.add(
            "centers for kernels",
            PreparedCenters::<f64>::bytes_for(k, d, compute_bytes),
            1,
            "values, radii, norms".into(),
        );
        if sparse {
            led.add(
                "centers for sparse rows",
                SparseCenters::bytes_for(k, d),
                1,
                format!("{d} × {k} transposed values in float64 and float16, norms"),
            );
            led.add(
                "sparse products (per thread)",
                threads as u64 * SparseScratch::<f64>::bytes(k, d, compute_bytes),
                1,
                format!("{threads} threads × ({k} products + one dense row of {d})"),
            );
        } else {
            led.add(
                "distance tiles (per thread)",
                threads as u64 * Backend::Cpu.assign_bytes(tile_rows, k, k_tile, d, compute_bytes).host,
                1,
                format!("{threads} threads × {tile_rows} rows × {k_tile} centres"),
            );
        }
        led.add("labels and distances", rows as u64, 12, format!("{rows} rows × (4 + 8) B"));
        led.add(
            "reassignment pool",
            rows as u64,
            8,
            format!("{rows} rows × 8 B (the batch rows a light centre may move to; before it, for spherical k-means, the rows' weights with rows of zeros at 0)"),
        );
        led.add(
            "per-cluster sums",
            (ClusterSums::bytes_for_rows(k, d, sparse) + threads * d * 8) as u64,
            1,
            format!("{k} × ({d} + 1) × 16 B (and for sparse rows a bit per sum), and a moved centre per thread, {threads} × {d} × 8 B"),
        );
        if sparse {
            led.add(
                "the batch's columns",
                (d * 4 + d.div_ceil(64) * 8) as u64,
                1,
                format!("up to {d} columns × 4 B, and a bit per column"),
            );
        }
        led
    }

    /// The plan of steps on `rows` rows (sparse rows when `sparse`): the
    /// centres and counts, a step's buffers ([`MiniBatch::step_ledger`])
    /// and the buffers `held` (name, bytes) that the caller holds for the
    /// whole fit, within `limit_bytes`.
    ///
    /// # Errors
    /// [`Error::DoesNotFit`] naming the largest buffer.
    pub fn plan_steps(
        &self,
        rows: usize,
        threads: usize,
        compute_bytes: usize,
        sparse: bool,
        held: &[(String, u64)],
        limit_bytes: u64,
    ) -> Result<Plan> {
        let (k, d) = (self.n_clusters, self.n_features);
        let mut led = Self::step_ledger(k, d, rows, threads, compute_bytes, sparse);
        led.add("centers and counts (float64)", (k * (d + 1)) as u64, 8, format!("{k} × ({d} + 1) × 8 B"));
        for (name, bytes) in held {
            led.add(name, *bytes, 1, "held by the caller for the fit".into());
        }
        check_fits(
            led.total(),
            limit_bytes,
            &led,
            || {
                format!(
                    "a mini-batch step on {rows} rows with {k} centres of {d} features on {}",
                    crate::units::threads(threads)
                )
            },
            Vec::new,
        )?;
        Ok(Plan::blocked("mini-batch k-means steps", limit_bytes, led, rows, rows, threads))
    }

    /// One step on `batch` (dense rows or CSR rows of `n_features`, each
    /// with its weight in `batch.w` when given: finite, non-negative),
    /// moving `centers` (row-major `(n_clusters, n_features)`, values of
    /// the compute type held in `f64`) in place: see the module docs.
    /// `seen` rows are added to the count since the last reassignment
    /// check; reassignment is checked when that count reaches
    /// `10 × n_clusters` or a centre has absorbed nothing (before the
    /// update), and then names
    /// the centres whose weight is below `reassignment_ratio` times the
    /// largest (at most half the batch, the lightest first). `work` holds
    /// the step's buffers: made for the fit's batches ([`StepWork::new`]),
    /// or replaced here by buffers for this batch when it has none or they
    /// do not serve it.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for a batch whose width differs from the
    /// centres', a non-finite value or an invalid weight, or centres of
    /// another shape.
    pub fn step<T: Real>(
        &mut self,
        centers: &mut [f64],
        batch: &Block<'_, T>,
        seen: usize,
        reassignment_ratio: f64,
        work: &mut Option<StepWork<T>>,
    ) -> Result<Step> {
        let (k, d) = (self.n_clusters, self.n_features);
        let sample_weight = batch.w;
        if d == 0 || batch.n_features != d || (batch.csr.is_none() && !batch.x.len().is_multiple_of(d)) {
            return Err(Error::param("X", format!("a batch of {} values is not rows of {d} features", batch.x.len())));
        }
        if centers.len() != k * d || self.counts.len() != k {
            return Err(Error::param(
                "centers",
                format!(
                    "{} centre values and {} counts for {k} centres of {d} features",
                    centers.len(),
                    self.counts.len()
                ),
            ));
        }
        let rows = batch.rows();
        // Whether to check for reassignment, decided before the update.
        self.n_since_last_reassign += seen;
        let check = self.counts.contains(&0.0) || self.n_since_last_reassign >= 10 * k;
        let stored = match batch.csr {
            Some(c) => &batch.x[c.indptr[0]..c.indptr[rows]],
            None => batch.x,
        };
        if let Some(i) = first_non_finite(stored) {
            let (row, column) = match batch.csr {
                Some(c) => {
                    let at = c.indptr[0] + i;
                    (c.indptr.partition_point(|&o| o <= at) - 1, c.indices[at] as usize)
                }
                None => (i / d, i % d),
            };
            return Err(Error::param("X", format!("row {row}, column {column} of the batch is not finite")));
        }
        if let Some(w) = sample_weight {
            if w.len() != rows {
                return Err(Error::param("sample_weight", format!("{} weights for {rows} rows", w.len())));
            }
            if let Some((i, v)) = w.iter().enumerate().find(|(_, v)| !(v.is_finite() && **v >= 0.0)) {
                return Err(Error::param(
                    "sample_weight",
                    format!("weight {i} is {v}; weights must be finite and >= 0"),
                ));
            }
        }
        let sparse = batch.csr.is_some();
        if !work.as_ref().is_some_and(|w| w.serves(self, rows, sparse)) {
            *work = None;
        }
        let StepWork {
            backend,
            tile_rows,
            k_tile,
            tiles,
            sparse: products,
            labels,
            dist,
            sums,
            sums_dirty,
            moved,
            columns,
            column_bits,
            prepared,
            ..
        } = work.get_or_insert_with(|| StepWork::new(k, d, rows, rayon::current_num_threads(), sparse));
        let (labels, dist) = (&mut labels[..rows], &mut dist[..rows]);
        if let Some(csr) = batch.csr {
            stored_columns(&csr.indices[csr.indptr[0]..csr.indptr[rows]], column_bits, columns);
        }
        // The exact nearest centres and their distances.
        let prepared = match (prepared.take(), sparse) {
            (Some(p), true) => prepared.insert(p.renew_for_columns(centers, columns)),
            (Some(p), false) => prepared.insert(p.renew(centers)),
            (None, sparse) => prepared.insert(PreparedCenters::<T>::for_rows(centers, k, d, sparse, self.unit_centers)),
        };
        let backend = backend.ops::<T>();
        match batch.csr {
            Some(csr) => backend.assign_sparse(batch.x, csr, prepared, products, labels, dist)?,
            None => backend.assign_block(batch.x, prepared, *tile_rows, *k_tile, tiles, labels, dist)?,
        }
        let inertia = match sample_weight {
            Some(w) => dist.iter().zip(w).map(|(v, w)| v * w).sum::<f64>(),
            None => dist.iter().sum::<f64>(),
        };
        // The update: c ← (c W + S) / (W + s) for every centre with rows.
        if *sums_dirty {
            sums.clear();
        }
        *sums_dirty = true;
        // Spherical k-means: a row of zeros has no direction. It adds
        // nothing to its centre's sum, and (as in Lloyd's steps, where
        // only the sum's direction counts) nothing to its count either.
        let directed: Option<Vec<f64>> = if self.unit_centers {
            let undirected = |r: usize| batch.row_values(r).0.iter().all(|v| v.to_f64() == 0.0);
            (0..rows).any(undirected).then(|| {
                (0..rows).map(|r| if undirected(r) { 0.0 } else { sample_weight.map_or(1.0, |w| w[r]) }).collect()
            })
        } else {
            None
        };
        let sum_weights = directed.as_deref().or(sample_weight);
        match batch.csr {
            Some(csr) => backend.sparse_sums(batch.x, csr, labels, sum_weights, sums, true),
            None => backend.cluster_sums(batch.x, d, labels, sum_weights, sums, true),
        }
        drop(directed);
        // Centres shared out between threads, each with its moved centre;
        // the squared change summed per centre, then over centres in order.
        let counts = &mut self.counts;
        let per = k.div_ceil((moved.len() / d).max(1)).max(1);
        let weights: Vec<f64> = (0..k).map(|j| sums.weight(j)).collect();
        let mut diffs = vec![0.0; k];
        let ClusterSums { sums: s_all, sums_err: e_all, .. } = sums;
        let update =
            Update { unit: self.unit_centers, float64: self.float64_centers, columns: sparse.then_some(&columns[..]) };
        centers
            .par_chunks_mut(per * d)
            .zip(s_all.par_chunks_mut(per * d))
            .zip(e_all.par_chunks_mut(per * d))
            .zip(counts.par_chunks_mut(per))
            .zip(diffs.par_chunks_mut(per))
            .zip(weights.par_chunks(per))
            .zip(moved.par_chunks_mut(d))
            .for_each(|((((((c, s), e), n), diff), w), moved)| {
                for (((((c, s), e), n), diff), &w) in c
                    .chunks_exact_mut(d)
                    .zip(s.chunks_exact_mut(d))
                    .zip(e.chunks_exact_mut(d))
                    .zip(n.iter_mut())
                    .zip(diff.iter_mut())
                    .zip(w)
                {
                    *diff = update.center::<T>(c, s, e, n, w, moved);
                }
            });
        let centers_squared_diff: f64 = diffs.iter().sum();
        if let Some(i) = centers.iter().position(|c| !c.is_finite()) {
            // Values near float64's largest: a centre's sum overflowed.
            let what = format!("the mean of cluster {} in column {}", i / d, i % d);
            return Err(super::kmeans::overflow(sample_weight.is_some(), &what, centers[i]));
        }
        sums.weights.fill(0.0);
        sums.weights_err.fill(0.0);
        *sums_dirty = false;
        // Reassignment of the centres that absorbed the least.
        let (mut to_reassign, mut pool) = (Vec::new(), Vec::new());
        if check {
            self.n_since_last_reassign = 0;
            if reassignment_ratio > 0.0 {
                to_reassign = if self.caller_reassigns {
                    self.light(reassignment_ratio)
                } else {
                    self.lightest(reassignment_ratio, rows)
                };
            }
        }
        if !to_reassign.is_empty() {
            pool = (0..rows)
                .filter(|&r| !self.unit_centers || batch.row_values(r).0.iter().any(|v| v.to_f64() != 0.0))
                .collect();
            if !self.caller_reassigns {
                to_reassign.truncate(pool.len());
            }
        }
        Ok(Step { inertia, centers_squared_diff, to_reassign, pool })
    }

    /// The centres whose weight is below `ratio` times the largest, in
    /// increasing order.
    fn light(&self, ratio: f64) -> Vec<usize> {
        let max = self.counts.iter().copied().fold(0.0, f64::max);
        (0..self.n_clusters).filter(|&j| self.counts[j] < ratio * max).collect()
    }

    /// The centres whose weight is below `ratio` times the largest, at most
    /// `rows / 2` of them (the lightest, ties by index), in increasing
    /// order; their weights are raised to the smallest weight kept.
    fn lightest(&mut self, ratio: f64, rows: usize) -> Vec<usize> {
        let mut light = self.light(ratio);
        let cap = rows / 2;
        if light.len() > cap {
            light.sort_by(|&a, &b| self.counts[a].total_cmp(&self.counts[b]).then(a.cmp(&b)));
            light.truncate(cap);
            light.sort_unstable();
        }
        let kept_min = (0..self.n_clusters)
            .filter(|j| light.binary_search(j).is_err())
            .map(|j| self.counts[j])
            .fold(f64::INFINITY, f64::min);
        if kept_min.is_finite() {
            for &j in &light {
                self.counts[j] = kept_min;
            }
        }
        light
    }
}

/// How a centre of absorbed weight `W` moves by a batch's rows of weight
/// `s` (see [`Move::value`]).
#[derive(Clone, Copy, Debug)]
struct Move {
    s: f64,
    /// `W + s`.
    after: f64,
    /// 1 for a centre with weight (`W > 0`), 0 for one without.
    kept: f64,
}

impl Move {
    fn new(count: f64, s: f64) -> Self {
        Move { s, after: count + s, kept: if count > 0.0 { 1.0 } else { 0.0 } }
    }

    /// One feature of the moved centre, `c + (S − s c) / (W + s)` from the
    /// sum `S` and its error `err`: `S − s c` from the compensated sum
    /// `S + S_err` with one fused rounding, so that a centre whose rows all
    /// equal it stays exactly where it is. A centre without weight moves
    /// onto its rows' mean, `(S + S_err) / s` (its old value taken as 0,
    /// as scikit-learn's `(W c + S) / (W + s)`): far from its rows, `c +
    /// fl(S − s c) / s` would lose their low digits.
    #[inline(always)]
    fn value(self, c: f64, sum: f64, err: f64) -> f64 {
        let c = c * self.kept;
        c + ((-self.s).mul_add(c, sum) + err) / self.after
    }
}

/// `out` = the centre `old` moved by `m` per feature ([`Move::value`]).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn moved_center(old: &[f64], sums: &[f64], sums_err: &[f64], m: Move, out: &mut [f64]) {
    for (((o, &c), &sum), &err) in out.iter_mut().zip(old).zip(sums).zip(sums_err) {
        *o = m.value(c, sum, err);
    }
}

/// `c` set to `m` rounded to `T`, its squared change added to `lane`.
#[inline(always)]
fn round_into_lane<T: Real>(lane: &mut f64, c: &mut f64, m: f64) {
    let new = T::from_f64(m).to_f64();
    *lane += (new - *c) * (new - *c);
    *c = new;
}

/// How a step moves each centre that received rows (see the module docs).
struct Update<'a> {
    unit: bool,
    /// Centres rounded to `f64` (unchanged), not to the batch's type.
    float64: bool,
    /// A sparse batch's columns: the sums are zero elsewhere.
    columns: Option<&'a [u32]>,
}

impl Update<'_> {
    /// Moves centre `c` (its sums `s`, errors `e`, absorbed weight
    /// `count`) by the batch's weight `w`, through `moved`, and zeroes its
    /// sums; returns `‖c_new − c_old‖²` (0 when it received nothing).
    fn center<T: Real>(
        &self,
        c: &mut [f64],
        s: &mut [f64],
        e: &mut [f64],
        count: &mut f64,
        w: f64,
        moved: &mut [f64],
    ) -> f64 {
        let mut diff = 0.0;
        if w > 0.0 {
            let m = Move::new(*count, w);
            let after = m.after;
            let few_columns = self.columns.is_some_and(|columns| columns.len() < c.len() / 4);
            if !self.unit && !few_columns {
                // Moved and rounded in one pass over the centre, which
                // zeroes its sums.
                *count = after;
                return if self.float64 { moved_rounded::<f64>(c, s, e, m) } else { moved_rounded::<T>(c, s, e, m) };
            }
            match self.columns {
                // A few columns: the others move as with zero sums.
                Some(columns) if few_columns => {
                    moved_center_alone(c, m, moved);
                    moved_at_columns(c, s, e, columns, m, moved);
                }
                _ => moved_center(c, s, e, m, moved),
            }
            if self.unit {
                unit_row(moved);
            }
            diff = if self.float64 { rounded_into::<f64>(c, moved) } else { rounded_into::<T>(c, moved) };
            *count = after;
        }
        // Zero again for the next step (rows of zero weight may have added
        // signed zeros); a sparse batch wrote at its columns only.
        match self.columns {
            Some(columns) => {
                for &q in columns {
                    s[q as usize] = 0.0;
                    e[q as usize] = 0.0;
                }
            }
            None => {
                s.fill(0.0);
                e.fill(0.0);
            }
        }
        diff
    }
}

/// `c` set to `moved` rounded to `T`; returns `Σ (c_new − c_old)²` (eight
/// interleaved partial sums, then their sum).
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn rounded_into<T: Real>(c: &mut [f64], moved: &[f64]) -> f64 {
    let mut lanes = [0.0f64; 8];
    let mut chunks = c.chunks_exact_mut(8);
    let mut from = moved.chunks_exact(8);
    for (c, m) in (&mut chunks).zip(&mut from) {
        for ((l, c), &m) in lanes.iter_mut().zip(c).zip(m) {
            round_into_lane::<T>(l, c, m);
        }
    }
    for ((l, c), &m) in lanes.iter_mut().zip(chunks.into_remainder()).zip(from.remainder()) {
        round_into_lane::<T>(l, c, m);
    }
    lanes.iter().sum()
}

/// [`moved_center`] then [`rounded_into`] in one pass, without the moved
/// centre in between: the same operations, so the same centre and the
/// same sum of squared changes. The sums and errors read are zeroed for
/// the next step in the same pass.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn moved_rounded<T: Real>(c: &mut [f64], sums: &mut [f64], sums_err: &mut [f64], m: Move) -> f64 {
    let mut lanes = [0.0f64; 8];
    let mut chunks = c.chunks_exact_mut(8);
    let (mut from, mut from_err) = (sums.chunks_exact_mut(8), sums_err.chunks_exact_mut(8));
    for ((c, sum), err) in (&mut chunks).zip(&mut from).zip(&mut from_err) {
        for (((l, c), sum), err) in lanes.iter_mut().zip(c).zip(sum).zip(err) {
            round_into_lane::<T>(l, c, m.value(*c, *sum, *err));
            (*sum, *err) = (0.0, 0.0);
        }
    }
    let rest = chunks.into_remainder().iter_mut().zip(from.into_remainder()).zip(from_err.into_remainder());
    for (l, ((c, sum), err)) in lanes.iter_mut().zip(rest) {
        round_into_lane::<T>(l, c, m.value(*c, *sum, *err));
        (*sum, *err) = (0.0, 0.0);
    }
    lanes.iter().sum()
}

/// [`moved_center`] with every sum and error zero (a column no row of the
/// batch stores a value in): the same operations on literal zeros, so the
/// same bits.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn moved_center_alone(old: &[f64], m: Move, out: &mut [f64]) {
    for (o, &c) in out.iter_mut().zip(old) {
        *o = m.value(c, 0.0, 0.0);
    }
}

/// [`moved_center`] at `columns` only.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn moved_at_columns(old: &[f64], sums: &[f64], sums_err: &[f64], columns: &[u32], m: Move, out: &mut [f64]) {
    for &q in columns {
        let q = q as usize;
        out[q] = m.value(old[q], sums[q], sums_err[q]);
    }
}

/// The distinct values of `indices` (columns `< 64 · bits.len()`), in
/// increasing order, into `columns`, through a bit per column in `bits`
/// (all zero before and after).
fn stored_columns(indices: &[u32], bits: &mut [u64], columns: &mut Vec<u32>) {
    for &f in indices {
        bits[f as usize / 64] |= 1 << (f % 64);
    }
    columns.clear();
    for (w, word) in bits.iter_mut().enumerate() {
        let mut b = std::mem::take(word);
        while b != 0 {
            columns.push((w * 64) as u32 + b.trailing_zeros());
            b &= b - 1;
        }
    }
}

/// Why a mini-batch fit stopped before its last step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// A step moved the centres by at most the tolerance.
    SmallCentersChange,
    /// The smoothed batch inertia found no new minimum for the allowed
    /// number of steps.
    NoImprovement,
}

/// Early stopping of a mini-batch fit: scikit-learn's
/// `_mini_batch_convergence`, on the batch inertia smoothed by an
/// exponentially weighted average with `α = min(2 · batch_size / (n_samples
/// + 1), 1)`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EarlyStop {
    /// The smoothed mean batch inertia (from the second step on).
    pub ewa_inertia: Option<f64>,
    /// Its smallest value so far.
    pub ewa_inertia_min: Option<f64>,
    /// Steps since `ewa_inertia_min` last decreased.
    pub no_improvement: usize,
}

impl EarlyStop {
    /// Takes step `step` (zero-based) of a fit on `n_samples` rows in
    /// batches of `batch_size`: its batch inertia (the sum over the batch)
    /// and squared centre change. Returns why the fit stops, if it does:
    /// never after the first step; when `tol_abs > 0` and the change is at
    /// most `tol_abs`; when `max_no_improvement` steps in a row found no new
    /// minimum.
    #[allow(clippy::too_many_arguments)]
    pub fn update(
        &mut self,
        step: usize,
        batch_inertia: f64,
        batch_size: usize,
        n_samples: usize,
        centers_squared_diff: f64,
        tol_abs: f64,
        max_no_improvement: Option<usize>,
    ) -> Option<Stop> {
        if step == 0 {
            return None;
        }
        let mean = batch_inertia / batch_size as f64;
        let alpha = (batch_size as f64 * 2.0 / (n_samples as f64 + 1.0)).min(1.0);
        let ewa = self.ewa_inertia.map_or(mean, |e| e * (1.0 - alpha) + mean * alpha);
        self.ewa_inertia = Some(ewa);
        if tol_abs > 0.0 && centers_squared_diff <= tol_abs {
            return Some(Stop::SmallCentersChange);
        }
        if self.ewa_inertia_min.is_none_or(|m| ewa < m) {
            self.no_improvement = 0;
            self.ewa_inertia_min = Some(ewa);
        } else {
            self.no_improvement += 1;
        }
        max_no_improvement.filter(|&m| self.no_improvement >= m).map(|_| Stop::NoImprovement)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::CsrIndex;

    /// The fused move gives the centre and the squared change of the move
    /// then the rounding, in float32 and float64, at every length.
    #[test]
    fn the_fused_move_is_the_move_then_the_rounding() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        for len in [1, 7, 8, 13, 64, 301] {
            let mut random = |scale: f64| -> Vec<f64> { (0..len).map(|_| rng.random_range(-scale..scale)).collect() };
            let (c, s, e) = (random(10.0), random(1e3), random(1e-13));
            for (count, w) in [(4.5, 3.0), (0.0, 1.0), (1e9 - 0.25, 0.25)] {
                let m = Move::new(count, w);
                let mut moved = vec![0.0; len];
                moved_center(&c, &s, &e, m, &mut moved);
                let (mut want32, mut want64) = (c.clone(), c.clone());
                let d32 = rounded_into::<f32>(&mut want32, &moved);
                let d64 = rounded_into::<f64>(&mut want64, &moved);
                let (mut got32, mut got64) = (c.clone(), c.clone());
                let (mut s32, mut e32, mut s64, mut e64) = (s.clone(), e.clone(), s.clone(), e.clone());
                assert_eq!(moved_rounded::<f32>(&mut got32, &mut s32, &mut e32, m).to_bits(), d32.to_bits());
                assert_eq!(moved_rounded::<f64>(&mut got64, &mut s64, &mut e64, m).to_bits(), d64.to_bits());
                assert!([s32, e32, s64, e64].iter().flatten().all(|&v| v.to_bits() == 0), "sums zeroed");
                assert!(got32.iter().zip(&want32).all(|(a, b)| a.to_bits() == b.to_bits()));
                assert!(got64.iter().zip(&want64).all(|(a, b)| a.to_bits() == b.to_bits()));
            }
        }
    }

    fn state(centers: &[f64], k: usize) -> MiniBatch {
        let d = centers.len() / k;
        MiniBatch {
            n_clusters: k,
            n_features: d,
            counts: vec![0.0; k],
            n_since_last_reassign: 0,
            unit_centers: false,
            float64_centers: false,
            caller_reassigns: false,
        }
    }

    /// From fresh counts a step moves each centre to the mean of its rows;
    /// the next step weighs the old centre by what it absorbed.
    #[test]
    fn centres_are_running_weighted_means() {
        let mut c = vec![0.0, 10.0];
        let mut m = state(&c, 2);
        let s = m.step(&mut c, &Block::dense(0, &[1.0f64, 2.0, 9.0], None, m.n_features), 3, 0.0, &mut None).unwrap();
        assert_eq!(c, vec![1.5, 9.0]);
        assert_eq!(m.counts, vec![2.0, 1.0]);
        assert_eq!(s.inertia, 1.0 + 4.0 + 1.0);
        assert_eq!(s.centers_squared_diff, 1.5 * 1.5 + 1.0);
        let s = m
            .step(&mut c, &Block::dense(0, &[3.0f64, 11.0], Some(&[2.0, 1.0]), m.n_features), 2, 0.0, &mut None)
            .unwrap();
        assert_eq!(c, vec![(1.5 * 2.0 + 6.0) / 4.0, 10.0]);
        assert_eq!(m.counts, vec![4.0, 2.0]);
        assert_eq!(s.inertia, 2.0 * 1.5 * 1.5 + 4.0);
        assert!(s.to_reassign.is_empty());
    }

    /// A centre without weight lands exactly on its rows' mean however far
    /// it starts from them (scikit-learn's `(0 · c + S) / s`), dense and
    /// sparse; `c + fl(S − s c) / s` lost the rows' low digits.
    #[test]
    fn a_centre_without_weight_lands_on_its_rows_mean() {
        for far in [1e8, -3e15, 1.0] {
            let rows = [1.234e-3f64, 5e-4, 1.234e-3, 5e-4];
            let mut c = vec![far, far];
            let mut m = state(&c, 1);
            m.step(&mut c, &Block::dense(0, &rows, None, 2), 2, 0.0, &mut None).unwrap();
            assert_eq!(c, [1.234e-3, 5e-4], "from {far}");
            // Sparse rows storing column 0 only: column 1's mean is 0.
            let (indptr, indices, values) = ([0usize, 1, 2], [0u32, 0], [0.1f64, 0.1]);
            let csr = CsrIndex { indptr: &indptr, indices: &indices };
            let mut c = vec![far; 20];
            let mut m = state(&c, 2);
            m.step(&mut c, &Block::sparse(0, &values, csr, None, 10), 2, 0.0, &mut None).unwrap();
            let want: Vec<f64> = (0..10).map(|j| if j == 0 { 0.1 } else { 0.0 }).collect();
            assert_eq!(c[..10], want[..], "from {far}");
        }
    }

    /// Unit centres are only moved to rows with a direction: rows of zeros
    /// leave the pool, and no more centres are named than it holds.
    #[test]
    fn unit_centres_are_reassigned_to_nonzero_rows_only() {
        let batch = [0.0f64, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        let mut c = vec![1.0, 0.0, 0.0, 1.0, -1.0, 0.0];
        let mut m = state(&c, 3);
        m.unit_centers = true;
        let s = m.step(&mut c, &Block::dense(0, &batch, None, m.n_features), 5, 5.0, &mut None).unwrap();
        assert_eq!(s.pool, vec![1]);
        assert_eq!(s.to_reassign.len(), 1);
        let mut c = vec![1.0, 0.0, 0.0, 1.0, -1.0, 0.0];
        let mut m = state(&c, 3);
        let s = m.step(&mut c, &Block::dense(0, &batch, None, m.n_features), 5, 5.0, &mut None).unwrap();
        assert_eq!(s.pool, (0..5).collect::<Vec<_>>());
        assert_eq!(s.to_reassign.len(), 2);
    }

    /// A centre that absorbed nothing triggers the check; light centres are
    /// named (at most half the batch) and their weights raised.
    #[test]
    fn light_centres_are_named_for_reassignment() {
        let mut c = vec![0.0, 100.0, 200.0, 300.0];
        let mut m = state(&c, 4);
        let batch: Vec<f64> = (0..10).map(|i| f64::from(i % 2) * 0.5).chain([100.0]).collect();
        let s = m.step(&mut c, &Block::dense(0, &batch, None, m.n_features), 11, 0.5, &mut None).unwrap();
        assert_eq!(m.counts, vec![10.0; 4]);
        assert_eq!(s.to_reassign, vec![1, 2, 3]);
        assert_eq!(m.n_since_last_reassign, 0);
        // Two rows: at most one centre, the lightest (lowest index on ties).
        let mut c = vec![0.0, 100.0, 200.0];
        let mut m = state(&c, 3);
        m.counts = vec![10.0, 2.0, 1.0];
        m.n_since_last_reassign = 28;
        let s = m.step(&mut c, &Block::dense(0, &[0.0f64, 0.0], None, m.n_features), 2, 0.5, &mut None).unwrap();
        assert_eq!(s.to_reassign, vec![2]);
        assert_eq!(m.counts, vec![12.0, 2.0, 2.0]);
    }

    /// scikit-learn's rule: nothing on the first step, the smoothed inertia
    /// from the second, a stop on a small change or after the allowed steps
    /// without a new minimum.
    #[test]
    fn early_stop_is_scikit_learns() {
        let mut e = EarlyStop::default();
        assert_eq!(e.update(0, 100.0, 10, 99, 0.0, 1.0, Some(2)), None);
        assert_eq!(e.ewa_inertia, None);
        assert_eq!(e.update(1, 100.0, 10, 99, 5.0, 1.0, Some(2)), None);
        assert_eq!(e.ewa_inertia, Some(10.0));
        assert_eq!(e.update(2, 200.0, 10, 99, 5.0, 1.0, Some(2)), None);
        assert_eq!(e.ewa_inertia, Some(10.0 * 0.8 + 20.0 * 0.2));
        assert_eq!(e.update(3, 200.0, 10, 99, 5.0, 1.0, Some(2)), Some(Stop::NoImprovement));
        assert_eq!(e.update(4, 0.0, 10, 99, 0.5, 1.0, None), Some(Stop::SmallCentersChange));
        assert_eq!(e.update(5, 300.0, 10, 99, 0.5, 0.0, None), None);
    }

    /// A centre whose rows all equal it does not move, however much it has
    /// absorbed.
    #[test]
    fn centres_on_their_rows_stay_exact() {
        let x = 0.1f64 + 1e-3 / 7.0;
        let mut c = vec![x, x * 3.0];
        let mut m = state(&c, 2);
        m.counts = vec![0.0, 0.0];
        let mut work = None;
        for step in 0..50 {
            m.step(&mut c, &Block::dense(0, &vec![x; 1 + step % 7], None, m.n_features), 1, 0.0, &mut work).unwrap();
            assert_eq!(c[0], x, "step {step}");
        }
        assert_eq!(m.counts[0], (0..50).map(|s| (1 + s % 7) as f64).sum::<f64>());
    }

    /// Buffers kept from step to step (grown when a batch outgrows them)
    /// give the same bits as buffers made for each step.
    #[test]
    fn kept_buffers_give_the_same_steps() {
        let (k, d) = (5, 40);
        let value = |i: usize| ((i * 7919) % 1013) as f64 / 101.0 - 5.0;
        let centers: Vec<f64> = (0..k * d).map(|i| value(i * 3 + 1)).collect();
        let (mut kept, mut fresh) = (state(&centers, k), state(&centers, k));
        let (mut kept_c, mut fresh_c) = (centers.clone(), centers);
        let mut work = Some(StepWork::new(k, d, 8, 2, false));
        for step in 0..12 {
            let rows = [8, 3, 20, 1][step % 4];
            let batch: Vec<f32> = (0..rows * d).map(|i| value(i + step * 1000) as f32).collect();
            let a = kept.step(&mut kept_c, &Block::dense(0, &batch, None, d), rows, 0.01, &mut work).unwrap();
            let b = fresh.step(&mut fresh_c, &Block::dense(0, &batch, None, d), rows, 0.01, &mut None).unwrap();
            assert_eq!((a.inertia.to_bits(), a.to_reassign), (b.inertia.to_bits(), b.to_reassign));
            assert_eq!(kept_c, fresh_c);
            assert_eq!(kept.counts, fresh.counts);
        }
    }

    #[test]
    fn bad_batches_are_errors() {
        let mut c = vec![0.0, 0.0, 1.0, 1.0];
        let mut m = state(&c, 2);
        assert!(m.step(&mut c, &Block::dense(0, &[1.0f64, 2.0, 3.0], None, m.n_features), 1, 0.0, &mut None).is_err());
        assert!(m.step(&mut c, &Block::dense(0, &[1.0f64, f64::NAN], None, m.n_features), 1, 0.0, &mut None).is_err());
        assert!(m.step(&mut c, &Block::dense(0, &[1.0f64, 2.0], Some(&[-1.0]), 2), 1, 0.0, &mut None).is_err());
        assert!(m.step(&mut c, &Block::dense(0, &[1.0f64, 2.0], Some(&[1.0, 1.0]), 2), 1, 0.0, &mut None).is_err());
        assert!(m.step(&mut c, &Block::dense(0, &[1.0f64, 2.0, 3.0], None, 3), 1, 0.0, &mut None).is_err());
        // A sparse batch's non-finite value is named by its row and column.
        let csr = CsrIndex { indptr: &[0, 1, 2], indices: &[1, 0] };
        let err =
            m.step(&mut c, &Block::sparse(0, &[1.0f64, f64::INFINITY], csr, None, 2), 1, 0.0, &mut None).unwrap_err();
        assert!(err.to_string().contains("row 1, column 0 of the batch is not finite"), "{err}");
    }

    /// A step on sparse (CSR) rows moves the centres, counts and names the
    /// centres to reassign exactly as the step on the same rows densified,
    /// weighted or not, with kept or fresh buffers; unit centres' pool
    /// leaves out rows without a stored nonzero.
    #[test]
    fn sparse_batches_step_as_their_dense_rows() {
        let (k, d) = (4, 30);
        let value = |i: usize| ((i * 7919) % 1013) as f64 / 101.0 - 5.0;
        let centers: Vec<f64> = (0..k * d).map(|i| value(i * 3 + 1)).collect();
        for (weighted, unit) in [(false, false), (true, false), (false, true)] {
            let (mut sparse, mut dense) = (state(&centers, k), state(&centers, k));
            let (mut sparse_c, mut dense_c) = (centers.clone(), centers.clone());
            sparse.unit_centers = unit;
            dense.unit_centers = unit;
            let mut work = Some(StepWork::new(k, d, 16, 2, true));
            for step in 0..10 {
                let rows = [16, 5, 9][step % 3];
                let (mut indptr, mut indices, mut values) = (vec![0usize], Vec::new(), Vec::new());
                let mut rows_dense = vec![0.0f64; rows * d];
                for r in 0..rows {
                    // Row 2 of each batch stores nothing; others a few columns.
                    for j in (0..d).filter(|j| r != 2 && (j * 31 + r * 7 + step) % 5 == 0) {
                        let v = value(r * d + j + step * 977);
                        indices.push(j as u32);
                        values.push(v);
                        rows_dense[r * d + j] = v;
                    }
                    indptr.push(values.len());
                }
                let w: Vec<f64> = (0..rows).map(|r| 0.5 + (r % 3) as f64).collect();
                let w = weighted.then_some(&w[..]);
                let csr = CsrIndex { indptr: &indptr, indices: &indices };
                let a =
                    sparse.step(&mut sparse_c, &Block::sparse(0, &values, csr, w, d), rows, 0.2, &mut work).unwrap();
                let b = dense.step(&mut dense_c, &Block::dense(0, &rows_dense, w, d), rows, 0.2, &mut None).unwrap();
                assert_eq!((&a.to_reassign, &a.pool), (&b.to_reassign, &b.pool), "step {step}");
                assert!(!unit || !a.pool.contains(&2));
                assert!((a.inertia - b.inertia).abs() <= 1e-12 * b.inertia.max(1.0));
                assert_eq!(sparse_c, dense_c, "step {step}");
                assert_eq!(sparse.counts, dense.counts);
            }
        }
    }
}
