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
//! | one pass's task over some rows (for a cluster) | [`crate::exec::Task`] | [`run_task`] | [`run_task`] |

mod kernels;
mod kmeans;
mod mixture;
mod task;

pub use kernels::{QuadraticFormJob, ScatterJob};
pub use kmeans::{parse_init, AssignResult, CentersJob, KMeansJob, Validated, ValidationJob};
pub use mixture::{information_criteria, n_parameters, GmmJob, GmmPredictJob, GmmScore};
pub use task::{run_task, runner_of, TASK_RUNNERS};

use crate::exec::{Observer, RunOptions};
use crate::io::{Dtype, Source};
use crate::plan::{Job, Plan};
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

/// What the planners see of a job over `x` (and weights `w`) computed in
/// `compute`, streaming `n_outputs` arrays, with the caller's `extra`
/// buffers (name, bytes), run as `run` says. Every job's plan starts here:
/// [`Job::new`] records what the inputs hold, and every planner starts its
/// ledger from [`Job::ledger`], which declares it once.
///
/// On a device backend the job also holds the backend's pinned host
/// buffers for its tiles in flight, whose results take `device_out_per_row`
/// bytes per row (0 for a job that runs on the host alone).
fn planned_job(
    x: &Source<'_>,
    w: Option<&Source<'_>>,
    compute: ComputeDtype,
    n_outputs: usize,
    extra: &[(String, u64)],
    run: &RunOptions,
    device_out_per_row: usize,
) -> Job {
    let job = Job::new(x, w, compute.bytes(), n_outputs, run);
    let pinned = (device_out_per_row > 0)
        .then(|| run.backend.pinned_host_bytes(x.n_features(), compute.bytes(), device_out_per_row))
        .flatten();
    extra.iter().chain(pinned.as_ref()).fold(job, |job, (name, bytes)| job.holding(name.clone(), *bytes))
}

/// Bytes per row of a device's k-means results: a label and a distance.
const KMEANS_DEVICE_OUT: usize = 4 + 8;

/// Bytes per row of a device's mixture results with `k` components: the
/// log-densities, and the k-means initialisation's labels and distances.
fn gmm_device_out(k: usize) -> usize {
    k.saturating_mul(8).saturating_add(KMEANS_DEVICE_OUT)
}

/// What every job does first, within `plan` and before any of its own work:
/// checks the disks it writes to ([`Plan::check_disk`]), then computes what
/// its inputs need before their rows can be read (an expression's
/// intermediates, within the bytes the plan counted for them,
/// [`Source::prepare`]), stopping when `observer` cancels.
///
/// # Errors
/// [`Error::NoDiskSpace`](crate::Error::NoDiskSpace); the inputs' errors;
/// [`Error::Cancelled`](crate::Error::Cancelled).
fn prepare(plan: &Plan, x: &Source<'_>, w: Option<&Source<'_>>, observer: &dyn Observer) -> crate::Result<()> {
    plan.check_disk()?;
    let cancel = observer.cancel();
    for src in std::iter::once(x).chain(w) {
        src.prepare(&cancel)?;
    }
    Ok(())
}

