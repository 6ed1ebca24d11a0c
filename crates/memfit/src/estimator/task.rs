//! The receiving side of [`crate::exec::Remote`]: decodes a [`Task`] and
//! runs its pass over the rows a process was given, within the memory limit
//! of that process, returning the statistics to merge. Each kind of task is
//! one [`TaskRunner`], listed once in [`TASK_RUNNERS`].

use crate::cluster::{AssignTask, ASSIGN};
use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::exec::{plan_scan_task, run_scan_task, RunOptions, Task, TaskRunner, SCAN};
use crate::io::{Dtype, Source};
use crate::linalg::{plan_weighted_scatter, run_scatter_task, SCATTER};
use crate::mixture::{MixtureTask, EM_TASK, E_TASK};
use crate::plan::{Job, Plan};

/// Every kind of task this version runs: a new distributed pass adds its
/// runner here.
pub static TASK_RUNNERS: [&dyn TaskRunner; 6] = [
    &ScanRunner,
    &AssignRunner,
    &ScatterRunner,
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

/// The validation pass (column moments and the initialisation sample).
struct ScanRunner;

impl TaskRunner for ScanRunner {
    fn kind(&self) -> &'static str {
        SCAN
    }

    fn plan_and_run(
        &self,
        task: &Task,
        x: &Source<'_>,
        w: Option<&Source<'_>>,
        limit_bytes: u64,
        run: bool,
        cancel: &crate::exec::Cancel,
    ) -> Result<(Plan, Option<Vec<u8>>)> {
        let plan = plan_scan_task(&task.payload, x, w, task.compute.itemsize(), limit_bytes)?;
        let out = match (run, task.compute) {
            (false, _) => None,
            (true, Dtype::F32) => Some(run_scan_task::<f32>(&task.payload, x, w, &plan, cancel)?),
            (true, _) => Some(run_scan_task::<f64>(&task.payload, x, w, &plan, cancel)?),
        };
        Ok((plan, out))
    }
}

/// The k-means assignment pass (Lloyd iterations, the final pass).
struct AssignRunner;

impl TaskRunner for AssignRunner {
    fn kind(&self) -> &'static str {
        ASSIGN
    }

    fn plan_and_run(
        &self,
        task: &Task,
        x: &Source<'_>,
        w: Option<&Source<'_>>,
        limit_bytes: u64,
        run: bool,
        cancel: &crate::exec::Cancel,
    ) -> Result<(Plan, Option<Vec<u8>>)> {
        let a = AssignTask::decode(&task.payload)?;
        let plan = a.plan(x, w, task.compute.itemsize(), limit_bytes)?;
        let (rows, shift) = (x.first_row()..x.n_samples(), &task.shift);
        let out = match (run, task.compute) {
            (false, _) => None,
            (true, Dtype::F32) => Some(a.run::<f32>(&plan, x, w, rows, shift, cancel)?),
            (true, _) => Some(a.run::<f64>(&plan, x, w, rows, shift, cancel)?),
        };
        Ok((plan, out))
    }
}

/// The weighted scatter matrix (float64 only).
struct ScatterRunner;

impl TaskRunner for ScatterRunner {
    fn kind(&self) -> &'static str {
        SCATTER
    }

    fn computes(&self, compute: Dtype) -> bool {
        compute == Dtype::F64
    }

    fn plan_and_run(
        &self,
        task: &Task,
        x: &Source<'_>,
        w: Option<&Source<'_>>,
        limit_bytes: u64,
        run: bool,
        cancel: &crate::exec::Cancel,
    ) -> Result<(Plan, Option<Vec<u8>>)> {
        let plan = plan_weighted_scatter(&Job::new(x, w, 8, 0, &RunOptions::with_limit(limit_bytes)))?;
        let out = run.then(|| run_scatter_task(&task.payload, x, w, &plan, cancel)).transpose()?;
        Ok((plan, out))
    }
}

/// A mixture's EM iteration or E-step pass (the task kind it is named by).
struct MixtureRunner(&'static str);

impl MixtureRunner {
    fn plan_and_run_in<T: Real>(
        task: &Task,
        x: &Source<'_>,
        w: Option<&Source<'_>>,
        limit_bytes: u64,
        run: bool,
        cancel: &crate::exec::Cancel,
    ) -> Result<(Plan, Option<Vec<u8>>)> {
        let m = MixtureTask::<T>::decode(&task.payload)?;
        let plan = m.plan(x, w, limit_bytes)?;
        let rows = x.first_row()..x.n_samples();
        let out = run.then(|| m.run(&plan, x, w, rows, &task.shift, cancel)).transpose()?;
        Ok((plan, out))
    }
}

impl TaskRunner for MixtureRunner {
    fn kind(&self) -> &'static str {
        self.0
    }

    fn plan_and_run(
        &self,
        task: &Task,
        x: &Source<'_>,
        w: Option<&Source<'_>>,
        limit_bytes: u64,
        run: bool,
        cancel: &crate::exec::Cancel,
    ) -> Result<(Plan, Option<Vec<u8>>)> {
        match task.compute {
            Dtype::F32 => Self::plan_and_run_in::<f32>(task, x, w, limit_bytes, run, cancel),
            _ => Self::plan_and_run_in::<f64>(task, x, w, limit_bytes, run, cancel),
        }
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
pub fn run_task(
    task: &[u8],
    x: &Source<'_>,
    w: Option<&Source<'_>>,
    limit_bytes: u64,
    run: bool,
    cancel: &crate::exec::Cancel,
) -> Result<(Plan, Option<Vec<u8>>)> {
    let task = Task::decode(task)?;
    let runner = runner_of(&task)?;
    if task.shift.len() != x.n_features() {
        return Err(Error::Remote {
            reason: format!("a task for {} features was given rows of {}", task.shift.len(), x.n_features()),
        });
    }
    x.check_weights(w)?;
    runner.plan_and_run(&task, x, w, limit_bytes, run, cancel)
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
        for kind in [SCAN, ASSIGN, SCATTER, EM_TASK, E_TASK, crate::array::REDUCE_TASK] {
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
            let task = Task { kind: kind.into(), compute, shift: vec![0.0; 2], payload: Vec::new() };
            let e = run_task(&task.encode(), &x, None, 1 << 20, false, &crate::exec::Cancel::new()).unwrap_err();
            assert!(matches!(&e, Error::Remote { reason } if reason.contains(kind)), "{e}");
        }
    }
}
