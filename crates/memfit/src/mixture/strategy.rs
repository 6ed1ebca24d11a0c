//! The two ways the EM loop ([`super::fit`]) holds a mixture: every
//! component's parameters in memory (`memory.rs`), or components in groups
//! whose covariances and precision factors live in a scratch file
//! (`grouped.rs`). The loop owns the iterations, the lower bound and its
//! `tol` test, the best of `n_init` runs, warm starts and the warnings; a
//! [`Strategy`] owns the passes over the data and the parameters' storage.

use std::sync::Arc;

use super::components::Params;
use super::fitted::{Outputs, StoredCovariances};
use super::params::GmmParams;
use super::passes::InitResp;
use crate::dtype::Real;
use crate::error::Result;
use crate::exec::{run_split, Pass, RowSplit};
use crate::io::{BlockReader, Source};

/// The data the passes of a run read: blocks of rows (and weights), the
/// row split every pass runs in, and the origin the rows are shifted to.
pub(crate) struct Data<'r, T> {
    pub(crate) blocks: BlockReader<'r, 'r, T>,
    pub(crate) split: &'r RowSplit,
    /// `(n_features,)`: subtracted from every row as it is read.
    pub(crate) shift: &'r [f64],
}

impl<'r, T: Real> Data<'r, T> {
    /// The data source.
    pub(crate) fn x(&self) -> &'r Source<'r> {
        self.blocks.x()
    }

    /// Runs `pass` over every row, as the split says.
    ///
    /// # Errors
    /// As [`run_split`].
    pub(crate) fn run<P: Pass<T>>(&mut self, pass: &mut P, cancel: &crate::exec::Cancel) -> Result<P::Stats> {
        run_split(pass, &mut self.blocks, self.split, self.shift, cancel)
    }
}

/// What the final E-step of a fit gives.
pub(crate) struct Final {
    /// `Σ_i w_i log p(x_i)` under the kept parameters.
    pub(crate) log_likelihood: f64,
    /// The largest condition estimate of a covariance, and its component.
    pub(crate) worst: Option<(usize, f64)>,
    /// The covariances, when they are kept on disk.
    pub(crate) stored: Option<Arc<StoredCovariances>>,
}

/// Where a fit's parameters live and how its passes run. The EM loop calls,
/// per run: [`Strategy::init`], [`Strategy::start`], then per iteration
/// [`Strategy::iterate`] and [`Strategy::prepare`]; [`Strategy::keep`] for
/// the best run so far; and [`Strategy::finish`] once. Parameters the loop
/// holds ([`Params`]) have shifted means; their covariances are empty when
/// the strategy keeps them elsewhere.
pub(crate) trait Strategy {
    /// What the strategy needs of the best run besides its [`Params`].
    type Kept;

    /// Sweeps of every component's log-densities over the data per EM
    /// iteration (for the E-step throughput).
    const SWEEPS_PER_ITERATION: usize;

    /// The initial M-step under `init`'s responsibilities into `cur`
    /// (`None`: every parameter is given, nothing is computed).
    ///
    /// # Errors
    /// Read and scratch I/O errors; [`crate::Error::Cancelled`].
    fn init(&mut self, init: Option<&InitResp>, cur: &mut Params, cancel: &crate::exec::Cancel) -> Result<()>;

    /// Sets up a run's first E-step from `cur` (with the given weights and
    /// means) or from `params.precisions_init`.
    ///
    /// # Errors
    /// As [`super::components::Estep::set_precisions`]; the covariance
    /// errors of [`Strategy::prepare`].
    fn start(&mut self, params: &GmmParams<'_>, cur: &mut Params) -> Result<()>;

    /// One EM iteration: the E-step under the current parameters with the
    /// M-step's sums, `cur` replaced by the new parameters; adds the E-step's
    /// and M-step's seconds to `secs` and returns `Σ_i w_i log p(x_i)` under
    /// the old parameters.
    ///
    /// # Errors
    /// Read and scratch I/O errors, [`crate::Error::Cancelled`], zero
    /// densities; grouped: [`crate::Error::IllDefinedCovariance`].
    fn iterate(&mut self, cur: &mut Params, secs: &mut (f64, f64), cancel: &crate::exec::Cancel) -> Result<f64>;

    /// Sets up the next E-step from `cur`, the parameters [`Strategy::iterate`] made.
    ///
    /// # Errors
    /// [`crate::Error::IllDefinedCovariance`] naming the first component
    /// whose covariance is not positive definite.
    fn prepare(&mut self, cur: &Params) -> Result<()>;

    /// Keeps what the strategy needs of the current run, the best so far;
    /// `more` when other runs follow.
    fn keep(&mut self, more: bool) -> Self::Kept;

    /// The final E-step under the kept run's parameters `best`: per-sample
    /// results to `outputs`. `last` says that the kept run was the last
    /// (its E-step parameters are still set up).
    ///
    /// # Errors
    /// As [`Strategy::iterate`]; whatever `outputs` return.
    fn finish(
        self,
        best: &Params,
        kept: Self::Kept,
        last: bool,
        outputs: &mut Outputs<'_>,
        cancel: &crate::exec::Cancel,
    ) -> Result<Final>;
}
