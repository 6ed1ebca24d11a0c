//! A 2-D expression as rows read on demand ([`ExprRows`]): the estimators
//! read it block by block like a `.npy` file, so `(X - mean) / std`
//! standardised on the fly is never materialised.

use std::sync::Mutex;

use super::eval::{eval, Ctx};
use super::lower::Output;
use super::lower::{Lowered, Work};
use super::node::Array;
use super::plan::Stages;
use super::run::{prepare, run_intermediates, Options, Slots};
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::exec::{Cancel, Context, RunOptions};
use crate::io::ChunkCache;
use crate::io::RowSource;
use crate::plan::Plan;

/// The rows of a 2-D expression, computed when read. Reductions and
/// contractions inside it (a column mean, say) run once, before the first
/// read ([`RowSource::prepare`], which jobs call before any of their own
/// work, interruptible), within the memory limit given (results too large
/// for it go to scratch files); what they need, their held results and the
/// working buffers of the largest stage, is [`RowSource::held_bytes`],
/// which a job reading the rows counts beside its own buffers.
pub struct ExprRows {
    lowered: Lowered,
    plan: Plan<Stages>,
    slots: Slots,
    held: u64,
    threads: usize,
    /// Decoded chunks of the Zarr inputs the rows read, shared by every
    /// read (the plan's last stage counts it): consecutive blocks that read
    /// parts of one chunk decode it once.
    zarr: ChunkCache,
    /// Whether the intermediates have been computed.
    ready: Mutex<bool>,
}

/// An expression read by a job has its intermediates planned within
/// `1 / JOB_SHARE` of the job's memory limit; the job plans its own buffers
/// in the rest (see [`ExprRows::for_job`]).
const JOB_SHARE: u64 = 4;

/// Most bytes of one block of [`ExprRows::block_rows`].
const MAX_BLOCK_BYTES: u64 = 64 << 20;

impl std::fmt::Debug for ExprRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ExprRows({:?})", self.shape())
    }
}

impl ExprRows {
    /// The rows of `root` (2-D) as the input of a job run as `run` says:
    /// its intermediates are planned within `1 / JOB_SHARE` of the job's
    /// limit (on disk when larger), on the job's threads, and the job's plan
    /// counts what they need ([`RowSource::held_bytes`]) beside its own
    /// buffers. Nothing is computed here.
    ///
    /// # Errors
    /// As [`ExprRows::new`]; [`Error::DoesNotFit`] when the intermediates
    /// cannot be planned within their share, naming the smallest job limit
    /// that gives them enough.
    pub fn for_job(root: &Array, run: &RunOptions) -> Result<Self> {
        let opts = Options { memory_limit: run.memory_limit / JOB_SHARE, threads: Some(run.threads()), ..run.clone() };
        ExprRows::new(root, &opts).map_err(|e| {
            // Limits the intermediates need, as job limits.
            let job = |b: u64| b.saturating_mul(JOB_SHARE);
            e.as_job_limit(run.memory_limit, job, job, |what| {
                format!("the input's intermediates, planned within 1/{JOB_SHARE} of the limit: {what}")
            })
        })
    }

    /// Plans `root` (2-D); its intermediate stages run before the first
    /// read, within `opts.memory_limit`, on `opts.threads()` threads.
    ///
    /// # Errors
    /// [`Error::WrongDimensions`] unless `root` is 2-D; as [`super::explain`].
    pub fn new(root: &Array, opts: &Options) -> Result<Self> {
        if root.shape().len() != 2 {
            return Err(Error::WrongDimensions {
                path: "<expression>".into(),
                expected: 2,
                shape: root.shape().to_vec(),
                hint: "reshape the expression to (n_samples, n_features)",
            });
        }
        let (lowered, plan) = prepare(root, &Output::Rows, opts)?;
        let slots = Slots::new(&lowered, &Output::Rows)?;
        // The plan's total: held intermediates plus its largest stage,
        // which runs while the reading job's buffers are allocated.
        let held = plan.total_bytes;
        let zarr = ChunkCache::new(plan.schedule.stages.last().map_or(0, |s| s.zarr_cache));
        Ok(ExprRows { lowered, plan, slots, held, threads: opts.threads().max(1), zarr, ready: Mutex::new(false) })
    }

    fn shape(&self) -> &[usize] {
        &self.lowered.stages.last().expect("a final stage").shape
    }

    /// The plan of the intermediate stages.
    pub fn plan(&self) -> &Plan<Stages> {
        &self.plan
    }

