//! One entry point per job, shared by every front-end: each job is a request
//! struct (data, parameters, the compute dtype as a value, the memory limit)
//! whose `plan` validates and plans, and whose run method dispatches on the
//! compute dtype, runs the algorithm and returns its result with the
//! [`Warning`]s it found (integers the compute dtype rounds included). The
//! CLI and the Python binding only open inputs, place outputs and render
//! messages.
//!
//! | job | request | plan | run |
//! |---|---|---|---|
//! | k-means fit | [`KMeansJob`] | [`KMeansJob::plan`] | [`KMeansJob::fit`] |
//! | nearest centre, (weighted) inertia | [`CentersJob`] | [`CentersJob::plan_assign`] | [`CentersJob::assign`] |
//! | distances to centres | [`CentersJob`] | [`CentersJob::plan_transform`] | [`CentersJob::transform`] |
//! | Gaussian mixture fit | [`GmmJob`] | [`GmmJob::plan`] | [`GmmJob::fit`] |
//! | mixture E-step (labels, probabilities, score, BIC, AIC) | [`GmmPredictJob`] | [`GmmPredictJob::plan`] | [`GmmPredictJob::predict`] |
//! | `x_iᵀ Q x_i` | [`QuadraticFormJob`] | [`QuadraticFormJob::plan`] | [`QuadraticFormJob::run`] |
//! | `Xᵀ diag(w) X` | [`ScatterJob`] | [`ScatterJob::plan`] | [`ScatterJob::run`] |

mod kernels;
mod kmeans;
mod mixture;

pub use kernels::{QuadraticFormJob, ScatterJob};
pub use kmeans::{parse_init, AssignResult, CentersJob, KMeansJob, WEIGHT_CHUNK_ROWS};
pub use mixture::{information_criteria, n_parameters, GmmJob, GmmPredictJob, GmmScore};

use crate::io::{Dtype, Source};
use crate::warning::Warning;

/// The floating-point type a job computes in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ComputeDtype {
    /// 32-bit floats: half the memory per value, about 7 significant digits.
    Float32,
    /// 64-bit floats.
    Float64,
}

impl ComputeDtype {
    /// Bytes per value (4 or 8).
    pub fn bytes(self) -> usize {
        match self {
            ComputeDtype::Float32 => 4,
            ComputeDtype::Float64 => 8,
        }
    }

    /// The dtype (`Dtype::F32` or `Dtype::F64`).
    pub fn dtype(self) -> Dtype {
        match self {
            ComputeDtype::Float32 => Dtype::F32,
            ComputeDtype::Float64 => Dtype::F64,
        }
    }

    /// float32 when it holds every value of `input` exactly (float32,
    /// float16, uint8, int16), else float64 (float64, and integers of 32 or
    /// 64 bits).
    pub fn exact_for(input: Dtype) -> Self {
        if input == Dtype::F64 || input.inexact_beyond(Dtype::F32).is_some() {
            ComputeDtype::Float64
        } else {
            ComputeDtype::Float32
        }
    }

    /// scikit-learn's rule: float32 for float32 input, float64 for the rest.
    pub fn like_scikit_learn(input: Dtype) -> Self {
        if input == Dtype::F32 {
            ComputeDtype::Float32
        } else {
            ComputeDtype::Float64
        }
    }
}

/// A result and the warnings its job found.
#[derive(Debug, Clone)]
pub struct Done<T> {
    /// The result.
    pub value: T,
    /// Warnings, in the order found.
    pub warnings: Vec<Warning>,
}

/// One warning for each of the data `x` (read in `compute`) and the weights
/// `w` (always read in float64) in which the conversion met integers that
/// dtype cannot represent exactly.
pub fn inexact_warnings(x: &Source<'_>, compute: Dtype, w: Option<&Source<'_>>) -> Vec<Warning> {
    std::iter::once((x, compute))
        .chain(w.map(|w| (w, Dtype::F64)))
        .filter_map(|(src, compute)| {
            src.inexact_integer(compute).map(|found| Warning::InexactIntegers { path: src.name(), found })
        })
        .collect()
}
