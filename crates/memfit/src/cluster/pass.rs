//! The nearest-centre pass: every row's exact nearest centre
//! ([`crate::kernels::assign_block`]) and, per accumulation chunk, the
//! statistics k-means needs from it: inertia, per-cluster weighted sums and
//! weights, or the rows farthest from their centres (with their values).
//!
//! One pass serves the Lloyd iterations (sums), the refill of clusters an
//! iteration left empty (farthest rows), the final assignment of a fit
//! (labels, row counts, plot sample) and `predict` (labels and distances of
//! new data).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rayon::prelude::*;

use crate::dtype::Real;
use crate::error::Result;
use crate::exec::Backend;
use crate::exec::{Block, Cancel, KeyedSample, Leaf, Merge, Pass};
use crate::kernels::{decision_dist, ClusterSums, PreparedCenters, Scratch, SparseScratch, MAX_PARTIAL_BYTES};
use crate::plan::{Plan, TILE_ROWS};

/// Receives each block's labels and squared distances, in row order.
pub type AssignSink<'f> = &'f mut dyn FnMut(&[u32], &[f64]) -> Result<()>;

/// A row far from its centre, with its values and weight.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct FarRow {
    pub(crate) dist: f64,
    pub(crate) row: usize,
    pub(crate) label: u32,
    pub(crate) weight: f64,
    /// The row's values in the compute type, as `f64`.
    pub(crate) values: Vec<f64>,
}

impl PartialEq for FarRow {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o).is_eq()
    }
}
impl Eq for FarRow {}
impl PartialOrd for FarRow {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for FarRow {
    /// Farther is greater; at equal distance the lower row is greater.
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.dist.total_cmp(&o.dist).then(o.row.cmp(&self.row))
    }
}

/// The `cap` rows farthest from their centres (the top of a total order, so
/// the same set whatever order rows are offered in).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct Farthest {
    cap: usize,
    heap: BinaryHeap<Reverse<FarRow>>,
}

impl Farthest {
    /// Bytes of a full list of `cap` rows of `d` features, and of the one
    /// row being measured (see [`Farthest::offer_sparse`]).
    pub(crate) fn bytes(cap: usize, d: usize) -> u64 {
        ((cap + 1) * (d * 8 + size_of::<FarRow>())) as u64
    }

    fn would_take(&self, dist: f64, row: usize) -> bool {
        self.heap.len() < self.cap
            || self.heap.peek().is_some_and(|Reverse(m)| dist.total_cmp(&m.dist).then(m.row.cmp(&row)).is_gt())
    }

    fn offer(&mut self, r: FarRow) {
        if self.would_take(r.dist, r.row) {
            if self.heap.len() == self.cap {
                self.heap.pop();
            }
            self.heap.push(Reverse(r));
        }
    }

    /// Offers a row whose values `fill` writes (into a cleared buffer),
    /// reusing the values buffer of the row it evicts: a full list takes
    /// rows without allocating.
    fn offer_with(&mut self, dist: f64, row: usize, label: u32, weight: f64, fill: impl FnOnce(&mut Vec<f64>)) {
        if !self.would_take(dist, row) {
            return;
        }
        let mut values = if self.heap.len() == self.cap {
            self.heap.pop().map(|Reverse(r)| r.values).unwrap_or_default()
        } else {
            Vec::new()
        };
        values.clear();
        fill(&mut values);
        self.heap.push(Reverse(FarRow { dist, row, label, weight, values }));
    }

