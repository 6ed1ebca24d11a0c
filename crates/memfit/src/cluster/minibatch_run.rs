//! A mini-batch k-means run from given centres: batches drawn by a seeded
//! generator and read with positioned reads, one [`MiniBatch::step`] each,
//! light centres moved to rows of the batch, early stopping as
//! scikit-learn's ([`EarlyStop`]).
//!
//! The rows of a batch are a function of the seed alone (sorted, so reads
//! from a file go forward), so a run does not depend on the thread count,
//! the memory limit or the blocking of the data.

use rand::seq::index::sample;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::minibatch::{EarlyStop, MiniBatch, StepWork};
use super::params::{KMeansParams, Metric, MiniBatchParams};
use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::exec::{install, Block, CsrIndex, Observer, Progress};
use crate::io::Source;

/// How batch rows are drawn from rows `first..n_samples` of the data.
pub(super) enum Draw {
    /// Uniformly, with replacement: the rows unit weights would give
    /// ([`uniform_index`]).
    Uniform { first: usize, n: usize },
    /// With probability proportional to the rows' weights: the cumulative
    /// weights over the total (the last is 1), searched as NumPy's
    /// `RandomState.choice(p=...)` does.
    Weighted { first: usize, cdf: Vec<f64> },
}

/// Rows of weights read at a time to build [`Draw::Weighted`].
const WEIGHT_PIECE: usize = 1 << 16;

impl Draw {
    /// The draw for `x` with optional per-row weights `w` (already checked
    /// finite and non-negative by the validation pass).
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`sample_weight`) when no weight is
    /// positive; read failures of `w`.
    pub(super) fn new(x: &Source<'_>, w: Option<&Source<'_>>) -> Result<Draw> {
        let (first, n) = (x.first_row(), x.n_samples());
        let Some(w) = w else {
            return Ok(Draw::Uniform { first, n });
        };
        let mut cdf = vec![0.0f64; n - first];
        let mut scratch = vec![0u8; WEIGHT_PIECE * w.scratch_bytes_per_row()];
        let mut total = 0.0;
        let mut start = first;
        while start < n {
            let rows = WEIGHT_PIECE.min(n - start);
            let out = &mut cdf[start - first..start - first + rows];
            w.read_rows::<f64>(start, rows, &[0.0], &mut scratch, out)?;
            for v in out.iter_mut() {
                total += *v;
                *v = total;
            }
            start += rows;
        }
        if !(total > 0.0 && total.is_finite()) {
            return Err(Error::param(
                "sample_weight",
                format!("the weights sum to {total}; at least one must be positive and their sum finite"),
            ));
        }
        for v in &mut cdf {
            *v /= total;
        }
        Ok(Draw::Weighted { first, cdf })
    }

    /// Bytes a draw over `rows` rows holds (the cumulative weights, when
    /// weighted, and a piece of weights being read).
    pub(super) fn bytes(rows: usize, weighted: bool) -> u64 {
        if weighted {
            (rows as u64 + WEIGHT_PIECE as u64) * 8
        } else {
            0
        }
    }

    /// `count` rows drawn with `rng`, sorted (a function of the seed alone;
    /// reads from a file go forward).
    fn rows(&self, rng: &mut ChaCha8Rng, count: usize, out: &mut Vec<usize>) {
        out.clear();
        match self {
            Draw::Uniform { first, n } => {
                out.extend((0..count).map(|_| first + uniform_index(rng.random(), n - first)))
            }
            Draw::Weighted { first, cdf } => out.extend((0..count).map(|_| {
                let u: f64 = rng.random();
                first + cdf.partition_point(|&c| c <= u).min(cdf.len() - 1)
            })),
        }
        out.sort_unstable();
    }
}

/// The row a draw `u` in `[0, 1)` picks among `m` rows of unit weight: the
/// first `i` whose cumulative share `fl((i + 1) / m)` exceeds `u`, as
/// searching [`Draw::Weighted`]'s cumulative weights of `m` ones gives
/// (so unit weights and no weights draw the same rows), without holding
/// them.
fn uniform_index(u: f64, m: usize) -> usize {
    let share = |i: usize| i as f64 / m as f64;
    let mut i = ((u * m as f64) as usize).min(m - 1);
    while i > 0 && share(i) > u {
        i -= 1;
    }
    while i + 1 < m && share(i + 1) <= u {
        i += 1;
    }
    i
}

