//! The three passes of a Gaussian-mixture fit, run by [`crate::exec`]:
//! the initial M-step under given responsibilities, the EM iteration (E-step
//! fused with the M-step's sums) and the E-step with per-sample outputs
//! (the final pass of a fit, and `predict`).

use std::time::Instant;

use super::components::Estep;
use super::fitted::Outputs;
use super::pass::{Stats, Sums, Workspace};
use super::task::{InitTask, MixtureTask, E, EM, INIT};
use crate::cluster::k_tile;
use crate::dtype::Real;
use crate::error::Result;
use crate::exec::Backend;
use crate::exec::{row_key, row_unit, Block, Leaf, Pass};
use crate::io::Source;
use crate::kernels::{PreparedCenters, Scratch};
use crate::plan::Plan;

/// Initial responsibilities of one run.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub(crate) enum InitResp {
    /// One-hot at the nearest of these centres (shifted, `(K, d)`).
    Nearest(Vec<f64>),
    /// One-hot at these rows (sorted `(row, component)`), with their values.
    Rows(Vec<(usize, usize)>, Vec<f64>),
    /// Uniform random, normalised per row: component `c` of row `i` draws
    /// [`row_unit`] keyed by the seed and `c`, so the responsibilities do
    /// not depend on how rows are read.
    Uniform(u64),
}

impl InitResp {
    /// The means the first sums are centred on.
    pub(crate) fn reference(&self, k: usize, d: usize) -> Vec<f64> {
        match self {
            InitResp::Nearest(c) => c.clone(),
            InitResp::Rows(_, m) => m.clone(),
            InitResp::Uniform(_) => vec![0.0; k * d],
        }
    }
}

/// Nearest-centre assignment buffers of a k-means initialisation.
pub(crate) struct Nearest<T> {
    backend: Backend,
    pub(crate) centers: PreparedCenters<T>,
    pub(crate) labels: Vec<u32>,
    pub(crate) dist: Vec<f64>,
    pub(crate) tiles: Vec<Scratch<T>>,
    pub(crate) tile_rows: usize,
    pub(crate) k_tile: usize,
}

impl<T: Real> Nearest<T> {
    /// The nearest-centre assignment of a k-means initialisation (`None` for
    /// other initialisations), with `plan`'s tiles.
    pub(crate) fn of(init: &InitResp, plan: &Plan, k: usize, d: usize) -> Option<Self> {
        match init {
            InitResp::Nearest(c) => Some(Nearest {
                backend: Backend::Cpu,
                centers: PreparedCenters::<T>::new(c, k, d),
                labels: vec![0; plan.schedule.block_rows],
                dist: vec![0.0; plan.schedule.block_rows],
                tiles: (0..plan.threads.max(1))
                    .map(|_| Scratch::<T>::new(plan.schedule.assign_tile_rows, k, k_tile(k, size_of::<T>()), d))
                    .collect(),
                tile_rows: plan.schedule.assign_tile_rows,
                k_tile: k_tile(k, size_of::<T>()),
            }),
            _ => None,
        }
    }
}

/// The initial M-step: sums of every block under the initial responsibilities,
/// for components `first..first + g` of `k` (all of them, or one group).
pub(crate) struct InitPass<'a, T> {
    pub(crate) init: &'a InitResp,
    pub(crate) nearest: Option<&'a mut Nearest<T>>,
    pub(crate) ws: &'a mut Workspace<T>,
    pub(crate) mats: &'a mut [Vec<f64>],
    pub(crate) sums: Sums<'a>,
    pub(crate) k: usize,
    pub(crate) first: usize,
    pub(crate) g: usize,
}

impl<T: Real> Pass<T> for InitPass<'_, T> {
    type Stats = Stats;

    fn new_stats(&self) -> Stats {
        self.sums.zeros(self.g, self.sums.reference.len() / self.g.max(1))
    }

    /// Every component's sums (groups run in one process only).
    fn task(&self) -> Option<(&'static str, Vec<u8>)> {
        (self.first == 0 && self.g == self.k).then(|| (INIT, InitTask::encode(self.k, self.init, &self.sums)))
    }

    fn block(&mut self, block: Block<'_, T>, leaves: &mut [Leaf<'_, Stats>]) -> Result<()> {
        for leaf in leaves.iter_mut() {
            let b = block.sub(leaf.rows.clone());
            self.responsibilities(b)?;
            self.ws.m_step(b.x, b.w, leaf.stats, self.mats);
        }
        Ok(())
    }
}

