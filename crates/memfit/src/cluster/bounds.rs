//! Bounded Lloyd iterations with exactly Lloyd's labels: Hamerly's bounds
//! (G. Hamerly, "Making k-means even faster", SDM 2010) widened by proven
//! rounding margins, so a row keeps its label without the other distances
//! only when no other centre could be the exact nearest one.
//!
//! # Per-row state
//! Each row holds its label `a` and `l`, a lower bound on the true distance
//! ‖x − c_j‖ to every other centre `j ≠ a` (two `f64` per row, in memory or
//! in an unnamed scratch file through [`RowStates`]). When the centres move,
//! `l` drops by the largest drift of the other centres (the triangle
//! inequality: ‖x − c′_j‖ ≥ ‖x − c_j‖ − ‖c_j − c′_j‖).
//!
//! # The test
//! Every pass computes D̃_a = [`crate::kernels::exact_sq_dist`]`(x, c_a)` (O(d), needed for the
//! inertia anyway; [`crate::kernels::unit_sq_dist`] for cosine k-means' unit rows): the
//! bits the full assignment reports for the label. With `s_a` ≤ half the
//! true distance from `c_a` to its nearest other centre and U ≥ √D_a (D̃
//! errs by at most γ₆₄(d + 6) D + η, η the squares' underflow and for unit
//! rows [`crate::kernels::unit_sq_dist`]'s error, see [`PreparedCenters::slack`]), every other centre has
//! √D_j ≥ L = max(l, 2 s_a − U), so D̃_j ≥ L² (1 − γ₆₄) − η. The row keeps `a`
//! when D̃_a + η < L² (1 − γ₆₄) (lowered by its roundings): then D̃_a is the
//! unique minimum over all centres, which is the label and distance the full
//! assignment gives (lowest index on ties is moot: there is no tie). Every
//! other row goes through [`crate::kernels::assign_rows`] (the exact, certified kernel),
//! which also returns a lower bound on its second-nearest distance
//! ([`crate::kernels::second_bound`]) for the new `l`. Labels and distances
//! being Lloyd's, the sums, inertia, empty-cluster refills and iteration
//! count are too, bit for bit.
//!
//! # On a cluster
//! A pass over rows held elsewhere (see [`crate::exec::Remote`]) runs as
//! one task per range: the client keeps the centre side (the centres the
//! states refer to, drifts, half gaps) and ships it in the task
//! ([`BoundsTask`]); each range's row states stay where its task ran, kept
//! by the remote between passes ([`crate::exec::RowStateUse`]). A range
//! whose states were lost starts afresh (a full assignment of its rows):
//! the statistics are the same either way.

use std::sync::atomic::{AtomicU64, Ordering};

use multiversion::multiversion;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::backend::Ops;
use crate::dtype::Real;
use crate::error::Result;
use crate::exec::{RowStateUse, RowStates};
use crate::kernels::{decision_dist, underflow_slack, PreparedCenters, Scratch};

/// `f64` values of state per row: the label (−1 before the first full
/// assignment) and the lower bound.
pub(crate) const WIDTH: usize = 2;

/// A state that has no bounds yet: assigned in full.
const FRESH: [f64; WIDTH] = [-1.0, 0.0];

/// Rounding allowance of a few `f64` operations.
const ROUND: f64 = 8.0 * f64::EPSILON;

/// γ₆₄(n) = n u / (1 − n u), with u = 2⁻⁵³.
fn gamma64(n: usize) -> f64 {
    let nu = n as f64 * f64::EPSILON / 2.0;
    nu / (1.0 - nu)
}

/// Most rows assigned in full together (a tile's rows that need it are
/// copied in batches of this many; a row's result does not depend on the
/// batch), so that the buffers stay small whatever the tile.
pub(crate) const COMPACT_ROWS: usize = 256;

/// Per-thread buffers of the bounded pass: rows that need the full
/// assignment, copied together, with their results.
pub(crate) struct Compact<T> {
    x: Vec<T>,
    index: Vec<u32>,
    labels: Vec<u32>,
    dist: Vec<f64>,
    second: Vec<f64>,
}