    /// Offers sparse row `i` of `block` (block row `row`), whose distance
    /// `approx` to its centre `label` of `centers` came from its stored
    /// values: within a relative (2 nnz + 2)·7·u₆₄ of the exact distance
    /// (see [`crate::kernels::sparse`]; the dense row's bits for unit rows),
    /// which the dense row's exact distance
    /// ([`PreparedCenters::exact_dist`]) is within γ₆₄(d + 6) of, plus the
    /// squares' underflow. A row that could be taken with the largest such
    /// error is measured as the dense row is, so the list holds the rows,
    /// and the distances, of the dense data.
    fn offer_sparse<T: Real>(
        &mut self,
        block: &Block<'_, T>,
        i: usize,
        approx: f64,
        centers: &PreparedCenters<T>,
        r: (usize, u32, f64),
    ) {
        let (row, label, weight) = r;
        let d = block.n_features;
        let nnz = block.row_values(i).0.len();
        let slack = (16 * (nnz + d + 8)) as f64 * f64::EPSILON;
        let upper = approx * (1.0 + slack) + (2 * (nnz + d + 8)) as f64 * f64::MIN_POSITIVE;
        if !self.would_take(upper, row) {
            return;
        }
        let mut values = Vec::with_capacity(d);
        block.dense_row_into(i, &mut values);
        // The row's values as `f64` (exact): the bits of its own type's.
        let dist = decision_dist(centers.is_unit(), &values, centers.center(label as usize));
        self.offer(FarRow { dist, row, label, weight, values });
    }

    /// The rows, farthest first.
    pub(crate) fn into_sorted(self) -> Vec<FarRow> {
        let mut all: Vec<FarRow> = self.heap.into_iter().map(|Reverse(r)| r).collect();
        all.sort_by(|a, b| b.cmp(a));
        all
    }
}

/// Statistics of the nearest-centre pass over some rows.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct AssignStats {
    /// `Σ w_i ‖x_i − c_{l_i}‖²`, from exact differences.
    pub(crate) inertia: f64,
    /// Per-cluster compensated `Σ w_i x_i` and `Σ w_i` (Lloyd passes only).
    pub(crate) sums: ClusterSums,
    /// Per-cluster row counts (final passes only).
    pub(crate) counts: Vec<f64>,
    /// Rows farthest from their centres (Lloyd passes only).
    pub(crate) farthest: Farthest,
    /// Rows that kept their label without the other distances (bounded
    /// passes only).
    #[serde(default)]
    pub(crate) skipped: u64,
}

impl AssignStats {
    /// Bytes of the statistics of a Lloyd pass over `k` clusters of `d`
    /// features (sums and weights, and for `sparse` rows their marks) and
    /// of a farthest pass (`k` rows with their values), counted together: a
    /// farthest pass runs while the Lloyd pass's sums are held.
    pub(crate) fn lloyd_bytes(k: usize, d: usize, sparse: bool) -> u64 {
        ClusterSums::bytes_for_rows(k, d, sparse) as u64 + Farthest::bytes(k, d)
    }

    /// Whether chunks are summed in parallel (small per-cluster sums) rather
    /// than one at a time with the clusters split between threads.
    fn parallel_chunks(k: usize, d: usize) -> bool {
        ClusterSums::bytes(k, d) <= MAX_PARTIAL_BYTES
    }

    /// How many statistics a pass holds at once: the folded prefix and the
    /// open chunk, plus one per chunk of a block when chunks run in
    /// parallel (see [`crate::exec::Pass::chunks_at_once`]).
    pub(crate) fn held(k: usize, d: usize, block_rows: usize) -> u64 {
        if Self::parallel_chunks(k, d) {
            2 + block_rows.div_ceil(crate::plan::CHUNK_ROWS) as u64
        } else {
            2
        }
    }
}

impl AssignStats {
    /// A Lloyd pass's statistics made of `sums` alone, to recycle them
    /// ([`Assignment::recycle`]).
    pub(crate) fn of_sums(sums: ClusterSums) -> Self {
        AssignStats {
            inertia: 0.0,
            sums,
            counts: Vec::new(),
            farthest: Farthest { cap: 0, heap: BinaryHeap::new() },
            skipped: 0,
        }
    }
}

impl Merge for AssignStats {
    fn merge(&mut self, next: &Self) {
        self.inertia += next.inertia;
        self.skipped += next.skipped;
        self.sums.merge(&next.sums);
        self.counts.iter_mut().zip(&next.counts).for_each(|(a, b)| *a += b);
        for Reverse(r) in &next.farthest.heap {
            self.farthest.offer(r.clone());
        }
    }