impl<T: Real> InitPass<'_, T> {
    /// The initial responsibilities of `block`'s rows for this pass's
    /// components, into the workspace (`(rows, g)`).
    ///
    /// # Errors
    /// The backend's errors.
    fn responsibilities(&mut self, block: Block<'_, T>) -> Result<()> {
        let (k, g, first, rows, start) = (self.k, self.g, self.first, block.rows(), block.start);
        let own = first..first + g;
        let resp = &mut self.ws.resp[..rows * g];
        match self.init {
            InitResp::Nearest(_) => {
                let a = self.nearest.as_deref_mut().expect("set for Nearest");
                let (labels, dist) = (&mut a.labels[..rows], &mut a.dist[..rows]);
                a.backend.ops::<T>().assign_block(
                    block.x,
                    &a.centers,
                    a.tile_rows,
                    a.k_tile,
                    &mut a.tiles,
                    labels,
                    dist,
                )?;
                resp.fill(0.0);
                for (i, &l) in labels.iter().enumerate() {
                    if own.contains(&(l as usize)) {
                        resp[i * g + l as usize - first] = 1.0;
                    }
                }
            }
            InitResp::Rows(pairs, _) => {
                resp.fill(0.0);
                let from = pairs.partition_point(|&(r, _)| r < start);
                for &(r, c) in pairs[from..].iter().take_while(|&&(r, _)| r < start + rows) {
                    if own.contains(&c) {
                        resp[(r - start) * g + c - first] = 1.0;
                    }
                }
            }
            InitResp::Uniform(seed) => {
                for (i, row) in resp.chunks_mut(g).enumerate() {
                    // Normalised over all `k` components, summed in order;
                    // this pass's components kept.
                    let mut s = 0.0;
                    for c in 0..k {
                        let u = row_unit(row_key(*seed, c), start + i);
                        s += u;
                        if own.contains(&c) {
                            row[c - first] = u;
                        }
                    }
                    row.iter_mut().for_each(|v| *v /= s);
                }
            }
        }
        Ok(())
    }
}

/// One EM iteration: the E-step of each block, then its M-step sums.
pub(crate) struct EmPass<'a, T> {
    pub(crate) x: &'a Source<'a>,
    pub(crate) es: &'a Estep<T>,
    pub(crate) ws: &'a mut Workspace<T>,
    pub(crate) mats: &'a mut [Vec<f64>],
    pub(crate) sums: Sums<'a>,
    /// Seconds in E-steps and M-steps.
    pub(crate) secs: (f64, f64),
}

impl<T: Real> Pass<T> for EmPass<'_, T> {
    type Stats = Stats;

    fn new_stats(&self) -> Stats {
        self.sums.zeros(self.es.k, self.es.d)
    }

    fn task(&self) -> Option<(&'static str, Vec<u8>)> {
        Some((EM, MixtureTask::encode_em(self.es, &self.sums)))
    }

    fn block(&mut self, block: Block<'_, T>, leaves: &mut [Leaf<'_, Stats>]) -> Result<()> {
        for leaf in leaves.iter_mut() {
            let b = block.sub(leaf.rows.clone());
            let t0 = Instant::now();
            self.ws.e_step(self.x, b.x, b.start, b.w, self.es, &mut leaf.stats.log_likelihood, None, false)?;
            let t1 = Instant::now();
            self.ws.m_step(b.x, b.w, leaf.stats, self.mats);
            self.secs.0 += (t1 - t0).as_secs_f64();
            self.secs.1 += t1.elapsed().as_secs_f64();
        }
        Ok(())
    }
}

/// An E-step with per-sample outputs; its statistic is `Σ_i w_i log p(x_i)`.
pub(crate) struct EPass<'a, 'o, T> {
    pub(crate) x: &'a Source<'a>,
    pub(crate) es: &'a Estep<T>,
    pub(crate) ws: &'a mut Workspace<T>,
    pub(crate) outputs: &'a mut Outputs<'o>,
    /// One block of labels when labels are wanted.
    pub(crate) labels: Vec<u32>,
    /// Whether the data are checked for non-finite values (data no
    /// validation pass has read).
    pub(crate) validate: bool,
}

impl<T: Real> Pass<T> for EPass<'_, '_, T> {
    type Stats = f64;

    fn new_stats(&self) -> f64 {
        0.0
    }

    fn checks_finite(&self) -> bool {
        self.validate
    }

    fn task(&self) -> Option<(&'static str, Vec<u8>)> {
        let o = &self.outputs;
        (o.labels.is_none() && o.proba.is_none() && o.log_likelihood.is_none())
            .then(|| (E, MixtureTask::encode_e(self.es, self.validate)))
    }

    fn block(&mut self, block: Block<'_, T>, leaves: &mut [Leaf<'_, f64>]) -> Result<()> {
        let k = self.es.k;
        for leaf in leaves.iter_mut() {
            let b = block.sub(leaf.rows.clone());
            let rows = b.rows();
            // New data (a validated pass) are scored as scikit-learn scores them.
            let labels = self.outputs.labels.is_some().then_some(&mut self.labels[..]);
            self.ws.e_step(self.x, b.x, b.start, b.w, self.es, leaf.stats, labels, self.validate)?;
            let resp = &self.ws.resp[..rows * k];
            if let Some(f) = self.outputs.labels.as_deref_mut() {
                f(&self.labels[..rows])?;
            }
            if let Some(f) = self.outputs.proba.as_deref_mut() {
                f(b.start - self.x.first_row(), 0, k, resp)?;
            }
            if let Some(f) = self.outputs.log_likelihood.as_deref_mut() {
                f(&self.ws.log_norm[..rows])?;
            }
        }
        Ok(())
    }
}