    /// Rows `start..start + rows` in the expression's own dtype: C-order
    /// little-endian bytes (a [`RowSource::read`] gives float64 values).
    ///
    /// # Errors
    /// As [`RowSource::read`].
    pub fn read_bytes(&self, start: usize, rows: usize) -> Result<Vec<u8>> {
        let col = self.eval_rows(start, rows)?;
        let mut bytes = Vec::with_capacity(col.len() * self.dtype().itemsize());
        col.encode(self.dtype(), &mut bytes);
        Ok(bytes)
    }

    /// The values of rows `start..start + rows` (the intermediates first).
    fn eval_rows(&self, start: usize, rows: usize) -> Result<super::values::Col> {
        self.prepare(&Cancel::new())?;
        let Work::Map { ir } = &self.lowered.stages.last().expect("a final stage").work else {
            unreachable!("rows end in an elementwise stage")
        };
        let ctx = Ctx { slots: &self.slots.cells, fp: &self.slots.fp, zarr: &self.zarr };
        let mut buf = Vec::new();
        eval(ir, &[start, 0], &[start + rows, self.n_cols()], &ctx, &mut buf)
    }

    /// Rows per block of a reader that holds one block's bytes
    /// ([`ExprRows::read_bytes`]) and a copy of them while it evaluates the
    /// next, within `limit` bytes beside [`RowSource::held_bytes`] and at
    /// most `MAX_BLOCK_BYTES` (64 MiB) a block (larger blocks save nothing): at
    /// least one.
    pub fn block_rows(&self, limit: u64) -> usize {
        let per_row = (self.bytes_per_row() + 2 * self.n_cols() * self.dtype().itemsize()).max(1) as u64;
        let room = limit.saturating_sub(self.held).min(MAX_BLOCK_BYTES);
        (room / per_row).clamp(1, self.n_rows().max(1) as u64) as usize
    }

    /// Warnings of the evaluation so far.
    pub fn warnings(&self) -> Vec<crate::Warning> {
        self.slots.warnings()
    }
}

impl RowSource for ExprRows {
    fn n_rows(&self) -> usize {
        self.shape()[0]
    }

    fn n_cols(&self) -> usize {
        self.shape()[1]
    }

    fn dtype(&self) -> Dtype {
        self.lowered.stages.last().expect("a final stage").dtype
    }

    fn bytes_per_row(&self) -> usize {
        let Work::Map { ir } = &self.lowered.stages.last().expect("a final stage").work else {
            unreachable!("rows end in an elementwise stage")
        };
        let per = super::plan::elem_bytes(ir, &self.lowered) as usize + 8;
        per * self.n_cols()
    }

    fn held_bytes(&self) -> u64 {
        self.held
    }

    fn prepare(&self, cancel: &Cancel) -> Result<()> {
        // A poisoned lock only means an earlier attempt panicked: try again.
        let mut ready = self.ready.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !*ready {
            let mut quiet = ();
            let mut ctx = Context::new(&mut quiet);
            ctx.cancel = cancel.clone();
            run_intermediates(&self.lowered, &self.plan, &self.slots, self.threads, None, &mut ctx)?;
            *ready = true;
        }
        Ok(())
    }

    fn read(&self, start: usize, rows: usize) -> Result<Vec<f64>> {
        let col = self.eval_rows(start, rows)?;
        Ok((0..col.len()).map(|i| col.get_f64(i)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::array::{Op, Reduction};

    /// The intermediates stop, with their error type, when cancelled, and
    /// are computed by a later preparation.
    #[test]
    fn preparing_stops_when_cancelled_and_keeps_the_error_type() {
        let (n, d) = (50_000, 4);
        let x = Array::from_f64((0..n * d).map(|i| (i % 13) as f64).collect(), &[n, d]).unwrap();
        let means = x.reduce(Reduction::Mean, &[1], true, None).unwrap();
        let centred = Array::ufunc(Op::Subtract, &[x, means]).unwrap();
        let rows = ExprRows::for_job(&centred, &RunOptions::with_limit(64 << 20)).unwrap();
        let cancelled = Cancel::new();
        cancelled.cancel();
        assert!(matches!(rows.prepare(&cancelled), Err(Error::Cancelled)));
        rows.prepare(&Cancel::new()).unwrap();
        let first = rows.read(0, 2).unwrap();
        assert_eq!(first, [-1.5, -0.5, 0.5, 1.5, -1.5, -0.5, 0.5, 1.5]);
    }
}
