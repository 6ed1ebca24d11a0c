//! The receiving side of [`crate::exec::Remote`]: decodes a [`Task`] and
//! runs its pass over the rows a process was given, within the memory limit
//! of that process, returning the statistics to merge. Each kind of task is
//! one [`TaskRunner`], listed once in [`TASK_RUNNERS`].

use std::cell::RefCell;
use std::ops::Range;

use serde::de::DeserializeOwned;

use crate::cluster::{AssignTask, ASSIGN};
use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::exec::{
    decode, plan_scan_task, run_scan_task, Cancel, RowStateUse, RunOptions, ScanTask, Task, TaskRunner, SCAN,
};
use crate::io::{Dtype, Source};
use crate::linalg::{plan_weighted_scatter, run_scatter_task, SCATTER};
use crate::mixture::{InitTask, MixtureTask, PlanRows, TaskRows, EM_TASK, E_TASK, INIT_TASK};
use crate::plan::{Job, Plan};

/// Every kind of task this version runs: a new distributed pass adds its
/// runner here.
pub static TASK_RUNNERS: [&dyn TaskRunner; 7] = [
    &ScanRunner,
    &AssignRunner,
    &ScatterRunner,
    &MixtureInitRunner,
    &MixtureRunner(EM_TASK),
    &MixtureRunner(E_TASK),
    &crate::array::ReduceRunner,
];

/// The runner of `task`'s kind and compute type.
///
/// # Errors
/// [`Error::Remote`] when [`TASK_RUNNERS`] has none.
pub fn runner_of(task: &Task) -> Result<&'static dyn TaskRunner> {
    TASK_RUNNERS.iter().copied().find(|r| r.kind() == task.kind && r.computes(task.compute)).ok_or_else(|| {
        Error::Remote { reason: format!("unknown task {:?} computing in {}", task.kind, task.compute.name()) }
    })
}

/// A row pass run for another process, in the three steps every such pass
/// has: its parameters decoded for the compute type `T` (the payload's
/// serde form), planned over the rows given, run over them. A new distributed row pass is one
/// implementation of these (listed in [`TASK_RUNNERS`]); its [`TaskRunner`]
/// comes with it, dispatching the compute type the same way for every pass.
trait RowTask: Sync {
    /// The task's parameters in compute type `T`, as its payload
    /// ([`Task::payload`]) encodes them.
    type Params<T: Real>: DeserializeOwned;

    /// What the payload is, for errors ("k-means task", say).
    const PAYLOAD: &'static str;

    /// As [`TaskRunner::kind`].
    fn kind(&self) -> &'static str;

    /// As [`TaskRunner::computes`] (float32 and float64 by default).
    fn computes(&self, compute: Dtype) -> bool {
        matches!(compute, Dtype::F32 | Dtype::F64)
    }

    /// The memory plan of `params` over the rows of `at` within
    /// `limit_bytes`.
    ///
    /// # Errors
    /// [`Error::DoesNotFit`] when one block does not fit.
    fn plan<T: Real>(&self, params: &Self::Params<T>, at: &Piece<'_, '_>, limit_bytes: u64) -> Result<Plan>;

    /// Runs `params` within `plan` over the rows of `at` and returns its
    /// [`crate::exec::task_result`].
    ///
    /// # Errors
    /// The pass's errors (read errors, [`Error::NonFinite`] naming the row
    /// in the whole data, [`Error::Cancelled`]).
    fn run<T: Real>(&self, params: Self::Params<T>, plan: &Plan, at: &Piece<'_, '_>) -> Result<Vec<u8>>;
}

/// The rows a process was given for a task: a piece of the data `x` (see
/// [`Source::starting_at`]) and its optional per-row weights `w`, all of
/// the piece's `rows`, the `shift` subtracted from each ([`Task::shift`],
/// one value per feature), the run's cancellation token, and the rows'
/// state when the task keeps one ([`Task::row_state`]): what the range's
/// last task left (`None`: none), replaced by what this one leaves.
struct Piece<'p, 's> {
    x: &'p Source<'s>,
    w: Option<&'p Source<'s>>,
    rows: Range<usize>,
    shift: &'p [f64],
    cancel: &'p Cancel,
    row_state: Option<RowStateUse>,
    state: &'p RefCell<Option<Vec<f64>>>,
}

impl Piece<'_, '_> {
    /// The rows of a mixture's task.
    fn task_rows(&self) -> TaskRows<'_, '_> {
        TaskRows { x: self.x, w: self.w, rows: self.rows.clone(), shift: self.shift, cancel: self.cancel }
    }
}