impl<T: Real> Compact<T> {
    fn new(tile_rows: usize, d: usize) -> Self {
        let tile_rows = tile_rows.min(COMPACT_ROWS);
        Compact {
            x: vec![T::default(); tile_rows * d],
            index: vec![0; tile_rows],
            labels: vec![0; tile_rows],
            dist: vec![0.0; tile_rows],
            second: vec![0.0; tile_rows],
        }
    }

    /// Bytes of one thread's buffers for tiles of `tile_rows` rows of `d`
    /// features in a compute type of `compute_bytes`.
    pub(crate) fn bytes(tile_rows: usize, d: usize, compute_bytes: usize) -> u64 {
        (tile_rows.min(COMPACT_ROWS) * (d * compute_bytes + 4 + 4 + 8 + 8)) as u64
    }

    /// Assigns the `full` rows held in full (see [`crate::kernels::assign_rows`]) and
    /// writes their labels, distances and new states at their indices.
    fn flush(
        &mut self,
        full: usize,
        shared: &Shared<'_, T>,
        scratch: &mut Scratch<T>,
        labels: &mut [u32],
        dist: &mut [f64],
        states: &mut [f64],
    ) {
        if full == 0 {
            return;
        }
        let d = shared.d;
        shared.backend.assign_rows(
            &self.x[..full * d],
            shared.centers,
            shared.k_tile,
            scratch,
            &mut self.labels[..full],
            &mut self.dist[..full],
            Some(&mut self.second[..full]),
        );
        for q in 0..full {
            let i = self.index[q] as usize;
            labels[i] = self.labels[q];
            dist[i] = self.dist[q];
            states[i * WIDTH] = f64::from(self.labels[q]);
            states[i * WIDTH + 1] = self.second[q].sqrt() * (1.0 - ROUND);
        }
    }
}

/// Bytes of the centre-side bounds of `k` centres of `d` features: the
/// centres the row bounds refer to, each centre's drift and half gap.
pub(crate) fn centre_bytes(k: usize, d: usize) -> u64 {
    (k * d * 8 + 2 * k * 8) as u64
}

/// The bounds of one run: per-row states, the centres they refer to, and
/// per centre the drift since then and half the gap to its nearest other
/// centre.
pub(crate) struct Bounds<T> {
    /// Names these bounds' row states when they are kept elsewhere.
    id: u64,
    states: RowStates,
    /// Every row needs a full assignment (the run's first pass).
    fresh: bool,
    /// The centres the states refer to (row-major `(k, d)`).
    referred: Vec<f64>,
    /// The largest drift, its centre, and the second largest.
    drift: (f64, usize, f64),
    /// Per centre: at most half the true distance to its nearest other centre.
    half_gap: Vec<f64>,
    /// Whether the half gaps are computed (k² d work): when k ≤ √n.
    use_gaps: bool,
    compact: Vec<Compact<T>>,
    k: usize,
    d: usize,
}

impl<T: Real> Bounds<T> {
    /// Bounds for `n_rows` rows from `first_row` on, `k` centres of `d`
    /// features, `threads` workers with tiles of `tile_rows` rows; `states`
    /// from [`RowStates::in_memory`] or [`RowStates::on_disk`] of
    /// [`WIDTH`] (of no rows when the rows' states are kept by the tasks of
    /// a remote split, see the module docs).
    pub(crate) fn new(states: RowStates, k: usize, d: usize, threads: usize, tile_rows: usize, n_rows: usize) -> Self {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Bounds {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            states,
            fresh: true,
            referred: Vec::new(),
            drift: (0.0, 0, 0.0),
            half_gap: vec![0.0; k],
            use_gaps: k.saturating_mul(k) <= n_rows,
            compact: (0..threads.max(1)).map(|_| Compact::new(tile_rows, d)).collect(),
            k,
            d,
        }
    }

