//! Work run in other processes: a pass that can describe itself as a
//! [`Task`] is handed, with the row ranges of a [`super::RowSplit`], to a
//! [`Remote`] (a cluster's scheduler, say), which runs the task over each
//! range wherever the rows are and returns each range's [`Partial`]
//! statistics, encoded; they merge in row order as local ranges do, so the
//! result has the same bits as a pass in one process
//! (see [`super::run_pass`]). An array expression's reduction stage is
//! handed over the same way, its ranges being ranges of the stage's fixed
//! accumulation chunks (see [`crate::array::run_on`]): the statistics of
//! each range fold in chunk order as [`super::run_grid`] folds them here.
//!
//! The receiving side decodes the task and runs it, through the
//! [`TaskRunner`] of its kind, over its rows ([`crate::estimator::run_task`],
//! [`TaskRunner::plan_and_run`]) or its chunks of an expression
//! ([`crate::array::run_task`], [`TaskRunner::plan_and_run_chunks`]): work
//! that runs in other processes is one [`Task`] on the sending side and one
//! [`TaskRunner`], listed in [`crate::estimator::TASK_RUNNERS`], on the
//! receiving side.

use std::ops::Range;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{Partial, Pass};
use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::io::{Dtype, Source};
use crate::plan::Plan;

/// A pass described for another process: which pass, what it computes in,
/// the shift subtracted from the rows, and the pass's own parameters.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Task {
    /// The pass (a name its module defines, e.g. `"kmeans-assign"`).
    pub kind: String,
    /// The compute type (`float32` or `float64`).
    pub compute: Dtype,
    /// Subtracted from every row before the pass sees it, `(n_features,)`.
    pub shift: Vec<f64>,
    /// The pass's parameters, encoded by its module.
    #[serde(with = "crate::wire::bytes")]
    pub payload: Vec<u8>,
    /// Whether rows are read scaled to unit norm
    /// ([`crate::io::Source::unit_rows`]): the receiving side opens its rows
    /// so.
    pub unit_rows: bool,
    /// The per-row state the task reads and updates, which stays where its
    /// range runs between passes (see [`RowStateUse`]); `None` for a
    /// stateless task.
    pub row_state: Option<RowStateUse>,
}

/// A task's per-row state (k-means bounds, say) that stays with its range
/// between passes: the [`Remote`] keeps what each range's task returned
/// under `id` and hands it to the next task of that id over the same range
/// (see [`crate::estimator::run_task`]). A range whose state is not there
/// (the first pass, `fresh`, or a state lost with a worker) starts from
/// none, which gives the same results: a task's statistics never depend on
/// whether its state was kept, only its speed does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowStateUse {
    /// Names the states of one run (a new id: none of the states kept so far
    /// serve it).
    pub id: u64,
    /// Whether every range starts from no state (this run's first pass).
    pub fresh: bool,
}

impl Task {
    /// The task as bytes (what a [`Remote`] ships).
    pub fn encode(&self) -> Vec<u8> {
        encode(self)
    }

    /// The task encoded in `bytes`.
    ///
    /// # Errors
    /// [`Error::Remote`] for bytes that are not a task.
    pub fn decode(bytes: &[u8]) -> Result<Task> {
        decode(bytes, "task")
    }
}

/// The receiving side of one kind of [`Task`]: decodes its payload, plans
/// it over the rows a process was given and runs it there.
pub trait TaskRunner: Sync {
    /// The kind's name on the wire ([`Task::kind`]): what the pass's
    /// [`super::Pass::task`] gives.
    fn kind(&self) -> &'static str;

    /// Whether the kind runs in the compute type `compute` (float32 and
    /// float64 by default).
    fn computes(&self, compute: Dtype) -> bool {
        matches!(compute, Dtype::F32 | Dtype::F64)
    }

    /// Plans `task` over the rows of `x` (a piece of the data, see
    /// [`Source::starting_at`]) and optional per-row weights `w` (the same
    /// rows) within `limit_bytes`; with `run`, also runs it and returns its
    /// [`task_result`]. `task.shift` has one value per feature of `x`.
    /// A task with per-row state ([`Task::row_state`]) reads its range's
    /// last state from `state` and leaves its own there.
    ///
    /// # Errors
    /// [`Error::Remote`] for a payload of another kind;
    /// [`Error::DoesNotFit`] when one block does not fit; when run, the
    /// pass's errors (read errors, [`Error::NonFinite`] naming the row in
    /// the whole data, [`Error::Cancelled`]); [`Error::Remote`] for a kind
    /// that runs over chunks of an expression (the default).
    #[allow(clippy::too_many_arguments)]
    fn plan_and_run(
        &self,
        task: &Task,
        x: &Source<'_>,
        w: Option<&Source<'_>>,
        limit_bytes: u64,
        run: bool,
        cancel: &crate::exec::Cancel,
        state: &mut Option<Vec<f64>>,
    ) -> Result<(Plan, Option<Vec<u8>>)> {
        let _ = (task, x, w, limit_bytes, run, cancel, state);
        Err(Error::Remote {
            reason: format!("task {:?} runs over chunks of an array expression, not rows", self.kind()),
        })
    }