impl<R: RowTask> TaskRunner for R {
    fn kind(&self) -> &'static str {
        RowTask::kind(self)
    }

    fn computes(&self, compute: Dtype) -> bool {
        RowTask::computes(self, compute)
    }

    #[allow(clippy::too_many_arguments)]
    fn plan_and_run(
        &self,
        task: &Task,
        x: &Source<'_>,
        w: Option<&Source<'_>>,
        limit_bytes: u64,
        run: bool,
        cancel: &Cancel,
        state: &mut Option<Vec<f64>>,
    ) -> Result<(Plan, Option<Vec<u8>>)> {
        let cell = RefCell::new(state.take());
        let at = Piece {
            x,
            w,
            rows: x.first_row()..x.n_samples(),
            shift: &task.shift,
            cancel,
            row_state: task.row_state,
            state: &cell,
        };
        let out = match task.compute {
            Dtype::F32 => plan_and_run_in::<f32, R>(self, task, &at, limit_bytes, run),
            _ => plan_and_run_in::<f64, R>(self, task, &at, limit_bytes, run),
        };
        *state = cell.into_inner();
        out
    }
}

/// [`TaskRunner::plan_and_run`] of `runner` in the compute type `T`.
fn plan_and_run_in<T: Real, R: RowTask>(
    runner: &R,
    task: &Task,
    at: &Piece<'_, '_>,
    limit_bytes: u64,
    run: bool,
) -> Result<(Plan, Option<Vec<u8>>)> {
    let params: R::Params<T> = decode(&task.payload, R::PAYLOAD)?;
    let plan = runner.plan(&params, at, limit_bytes)?;
    let out = run.then(|| runner.run(params, &plan, at)).transpose()?;
    Ok((plan, out))
}

/// The validation pass (column moments and the initialisation sample).
struct ScanRunner;

impl RowTask for ScanRunner {
    type Params<T: Real> = ScanTask;
    const PAYLOAD: &'static str = "scan task";

    fn kind(&self) -> &'static str {
        SCAN
    }

    fn plan<T: Real>(&self, p: &ScanTask, at: &Piece<'_, '_>, limit_bytes: u64) -> Result<Plan> {
        plan_scan_task(p, at.x, at.w, size_of::<T>(), limit_bytes)
    }

    /// The pass sees the rows as they are (no shift).
    fn run<T: Real>(&self, p: ScanTask, plan: &Plan, at: &Piece<'_, '_>) -> Result<Vec<u8>> {
        run_scan_task::<T>(p, at.x, at.w, plan, at.rows.clone(), at.cancel)
    }
}

/// The k-means assignment pass (Lloyd iterations, the final pass).
struct AssignRunner;

impl RowTask for AssignRunner {
    type Params<T: Real> = AssignTask;
    const PAYLOAD: &'static str = "k-means task";

    fn kind(&self) -> &'static str {
        ASSIGN
    }

    fn plan<T: Real>(&self, a: &AssignTask, at: &Piece<'_, '_>, limit_bytes: u64) -> Result<Plan> {
        a.plan(at.x, at.w, size_of::<T>(), limit_bytes)
    }

    /// A bounded pass's task reads and leaves its rows' bounds in
    /// `at.state`.
    fn run<T: Real>(&self, a: AssignTask, plan: &Plan, at: &Piece<'_, '_>) -> Result<Vec<u8>> {
        let mut state = at.state.borrow_mut();
        let kept = if at.row_state.is_some_and(|s| !s.fresh) { state.take() } else { None };
        let (out, left) = a.run::<T>(plan, at.x, at.w, at.rows.clone(), at.shift, kept, at.cancel)?;
        *state = left;
        Ok(out)
    }
}

/// The weighted scatter matrix (float64 only: `T` is always `f64`).
struct ScatterRunner;

impl RowTask for ScatterRunner {
    /// `n_features`.
    type Params<T: Real> = usize;
    const PAYLOAD: &'static str = "scatter task";

    fn kind(&self) -> &'static str {
        SCATTER
    }

    fn computes(&self, compute: Dtype) -> bool {
        compute == Dtype::F64
    }

    fn plan<T: Real>(&self, _d: &usize, at: &Piece<'_, '_>, limit_bytes: u64) -> Result<Plan> {
        plan_weighted_scatter(&Job::new(at.x, at.w, 8, 0, &RunOptions::with_limit(limit_bytes)))
    }

    /// The pass sees the rows as they are (no shift).
    fn run<T: Real>(&self, d: usize, plan: &Plan, at: &Piece<'_, '_>) -> Result<Vec<u8>> {
        run_scatter_task(d, at.x, at.w, plan, at.rows.clone(), at.cancel)
    }
}

/// A mixture fit's initial M-step.
struct MixtureInitRunner;

impl RowTask for MixtureInitRunner {
    type Params<T: Real> = InitTask;
    const PAYLOAD: &'static str = "mixture init task";