    /// Records that the centres are now `centers` (row-major `(k, d)`):
    /// their drifts from the centres the states refer to (upper bounds on
    /// the true distances) and their half gaps (lower bounds).
    pub(crate) fn moved_to(&mut self, centers: &[f64]) {
        let (k, d) = (self.k, self.d);
        if self.referred.is_empty() {
            self.referred = centers.to_vec();
        }
        let widen = (1.0 + gamma64(2 * d + 4)) * (1.0 + ROUND);
        // Squares below f64's smallest normal lose up to η in all.
        let eta = underflow_slack(d);
        let (mut m1, mut a1, mut m2) = (0.0f64, 0usize, 0.0f64);
        for j in 0..k {
            let (old, new) = (&self.referred[j * d..(j + 1) * d], &centers[j * d..(j + 1) * d]);
            let sq: f64 = old.iter().zip(new).map(|(a, b)| (a - b) * (a - b)).sum();
            let drift = (sq + eta).sqrt() * widen;
            if drift > m1 {
                (m2, m1, a1) = (m1, drift, j);
            } else if drift > m2 {
                m2 = drift;
            }
        }
        // Composed with the drifts not yet applied to the rows (none: every
        // pass applies them), so the latest move replaces them.
        self.drift = (m1, a1, m2);
        self.referred.copy_from_slice(centers);
        if self.use_gaps && k > 1 {
            let lower = (1.0 - gamma64(2 * d + 4)) * (1.0 - ROUND);
            for j in 0..k {
                let cj = &centers[j * d..(j + 1) * d];
                let nearest = (0..k)
                    .filter(|&i| i != j)
                    .map(|i| centers[i * d..(i + 1) * d].iter().zip(cj).map(|(a, b)| (a - b) * (a - b)).sum::<f64>())
                    .fold(f64::INFINITY, f64::min);
                self.half_gap[j] = 0.5 * (nearest - eta).max(0.0).sqrt() * lower;
            }
        }
    }

    /// Assigns the rows `start..start + rows` of a block (`x` row-major) to
    /// `centers` (the centres of the last [`Self::moved_to`]) on `backend`,
    /// writing the labels and exact distances that its assignment writes,
    /// in tiles of `tile_rows` rows and `k_tile` centres in parallel over
    /// `scratch`; returns how many rows kept
    /// their label without the other distances.
    ///
    /// # Errors
    /// Scratch-file errors of the states on disk.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn assign_block(
        &mut self,
        backend: &dyn Ops<T>,
        x: &[T],
        start: usize,
        centers: &PreparedCenters<T>,
        (tile_rows, k_tile): (usize, usize),
        scratch: &mut [Scratch<T>],
        labels: &mut [u32],
        dist: &mut [f64],
    ) -> Result<u64> {
        let (d, rows) = (self.d, labels.len());
        let fresh = self.fresh;
        let states = self.states.rows(start, rows, fresh.then_some(&FRESH[..]))?;
        let workers = scratch.len().min(self.compact.len()).max(1);
        let n_tiles = rows.div_ceil(tile_rows);
        let per_worker = n_tiles.div_ceil(workers).max(1) * tile_rows;
        let shared = Shared {
            backend,
            centers,
            drift: self.drift,
            half_gap: &self.half_gap,
            use_gaps: self.use_gaps,
            k_tile,
            d,
        };
        let skipped: u64 = scratch[..workers]
            .par_iter_mut()
            .zip(self.compact[..workers].par_iter_mut())
            .zip(labels.par_chunks_mut(per_worker))
            .zip(dist.par_chunks_mut(per_worker))
            .zip(states.par_chunks_mut(per_worker * WIDTH))
            .enumerate()
            .map(|(w, ((((s, c), lab), dis), st))| {
                let base = w * per_worker;
                let mut skipped = 0;
                for (t, ((l, m), st)) in lab
                    .chunks_mut(tile_rows)
                    .zip(dis.chunks_mut(tile_rows))
                    .zip(st.chunks_mut(tile_rows * WIDTH))
                    .enumerate()
                {
                    let r0 = base + t * tile_rows;
                    skipped += shared.tile(&x[r0 * d..(r0 + l.len()) * d], s, c, l, m, st);
                }
                skipped
            })
            .sum();
        self.states.store(start, rows)?;
        Ok(skipped)
    }

    /// The next pass assigns every row in full (bounds paused for passes
    /// without them are stale).
    pub(crate) fn restart(&mut self) {
        self.fresh = true;
    }

    /// Called after each full pass over the rows: the states now refer to
    /// the centres of the last [`Self::moved_to`].
    pub(crate) fn passed(&mut self) {
        self.fresh = false;
    }

    /// The row states a pass's tasks keep where they run.
    pub(crate) fn row_state(&self) -> RowStateUse {
        RowStateUse { id: self.id, fresh: self.fresh }
    }

    /// The centre side a task over some of the rows needs (see the module
    /// docs).
    pub(crate) fn task(&self) -> BoundsTask {
        BoundsTask { drift: self.drift, half_gap: self.half_gap.clone(), use_gaps: self.use_gaps }
    }

    /// The bounds of a task over `n_rows` rows from `first_row` on (the
    /// range's `states` kept from its last task, of [`WIDTH`] values per
    /// row, or `None`: a full assignment of every row), with the client's
    /// centre side `task` for `k` centres of `d` features, `threads`
    /// workers and tiles of `tile_rows` rows.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn of_task(
        task: BoundsTask,
        states: Option<Vec<f64>>,
        first_row: usize,
        n_rows: usize,
        k: usize,
        d: usize,
        threads: usize,
        tile_rows: usize,
    ) -> Self {
        let kept = states.filter(|s| s.len() == n_rows * WIDTH);
        let fresh = kept.is_none();
        let states = match kept {
            Some(v) => RowStates::from_values(first_row, n_rows, WIDTH, v),
            None => RowStates::in_memory(first_row, n_rows, WIDTH),
        };
        let mut b = Bounds::new(states, k, d, threads, tile_rows, n_rows);
        (b.fresh, b.drift, b.half_gap, b.use_gaps) = (fresh, task.drift, task.half_gap, task.use_gaps);
        b
    }

    /// The row states after the task's pass, to keep for the next one.
    pub(crate) fn into_states(self) -> Option<Vec<f64>> {
        self.states.into_values()
    }

    /// Feeds the labels of the last pass (rows `first_row..first_row +
    /// n_rows`, in row order) to `sink`, through `labels` (at most the
    /// states' block of rows at a time): a run whose last pass moved no
    /// centre has its final labels here, without reading the data again.
    ///
    /// # Errors
    /// Scratch read errors; the sink's errors.
    pub(crate) fn labels_to(
        &mut self,
        first_row: usize,
        n_rows: usize,
        labels: &mut [u32],
        sink: &mut dyn FnMut(&[u32]) -> Result<()>,
    ) -> Result<()> {
        debug_assert!(!self.fresh, "a pass has set every label");
        let step = labels.len().max(1);
        let end = first_row + n_rows;
        let mut start = first_row;
        while start < end {
            let rows = step.min(end - start);
            let states = self.states.rows(start, rows, None)?;
            for (l, s) in labels.iter_mut().zip(states.chunks_exact(WIDTH)) {
                *l = s[0] as u32;
            }
            sink(&labels[..rows])?;
            start += rows;
        }
        Ok(())
    }
}

