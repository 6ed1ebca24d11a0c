//! Expectation–maximisation for Gaussian mixtures on data read in blocks:
//! [`fit`] validates, initialises and runs the one EM loop with a
//! [`Strategy`] that holds the parameters in memory (one pass per iteration,
//! the E-step fused with the M-step's sums, [`super::pass`]) or in component
//! groups on disk.
//!
//! The iteration, the lower bound (mean log-likelihood per sample, before
//! the iteration's M-step), the `|change| < tol` test, the choice of the best
//! of `n_init` runs and the final E-step follow scikit-learn's
//! `BaseMixture.fit_predict`. Reference: Dempster, Laird & Rubin, "Maximum
//! likelihood from incomplete data via the EM algorithm" (1977); Bishop,
//! *Pattern Recognition and Machine Learning* §9.2.

use std::sync::Arc;
use std::time::Instant;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::components::Params;
use super::fitted::{GmmFit, GmmTimings, Outputs, StoredCovariances};
use super::grouped::{GroupWork, Grouped};
use super::memory::InMemory;
use super::params::{CovarianceType, GmmParams, InitMethod};
use super::passes::InitResp;
use super::strategy::{Data, Final, Strategy};
use crate::cluster::{kmeans_plusplus, plan_kmeans, random_rows};
use crate::dtype::Real;
use crate::error::Result;
use crate::exec::{scan, Observer, Progress, RunOptions};
use crate::io::{BlockReader, Source};
use crate::plan::{Job, Plan, SampleLayout};