    fn clear(&mut self) {
        self.inertia = 0.0;
        self.skipped = 0;
        self.sums.clear();
        self.counts.fill(0.0);
        self.farthest.heap.clear();
    }
}

/// Per-block labels and distances, the per-thread tiles of the kernel, and
/// the backend that runs it.
pub(crate) struct Assignment<T> {
    backend: Backend,
    labels: Vec<u32>,
    dist: Vec<f64>,
    tiles: Vec<Scratch<T>>,
    /// Per-thread buffers for sparse rows (empty for dense data).
    sparse: Vec<SparseScratch<T>>,
    /// Cleared statistics of earlier Lloyd passes, handed out again (their
    /// per-cluster sums are the pass's largest buffers: allocating them
    /// every pass costs fresh pages).
    spare: std::sync::Mutex<Vec<AssignStats>>,
    pub(super) tile_rows: usize,
    k_tile: usize,
}

impl<T: Real> Assignment<T> {
    /// The block of labels (to fill from elsewhere, such as the bounds).
    pub(crate) fn labels_mut(&mut self) -> &mut [u32] {
        &mut self.labels
    }

    /// Buffers for `plan` and `n_clusters` centres of `n_features`: one block
    /// of labels and distances and one tile per thread (for `sparse` rows,
    /// one [`SparseScratch`] per thread), for `backend`.
    pub(crate) fn new(plan: &Plan, n_clusters: usize, n_features: usize, backend: Backend, sparse: bool) -> Self {
        let threads = plan.threads.max(1);
        Assignment {
            backend,
            labels: vec![0; plan.schedule.block_rows],
            dist: vec![0.0; plan.schedule.block_rows],
            tiles: (0..if sparse { 0 } else { threads })
                .map(|_| Scratch::new(plan.schedule.assign_tile_rows, n_clusters, plan.schedule.k_tile, n_features))
                .collect(),
            sparse: (0..if sparse { threads } else { 0 }).map(|_| SparseScratch::new(n_clusters, n_features)).collect(),
            spare: std::sync::Mutex::new(Vec::new()),
            tile_rows: plan.schedule.assign_tile_rows,
            k_tile: plan.schedule.k_tile,
        }
    }

    /// Takes back a Lloyd pass's statistics (their sums, emptied of their
    /// farthest rows), cleared, for the next Lloyd pass.
    pub(crate) fn recycle(&self, mut stats: AssignStats) {
        stats.clear();
        self.spare.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(stats);
    }

    /// Bytes per block row: label and distance.
    pub(crate) const BYTES_PER_ROW: u64 = 4 + 8;
}