    fn kind(&self) -> &'static str {
        INIT_TASK
    }

    fn plan<T: Real>(&self, m: &InitTask, at: &Piece<'_, '_>, limit_bytes: u64) -> Result<Plan> {
        m.plan(PlanRows { x: at.x, w: at.w, compute_bytes: size_of::<T>(), limit_bytes })
    }

    fn run<T: Real>(&self, m: InitTask, plan: &Plan, at: &Piece<'_, '_>) -> Result<Vec<u8>> {
        m.run::<T>(plan, at.task_rows())
    }
}

/// A mixture's EM iteration or E-step pass (the task kind it is named by).
struct MixtureRunner(&'static str);

impl RowTask for MixtureRunner {
    type Params<T: Real> = MixtureTask<T>;
    const PAYLOAD: &'static str = "mixture task";

    fn kind(&self) -> &'static str {
        self.0
    }

    fn plan<T: Real>(&self, m: &MixtureTask<T>, at: &Piece<'_, '_>, limit_bytes: u64) -> Result<Plan> {
        m.plan(at.x, at.w, limit_bytes)
    }

    fn run<T: Real>(&self, m: MixtureTask<T>, plan: &Plan, at: &Piece<'_, '_>) -> Result<Vec<u8>> {
        m.run(plan, at.task_rows())
    }
}

/// Plans `task` (encoded by [`Task::encode`]) over the rows of `x` (a piece
/// of the data: [`Source::starting_at`] numbers its rows as in the whole)
/// and optional per-row weights `w` (the same rows), within `limit_bytes`
/// on the current rayon pool; with `run`, also runs it. Returns the plan and,
/// when run, the rows' encoded [`crate::exec::Partial`] statistics.
///
/// # Errors
/// [`Error::Remote`] for bytes that are not a task this version knows (no
/// runner in [`TASK_RUNNERS`] for its kind and compute type);
/// [`Error::DoesNotFit`] when one block of the pass does not fit the limit;
/// when run, the pass's errors ([`Error::NonFinite`] naming the row in the
/// whole data, read errors, [`Error::Cancelled`]).
///
/// A task that keeps per-row state ([`Task::row_state`]) reads the state
/// its range's last task left from `state` (`None`: there is none, as after
/// losing it with a worker: the task then starts from none, with the same
/// results) and leaves its own there.
pub fn run_task(
    task: &[u8],
    x: &Source<'_>,
    w: Option<&Source<'_>>,
    limit_bytes: u64,
    run: bool,
    cancel: &Cancel,
    state: &mut Option<Vec<f64>>,
) -> Result<(Plan, Option<Vec<u8>>)> {
    let task = Task::decode(task)?;
    let runner = runner_of(&task)?;
    if task.shift.len() != x.n_features() {
        return Err(Error::Remote {
            reason: format!("a task for {} features was given rows of {}", task.shift.len(), x.n_features()),
        });
    }
    x.check_weights(w)?;
    if task.unit_rows != x.has_unit_rows() {
        return Err(Error::Remote {
            reason: format!(
                "a task {} rows scaled to unit norm was given rows {} so",
                if task.unit_rows { "on" } else { "not on" },
                if x.has_unit_rows() { "read" } else { "not read" }
            ),
        });
    }
    runner.plan_and_run(&task, x, w, limit_bytes, run, cancel, state)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One runner per kind, and the pass's kinds all have one.
    #[test]
    fn every_task_kind_has_one_runner() {
        let kinds: Vec<&str> = TASK_RUNNERS.iter().map(|r| r.kind()).collect();
        let mut unique = kinds.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), kinds.len(), "{kinds:?}");
        for kind in [SCAN, ASSIGN, SCATTER, INIT_TASK, EM_TASK, E_TASK, crate::array::REDUCE_TASK] {
            assert!(kinds.contains(&kind), "{kind}");
        }
    }

    /// A kind this version does not know, or one in a compute type its
    /// runner does not take, is refused naming both.
    #[test]
    fn unknown_tasks_are_refused() {
        let values = [0.0; 4];
        let x = Source::memory(crate::io::ArrayRef::c_order(crate::io::Values::F64(&values), 2, 2).unwrap());
        for (kind, compute) in [("no-such-pass", Dtype::F64), (SCATTER, Dtype::F32)] {
            let task = Task {
                kind: kind.into(),
                compute,
                shift: vec![0.0; 2],
                payload: Vec::new(),
                unit_rows: false,
                row_state: None,
            };
            let e =
                run_task(&task.encode(), &x, None, 1 << 20, false, &crate::exec::Cancel::new(), &mut None).unwrap_err();
            assert!(matches!(&e, Error::Remote { reason } if reason.contains(kind)), "{e}");
        }
    }
}