/// Where a run of steps ended.
pub(super) struct Steps {
    /// Row-major `(n_clusters, n_features)` centres (values of the compute
    /// type, as `f64`).
    pub centers: Vec<f64>,
    /// Steps taken.
    pub n_steps: usize,
    /// Whether early stopping ended the run.
    pub converged: bool,
}

/// Steps run in one thread pool between progress reports.
const STEPS_PER_REPORT: usize = 256;

/// Runs mini-batch steps (see [`MiniBatchParams`]) from `centers` on `x`,
/// drawing rows by `draw` with `rng`, on `threads` threads; `tol_abs` is the
/// absolute tolerance on a step's squared centre change. Reports one
/// [`Progress::Iteration`] per pass's worth of steps (`run` of `n_init`).
///
/// # Errors
/// As [`Source::gather_rows`] and [`MiniBatch::step`];
/// [`Error::Cancelled`] when `observer` cancels.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_steps<T: Real, C: Real>(
    params: &KMeansParams,
    mb: &MiniBatchParams,
    x: &Source<'_>,
    draw: &Draw,
    mut centers: Vec<f64>,
    tol_abs: f64,
    rng: &mut ChaCha8Rng,
    threads: usize,
    (run, n_init): (usize, usize),
    observer: &mut dyn Observer,
) -> Result<Steps> {
    let (k, d) = (params.n_clusters, x.n_features());
    let n = x.n_samples() - x.first_row();
    let batch = mb.batch_size.min(n);
    let n_steps = params.max_iter.saturating_mul(n) / batch;
    let unit_centers = params.metric == Metric::Cosine;
    let mut state = MiniBatch {
        n_clusters: k,
        n_features: d,
        counts: vec![0.0; k],
        n_since_last_reassign: 0,
        unit_centers,
        // Centres of `C`: float64 ones for float32 rows (see `fit_centers`).
        float64_centers: C::DTYPE != T::DTYPE,
        caller_reassigns: false,
    };
    MiniBatch::start_centers::<C>(&mut centers, d, unit_centers);
    let mut stop = EarlyStop::default();
    // A sparse batch holds at most its rows' largest count of stored values each.
    let sparse = x.sparse_row_nnz();
    let mut buffers = StepBuffers {
        idx: Vec::with_capacity(batch),
        values: match sparse {
            Some(nnz) => Vec::with_capacity(batch * nnz),
            None => vec![T::zero(); batch * d],
        },
        indptr: Vec::with_capacity(if sparse.is_some() { batch + 1 } else { 0 }),
        indices: Vec::with_capacity(sparse.map_or(0, |nnz| batch * nnz)),
        previous: Vec::new(),
        work: Some(StepWork::new(k, d, batch, threads, sparse.is_some())),
    };
    let cancel = observer.cancel();
    let steps_per_pass = n.div_ceil(batch);
    let mut step = 0;
    let mut ended = None;
    while step < n_steps && ended.is_none() {
        let till = (step + STEPS_PER_REPORT).min(n_steps).min((step / steps_per_pass + 1) * steps_per_pass);
        let started = std::time::Instant::now();
        let (done, why, inertia, change) = install(threads, || {
            let mut last = (0.0, 0.0);
            for s in step..till {
                if cancel.is_cancelled() {
                    return Err(Error::Cancelled);
                }
                last = one_step(&mut state, &mut centers, mb, x, draw, rng, batch, &mut buffers, tol_abs > 0.0)?;
                if let Some(why) = stop.update(s, last.0, batch, n, last.1, tol_abs, mb.max_no_improvement) {
                    return Ok((s + 1, Some(why), last.0, last.1));
                }
            }
            Ok((till, None, last.0, last.1))
        })??;
        ended = why;
        let secs = started.elapsed().as_secs_f64().max(1e-9);
        observer.event(&Progress::Iteration {
            run,
            n_init,
            iteration: (done * batch).div_ceil(n),
            max_iter: params.max_iter,
            inertia: stop.ewa_inertia.map_or(inertia, |e| e * batch as f64),
            center_shift: change,
            tol: tol_abs,
            rows_per_sec: ((done - step) * batch) as f64 / secs,
            skip_share: 0.0,
        });
        step = done;
    }
    Ok(Steps { centers, n_steps: step, converged: ended.is_some() })
}

/// Buffers a step reuses: the batch's row indices and values (for sparse
/// data its stored values, with their offsets and columns), the centres
/// before the step (for the change, when a tolerance is set), and the
/// step's own.
struct StepBuffers<T> {
    idx: Vec<usize>,
    values: Vec<T>,
    indptr: Vec<usize>,
    indices: Vec<u32>,
    previous: Vec<f64>,
    work: Option<StepWork<T>>,
}

