//! What a run reports while it goes, and how a caller cancels it.

/// What a fit reports while it runs.
#[derive(Debug, Clone)]
pub enum Progress<'a> {
    /// A phase starts (`"validating"`, `"init"`, `"iterating"`, `"labels"`).
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
    },
}

/// Receives progress and can cancel a fit (checked once per read block).
pub trait Observer {
    /// Called at each phase and iteration.
    fn event(&mut self, _event: &Progress<'_>) {}
    /// Returning `true` stops the fit with [`crate::Error::Cancelled`].
    fn cancelled(&self) -> bool {
        false
    }
}

impl Observer for () {}