/// Fits a Gaussian mixture to `x` (shape `(n_samples, n_features)`, any
/// supported dtype, converted block by block to the compute type `T`), with
/// optional `sample_weight` (shape `(n_samples,)`), within `plan` (from
/// [`super::plan_gmm`] for the same parameters and data). The final E-step's
/// labels, probabilities and log-likelihoods go to `outputs`.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] / [`crate::Error::ShapeMismatch`] for bad parameters
/// or initial arrays; [`crate::Error::NonFinite`] naming the first non-finite value;
/// [`crate::Error::InvalidWeight`]; `reg_covar` errors naming a component whose
/// covariance is not positive definite; read errors and whatever `outputs`
/// return; [`crate::Error::Cancelled`] when `observer` cancels.
///
/// # Panics
/// Never on user input.
pub fn fit<T: Real>(
    params: &GmmParams<'_>,
    x: &Source<'_>,
    sample_weight: Option<&Source<'_>>,
    plan: &Plan,
    opts: &RunOptions,
    outputs: &mut Outputs<'_>,
    observer: &mut dyn Observer,
) -> Result<GmmFit> {
    let (n, d, k) = (x.n_samples(), x.n_features(), params.n_components);
    let t = params.covariance_type;
    params.validate(n, d)?;
    x.check_weights(sample_weight)?;
    // Refused before anything is read when the scratch files and outputs
    // cannot fit their disks.
    plan.check_disk()?;
    if plan.schedule.component_groups.is_some() && !opts.backend.is_cpu() {
        let what = "Gaussian mixtures whose parameters are held in component groups";
        return Err(crate::device::execution_unavailable(opts.backend.device(), what));
    }
    let mut timings = GmmTimings::default();
    let mut warnings = Vec::new();
    let mut master = ChaCha8Rng::seed_from_u64(params.random_state);
    let sample_seed = master.next_u64();
    let split = &opts.row_split;
    let needs_init = !params.fully_initialised();
    let kpp = needs_init && params.init_params == InitMethod::KMeansPlusPlus;

    observer.event(&Progress::Phase("validating"));
    let clock = Instant::now();
    let mut blocks = BlockReader::<T>::new(x, sample_weight, plan.schedule.scan_block_rows);
    let sample = if kpp { plan.schedule.init_sample } else { SampleLayout::default() };
    let scanned = scan(&mut blocks, split, sample, &opts.scratch_dir(), sample_seed, &*observer)?;
    // The scan's blocks are released before the initialisation: a k-means
    // initialisation plans against the whole limit.
    drop(blocks);
    let mut row_reader = BlockReader::<T>::new(x, sample_weight, 1);
    timings.validate_secs = clock.elapsed().as_secs_f64();
    let shift = scanned.shift.clone();
    let n_eff = scanned.weight_sum;

    let clock = Instant::now();
    observer.event(&Progress::Phase("init"));
    let mut inits: Vec<Option<InitResp>> = Vec::with_capacity(params.n_init);
    for _ in 0..params.n_init {
        let seed = master.next_u64();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        inits.push(if !needs_init {
            None
        } else {
            Some(match params.init_params {
                InitMethod::KMeans => {
                    let kp = params.kmeans_init(seed);
                    let kplan = plan_kmeans(&kp, &Job::new(x, sample_weight, size_of::<T>(), 0, opts))?;
                    let m = crate::cluster::fit::<T>(&kp, x, sample_weight, &kplan, opts, None, observer)?;
                    warnings.extend(m.warnings.into_iter().map(|w| crate::warning::Warning::InKMeansInit(Box::new(w))));
                    let centres = m.cluster_centers.chunks(d);
                    InitResp::Nearest(centres.flat_map(|c| c.iter().zip(&shift).map(|(v, s)| v.to_f64() - s)).collect())
                }
                InitMethod::KMeansPlusPlus => {
                    let idx = kmeans_plusplus(&scanned.sample, k, &mut rng, false, &observer.cancel())?;
                    let means = scanned.sample.gather(&idx)?;
                    let means = means.chunks(d).flat_map(|c| c.iter().zip(&shift).map(|(v, s)| v - s)).collect();
                    one_hot_rows(scanned.sample.rows_of(&idx)?, means)
                }
                InitMethod::Random => InitResp::Uniform(rng.next_u64()),
                InitMethod::RandomFromData => {
                    let mut blocks = BlockReader::<T>::new(x, sample_weight, plan.schedule.scan_block_rows);
                    let rows = random_rows(&mut blocks, split, k, "n_components", &mut rng, &observer.cancel())?;
                    let mut means = vec![0.0; k * d];
                    for (c, &r) in rows.iter().enumerate() {
                        row_reader.read_row(r, &shift, &mut means[c * d..(c + 1) * d])?;
                    }
                    one_hot_rows(rows, means)
                }
            })
        });
    }
    drop(scanned);
    drop(row_reader);
    timings.init_secs = clock.elapsed().as_secs_f64();

    let data = Data { blocks: BlockReader::<T>::new(x, sample_weight, plan.schedule.block_rows), split, shift: &shift };
    let run = Run { params, shift: &shift, n_rows: n - x.first_row(), n_eff, weighted: sample_weight.is_some() };
    let mass = super::mstep::Mass::of(n_eff, run.n_rows, run.weighted);
    let runs = if plan.schedule.component_groups.is_some() {
        let slots = if params.n_init > 1 { 2 } else { 1 };
        let gw = GroupWork::<T>::new(t, k, x, plan, slots, &opts.scratch_dir())?;
        em(Grouped::new(params, gw, data, plan, mass), &run, inits, outputs, observer, &mut timings)?
    } else {
        em(InMemory::new(params, data, plan, mass, opts.backend), &run, inits, outputs, observer, &mut timings)?
    };
    let Runs { best_init, best, lower_bounds, converged, lower_bound_per_init, log_likelihood, e_steps, worst, stored } =
        runs;
    let eps = if T::DTYPE == crate::io::Dtype::F32 { f64::from(f32::EPSILON) } else { f64::EPSILON };
    if let Some((c, cond)) = worst.filter(|(_, v)| *v * eps > 1e-2) {
        let component = (t != CovarianceType::Tied).then_some(c);
        warnings.push(crate::warning::Warning::IllConditioned { component, condition: cond, dtype: T::DTYPE });
    }
    if !converged && params.max_iter > 0 {
        warnings.push(crate::warning::Warning::NotConverged {
            estimator: crate::warning::Estimator::GaussianMixture,
            max_iter: params.max_iter,
        });
    }
    let score = log_likelihood / n_eff;
    let n_parameters = t.n_cov_parameters(k, d) + k * d + k - 1;
    let (nf, kf, df) = (n as f64, k as f64, d as f64);
    let e_step_flops = match t {
        CovarianceType::Full => nf * kf * df * (df + 1.0),
        CovarianceType::Tied => nf * df * (df + 1.0) + nf * kf * 3.0 * df,
        CovarianceType::Diag | CovarianceType::Spherical => nf * kf * 3.0 * df,
    };
    let (n_iter, lower_bound) = (lower_bounds.len(), lower_bounds.last().copied().unwrap_or(f64::NEG_INFINITY));
    let means = best.means.chunks(d).flat_map(|r| r.iter().zip(&shift).map(|(v, s)| v + s)).collect();
    let fit = GmmFit {
        covariance_type: t,
        n_components: k,
        n_features: d,
        n_samples: n,
        weights: best.weights,
        means,
        covariances: best.cov,
        stored,
        shift,
        lower_bound,
        lower_bounds,
        n_iter,
        converged,
        lower_bound_per_init,
        best_init,
        score,
        n_effective: n_eff,
        n_parameters,
        e_step_flops,
        e_step_gflops_per_sec: e_step_flops * e_steps as f64 / timings.e_step_secs.max(1e-12) / 1e9,
        bic: -2.0 * score * n_eff + n_parameters as f64 * n_eff.ln(),
        aic: -2.0 * score * n_eff + 2.0 * n_parameters as f64,
        timings,
        warnings,
    };
    if T::DTYPE == crate::io::Dtype::F32 {
        fit.check_float32_variances(params.reg_covar)?;
    }
    Ok(fit)
}