/// One step: draw and read a batch, assign and update, move light centres
/// to distinct rows of the batch. Returns the batch inertia and the squared
/// centre change (0 unless `want_change`).
#[allow(clippy::too_many_arguments)]
fn one_step<T: Real>(
    state: &mut MiniBatch,
    centers: &mut [f64],
    mb: &MiniBatchParams,
    x: &Source<'_>,
    draw: &Draw,
    rng: &mut ChaCha8Rng,
    batch: usize,
    buf: &mut StepBuffers<T>,
    want_change: bool,
) -> Result<(f64, f64)> {
    let d = state.n_features;
    draw.rows(rng, batch, &mut buf.idx);
    let sparse = x.sparse_row_nnz().is_some();
    if sparse {
        x.gather_csr::<T>(&buf.idx, &mut buf.indptr, &mut buf.indices, &mut buf.values)?;
    } else {
        x.gather_rows::<T>(&buf.idx, &mut buf.values)?;
    }
    if want_change {
        buf.previous.clear();
        buf.previous.extend_from_slice(centers);
    }
    let block = if sparse {
        Block::sparse(0, &buf.values, CsrIndex { indptr: &buf.indptr, indices: &buf.indices }, None, d)
    } else {
        Block::dense(0, &buf.values, None, d)
    };
    let s = state.step(centers, &block, batch, mb.reassignment_ratio, &mut buf.work)?;
    if !s.to_reassign.is_empty() {
        let rows = sample(rng, s.pool.len(), s.to_reassign.len());
        for (&j, r) in s.to_reassign.iter().zip(rows.iter()) {
            centers[j * d..(j + 1) * d].copy_from_slice(&block.dense_row(s.pool[r]));
        }
    }
    let change =
        if want_change { centers.iter().zip(&buf.previous).map(|(a, b)| (a - b) * (a - b)).sum() } else { 0.0 };
    Ok((s.inertia, change))
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;
    use crate::io::{ArrayRef, Values};

    /// Rows are drawn sorted, in range, never with zero weight, and in
    /// proportion to the weights.
    #[test]
    fn draws_follow_the_weights() {
        let x = vec![0.0f64; 8];
        let src = Source::memory(ArrayRef::c_order(Values::F64(&x), 8, 1).unwrap());
        let w = [0.0, 1.0, 0.0, 3.0, 0.0, 0.0, 0.0, 0.0];
        let ws = Source::memory(ArrayRef::c_order(Values::F64(&w), 8, 1).unwrap());
        let draw = Draw::new(&src, Some(&ws)).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut rows = Vec::new();
        draw.rows(&mut rng, 4000, &mut rows);
        assert!(rows.windows(2).all(|p| p[0] <= p[1]));
        let threes = rows.iter().filter(|&&r| r == 3).count();
        assert_eq!(rows.iter().filter(|&&r| r == 1).count() + threes, 4000);
        assert!((2800..3200).contains(&threes), "{threes}");
        // No weights draw the rows unit weights draw.
        let ones = Source::memory(ArrayRef::c_order(Values::F64(&[1.0; 8]), 8, 1).unwrap());
        let (uniform, unit) = (Draw::new(&src, None).unwrap(), Draw::new(&src, Some(&ones)).unwrap());
        let mut again = Vec::new();
        uniform.rows(&mut ChaCha8Rng::seed_from_u64(2), 5000, &mut rows);
        unit.rows(&mut ChaCha8Rng::seed_from_u64(2), 5000, &mut again);
        assert!(rows.iter().all(|&r| r < 8) && rows.len() == 5000 && rows == again);
        for m in [1, 3, 7, 1000, 1 << 40] {
            for u in [0.0, 1e-300, 0.5, 0.999_999_999_999, 1.0 - f64::EPSILON / 2.0, 1.0 / 3.0, 2.0 / 3.0] {
                let i = uniform_index(u, m);
                let share = |i: usize| i as f64 / m as f64;
                assert!(i < m && share(i + 1) > u.min(share(m)) && (i == 0 || share(i) <= u), "{u} {m} {i}");
            }
        }
        let zero = Source::memory(ArrayRef::c_order(Values::F64(&[0.0; 8]), 8, 1).unwrap());
        assert!(Draw::new(&src, Some(&zero)).is_err());
    }
}