/// The centre side of the bounds, for a task over some of the rows: see
/// [`Bounds::task`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct BoundsTask {
    drift: (f64, usize, f64),
    half_gap: Vec<f64>,
    use_gaps: bool,
}

/// What every worker of a bounded pass reads.
struct Shared<'a, T: Real> {
    backend: &'a dyn Ops<T>,
    centers: &'a PreparedCenters<T>,
    drift: (f64, usize, f64),
    half_gap: &'a [f64],
    use_gaps: bool,
    k_tile: usize,
    d: usize,
}

impl<T: Real> Shared<'_, T> {
    /// One tile: the test for every row, the full assignment for the rows
    /// that fail it (copied together); returns the rows that passed.
    fn tile(
        &self,
        x: &[T],
        scratch: &mut Scratch<T>,
        c: &mut Compact<T>,
        labels: &mut [u32],
        dist: &mut [f64],
        states: &mut [f64],
    ) -> u64 {
        let d = self.d;
        let rows = labels.len();
        // First every row's test, then the rows that fail it, assigned in
        // full in batches.
        let mut cleared = [false; crate::plan::TILE_ROWS];
        let cleared = &mut cleared[..rows];
        test_rows(x, self, TestOut { labels, dist, states, cleared });
        let (mut full, mut passed) = (0, rows);
        for i in (0..rows).filter(|&i| !cleared[i]) {
            c.x[full * d..(full + 1) * d].copy_from_slice(&x[i * d..(i + 1) * d]);
            c.index[full] = i as u32;
            full += 1;
            if full == c.index.len() {
                c.flush(full, self, scratch, labels, dist, states);
                passed -= full;
                full = 0;
            }
        }
        c.flush(full, self, scratch, labels, dist, states);
        passed -= full;
        passed as u64
    }
}