/// What the pass does besides assigning.
pub(crate) enum Mode<'f> {
    /// A Lloyd iteration: per-cluster sums and weights.
    Lloyd,
    /// The rows farthest from their centres (with their values), to refill
    /// the clusters a Lloyd iteration left empty.
    Farthest,
    /// A fit's last pass: per-cluster row counts, labels to a sink, a plot
    /// sample (values, label in the weight slot).
    Final { sink: crate::cluster::LabelSink<'f>, plot: Option<KeyedSample> },
    /// New data: labels and distances to a sink.
    Predict(AssignSink<'f>),
}

#[derive(Clone, Copy)]
enum Kind {
    Lloyd,
    Farthest,
    Final,
    Predict,
}

/// The nearest-centre pass.
pub(crate) struct AssignPass<'p, 'f, T> {
    pub(crate) centers: &'p PreparedCenters<T>,
    pub(crate) asg: &'p mut Assignment<T>,
    pub(crate) mode: Mode<'f>,
    /// The weights' name, for errors about new data's weights (fits
    /// validate them in their validation pass).
    pub(crate) weights_name: Option<std::path::PathBuf>,
    /// A Lloyd pass's bounds (see [`super::bounds`]): rows they clear keep
    /// their labels without the other distances.
    pub(crate) bounds: Option<&'p mut super::bounds::Bounds<T>>,
    /// The run's cancellation, checked between the pieces of a block (see
    /// [`PIECE_WORK`]) as the runner checks it between blocks.
    pub(crate) cancel: Cancel,
}

/// Most distance terms (rows × centres × features) a block's dense rows
/// are assigned in at once, between checks of the cancellation: blocks are
/// sized by memory, and with many centres one block's assignment can take
/// a minute, where a cancelled run should stop within about a second.
const PIECE_WORK: usize = 1 << 30;

impl<T: Real> AssignPass<'_, '_, T> {
    fn k(&self) -> usize {
        self.centers.n_clusters
    }
    fn d(&self) -> usize {
        self.centers.n_features
    }
}

impl<T: Real> Pass<T> for AssignPass<'_, '_, T> {
    type Stats = AssignStats;

    fn new_stats(&self) -> AssignStats {
        let (k, d) = (self.k(), self.d());
        let lloyd = matches!(self.mode, Mode::Lloyd);
        if lloyd {
            let kept = self.asg.spare.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
            if let Some(s) = kept.filter(|s| s.sums.sums.len() == k * d && s.sums.n_clusters() == k) {
                return s;
            }
        }
        AssignStats {
            inertia: 0.0,
            sums: if lloyd { ClusterSums::new(k, d) } else { ClusterSums::default() },
            counts: vec![0.0; if matches!(self.mode, Mode::Final { .. }) { k } else { 0 }],
            farthest: Farthest {
                cap: if matches!(self.mode, Mode::Farthest) { k } else { 0 },
                heap: BinaryHeap::new(),
            },
            skipped: 0,
        }
    }

    /// Small per-cluster sums: chunks in parallel, each row by row; large
    /// ones: one chunk at a time, clusters split between threads.
    fn chunks_at_once(&self) -> bool {
        AssignStats::parallel_chunks(self.k(), self.d())
    }

    fn checks_finite(&self) -> bool {
        matches!(self.mode, Mode::Predict(_))
    }

    fn task(&self) -> Option<(&'static str, Vec<u8>)> {
        super::task::AssignTask::of(self).map(|p| (super::task::ASSIGN, p))
    }

    /// A bounded pass's rows keep their bounds where their tasks run.
    fn recycle(&mut self, stats: AssignStats) {
        if matches!(self.mode, Mode::Lloyd) {
            self.asg.recycle(stats);
        }
    }

    fn row_state(&self) -> Option<crate::exec::RowStateUse> {
        self.bounds.as_deref().map(super::bounds::Bounds::row_state)
    }

    fn block(&mut self, block: Block<'_, T>, leaves: &mut [Leaf<'_, AssignStats>]) -> Result<()> {
        let (rows, d) = (block.rows(), self.d());
        if let (Mode::Predict(_), Some(w), Some(name)) = (&self.mode, block.w, &self.weights_name) {
            if let Some(i) = w.iter().position(|v| !v.is_finite()) {
                return Err(crate::Error::InvalidWeight { path: name.clone(), row: block.start + i, value: w[i] });
            }
        }
        let at_once = self.chunks_at_once();
        let a = &mut *self.asg;
        let backend = a.backend.ops::<T>();
        let (labels, dist) = (&mut a.labels[..rows], &mut a.dist[..rows]);
        let skipped = if let Some(csr) = block.csr {
            debug_assert!(self.bounds.is_none(), "sparse rows are assigned without bounds");
            backend.assign_sparse(block.x, csr, self.centers, &mut a.sparse, labels, dist)?;
            0
        } else {
            // In pieces of whole tiles, each row's result the same whatever
            // the piece (as whatever the block).
            let (per_row, tile) = ((self.centers.n_clusters * d).max(1), a.tile_rows.max(1));
            let piece = (PIECE_WORK / per_row).max(tile * a.tiles.len().max(1)).div_ceil(tile) * tile;
            let mut skipped = 0;
            for r0 in (0..rows).step_by(piece) {
                if r0 > 0 && self.cancel.is_cancelled() {
                    return Err(crate::Error::Cancelled);
                }
                let r1 = (r0 + piece).min(rows);
                let (x, labels, dist) = (&block.x[r0 * d..r1 * d], &mut labels[r0..r1], &mut dist[r0..r1]);
                skipped += match self.bounds.as_deref_mut() {
                    Some(b) => {
                        let tiles = (a.tile_rows, a.k_tile);
                        b.assign_block(backend, x, block.start + r0, self.centers, tiles, &mut a.tiles, labels, dist)?
                    }
                    None => {
                        backend.assign_block(x, self.centers, a.tile_rows, a.k_tile, &mut a.tiles, labels, dist)?;
                        0
                    }
                };
            }
            skipped
        };
        if let Some(leaf) = leaves.first_mut() {
            leaf.stats.skipped += skipped;
        }
        let (labels, dist) = (&a.labels[..rows], &a.dist[..rows]);
        let kind = match &self.mode {
            Mode::Lloyd => Kind::Lloyd,
            Mode::Farthest => Kind::Farthest,
            Mode::Final { .. } => Kind::Final,
            Mode::Predict(_) => Kind::Predict,
        };
        let centers = self.centers;
        let one = |leaf: &mut Leaf<'_, AssignStats>, parallel_sums: bool| {
            let r = leaf.rows.clone();
            let s = &mut *leaf.stats;
            let w = block.w.map(|w| &w[r.clone()]);
            // Weighted distances per fixed tile, tiles added in order.
            for t in r.clone().step_by(TILE_ROWS) {
                let t = t..(t + TILE_ROWS).min(r.end);
                s.inertia += match block.w {
                    Some(w) => dist[t.clone()].iter().zip(&w[t]).map(|(d, w)| d * w).sum::<f64>(),
                    None => dist[t].iter().sum::<f64>(),
                };
            }
            match kind {
                Kind::Lloyd => match block.csr {
                    Some(csr) => {
                        let rows = crate::exec::CsrIndex { indptr: &csr.indptr[r.start..=r.end], indices: csr.indices };
                        backend.sparse_sums(block.x, rows, &labels[r.clone()], w, &mut s.sums, parallel_sums);
                    }
                    None => {
                        let x = &block.x[r.start * d..r.end * d];
                        backend.cluster_sums(x, d, &labels[r.clone()], w, &mut s.sums, parallel_sums);
                    }
                },
                Kind::Farthest => {
                    for i in r {
                        let wi = block.w.map_or(1.0, |w| w[i]);
                        let (row, l) = (block.start + i, labels[i]);
                        // A row of zeros has no direction: cosine k-means
                        // never moves a centre onto it.
                        let no_direction =
                            || centers.is_unit() && block.row_values(i).0.iter().all(|v| v.to_f64() == 0.0);
                        if wi <= 0.0 || no_direction() {
                            continue;
                        }
                        if block.csr.is_some() {
                            s.farthest.offer_sparse(&block, i, dist[i], centers, (row, l, wi));
                        } else {
                            s.farthest.offer_with(dist[i], row, l, wi, |v| block.dense_row_into(i, v));
                        }
                    }
                }
                Kind::Final => {
                    for &l in &labels[r] {
                        s.counts[l as usize] += 1.0;
                    }
                }
                Kind::Predict => {}
            }
        };
        if leaves.len() > 1 {
            leaves.par_iter_mut().for_each(|leaf| one(leaf, false));
        } else if let Some(leaf) = leaves.first_mut() {
            one(leaf, !at_once);
        }
        match &mut self.mode {
            Mode::Lloyd | Mode::Farthest => Ok(()),
            Mode::Final { sink, plot } => {
                if let Some(p) = plot.as_mut() {
                    for (i, &l) in labels.iter().enumerate() {
                        if p.wants(block.start + i) {
                            p.offer(block.start + i, block.dense_row(i).into_iter(), f64::from(l))?;
                        }
                    }
                }
                sink.as_deref_mut().map_or(Ok(()), |f| f(labels))
            }
            Mode::Predict(f) => f(labels, dist),
        }
    }
}
