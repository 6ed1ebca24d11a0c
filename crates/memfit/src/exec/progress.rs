//! What a run reports while it goes, and how a caller cancels it.

use super::Cancel;

/// What a fit reports while it runs.
#[derive(Debug, Clone)]
pub enum Progress<'a> {
    /// A phase starts (`"validating"`, `"init"`, `"iterating"`, `"labels"`;
    /// an array job's stages as `"stage 1 of 3"`).
    Phase(&'a str),
    /// An EM iteration of a Gaussian mixture finished.
    EmIteration {
        /// Zero-based index of the initialisation.
        run: usize,
        /// Number of initialisations.
        n_init: usize,
        /// One-based iteration number.
        iteration: usize,
        /// Maximum iterations.
        max_iter: usize,
        /// Mean log-likelihood of the parameters this iteration started from.
        lower_bound: f64,
        /// Change of the lower bound from the previous iteration.
        change: f64,
        /// Rows processed per second in this pass.
        rows_per_sec: f64,
    },
    /// A Lloyd iteration finished.
    Iteration {
        /// Zero-based index of the initialisation.
        run: usize,
        /// Number of initialisations.
        n_init: usize,
        /// One-based iteration number.
        iteration: usize,
        /// Maximum iterations.
        max_iter: usize,
        /// Inertia of the centres this iteration started from.
        inertia: f64,
        /// Sum of squared centre shifts this iteration.
        center_shift: f64,
        /// The absolute tolerance the shift is compared with.
        tol: f64,
        /// Rows processed per second in this pass.
        rows_per_sec: f64,
        /// Share of the pass's `n_samples × n_clusters` distances that
        /// bounds skipped (0 for a plain Lloyd pass).
        skip_share: f64,
    },
}

/// Receives progress and can cancel a run (row passes check once per read
/// block, array stages once per tile or batch of work units).
pub trait Observer {
    /// Called at each phase and iteration.
    fn event(&mut self, _event: &Progress<'_>) {}
    /// The run's cancellation token (a clone of the observer's own): once it
    /// is cancelled the run stops with [`crate::Error::Cancelled`]. The
    /// default is a token nobody cancels.
    fn cancel(&self) -> Cancel {
        Cancel::default()
    }
    /// Whether the run is cancelled (its token's state).
    fn cancelled(&self) -> bool {
        self.cancel().is_cancelled()
    }
}

impl Observer for () {}
