//! Engine-level checks of the iterations against naive float64 references:
//! one Lloyd iteration of k-means from given centres, and one EM iteration
//! (E-step and M-step) of a diagonal Gaussian mixture from given parameters.

use memfit::cluster::{plan_kmeans, Init, KMeansParams};
use memfit::exec::RunOptions;
use memfit::io::{ArrayRef, Source, Values};
use memfit::mixture::{plan_gmm, CovarianceType, GmmParams, Outputs, PrecisionsInit};
use memfit::plan::Job;

/// `n` rows of 2-D data in three loose groups, deterministic.
fn data(n: usize) -> Vec<f64> {
    (0..n)
        .flat_map(|i| {
            let g = (i % 3) as f64;
            let a = ((i as f64) * 0.618_033_988_749).fract() - 0.5;
            let b = ((i as f64) * 0.414_213_562_373).fract() - 0.5;
            [g * 4.0 + a * 3.0, g * g - b * 2.0]
        })
        .collect()
}

fn nearest(row: &[f64], centers: &[f64]) -> (usize, f64) {
    let mut best = (0, f64::INFINITY);
    for (j, c) in centers.chunks(2).enumerate() {
        let d: f64 = row.iter().zip(c).map(|(x, c)| (x - c) * (x - c)).sum();
        if d < best.1 {
            best = (j, d);
        }
    }
    best
}

#[test]
fn one_lloyd_iteration_matches_a_naive_reference() {
    let n = 5000;
    let x = data(n);
    let init = vec![0.0, 0.0, 3.0, 1.0, 9.0, 4.0];
    let src = Source::memory(ArrayRef::c_order(Values::F64(&x), n, 2).unwrap());
    let params = KMeansParams {
        n_clusters: 3,
        init: Init::Centers { values: init.clone(), n_rows: 3, n_cols: 2 },
        max_iter: 1,
        ..Default::default()
    };
    let run = RunOptions::with_limit(1 << 30);
    let plan = plan_kmeans(&params, &Job::new(&src, None, 8, 0, &run)).unwrap();
    let fit = memfit::cluster::fit::<f64>(&params, &src, None, &plan, &run, None, &mut ()).unwrap();
    // Naive: label by exact distance, centre = mean of the cluster's rows
    // summed in row order. memfit's compensated sums give the exact means
    // rounded once (computed with Python's `fractions` from these labels),
    // which the naive ones miss by up to 32 ulps.
    let mut sums = [0.0; 6];
    let mut counts = [0.0; 3];
    for row in x.chunks(2) {
        let (j, _) = nearest(row, &init);
        sums[2 * j] += row[0];
        sums[2 * j + 1] += row[1];
        counts[j] += 1.0;
    }
    let want: Vec<f64> = (0..6).map(|q| sums[q] / counts[q / 2]).collect();
    let exact = [
        -0.006200336016412423,
        -0.004736001213320722,
        3.9865040859935874,
        0.9998541462131729,
        7.997732581555011,
        3.9994629218627984,
    ];
    assert_eq!(fit.cluster_centers, exact);
    for (e, w) in exact.iter().zip(&want) {
        assert!((e - w).abs() <= 32.0 * f64::EPSILON * w.abs().max(0.01), "{e} vs {w}");
    }
    assert_eq!(fit.n_iter, 1);
    // The inertia of the returned centres, from exact differences.
    let inertia: f64 = x.chunks(2).map(|row| nearest(row, &want).1).sum();
    assert!((fit.inertia - inertia).abs() <= 1e-12 * inertia, "{} vs {inertia}", fit.inertia);
}

#[test]
fn one_em_iteration_matches_a_naive_reference() {
    let n = 3000;
    let x = data(n);
    let src = Source::memory(ArrayRef::c_order(Values::F64(&x), n, 2).unwrap());
    let weights = vec![0.3, 0.3, 0.4];
    let means = vec![0.0, 0.0, 4.0, 1.0, 8.0, 4.0];
    let prec = vec![1.0, 2.0, 0.5, 1.0, 1.5, 0.8]; // diagonal precisions
    let p = Source::memory(ArrayRef::c_order(Values::F64(&prec), 3, 2).unwrap());
    let params = GmmParams {
        n_components: 3,
        covariance_type: CovarianceType::Diag,
        max_iter: 1,
        reg_covar: 0.0,
        weights_init: Some(weights.clone()),
        means_init: Some(means.clone()),
        precisions_init: Some(PrecisionsInit::Precisions(p)),
        ..GmmParams::default()
    };
    let run = RunOptions::with_limit(1 << 30);
    let plan = plan_gmm(&params, &Job::new(&src, None, 8, 0, &run), false).unwrap();
    let fit = memfit::mixture::fit::<f64>(&params, &src, None, &plan, &run, &mut Outputs::default(), &mut ()).unwrap();
    // Naive E-step (log-sum-exp) and M-step in float64.
    let (mut nk, mut s1, mut s2, mut ll) = ([0.0; 3], [0.0; 6], [0.0; 6], 0.0);
    for row in x.chunks(2) {
        let logp: Vec<f64> = (0..3)
            .map(|c| {
                let mut v = weights[c].ln();
                for j in 0..2 {
                    let pr = prec[2 * c + j];
                    let dx = row[j] - means[2 * c + j];
                    v += 0.5 * pr.ln() - 0.5 * (2.0 * std::f64::consts::PI).ln() - 0.5 * pr * dx * dx;
                }
                v
            })
            .collect();
        let m = logp.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = logp.iter().map(|v| (v - m).exp()).sum();
        ll += m + s.ln();
        for c in 0..3 {
            let r = (logp[c] - m).exp() / s;
            nk[c] += r;
            for j in 0..2 {
                s1[2 * c + j] += r * row[j];
                s2[2 * c + j] += r * row[j] * row[j];
            }
        }
    }
    assert!((fit.lower_bounds[0] - ll / n as f64).abs() < 1e-12);
    for c in 0..3 {
        assert!((fit.weights[c] - nk[c] / n as f64).abs() < 1e-12, "weight {c}");
        for j in 0..2 {
            let mean = s1[2 * c + j] / nk[c];
            let var = s2[2 * c + j] / nk[c] - mean * mean;
            assert!((fit.means[2 * c + j] - mean).abs() < 1e-9, "mean {c} {j}");
            assert!((fit.covariances[2 * c + j] - var).abs() < 1e-8 * var.max(1.0), "var {c} {j}");
        }
    }
}