    /// Plans `task` over the accumulation chunks `chunks` (indices on the
    /// chunk grid of the stage the task names) of the array expression
    /// `root` within `limit_bytes`; with `run`, also runs it and returns
    /// the chunks' encoded statistics.
    ///
    /// # Errors
    /// [`Error::Remote`] for a payload that does not fit `root`, and for a
    /// kind that runs over rows (the default); [`Error::DoesNotFit`] when
    /// the task does not fit; when run, the expression's errors (read
    /// errors, [`Error::Cancelled`]).
    fn plan_and_run_chunks(
        &self,
        task: &Task,
        root: &crate::array::Array,
        chunks: Range<usize>,
        limit_bytes: u64,
        run: bool,
        cancel: &crate::exec::Cancel,
    ) -> Result<(crate::plan::Plan<crate::array::Stages>, Option<Vec<u8>>)> {
        let _ = (task, root, chunks, limit_bytes, run, cancel);
        Err(Error::Remote {
            reason: format!("task {:?} runs over rows, not chunks of an array expression", self.kind()),
        })
    }
}

/// Runs tasks elsewhere.
pub trait Remote: Send + Sync + std::fmt::Debug {
    /// Runs `task` over each of `ranges` and returns, in the same order,
    /// each range's result: for a row pass, ranges of rows (consecutive,
    /// starting on multiples of [`crate::plan::CHUNK_ROWS`]) and their
    /// [`task_result`] (see [`crate::estimator::run_task`]); for an array
    /// reduction, consecutive ranges of its accumulation chunks and their
    /// statistics (see [`crate::array::run_task`]).
    ///
    /// # Errors
    /// [`Error::Remote`], or the error the task raised, when a task fails.
    fn run(&self, task: &Task, ranges: &[Range<usize>]) -> Result<Vec<Vec<u8>>>;

    /// [`Remote::run`], handing each range's result to `each` in order as
    /// soon as it is ready, so that the caller merges it and drops it before
    /// the next: the caller holds one result at a time, not all of them (a
    /// k-means++ sample comes back from every range). The default hands on
    /// what [`Remote::run`] returns.
    ///
    /// # Errors
    /// Those of [`Remote::run`], and the first error `each` returns.
    fn run_each(
        &self,
        task: &Task,
        ranges: &[Range<usize>],
        each: &mut dyn FnMut(Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        self.run(task, ranges)?.into_iter().try_for_each(each)
    }
}

/// `value` in the wire format (postcard: compact, little-endian, exact for
/// every `f64`).
pub fn encode<V: Serialize>(value: &V) -> Vec<u8> {
    postcard::to_stdvec(value).expect("in-memory values always encode")
}

/// The value of type `V` encoded in `bytes` (`what` names it in errors).
///
/// # Errors
/// [`Error::Remote`] for bytes that do not hold a `V`.
pub fn decode<V: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<V> {
    postcard::from_bytes(bytes).map_err(|e| Error::Remote { reason: format!("cannot decode the {what}: {e}") })
}

/// What a task returns: the statistics of its rows (`partial`, from
/// [`super::run_pass`]) and the pass's [side results](super::Pass::side).
pub fn task_result<T: Real, P: Pass<T>>(pass: &P, partial: Partial<P::Stats>) -> Vec<u8> {
    encode(&(partial, pass.side()))
}

/// Runs `task` over `ranges` on `remote` and merges each range's result
/// ([`task_result`]) as it comes back: the statistics in order, the side
/// results into `pass`.
pub(super) fn merge_encoded<T: Real, P: Pass<T>>(
    pass: &mut P,
    remote: &dyn Remote,
    task: &Task,
    ranges: &[Range<usize>],
) -> Result<P::Stats> {
    let mut total: Option<Partial<P::Stats>> = None;
    let mut came = 0;
    remote.run_each(task, ranges, &mut |bytes| {
        came += 1;
        let Some(r) = ranges.get(came - 1) else {
            return Err(Error::Remote {
                reason: format!("more statistics came back than {} ranges of rows", ranges.len()),
            });
        };
        let (p, side): (Partial<P::Stats>, Vec<u8>) = decode(&bytes, "statistics")?;
        drop(bytes);
        if !side.is_empty() {
            pass.merge_side(&side)?;
        }
        if p.rows() != *r {
            return Err(Error::Remote {
                reason: format!("statistics of rows {:?} came back for rows {r:?}", p.rows()),
            });
        }
        total = Some(match total.take() {
            None => p,
            Some(t) => t.merge(p)?,
        });
        Ok(())
    })?;
    if came != ranges.len() {
        return Err(Error::Remote {
            reason: format!("{came} statistics came back for {} ranges of rows", ranges.len()),
        });
    }
    total.ok_or_else(|| Error::Remote { reason: "no ranges of rows".into() })?.finish()
}
