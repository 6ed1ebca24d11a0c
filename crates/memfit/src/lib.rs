//! memfit: large-array numerical work within a memory budget.
//!
//! The engine reads data in row blocks from `.npy` files far larger than RAM
//! (or borrows in-memory arrays without copying them whole), plans every
//! buffer it allocates against a user-set memory limit, and runs fused,
//! blocked kernels on all cores.
//!
//! - [`io`]: `.npy` headers, block readers ([`io::Source`]), Zarr arrays,
//!   scratch files, and outputs put in place only when complete
//!   ([`io::AtomicFile`], [`io::AtomicFolder`]; unnamed until then on Linux,
//!   so a killed process leaves nothing).
//! - [`plan`]: memory-limit parsing, the default limit, [`plan::Plan`].
//! - [`memory`]: resident-memory readings of this process (`/proc/self/status`).
//! - [`exec`]: the blocked pass ([`exec::run_pass`]) and its mergeable statistics.
//! - [`kernels`]: fused distance + argmin, weighted per-cluster sums, Gaussian log-densities.
//! - [`cluster`]: k-means (Lloyd) with k-means++ / random / given init.
//! - [`mixture`]: Gaussian mixtures (EM), in memory or in groups of components.
//! - [`linalg`]: blocked row-wise quadratic forms and weighted scatter matrices.
//! - [`mod@array`]: lazy NumPy-style array expressions evaluated in blocks.
//! - [`generate`]: synthetic data streamed to `.npy`.
//! - [`estimator`]: one entry point per job (validate, plan, dispatch on the
//!   compute dtype, run), used by the CLI and the Python binding.
//! - [`dtype`], [`units`]: stored and compute element types; byte counts for people.
//! - [`Error`] / [`Warning`]: failures and warnings as data; hints are
//!   [`Remedy`] values each front-end words with its [`Spelling`].
//!
//! ```no_run
//! use memfit::cluster::{fit, plan_kmeans, KMeansParams};
//! use memfit::exec::RunOptions;
//! use memfit::plan::Job;
//! use memfit::io::Source;
//! let x = Source::open_matrix("data.npy")?;
//! let params = KMeansParams { n_clusters: 200, ..Default::default() };
//! let run = RunOptions::with_limit(512 << 20);
//! let plan = plan_kmeans(&params, &Job::new(&x, None, 8, 0, &run))?;
//! let model = fit::<f64>(&params, &x, None, &plan, &run, None, &mut ())?;
//! println!("inertia {} after {} iterations", model.inertia, model.n_iter);
//! # Ok::<(), memfit::Error>(())
//! ```

pub mod array;
mod backend;
pub mod cluster;
pub mod device;
pub mod dtype;
mod error;
pub mod estimator;
pub mod exec;
pub mod generate;
pub mod io;
pub mod kernels;
pub mod linalg;
pub mod memory;
pub mod mixture;
pub mod plan;
pub mod units;
pub mod warning;
mod wire;

pub use dtype::Real;
pub use error::{common_remedy, for_example, hint, join, Count, Error, Neutral, Remedy, Rendered, Result, Spelling};
pub use error::{shape_text, ExpressionFault, ALL_WEIGHTS_ZERO};
pub use warning::{FpException, Warning};
