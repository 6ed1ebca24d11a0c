//! Gaussian mixtures fitted by EM on data read in blocks, within a memory
//! plan: full, tied, diagonal and spherical covariances, parametrised by
//! precision Cholesky factors as scikit-learn's `GaussianMixture`.
//!
//! - [`GmmParams`]: hyperparameters with scikit-learn's names and defaults.
//! - [`plan_gmm`]: the memory plan (every buffer, block sizes, passes).
//! - [`fit`]: EM, one loop over a strategy that holds every component in
//!   memory (one fused pass per iteration) or components in groups on disk
//!   (the plan chooses; [`NEGLIGIBLE_RESPONSIBILITY`] says which rows the
//!   M-step skips).
//! - [`predict`]: labels, probabilities and log-likelihoods of a saved model.
//! - [`save_model`] / [`load_model`]: the model folder.

mod components;
mod em;
mod fitted;
mod grouped;
mod groups;
mod memory;
mod model_dir;
mod mstep;
mod params;
mod pass;
mod passes;
mod plan;
mod predict;
mod strategy;
mod task;

pub use components::{cov_len, full_covariance, packed_len, prec_len};
pub use em::fit;
pub use fitted::{ColumnSink, GmmFit, GmmTimings, Outputs, Sink, StoredCovariances};
pub(crate) use memory::{PlanRows, TaskRows};
pub use model_dir::{check_model_dir, load_model, model_dir_bytes, param_dtype, save_model, MODEL_JSON};
pub use params::{CovarianceType, GmmParams, InitMethod, PrecisionsInit};
pub use pass::NEGLIGIBLE_RESPONSIBILITY;
pub use plan::plan_gmm;
pub use predict::{plan_predict, predict, MixtureModel};
pub(crate) use task::{InitTask, MixtureTask, E as E_TASK, EM as EM_TASK, INIT as INIT_TASK};