/// What the EM runs of a fit return (all initialisations, the best kept,
/// and its final E-step).
struct Runs {
    /// Index of the kept initialisation.
    best_init: usize,
    /// Its parameters (shifted means; covariances empty when they are on disk).
    best: Params,
    lower_bounds: Vec<f64>,
    converged: bool,
    lower_bound_per_init: Vec<f64>,
    /// `Σ_i w_i log p(x_i)` of the final E-step.
    log_likelihood: f64,
    /// Sweeps of every component's log-densities over the data in the EM
    /// iterations, all initialisations.
    e_steps: usize,
    /// The largest condition estimate and its component.
    worst: Option<(usize, f64)>,
    /// Covariances kept on disk by a grouped fit.
    stored: Option<Arc<StoredCovariances>>,
}

/// What every run of a fit shares.
struct Run<'a> {
    params: &'a GmmParams<'a>,
    /// The origin the rows are shifted to, `(n_features,)`.
    shift: &'a [f64],
    /// Rows of the data.
    n_rows: usize,
    /// Sum of the sample weights.
    n_eff: f64,
    /// Whether rows carry sample weights (for error messages).
    weighted: bool,
}

/// The EM loop: runs every initialisation in `inits` with `strategy`
/// (iterations until `|change| < tol` or `max_iter`, the first change
/// measured from `lower_bound_init`), keeps the run with the highest final
/// lower bound (without iterations, the last, as scikit-learn's
/// `fit_predict`), then runs the final E-step with it.
///
/// # Errors
/// As [`fit`].
fn em<S: Strategy>(
    mut strategy: S,
    run: &Run<'_>,
    inits: Vec<Option<InitResp>>,
    outputs: &mut Outputs<'_>,
    observer: &mut dyn Observer,
    timings: &mut GmmTimings,
) -> Result<Runs> {
    let params = run.params;
    let d = run.shift.len();
    // The best run so far: its index, parameters, what the strategy kept,
    // its lower bounds and whether it converged.
    type Best<K> = Option<(usize, Params, K, Vec<f64>, bool)>;
    let mut best: Best<S::Kept> = None;
    let mut lower_bound_per_init = Vec::with_capacity(params.n_init);
    let mut cur = Params::default();
    let mut e_steps = 0usize;
    for (index, init) in inits.into_iter().enumerate() {
        let clock = Instant::now();
        if init.is_some() {
            observer.event(&Progress::Phase("init"));
        }
        strategy.init(init.as_ref(), &mut cur, &observer.cancel())?;
        if let Some(w) = &params.weights_init {
            cur.weights.clone_from(w);
        }
        if let Some(m) = &params.means_init {
            cur.means = m.chunks(d).flat_map(|r| r.iter().zip(run.shift).map(|(v, s)| v - s)).collect();
        }
        strategy.start(params, &mut cur)?;
        timings.init_secs += clock.elapsed().as_secs_f64();

        let clock = Instant::now();
        observer.event(&Progress::Phase("iterating"));
        let mut lower_bounds = Vec::new();
        let mut converged = false;
        let mut lower_bound = params.lower_bound_init.unwrap_or(f64::NEG_INFINITY);
        for it in 1..=params.max_iter {
            let pass_clock = Instant::now();
            let mut secs = (0.0, 0.0);
            let log_likelihood = strategy.iterate(&mut cur, &mut secs, &observer.cancel())?;
            timings.e_step_secs += secs.0;
            timings.m_step_secs += secs.1;
            e_steps += S::SWEEPS_PER_ITERATION;
            let prev = lower_bound;
            lower_bound = lower_bound_of(log_likelihood, run.n_eff, run.weighted)?;
            strategy.prepare(&cur)?;
            let bounds = (prev, lower_bound);
            if record_iteration(params, (index, it), run.n_rows, bounds, &mut lower_bounds, pass_clock, observer) {
                converged = true;
                break;
            }
        }
        timings.em_secs += clock.elapsed().as_secs_f64();
        lower_bound_per_init.push(lower_bound);
        // The highest lower bound wins; without iterations, the last
        // initialisation (as scikit-learn's `fit_predict`).
        let better =
            params.max_iter == 0 || best.as_ref().is_none_or(|(_, _, _, lbs, _)| lbs.last() < lower_bounds.last());
        if better {
            let more = params.n_init > 1;
            let kept = if more { cur.clone() } else { std::mem::take(&mut cur) };
            best = Some((index, kept, strategy.keep(more), lower_bounds, converged));
        }
    }
    let (best_init, best, kept, lower_bounds, converged) = best.expect("n_init >= 1");
    observer.event(&Progress::Phase("final E-step"));
    let clock = Instant::now();
    let last = best_init + 1 == params.n_init;
    let Final { log_likelihood, worst, stored } = strategy.finish(&best, kept, last, outputs, &observer.cancel())?;
    timings.final_pass_secs = clock.elapsed().as_secs_f64();
    Ok(Runs { best_init, best, lower_bounds, converged, lower_bound_per_init, log_likelihood, e_steps, worst, stored })
}

