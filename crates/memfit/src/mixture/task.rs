//! The passes of a Gaussian-mixture fit as [`crate::exec::Task`]s: the
//! initial M-step's sums, an EM iteration's sums, or the log-likelihood of
//! an E-step without per-row outputs, computed over rows another process
//! holds (see
//! [`crate::exec::Remote`]). This file holds what a task is and its bytes;
//! the in-memory strategy plans and runs it (`memory.rs`: a task holds every
//! component, groups run in one process only).

use serde::{Deserialize, Serialize};

use super::components::Estep;
use super::params::CovarianceType;
use super::pass::Sums;
use super::passes::InitResp;
use crate::dtype::Real;
use crate::exec::encode;

/// The task kind of an EM iteration.
pub(crate) const EM: &str = "gmm-em";
/// The task kind of an E-step's log-likelihood.
pub(crate) const E: &str = "gmm-e";
/// The task kind of a fit's initial M-step.
pub(crate) const INIT: &str = "gmm-init";

/// A fit's initial M-step: the sums of `k` components under the initial
/// responsibilities `init` (the same for every compute type).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct InitTask {
    pub(crate) k: usize,
    pub(crate) init: InitResp,
    pub(crate) sums: EmSums,
}

/// [`InitTask`] borrowed.
#[derive(Serialize)]
struct InitTaskRef<'a> {
    k: usize,
    init: &'a InitResp,
    sums: EmSumsRef<'a>,
}

impl InitTask {
    /// The task of an initial M-step of `k` components adding `sums`
    /// under `init`.
    pub(crate) fn encode(k: usize, init: &InitResp, sums: &Sums<'_>) -> Vec<u8> {
        let sums = EmSumsRef { t: sums.t, reference: sums.reference, scatter: sums.scatter };
        encode(&InitTaskRef { k, init, sums })
    }
}

/// What an EM iteration's sums are centred on and hold.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct EmSums {
    pub(crate) t: CovarianceType,
    pub(crate) reference: Vec<f64>,
    pub(crate) scatter: bool,
}

/// An EM iteration (with `em`) or an E-step's `Σ_i w_i log p(x_i)`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(bound = "T: Real")]
pub(crate) struct MixtureTask<T> {
    pub(crate) es: Estep<T>,
    pub(crate) em: Option<EmSums>,
    /// Whether the rows are checked for non-finite values.
    pub(crate) validate: bool,
}

/// [`MixtureTask`] borrowed, to encode without copying the parameters
/// (the same bytes: serde writes a slice as a vector).
#[derive(Serialize)]
#[serde(bound = "T: Real")]
struct MixtureTaskRef<'a, T> {
    es: &'a Estep<T>,
    em: Option<EmSumsRef<'a>>,
    validate: bool,
}

/// [`EmSums`] borrowed.
#[derive(Serialize)]
struct EmSumsRef<'a> {
    t: CovarianceType,
    reference: &'a [f64],
    scatter: bool,
}

impl<T: Real> MixtureTask<T> {
    /// The task of an EM pass with E-step parameters `es` adding `sums`.
    pub(crate) fn encode_em(es: &Estep<T>, sums: &Sums<'_>) -> Vec<u8> {
        let em = EmSumsRef { t: sums.t, reference: sums.reference, scatter: sums.scatter };
        encode(&MixtureTaskRef { es, em: Some(em), validate: false })
    }

    /// The task of an E pass (without per-row outputs) with E-step
    /// parameters `es`, checking the rows for non-finite values with `validate`.
    pub(crate) fn encode_e(es: &Estep<T>, validate: bool) -> Vec<u8> {
        encode(&MixtureTaskRef { es, em: None, validate })
    }
}
