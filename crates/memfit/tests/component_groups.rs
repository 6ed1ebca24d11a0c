//! Mixtures fitted in component groups (parameters on disk) against the
//! same fits with every component in memory: the same bits (lower bounds,
//! weights, means, covariances, labels) for full, diag and spherical, every
//! initialisation, `n_init > 1`, given precisions and warm starts; and
//! prediction (labels, probabilities by columns, log-likelihoods) from a
//! saved model read one group at a time. The k-means++ sample has the same
//! rows at any limit (spilled to scratch files when the limit is small), so
//! `k-means++` mixtures are grouped too.

use memfit::exec::RunOptions;
use memfit::io::{ArrayRef, Source, Values};
use memfit::mixture::{
    load_model, plan_gmm, plan_predict, predict, save_model, CovarianceType, GmmFit, GmmParams, InitMethod, Outputs,
    PrecisionsInit,
};
use memfit::plan::{Job, Plan};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

const D: usize = 24;
const K: usize = 12;

/// `n` rows from `K` shifted, correlated Gaussian clusters in `D` features.
fn data(n: usize) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let normal = Normal::new(0.0, 1.0).unwrap();
    (0..n)
        .flat_map(|i| {
            let c = (i * 7 % K) as f64;
            let z: Vec<f64> = (0..D).map(|_| normal.sample(&mut rng)).collect();
            (0..D).map(move |j| 3.0 * c * ((j % 3) as f64 - 1.0) + z[j] + 0.5 * z[(j + 1) % D]).collect::<Vec<_>>()
        })
        .collect()
}

fn params(t: CovarianceType, init: InitMethod, n_init: usize) -> GmmParams<'static> {
    GmmParams {
        n_components: K,
        covariance_type: t,
        max_iter: 8,
        tol: 0.0,
        n_init,
        init_params: init,
        random_state: 3,
        ..GmmParams::default()
    }
}

/// The largest limit at which the plan cuts the components into at least
/// three groups.
fn grouping_limit(p: &GmmParams<'_>, src: &Source<'_>) -> (u64, Plan) {
    let mut limit = plan_gmm(p, &job(src, 1 << 30), false).unwrap().total_bytes;
    loop {
        limit = limit * 9 / 10;
        if let Ok(plan) = plan_gmm(p, &job(src, limit), false) {
            if plan.schedule.component_groups.as_ref().is_some_and(|g| g.count >= 3) {
                return (limit, plan);
            }
        }
        assert!(limit > 1 << 16, "no grouped plan found");
    }
}

/// A float64 job over `src` within `limit` bytes.
fn job(src: &Source<'_>, limit: u64) -> Job {
    Job::new(src, None, 8, 0, &RunOptions::with_limit(limit))
}

fn fit(p: &GmmParams<'_>, src: &Source<'_>, limit: u64) -> (GmmFit, Plan) {
    let plan = plan_gmm(p, &job(src, limit), false).unwrap();
    let run = RunOptions::with_limit(limit);
    let fit = memfit::mixture::fit::<f64>(p, src, None, &plan, &run, &mut Outputs::default(), &mut ()).unwrap();
    (fit, plan)
}

/// Bitwise equality of two float slices (NaN equal to the same NaN).
fn same(a: &[f64], b: &[f64], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(x.to_bits(), y.to_bits(), "{what} [{i}]: {x} vs {y}");
    }
}

fn assert_same(a: &GmmFit, b: &GmmFit, what: &str) {
    same(&a.lower_bounds, &b.lower_bounds, &format!("{what} lower bounds"));
    same(&[a.score], &[b.score], &format!("{what} score"));
    same(&a.weights, &b.weights, &format!("{what} weights"));
    same(&a.means, &b.means, &format!("{what} means"));
    let (mut ca, mut cb) = (vec![0.0; D * D], vec![0.0; D * D]);
    for c in 0..K {
        a.covariance(c, &mut ca).unwrap();
        b.covariance(c, &mut cb).unwrap();
        same(&ca, &cb, &format!("{what} covariance {c}"));
    }
}