/// The lower bound (mean log-likelihood per sample) of an E-step that summed
/// `log_likelihood` over rows of total weight `n_eff`.
///
/// # Errors
/// The overflow error when it is not finite.
fn lower_bound_of(log_likelihood: f64, n_eff: f64, weighted: bool) -> Result<f64> {
    let lower_bound = log_likelihood / n_eff;
    if !lower_bound.is_finite() {
        return Err(crate::cluster::overflow(weighted, "lower bound", lower_bound));
    }
    Ok(lower_bound)
}

/// Records iteration `it` of initialisation `run` over `n` rows, whose lower
/// bound went from `bounds.0` to `bounds.1` (its pass began at `clock`):
/// keeps the bound, reports progress, and says whether `|change| < tol`.
fn record_iteration(
    params: &GmmParams<'_>,
    (run, it): (usize, usize),
    n: usize,
    (prev, lower_bound): (f64, f64),
    lower_bounds: &mut Vec<f64>,
    clock: Instant,
    observer: &mut dyn Observer,
) -> bool {
    lower_bounds.push(lower_bound);
    let change = lower_bound - prev;
    observer.event(&Progress::EmIteration {
        run,
        n_init: params.n_init,
        iteration: it,
        max_iter: params.max_iter,
        lower_bound,
        change,
        rows_per_sec: n as f64 / clock.elapsed().as_secs_f64().max(1e-9),
    });
    change.abs() < params.tol
}

