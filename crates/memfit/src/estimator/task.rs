//! The receiving side of [`crate::exec::Remote`]: decodes a [`Task`] and
//! runs its pass over the rows a process was given, within the memory limit
//! of that process, returning the statistics to merge.

use crate::cluster::{AssignTask, ASSIGN};
use crate::error::{Error, Result};
use crate::exec::{plan_scan_task, run_scan_task, RunOptions, Task, SCAN};
use crate::io::{Dtype, Source};
use crate::linalg::{plan_weighted_scatter, run_scatter_task, SCATTER};
use crate::mixture::{MixtureTask, EM_TASK, E_TASK};
use crate::plan::{Job, Plan};

/// A decoded task, ready to plan and run.
enum Decoded {
    Scan,
    Assign(AssignTask),
    Scatter,
    Mixture32(MixtureTask<f32>),
    Mixture64(MixtureTask<f64>),
}

fn decoded(task: &Task) -> Result<Decoded> {
    match (task.kind.as_str(), task.compute) {
        (SCAN, Dtype::F32 | Dtype::F64) => Ok(Decoded::Scan),
        (ASSIGN, Dtype::F32 | Dtype::F64) => Ok(Decoded::Assign(AssignTask::decode(&task.payload)?)),
        (SCATTER, Dtype::F64) => Ok(Decoded::Scatter),
        (EM_TASK | E_TASK, Dtype::F32) => Ok(Decoded::Mixture32(MixtureTask::decode(&task.payload)?)),
        (EM_TASK | E_TASK, Dtype::F64) => Ok(Decoded::Mixture64(MixtureTask::decode(&task.payload)?)),
        (kind, compute) => {
            Err(Error::Remote { reason: format!("unknown task {kind:?} computing in {}", compute.name()) })
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
/// [`Error::Remote`] for bytes that are not a task this version knows;
/// [`Error::DoesNotFit`] when one block of the pass does not fit the limit;
/// when run, the pass's errors ([`Error::NonFinite`] naming the row in the
/// whole data, read errors, [`Error::Cancelled`]).
pub fn run_task(
    task: &[u8],
    x: &Source<'_>,
    w: Option<&Source<'_>>,
    limit_bytes: u64,
    run: bool,
    cancelled: &dyn Fn() -> bool,
) -> Result<(Plan, Option<Vec<u8>>)> {
    let task = Task::decode(task)?;
    if task.shift.len() != x.n_features() {
        return Err(Error::Remote {
            reason: format!("a task for {} features was given rows of {}", task.shift.len(), x.n_features()),
        });
    }
    x.check_weights(w)?;
    let rows = x.first_row()..x.n_samples();
    let shift = &task.shift;
    Ok(match decoded(&task)? {
        Decoded::Scan => {
            let plan = plan_scan_task(&task.payload, x, w, task.compute.itemsize(), limit_bytes)?;
            let out = match (run, task.compute) {
                (false, _) => None,
                (true, Dtype::F32) => Some(run_scan_task::<f32>(&task.payload, x, w, &plan, cancelled)?),
                (true, _) => Some(run_scan_task::<f64>(&task.payload, x, w, &plan, cancelled)?),
            };
            (plan, out)
        }
        Decoded::Assign(a) => {
            let plan = a.plan(x, w, task.compute.itemsize(), limit_bytes)?;
            let out = match (run, task.compute) {
                (false, _) => None,
                (true, Dtype::F32) => Some(a.run::<f32>(&plan, x, w, rows, shift, cancelled)?),
                (true, _) => Some(a.run::<f64>(&plan, x, w, rows, shift, cancelled)?),
            };
            (plan, out)
        }
        Decoded::Scatter => {
            let plan = plan_weighted_scatter(&Job::new(x, w, 8, 0, &RunOptions::with_limit(limit_bytes)))?;
            let out = run.then(|| run_scatter_task(&task.payload, x, w, &plan, cancelled)).transpose()?;
            (plan, out)
        }
        Decoded::Mixture32(m) => {
            let plan = m.plan(x, w, limit_bytes)?;
            let out = run.then(|| m.run(&plan, x, w, rows, shift, cancelled)).transpose()?;
            (plan, out)
        }
        Decoded::Mixture64(m) => {
            let plan = m.plan(x, w, limit_bytes)?;
            let out = run.then(|| m.run(&plan, x, w, rows, shift, cancelled)).transpose()?;
            (plan, out)
        }
    })
}
