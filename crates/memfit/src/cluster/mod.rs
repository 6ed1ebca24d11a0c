//! K-means clustering: parameters, memory plan, initialisation, Lloyd
//! iterations and prediction.

mod init;
mod kmeans;
mod params;
mod plan;
mod predict;

pub use init::{kmeans_plusplus, uniform_distinct, SequentialSample};
pub use kmeans::{fit, KMeansFit, LabelSink, Observer, PlotSample, Progress, Timings};
pub(crate) use kmeans::{overflow, scan};
pub use params::{Init, KMeansParams};
pub(crate) use plan::kernel_tile_rows;
pub use plan::{default_init_sample_rows, plan_kmeans, MAX_K_TILE};
pub use predict::{plan_predict, plan_transform, predict, transform, AssignSink};