#[test]
fn grouped_fits_equal_in_memory_fits() {
    let n = 3000;
    let x = data(n);
    let src = Source::memory(ArrayRef::c_order(Values::F64(&x), n, D).unwrap());
    for (t, init, n_init) in [
        (CovarianceType::Full, InitMethod::KMeans, 1),
        (CovarianceType::Full, InitMethod::KMeansPlusPlus, 1),
        (CovarianceType::Diag, InitMethod::KMeansPlusPlus, 2),
        (CovarianceType::Full, InitMethod::Random, 2),
        (CovarianceType::Full, InitMethod::RandomFromData, 1),
        (CovarianceType::Diag, InitMethod::Random, 2),
        (CovarianceType::Diag, InitMethod::RandomFromData, 1),
        (CovarianceType::Spherical, InitMethod::Random, 1),
    ] {
        let what = format!("{t:?} {init:?} n_init {n_init}");
        let whole = params(t, init, n_init);
        let (a, plan_a) = fit(&whole, &src, 1 << 30);
        assert!(plan_a.schedule.component_groups.is_none());
        assert!(!a.covariances_on_disk());
        let (limit, plan) = grouping_limit(&whole, &src);
        let (b, _) = fit(&whole, &src, limit);
        assert!(b.covariances_on_disk(), "{what}: {plan}");
        assert!(plan.to_string().contains("component groups:"), "{plan}");
        assert_same(&a, &b, &what);
        assert_eq!(a.best_init, b.best_init, "{what}");
    }
}

#[test]
fn grouped_fits_have_the_same_bits_for_any_groups_and_threads() {
    let n = 2000;
    let x = data(n);
    let src = Source::memory(ArrayRef::c_order(Values::F64(&x), n, D).unwrap());
    for t in [CovarianceType::Full, CovarianceType::Diag] {
        let p = params(t, InitMethod::KMeansPlusPlus, 1);
        let (want, _) = fit(&p, &src, 1 << 30);
        let mut limit = plan_gmm(&p, &job(&src, 1 << 30), false).unwrap().total_bytes;
        let mut counts = Vec::new();
        while limit > 1 << 16 {
            limit = limit * 19 / 20;
            for threads in [1, 2] {
                let mut run = RunOptions::with_limit(limit);
                run.threads = Some(threads);
                let j = Job::new(&src, None, 8, 0, &run);
                let Ok(plan) = plan_gmm(&p, &j, false) else { continue };
                let Some(g) = plan.schedule.component_groups.clone() else { continue };
                let got =
                    memfit::mixture::fit::<f64>(&p, &src, None, &plan, &run, &mut Outputs::default(), &mut ()).unwrap();
                assert_same(&want, &got, &format!("{t:?}, {} groups, {threads} threads", g.count));
                counts.push(g.count);
            }
        }
        counts.dedup();
        assert!(counts.len() >= 3, "{t:?}: group counts {counts:?}");
    }
}

#[test]
fn tied_is_never_grouped() {
    let n = 600;
    let x = data(n);
    let src = Source::memory(ArrayRef::c_order(Values::F64(&x), n, D).unwrap());
    let p = params(CovarianceType::Tied, InitMethod::Random, 1);
    let total = plan_gmm(&p, &job(&src, 1 << 30), false).unwrap().total_bytes;
    assert!(plan_gmm(&p, &job(&src, total / 2), false).is_err());
}