/// Hamerly's test for each row of a tile (see the module docs): writes the
/// row's label, its exact distance [`crate::kernels::decision_dist`] to it and its dropped
/// lower bound, and whether the test clears it.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn test_rows<T: Real>(x: &[T], s: &Shared<'_, T>, out: TestOut<'_>) {
    // A const width lets the compiler unroll the distance of narrow rows.
    macro_rules! fixed {
        ($($n:literal)*) => {
            match s.d {
                $($n => test_rows_of::<T, $n>(x, s, out),)*
                _ => test_rows_of::<T, 0>(x, s, out),
            }
        };
    }
    fixed!(1 2 3 4 5 6 7 8);
}

/// What [`test_rows`] writes for each row of a tile.
struct TestOut<'a> {
    labels: &'a mut [u32],
    dist: &'a mut [f64],
    states: &'a mut [f64],
    cleared: &'a mut [bool],
}

/// [`test_rows`] for rows of `D` features (`D = 0`: any width).
///
/// In phases over the tile, each a loop without branches over arrays (the
/// outcome is data dependent: mispredicted branches cost more than the
/// arithmetic); the first, which reads no centre, runs in vector lanes.
#[inline(always)]
fn test_rows_of<T: Real, const D: usize>(x: &[T], s: &Shared<'_, T>, out: TestOut<'_>) {
    let TestOut { labels, dist, states, cleared } = out;
    let d = if D == 0 { s.d } else { D };
    let k = s.centers.n_clusters;
    let rows = labels.len();
    let g = gamma64(d + 6);
    // D̃_j ≥ L² (1 − γ₆₄) for every other centre: `own` below `keep · L²`
    // (lowered for its own roundings) keeps the label.
    let keep = (1.0 - g) * (1.0 - ROUND);
    let inv = 1.0 / (1.0 - g) * (1.0 + ROUND);
    // η of the exact distances (for unit rows, of `unit_sq_dist`).
    let (eta, unit) = (s.centers.slack(), s.centers.is_unit());
    let (m1, a1, m2) = s.drift;
    let gap_weight = if s.use_gaps { 2.0 } else { 0.0 };
    // Labels below `k` (−1, a fresh row, reads centre 0 and is not
    // cleared): the clamp lets the compiler drop the bounds checks.
    let last = k as u32 - 1;
    let (centers, half_gap) = (&s.centers.centers()[..k * d], &s.half_gap[..k]);
    let x = &x[..rows * d];
    let mut known = [false; crate::plan::TILE_ROWS];
    let mut lower = [0.0f64; crate::plan::TILE_ROWS];
    let (known, lower, states) = (&mut known[..rows], &mut lower[..rows], &mut states[..rows * WIDTH]);
    // The labels and dropped lower bounds.
    for (((label, kn), lo), st) in
        labels.iter_mut().zip(known.iter_mut()).zip(lower.iter_mut()).zip(states.chunks_exact_mut(WIDTH))
    {
        *kn = st[0] >= 0.0;
        let a = (st[0].max(0.0) as u32).min(last);
        let dropped = st[1] - if a as usize == a1 { m2 } else { m1 };
        let l = if dropped > 0.0 { dropped * (1.0 - ROUND) } else { 0.0 };
        *label = a;
        *lo = l;
        st[1] = l;
    }
    // Each row's exact distance to its centre: the bits the full assignment
    // reports for the label.
    for ((own, &a), row) in dist.iter_mut().zip(labels.iter()).zip(x.chunks_exact(d)) {
        let c = a.min(last) as usize * d;
        *own = decision_dist(unit, row, &centers[c..c + d]);
    }
    // The test.
    for ((((clear, &own), &a), &kn), &l) in
        cleared.iter_mut().zip(dist.iter()).zip(labels.iter()).zip(known.iter()).zip(lower.iter())
    {
        let upper = ((own + eta) * inv).sqrt() * (1.0 + ROUND);
        // Without the gaps: −upper, below zero, which says nothing.
        let by_gap = (gap_weight * half_gap[a.min(last) as usize] - upper) * (1.0 - ROUND);
        // A negative bound says nothing (and must not square to one).
        let lo = if l > by_gap { l } else { by_gap };
        let lo = if lo > 0.0 { lo } else { 0.0 };
        *clear = kn & ((k == 1) | (own + eta < keep * lo * lo));
    }
}
