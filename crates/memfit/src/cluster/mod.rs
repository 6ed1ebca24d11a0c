//! K-means clustering: parameters, memory plan, initialisation, Lloyd
//! iterations and prediction.

mod auto;
mod bounds;
mod init;
mod kmeans;
mod minibatch;
mod minibatch_run;
mod params;
mod pass;
mod plan;
mod predict;
mod task;

/// Progress events and cancellation (see [`crate::exec`]).
pub use crate::exec::{Observer, Progress};
pub(crate) use init::random_rows;
pub use init::{kmeans_plusplus, uniform_distinct, WeightedDraw};
pub(crate) use kmeans::overflow;
pub use kmeans::{fit, fit_centers, validate, KMeansFit, LabelSink, PlotSample, Timings};
pub use minibatch::{EarlyStop, MiniBatch, Step, StepWork, Stop};
pub use params::{Algorithm, Init, KMeansParams, Metric, MiniBatchParams};
pub use pass::AssignSink;
pub(crate) use plan::kernel_tile_rows;
pub use plan::{default_init_sample_rows, k_tile, plan_kmeans, plan_validation};
pub use predict::{plan_predict, plan_transform, predict, transform};
pub(crate) use task::{AssignTask, ASSIGN};