#[test]
fn warm_start_and_given_precisions_in_groups() {
    let n = 3000;
    let x = data(n);
    let src = Source::memory(ArrayRef::c_order(Values::F64(&x), n, D).unwrap());
    let (first, _) = fit(&params(CovarianceType::Full, InitMethod::KMeans, 1), &src, 1 << 30);
    let dir = tempfile::tempdir().unwrap();
    save_model(dir.path().join("m"), &first, serde_json::json!({}), false).unwrap();
    // The fitted precisions U Uᵀ, `(K·D, D)`, as precisions_init.
    let mut u = vec![0.0; D * D];
    let mut prec = vec![0.0; K * D * D];
    for c in 0..K {
        first.precision_cholesky(c, &mut u).unwrap();
        for i in 0..D {
            for j in 0..D {
                prec[c * D * D + i * D + j] = (0..D).map(|q| u[i * D + q] * u[j * D + q]).sum();
            }
        }
    }
    for (max_iter, cholesky) in [(0, true), (3, true), (0, false), (3, false)] {
        let run = |limit: u64| {
            let model = load_model(dir.path().join("m")).unwrap();
            let mut p = params(CovarianceType::Full, InitMethod::KMeans, 1);
            p.max_iter = max_iter;
            p.weights_init = Some(model.weights.clone());
            p.means_init = Some(model.means.clone());
            p.precisions_init = Some(if cholesky {
                PrecisionsInit::Cholesky(model.precisions_cholesky)
            } else {
                PrecisionsInit::Precisions(Source::memory(ArrayRef::c_order(Values::F64(&prec), K * D, D).unwrap()))
            });
            p.lower_bound_init = model.lower_bound;
            let plan = plan_gmm(&p, &job(&src, limit), false).unwrap();
            let run = RunOptions::with_limit(limit);
            let f = memfit::mixture::fit::<f64>(&p, &src, None, &plan, &run, &mut Outputs::default(), &mut ()).unwrap();
            (f, plan)
        };
        let (a, _) = run(1 << 30);
        let (limit, _) = grouping_limit(&params(CovarianceType::Full, InitMethod::KMeans, 1), &src);
        let (b, plan) = run(limit);
        assert!(plan.schedule.component_groups.is_some());
        assert_same(&a, &b, &format!("given precisions (Cholesky {cholesky}), max_iter {max_iter}"));
    }
}

#[test]
fn grouped_prediction_equals_in_memory_prediction() {
    let n = 3000;
    let x = data(n);
    let src = Source::memory(ArrayRef::c_order(Values::F64(&x), n, D).unwrap());
    let (f, _) = fit(&params(CovarianceType::Full, InitMethod::KMeans, 1), &src, 1 << 30);
    let dir = tempfile::tempdir().unwrap();
    save_model(dir.path().join("m"), &f, serde_json::json!({}), false).unwrap();
    let model = load_model(dir.path().join("m")).unwrap();
    let run = |limit: u64| {
        let plan = plan_predict(&model, &job(&src, limit)).unwrap();
        let (mut labels, mut ll, mut proba) = (Vec::new(), Vec::new(), vec![f64::NAN; n * K]);
        let mut put_l = |l: &[u32]| {
            labels.extend_from_slice(l);
            Ok(())
        };
        let mut put_ll = |v: &[f64]| {
            ll.extend_from_slice(v);
            Ok(())
        };
        let mut put_p = |row: usize, first: usize, g: usize, v: &[f64]| {
            for (i, r) in v.chunks(g).enumerate() {
                proba[(row + i) * K + first..(row + i) * K + first + g].copy_from_slice(r);
            }
            Ok(())
        };
        let score = {
            let mut outputs =
                Outputs { labels: Some(&mut put_l), log_likelihood: Some(&mut put_ll), proba: Some(&mut put_p) };
            predict::<f64>(&model, &src, &plan, &Default::default(), Default::default(), &mut outputs, &mut ()).unwrap()
        };
        (plan, score, labels, ll, proba)
    };
    let (plan_a, sa, la, lla, pa) = run(1 << 30);
    assert!(plan_a.schedule.component_groups.is_none());
    let mut limit = plan_a.total_bytes;
    let (plan_b, sb, lb, llb, pb) = loop {
        limit = limit * 9 / 10;
        if plan_predict(&model, &job(&src, limit))
            .is_ok_and(|p| p.schedule.component_groups.is_some_and(|g| g.count >= 3))
        {
            break run(limit);
        }
        assert!(limit > 1 << 16);
    };
    assert!(plan_b.schedule.component_groups.is_some());
    same(&[sa], &[sb], "score");
    assert_eq!(la, lb);
    same(&lla, &llb, "log-likelihoods");
    same(&pa, &pb, "probabilities");
}