fn one_hot_rows(rows: Vec<usize>, means: Vec<f64>) -> InitResp {
    let mut pairs: Vec<(usize, usize)> = rows.into_iter().enumerate().map(|(c, r)| (r, c)).collect();
    pairs.sort_unstable();
    InitResp::Rows(pairs, means)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{ArrayRef, Values};
    use crate::mixture::{plan_gmm, PrecisionsInit};
    use rand::SeedableRng;
    use rand_distr::{Distribution, Normal};

    /// Three elongated Gaussian clusters in 4-D.
    fn data(n: usize) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let normal = Normal::new(0.0, 1.0).unwrap();
        (0..n)
            .flat_map(|i| {
                let c = (i % 3) as f64 * 6.0;
                let z: Vec<f64> = (0..4).map(|_| normal.sample(&mut rng)).collect();
                [c + 2.0 * z[0], c + z[0] + 0.5 * z[1], -c + z[2], 0.3 * z[3] + z[2]]
            })
            .collect()
    }

    fn run(x: &[f64], t: CovarianceType, limit: u64, threads: usize) -> GmmFit {
        let src = Source::memory(ArrayRef::c_order(Values::F64(x), x.len() / 4, 4).unwrap());
        rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap().install(|| {
            let params = GmmParams {
                n_components: 3,
                covariance_type: t,
                reg_covar: 0.0,
                max_iter: 25,
                tol: 0.0,
                init_params: InitMethod::Random,
                random_state: 5,
                ..GmmParams::default()
            };
            let run = RunOptions::with_limit(limit);
            let plan = plan_gmm(&params, &Job::new(&src, None, 8, 0, &run), false).unwrap();
            fit::<f64>(&params, &src, None, &plan, &run, &mut Outputs::default(), &mut ()).unwrap()
        })
    }

    #[test]
    fn lower_bound_never_decreases_and_results_ignore_threads_and_limit() {
        let x = data(6000);
        for t in [CovarianceType::Full, CovarianceType::Tied, CovarianceType::Diag, CovarianceType::Spherical] {
            let a = run(&x, t, 1 << 30, 2);
            assert!(
                a.lower_bounds.windows(2).all(|w| w[1] >= w[0] - 1e-12 * w[0].abs()),
                "{t:?}: {:?}",
                a.lower_bounds
            );
            assert!((a.weights.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            // 6000 × 4 × 8 B = 192 KB of data under a 96 KiB limit: several blocks.
            let b = run(&x, t, 96 << 10, 1);
            assert_eq!(a.lower_bounds, b.lower_bounds, "{t:?}");
            assert_eq!(a.means, b.means, "{t:?}");
            assert_eq!(a.covariances, b.covariances, "{t:?}");
        }
    }

    #[test]
    fn max_iter_zero_returns_the_initial_parameters() {
        let x = data(600);
        let src = Source::memory(ArrayRef::c_order(Values::F64(&x), 600, 4).unwrap());
        let (weights, means) = (vec![0.2, 0.3, 0.5], vec![0.5; 12]);
        // Diagonal precisions 1, 2, 4 for the components: covariances 1, 1/2, 1/4.
        let prec: Vec<f64> = (0..3).flat_map(|c| [f64::from(1u32 << c); 4]).collect();
        let p = Source::memory(ArrayRef::c_order(Values::F64(&prec), 3, 4).unwrap());
        let params = GmmParams {
            n_components: 3,
            covariance_type: CovarianceType::Diag,
            max_iter: 0,
            n_init: 2,
            weights_init: Some(weights.clone()),
            means_init: Some(means.clone()),
            precisions_init: Some(PrecisionsInit::Precisions(p)),
            ..GmmParams::default()
        };
        let run = RunOptions::default();
        let plan = plan_gmm(&params, &Job::new(&src, None, 8, 0, &run), false).unwrap();
        let mut labels = Vec::new();
        let mut put = |l: &[u32]| {
            labels.extend_from_slice(l);
            Ok(())
        };
        let mut outputs = Outputs { labels: Some(&mut put), ..Outputs::default() };
        let fit = fit::<f64>(&params, &src, None, &plan, &run, &mut outputs, &mut ()).unwrap();
        assert_eq!((fit.n_iter, fit.converged, fit.lower_bounds.len()), (0, false, 0));
        assert_eq!(fit.lower_bound, f64::NEG_INFINITY);
        assert!(fit.warnings.is_empty(), "{:?}", fit.warnings);
        assert_eq!(fit.weights, weights);
        for (a, b) in fit.means.iter().zip(&means) {
            assert!((a - b).abs() < 1e-12);
        }
        for (c, v) in fit.covariances.chunks(4).enumerate() {
            assert!(v.iter().all(|&v| (v * f64::from(1u32 << c) - 1.0).abs() < 1e-15), "{c}: {v:?}");
        }
        assert_eq!(labels.len(), 600);
    }

    #[test]
    fn fitted_covariances_are_symmetric_positive_definite() {
        let x = data(3000);
        let fit = run(&x, CovarianceType::Full, 1 << 30, 2);
        assert!(fit.means.iter().all(|v| v.is_finite()));
        let mut cov = vec![0.0; 16];
        for c in 0..3 {
            fit.covariance(c, &mut cov).unwrap();
            for i in 0..4 {
                assert!(cov[i * 4 + i] > 0.0);
                for j in 0..4 {
                    assert_eq!(cov[i * 4 + j], cov[j * 4 + i]);
                }
            }
            let mut u = vec![0.0; 16];
            fit.precision_cholesky(c, &mut u).unwrap();
        }
    }
}
