//! What a job over rows looks like to its planner ([`Job`]), and the one
//! place where what the input holds enters the plan ([`Job::ledger`]).

use std::path::PathBuf;

use super::Ledger;
use crate::exec::RunOptions;
use crate::io::Source;

/// What a job looks like to a planner: the data's shape and read scratch,
/// the weights' read scratch, the compute type, the run options (limit,
/// threads, scratch folder), the streamed outputs, and the buffers held
/// through the whole run by the input (an expression's intermediates, a
/// computed chunk: [`Source::held_bytes`]) and by the caller (a generated
/// input, results returned in memory).
///
/// Built by [`Job::new`] only, which records what the input holds; a
/// planner starts its ledger from [`Job::ledger`], which declares those
/// held buffers, and adds only its own buffers: no planner can forget or
/// overwrite what the input holds.
#[derive(Debug, Clone)]
pub struct Job {
    /// Rows of the data (from the first row of a piece on).
    pub n_samples: usize,
    /// Columns of the data.
    pub n_features: usize,
    /// Bytes per row of read scratch for the data (0 for in-memory data).
    pub x_scratch_per_row: usize,
    /// Bytes per row of read scratch for the weights; `None` without weights.
    pub w_scratch_per_row: Option<usize>,
    /// For sparse (CSR) data, the most values one row stores: read blocks
    /// hold that many values and columns per row instead of `n_features`
    /// values. `None` for dense data.
    pub sparse_row_nnz: Option<usize>,
    /// Bytes per element of the compute type (4 or 8).
    pub compute_bytes: usize,
    /// Worker threads ([`RunOptions::threads`]).
    pub threads: usize,
    /// Arrays of one value per row streamed to files (labels,
    /// log-likelihoods), each with a writer's buffers
    /// ([`crate::io::npy_writer_bytes`]).
    pub n_outputs: usize,
    /// The memory limit in bytes ([`RunOptions::memory_limit`]).
    pub limit_bytes: u64,
    /// The folder scratch files go to ([`RunOptions::scratch_dir`]).
    pub scratch_dir: PathBuf,
    /// Whether passes over the rows run as tasks elsewhere (a remote
    /// [`RunOptions::row_split`]): per-row state stays with those tasks,
    /// not in this process.
    pub rows_elsewhere: bool,
    /// Buffers held through the run: first what the input holds, then the
    /// caller's (name, bytes).
    held: Vec<(String, u64)>,
}

/// The name of the input's held buffer in a plan.
pub const INPUT_HELD: &str = "held by the input (expression intermediates, a computed chunk)";

impl Job {
    /// Describes a job over `x` (and optional weights) in a compute type of
    /// `compute_bytes` bytes, streaming `n_outputs` arrays, run as `run`
    /// says; records the bytes `x` and the weights hold
    /// ([`Source::held_bytes`]).
    pub fn new(
        x: &Source<'_>,
        weights: Option<&Source<'_>>,
        compute_bytes: usize,
        n_outputs: usize,
        run: &RunOptions,
    ) -> Self {
        let input_held = x.held_bytes() + weights.map_or(0, Source::held_bytes);
        Job {
            n_samples: x.n_samples() - x.first_row(),
            n_features: x.n_features(),
            x_scratch_per_row: x.scratch_bytes_per_row(),
            w_scratch_per_row: weights.map(Source::scratch_bytes_per_row),
            sparse_row_nnz: x.sparse_row_nnz(),
            compute_bytes,
            threads: run.threads(),
            n_outputs,
            limit_bytes: run.memory_limit,
            scratch_dir: run.scratch_dir(),
            rows_elsewhere: run.row_split.is_remote(),
            held: vec![(INPUT_HELD.to_string(), input_held)],
        }
    }

    /// Adds a buffer of `bytes` bytes that the caller holds through the run
    /// (`name` says what it is, in the caller's words).
    #[must_use]
    pub fn holding(mut self, name: impl Into<String>, bytes: u64) -> Self {
        self.held.push((name.into(), bytes));
        self
    }

    /// Bytes a read block holds per row of the data (and, with
    /// `w_scratch`, of the weights): raw scratch and converted values for
    /// dense data, an offset and the most stored values with their columns
    /// for sparse data (see [`crate::io::BlockReader`]).
    pub fn read_bytes_per_row(&self, w_scratch: Option<usize>) -> u64 {
        use crate::io::BlockReader;
        match self.sparse_row_nnz {
            Some(nnz) => {
                BlockReader::<f64>::sparse_bytes_per_row(nnz, self.compute_bytes, w_scratch)
                    + self.x_scratch_per_row as u64
            }
            None => BlockReader::<f64>::bytes_per_row(
                self.x_scratch_per_row,
                self.n_features,
                self.compute_bytes,
                w_scratch,
            ),
        }
    }

    /// Bytes of one row's converted values in a read block (what caps a
    /// block's size, see [`super::pick_block_rows`]).
    pub fn row_value_bytes(&self) -> u64 {
        match self.sparse_row_nnz {
            Some(nnz) => (nnz * (self.compute_bytes + 4) + 8) as u64,
            None => (self.n_features * self.compute_bytes) as u64,
        }
    }

    /// Bytes the input holds through the run.
    pub fn input_held_bytes(&self) -> u64 {
        self.held[0].1
    }

    /// A ledger that declares what the input and the caller hold through
    /// the run (buffers of 0 bytes are left out): every planner of a row
    /// job starts from it and adds its own buffers.
    pub fn ledger(&self) -> Ledger {
        let mut led = Ledger::default();
        for (i, (name, bytes)) in self.held.iter().enumerate() {
            let by = if i == 0 { "held by the input while the job runs" } else { "held by the caller" };
            led.add(name, *bytes, 1, by.into());
        }
        led
    }
}

#[cfg(test)]
impl Job {
    /// A job over `n_samples × n_features` rows of a `.npy` of `float64`,
    /// in `float64`, on 2 threads, for planner tests.
    pub(crate) fn of_shape(n_samples: usize, n_features: usize, run: &RunOptions) -> Self {
        Job {
            n_samples,
            n_features,
            x_scratch_per_row: n_features * 8,
            w_scratch_per_row: None,
            sparse_row_nnz: None,
            compute_bytes: 8,
            threads: 2,
            n_outputs: 0,
            limit_bytes: run.memory_limit,
            scratch_dir: run.scratch_dir(),
            rows_elsewhere: false,
            held: vec![(INPUT_HELD.to_string(), 0)],
        }
    }
}
