//! A 2-D expression as rows read on demand ([`ExprRows`]): the estimators
//! read it block by block like a `.npy` file, so `(X - mean) / std`
//! standardised on the fly is never materialised.

use std::sync::OnceLock;

use super::eval::{eval, Ctx};
use super::lower::{Lowered, Work};
use super::node::Array;
use super::plan::{ArrayPlan, Output};
use super::run::{prepare, run_intermediates, Options, Slots};
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::io::RowSource;

/// The rows of a 2-D expression, computed when read. Reductions and
/// contractions inside it (a column mean, say) run once, at the first read,
/// within the memory limit given (results too large for it go to scratch
/// files); what they need, their held results and the working buffers of
/// the largest stage, is [`RowSource::held_bytes`], which a job reading the
/// rows counts beside its own buffers.
pub struct ExprRows {
    lowered: Lowered,
    plan: ArrayPlan,
    slots: Slots,
    held: u64,
    opts: Options,
    ready: OnceLock<std::result::Result<(), String>>,
}

impl std::fmt::Debug for ExprRows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ExprRows({:?})", self.shape())
    }
}

impl ExprRows {
    /// Plans `root` (2-D); its intermediate stages run before the first
    /// read, within `opts.memory_limit`.
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
        Ok(ExprRows { lowered, plan, slots, held, opts: opts.clone(), ready: OnceLock::new() })
    }

    fn ready(&self) -> Result<()> {
        let threads = self.opts.threads.unwrap_or_else(rayon::current_num_threads);
        let done = self.ready.get_or_init(|| {
            run_intermediates(&self.lowered, &self.plan, &self.slots, threads, &mut crate::exec::Context::new(&mut ()))
                .map_err(|e| e.to_string())
        });
        done.clone().map_err(|message| Error::Expression { kind: crate::error::ExpressionFault::Value, message })
    }

    fn shape(&self) -> &[usize] {
        &self.lowered.stages.last().expect("a final stage").shape
    }

    /// The plan of the intermediate stages.
    pub fn plan(&self) -> &ArrayPlan {
        &self.plan
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

    fn read(&self, start: usize, rows: usize) -> Result<Vec<f64>> {
        self.ready()?;
        let Work::Map { ir } = &self.lowered.stages.last().expect("a final stage").work else {
            unreachable!("rows end in an elementwise stage")
        };
        let ctx = Ctx { slots: &self.slots.cells, overflow: &self.slots.overflow };
        let mut buf = Vec::new();
        let col = eval(ir, &[start, 0], &[start + rows, self.n_cols()], &ctx, &mut buf)?;
        Ok((0..col.len()).map(|i| col.get_f64(i)).collect())
    }
}
