//! How a job runs, apart from what it computes: the memory limit, the
//! threads, where its row passes run and where its scratch files go. Every
//! job takes one [`RunOptions`] (k-means and mixture fits and predictions,
//! the kernels, array expressions); the estimators' parameter structs
//! ([`crate::cluster::KMeansParams`], [`crate::mixture::GmmParams`]) hold
//! only hyperparameters. The options flow one way: front end →
//! [`RunOptions`] → the job's [`crate::plan::Job`] (limit, threads, what the
//! input holds) → its [`crate::plan::Plan`] → the passes.
//!
//! The observer (progress events and cancellation, [`super::Observer`]) is
//! borrowed for the length of one run, so it is the run methods' argument
//! rather than a field here.

use std::path::PathBuf;

use super::RowSplit;

/// How to run a job.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The memory limit, in bytes: every buffer the job allocates (what its
    /// input holds included) is planned within it, or the job is refused
    /// before any work with [`crate::Error::DoesNotFit`] naming the smallest
    /// limit that works. Default: [`crate::plan::default_limit_bytes`].
    pub memory_limit: u64,
    /// Worker threads; `None` (the default) is the current rayon pool's
    /// (front ends run estimator jobs inside a pool of the threads asked
    /// for; array jobs start their own pools of this many threads).
    pub threads: Option<usize>,
    /// Where row passes run: whole and here by default, or cut into row
    /// ranges run here or on a cluster ([`RowSplit::remote`]). Results are
    /// the same bits for any split.
    pub row_split: RowSplit,
    /// Folder for the scratch files of a mixture fit whose components are
    /// processed in groups (see [`crate::plan::ComponentGroups`]); `None`
    /// (the default) is the system's temporary folder (`TMPDIR`). The files have
    /// no name there and vanish when the run ends, however it ends.
    pub scratch_dir: Option<PathBuf>,
    /// Where the passes' arithmetic happens: the CPU (the default), or a
    /// device opened and planned by [`crate::device::backend`].
    pub backend: super::Backend,
    /// Floating-point exceptions that fail an array job (NumPy's
    /// `np.errstate(...="raise")`): when its evaluation raised one of them,
    /// the job fails with [`crate::Error::FloatingPoint`] before it commits
    /// an output, so no file is written or replaced. Empty by default: they
    /// are reported as warnings.
    pub raise_on: Vec<crate::FpException>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions::with_limit(crate::plan::default_limit_bytes())
    }
}

impl RunOptions {
    /// Options with a memory limit of `memory_limit` bytes and the defaults
    /// for the rest.
    pub fn with_limit(memory_limit: u64) -> Self {
        RunOptions {
            memory_limit,
            threads: None,
            row_split: RowSplit::default(),
            scratch_dir: None,
            backend: super::Backend::Cpu,
            raise_on: Vec::new(),
        }
    }

    /// The worker threads: [`RunOptions::threads`], or the current rayon
    /// pool's.
    pub fn threads(&self) -> usize {
        self.threads.unwrap_or_else(rayon::current_num_threads)
    }

    /// The folder scratch files go to ([`RunOptions::scratch_dir`] or the
    /// system's temporary folder, [`crate::io::temp_dir`]).
    pub fn scratch_dir(&self) -> PathBuf {
        self.scratch_dir.clone().unwrap_or_else(crate::io::temp_dir)
    }
}