/// The warnings of a job run within `plan` on `x` (read in `compute`) and
/// weights `w` (always read in float64): first a memory limit above the
/// memory there is, when the plan needs more than that
/// ([`Plan::memory_warning`]); then, for each of `x` and `w`, integers the
/// conversion met that its dtype cannot represent exactly.
pub fn job_warnings(plan: &Plan, x: &Source<'_>, compute: Dtype, w: Option<&Source<'_>>) -> Vec<Warning> {
    let inexact = std::iter::once((x, compute)).chain(w.map(|w| (w, Dtype::F64))).filter_map(|(src, compute)| {
        src.inexact_integer(compute).map(|found| Warning::InexactIntegers { path: src.name(), found })
    });
    plan.memory_warning().into_iter().chain(inexact).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::KMeansParams;
    use crate::error::Error;
    use crate::io::{ArrayRef, Values};
    use crate::mixture::{CovarianceType, GmmParams, MixtureModel, Outputs};

    fn source(values: &[f64], n: usize, d: usize) -> Source<'_> {
        Source::memory(ArrayRef::c_order(Values::F64(values), n, d).unwrap())
    }

    #[test]
    fn compute_dtype_rules() {
        assert_eq!(ComputeDtype::exact_for(Dtype::I16), ComputeDtype::Float32);
        assert_eq!(ComputeDtype::exact_for(Dtype::I32), ComputeDtype::Float64);
        assert_eq!(ComputeDtype::exact_for(Dtype::F64), ComputeDtype::Float64);
        assert_eq!(ComputeDtype::like_scikit_learn(Dtype::F16), ComputeDtype::Float64);
        assert_eq!(ComputeDtype::like_scikit_learn(Dtype::F32), ComputeDtype::Float32);
        assert_eq!(ComputeDtype::Float32.bytes(), 4);
    }

    /// T3-14: an expression input's intermediates (row means larger than
    /// their share of the limit) go to scratch, and what they need is
    /// planned beside the caller's own buffers, never in place of them.
    #[test]
    fn expression_intermediates_count_beside_the_callers_buffers() {
        use crate::array::{Array, ExprRows, Op, Options, Reduction};
        let (n, d) = (200_000, 4);
        let x = Array::from_f64((0..n * d).map(|i| (i % 97) as f64).collect(), &[n, d]).unwrap();
        let means = x.reduce(Reduction::Mean, &[1], true, None).unwrap();
        let centred = Array::ufunc(Op::Subtract, &[x, means]).unwrap();
        let share = 1 << 20; // the row means are 1.6 MB
        let rows = ExprRows::new(&centred, &Options { threads: Some(1), ..Options::with_limit(share) }).unwrap();
        assert!(rows.plan().schedule.scratch_bytes >= (n * 8) as u64, "{:?}", rows.plan());
        let src = Source::rows(Box::new(rows));
        let held = src.held_bytes();
        assert!(held > 0 && held <= share, "{held}");
        let params = KMeansParams { n_clusters: 3, ..KMeansParams::default() };
        let callers = ("labels_".to_string(), 4 * n as u64);
        let job = KMeansJob {
            params,
            x: &src,
            sample_weight: None,
            compute: ComputeDtype::Float64,
            float64_centers: false,
            n_outputs: 0,
            extra: vec![callers.clone()],
            run: RunOptions::with_limit(64 << 20),
        };
        let plan = job.plan().unwrap();
        let bytes = |name: &str| plan.buffers.iter().find(|b| b.name.starts_with(name)).map(|b| b.bytes);
        assert_eq!(bytes("held by the input"), Some(held), "{plan}");
        assert_eq!(bytes(&callers.0), Some(callers.1), "{plan}");
        let fit = job.fit(&plan, None, &mut ()).unwrap();
        assert_eq!(fit.n_samples, n);
    }

    /// Every job's plan declares what its input holds, once, beside its
    /// own buffers, and runs after the input has prepared.
    #[test]
    fn every_job_counts_what_the_input_holds_once() {
        use crate::array::{Array, ExprRows, Op, Reduction};
        use crate::plan::INPUT_HELD;
        let (n, d) = (20_000, 4);
        let x = Array::from_f64((0..n * d).map(|i| (i % 89) as f64).collect(), &[n, d]).unwrap();
        let means = x.reduce(Reduction::Mean, &[1], true, None).unwrap();
        let centred = Array::ufunc(Op::Subtract, &[x, means]).unwrap();
        let run = RunOptions { threads: Some(1), ..RunOptions::with_limit(64 << 20) };
        let src = Source::rows(Box::new(ExprRows::for_job(&centred, &run).unwrap()));
        let held = src.held_bytes();
        assert!(held > 0);
        let counted = |plan: &Plan| {
            let found: Vec<u64> = plan.buffers.iter().filter(|b| b.name == INPUT_HELD).map(|b| b.bytes).collect();
            assert_eq!(found, [held], "{plan}");
        };
        let compute = ComputeDtype::Float64;
        let params = KMeansParams { n_clusters: 3, max_iter: 2, ..KMeansParams::default() };
        let km = KMeansJob {
            params,
            x: &src,
            sample_weight: None,
            compute,
            float64_centers: false,
            n_outputs: 1,
            extra: vec![],
            run: run.clone(),
        };
        let plan = km.plan().unwrap();
        counted(&plan);
        let fit = km.fit(&plan, None, &mut ()).unwrap();
        let centers = &fit.cluster_centers;
        let cj = CentersJob {
            x: &src,
            centers,
            n_clusters: 3,
            sample_weight: None,
            compute,
            labels_file: true,
            run: run.clone(),
        };
        counted(&cj.plan_assign().unwrap());
        counted(&cj.plan_transform().unwrap());
        let params = GmmParams { n_components: 2, covariance_type: CovarianceType::Diag, ..GmmParams::default() };
        let gm =
            GmmJob { params, x: &src, sample_weight: None, compute, n_outputs: 0, extra: vec![], run: run.clone() };
        counted(&gm.plan().unwrap());
        static P: [f64; 8] = [1.0; 8];
        let model = MixtureModel {
            covariance_type: CovarianceType::Diag,
            weights: vec![0.5, 0.5],
            means: vec![0.0; 8],
            precisions_cholesky: Source::memory(ArrayRef::c_order(Values::F64(&P), 2, 4).unwrap()),
            shift: None,
            lower_bound: None,
        };
        let gp = GmmPredictJob { model: &model, x: &src, compute, n_outputs: 0, run: run.clone() };
        counted(&gp.plan().unwrap());
        let q = [0.0; 16];
        let qf = QuadraticFormJob {
            x: &src,
            q: &q,
            q_shape: [4, 4],
            q_read: false,
            compute,
            n_outputs: 0,
            run: run.clone(),
        };
        counted(&qf.plan().unwrap());
        let sc = ScatterJob { x: &src, weights: None, run };
        let plan = sc.plan().unwrap();
        counted(&plan);
        // Rows centred: every row of the scatter's sums is about 0.
        let s = sc.run(&plan, &()).unwrap().value;
        assert!(s.chunks(4).all(|r| r.iter().sum::<f64>().abs() < 1e-6 * s[0].abs().max(1.0)), "{s:?}");
    }

    /// An expression's intermediates that cannot be planned within the
    /// job's share are refused naming the job's smallest limit.
    #[test]
    fn an_expression_too_large_for_its_share_names_the_jobs_smallest_limit() {
        use crate::array::{Array, ExprRows, Op, Reduction};
        let (n, d) = (4096, 64);
        let x = Array::from_f64((0..n * d).map(|i| (i % 31) as f64).collect(), &[n, d]).unwrap();
        let means = x.reduce(Reduction::Mean, &[1], true, None).unwrap();
        let centred = Array::ufunc(Op::Subtract, &[x, means]).unwrap();
        let run = RunOptions { threads: Some(1), ..RunOptions::with_limit(4 << 10) };
        let Err(Error::DoesNotFit { required_bytes, limit_bytes, .. }) = ExprRows::for_job(&centred, &run) else {
            panic!("planned within 1 KiB")
        };
        assert_eq!(limit_bytes, 4 << 10);
        let enough = RunOptions { memory_limit: required_bytes, ..run };
        assert!(ExprRows::for_job(&centred, &enough).is_ok());
    }

    #[test]
    fn one_entry_fits_in_either_dtype_with_the_same_shape_of_result() {
        let x: Vec<f64> = (0..200).map(|i| f64::from(i % 10) + if i % 20 < 10 { 0.0 } else { 50.0 }).collect();
        let x = source(&x, 100, 2);
        for compute in [ComputeDtype::Float32, ComputeDtype::Float64] {
            let params = KMeansParams { n_clusters: 2, ..KMeansParams::default() };
            let run = RunOptions::with_limit(64 << 20);
            let job = KMeansJob {
                params,
                x: &x,
                sample_weight: None,
                compute,
                float64_centers: false,
                n_outputs: 0,
                extra: vec![],
                run,
            };
            let plan = job.plan().unwrap();
            let fit = job.fit(&plan, None, &mut ()).unwrap();
            assert_eq!(fit.cluster_centers.len(), 4);
            assert!(fit.converged, "{compute:?}");
        }
    }

    #[test]
    fn weighted_inertia_is_the_weighted_sum_of_squared_distances() {
        let xv = [0.0, 1.0, 3.0, 10.0];
        let wv = [1.0, 2.0, 0.5, 4.0];
        let (x, w) = (source(&xv, 4, 1), source(&wv, 4, 1));
        let centers = [0.0, 9.0];
        let job = CentersJob {
            x: &x,
            centers: &centers,
            n_clusters: 2,
            sample_weight: Some(&w),
            compute: ComputeDtype::Float64,
            labels_file: false,
            run: RunOptions::with_limit(64 << 20),
        };
        let plan = job.plan_assign().unwrap();
        assert!(plan.buffers.iter().any(|b| b.name.contains("weights")), "{plan}");
        let mut labels = Vec::new();
        let done = job
            .assign(
                &plan,
                &mut |l, _| {
                    labels.extend_from_slice(l);
                    Ok(())
                },
                &(),
            )
            .unwrap();
        assert_eq!(labels, [0, 0, 0, 1]);
        assert_eq!(done.value.inertia, 2.0 * 1.0 + 0.5 * 9.0 + 4.0 * 1.0);
        let unweighted = CentersJob { sample_weight: None, ..job };
        let plan = unweighted.plan_assign().unwrap();
        assert_eq!(unweighted.assign(&plan, &mut |_, _| Ok(()), &()).unwrap().value.inertia, 1.0 + 9.0 + 1.0);
        let narrow = CentersJob { centers: &centers[..1], n_clusters: 2, ..unweighted };
        assert!(matches!(narrow.plan_assign(), Err(Error::ShapeMismatch { .. })));
    }

    #[test]
    fn warm_start_checks_the_model_and_runs_one_init() {
        let xv: Vec<f64> = (0..60).map(|i| f64::from(i) * 0.37 % 5.0).collect();
        let x = source(&xv, 30, 2);
        let model = |k: usize, d: usize, p: &'static [f64]| MixtureModel {
            covariance_type: CovarianceType::Spherical,
            weights: vec![1.0 / k as f64; k],
            means: vec![1.0; k * d],
            precisions_cholesky: Source::memory(ArrayRef::c_order(Values::F64(p), p.len(), 1).unwrap()),
            shift: None,
            lower_bound: Some(-3.0),
        };
        static P2: [f64; 2] = [1.0, 1.0];
        let params = || GmmParams {
            n_components: 2,
            covariance_type: CovarianceType::Spherical,
            n_init: 3,
            ..GmmParams::default()
        };
        let mut job = GmmJob {
            params: params(),
            x: &x,
            sample_weight: None,
            compute: ComputeDtype::Float64,
            n_outputs: 0,
            extra: vec![],
            run: RunOptions::with_limit(64 << 20),
        };
        let wide = model(2, 3, &P2);
        assert!(matches!(job.warm_start(wide), Err(Error::InvalidParameter { name: "warm_start", .. })));
        let warned = job.warm_start(model(2, 2, &P2)).unwrap();
        assert_eq!(warned, Some(Warning::WarmStartWithNInit { n_init: 3 }));
        assert_eq!((job.params.n_init, job.params.lower_bound_init), (1, Some(-3.0)));
        let plan = job.plan().unwrap();
        let fit = job.fit(&plan, &mut Outputs::default(), &mut ()).unwrap();
        assert_eq!(fit.n_parameters, mixture::n_parameters(CovarianceType::Spherical, 2, 2));
    }

    #[test]
    fn information_criteria_follow_their_formulas() {
        assert_eq!(n_parameters(CovarianceType::Full, 3, 2), 3 * 3 + 6 + 2);
        let (bic, aic) = information_criteria(-1.5, 100.0, 17);
        assert_eq!(bic, -2.0 * -1.5 * 100.0 + 17.0 * 100f64.ln());
        assert_eq!(aic, 300.0 + 34.0);
    }

    #[test]
    fn quadratic_form_checks_q_before_planning() {
        let xv = [1.0, 2.0, 3.0, 4.0];
        let x = source(&xv, 2, 2);
        let q = [1.0, 0.0, 0.0];
        let job = QuadraticFormJob {
            x: &x,
            q: &q,
            q_shape: [1, q.len()],
            q_read: false,
            compute: ComputeDtype::Float64,
            n_outputs: 0,
            run: RunOptions::with_limit(1),
        };
        assert!(matches!(job.plan(), Err(Error::ShapeMismatch { .. })));
    }
}
