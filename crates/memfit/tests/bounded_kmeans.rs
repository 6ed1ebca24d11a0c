//! Bounded k-means gives plain Lloyd's bits: labels, centres, inertia and
//! iteration count equal for float32 and float64, weighted or not, on data
//! with many exact ties (integer grids, duplicated rows), data far from the
//! origin, one to many clusters, any thread count, memory limit (bounds in
//! memory or in a scratch file) and row split; and the bounds skip most
//! distances once the centres settle.

use memfit::cluster::{fit, plan_kmeans, Algorithm, Init, KMeansFit, KMeansParams};
use memfit::dtype::Real;
use memfit::exec::{RowSplit, RunOptions};
use memfit::io::{ArrayRef, Source, Values};
use memfit::kernels::exact_sq_dist;
use memfit::plan::{Job, CHUNK_ROWS};

/// A deterministic uniform in [0, 1).
fn uniform(state: &mut u64) -> f64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state >> 11) as f64 / (1u64 << 53) as f64
}

/// Data sets: name, values (row-major), n, d.
fn datasets() -> Vec<(&'static str, Vec<f64>, usize, usize)> {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut out = Vec::new();
    // Blobs around 12 centres, 3-D.
    let n = 2 * CHUNK_ROWS + 777;
    let blobs: Vec<f64> = (0..n)
        .flat_map(|i| {
            let c = (i % 12) as f64;
            let (a, b, e) = (uniform(&mut s), uniform(&mut s), uniform(&mut s));
            [c * 3.0 + a, (c * 1.7).sin() * 5.0 + b, c * c * 0.1 + e]
        })
        .collect();
    out.push(("blobs", blobs, n, 3));
    // An integer grid: many rows exactly halfway between centres.
    let n = 40_000;
    let grid: Vec<f64> = (0..n).flat_map(|i| [(i % 7) as f64, ((i / 7) % 5) as f64]).collect();
    out.push(("grid", grid, n, 2));
    // Duplicated rows far from the origin (N1-like), 20 features.
    let n = 30_000;
    let base: Vec<f64> = (0..50 * 20).map(|_| uniform(&mut s) * 10.0 + 1e6).collect();
    let far: Vec<f64> = (0..n).flat_map(|i| base[(i % 50) * 20..(i % 50 + 1) * 20].to_vec()).collect();
    out.push(("far duplicates", far, n, 20));
    out
}

#[allow(clippy::too_many_arguments)]
fn run<T: Real>(
    x: &[f64],
    w: Option<&[f64]>,
    n: usize,
    d: usize,
    k: usize,
    algorithm: Algorithm,
    limit: u64,
    threads: usize,
    split: RowSplit,
) -> KMeansFit<T> {
    let src = Source::memory(ArrayRef::c_order(Values::F64(x), n, d).unwrap());
    let ws = w.map(|w| Source::memory(ArrayRef::c_order(Values::F64(w), n, 1).unwrap()));
    let init: Vec<f64> = (0..k).flat_map(|j| x[(j * 7919 % n) * d..][..d].to_vec()).collect();
    let params = KMeansParams {
        n_clusters: k,
        init: Init::Centers { values: init, n_rows: k, n_cols: d },
        max_iter: 60,
        tol: 0.0,
        algorithm,
        ..Default::default()
    };
    let mut opts = RunOptions::with_limit(limit);
    opts.threads = Some(threads);
    opts.row_split = split;
    let plan = plan_kmeans(&params, &Job::new(&src, ws.as_ref(), size_of::<T>(), 0, &opts)).unwrap();
    assert_eq!(plan.schedule.bounds_on_disk.is_some(), algorithm != Algorithm::Lloyd);
    fit::<T>(&params, &src, ws.as_ref(), &plan, &opts, None, &mut ()).unwrap()
}

/// Fits `params` on `src` (float64) under `opts`, with the labels it writes.
fn fit_with_labels(params: &KMeansParams, src: &Source<'_>, opts: &RunOptions) -> (KMeansFit<f64>, Vec<u32>) {
    let plan = plan_kmeans(params, &Job::new(src, None, 8, 1, opts)).unwrap();
    let mut labels = Vec::new();
    let mut sink = |l: &[u32]| {
        labels.extend_from_slice(l);
        Ok(())
    };
    let f = fit::<f64>(params, src, None, &plan, opts, Some(&mut sink), &mut ()).unwrap();
    (f, labels)
}

fn same<T: Real + PartialEq + std::fmt::Debug>(a: &KMeansFit<T>, b: &KMeansFit<T>, what: &str) {
    assert_eq!(a.cluster_centers, b.cluster_centers, "{what}: centres");
    assert_eq!(a.inertia.to_bits(), b.inertia.to_bits(), "{what}: inertia");
    assert_eq!(a.n_iter, b.n_iter, "{what}: n_iter");
    assert_eq!(a.n_nonempty_clusters, b.n_nonempty_clusters, "{what}: clusters");
}

#[test]
fn bounded_iterations_give_lloyds_bits() {
    for (name, x, n, d) in datasets() {
        let w: Vec<f64> = (0..n).map(|i| 0.5 + (i % 5) as f64).collect();
        for k in [1, 2, 9, 60] {
            for weights in [None, Some(&w[..])] {
                let what = format!("{name} k={k} weighted={}", weights.is_some());
                let lloyd = run::<f64>(&x, weights, n, d, k, Algorithm::Lloyd, 1 << 30, 2, RowSplit::default());
                for algorithm in [Algorithm::Bounded, Algorithm::Auto] {
                    let b = run::<f64>(&x, weights, n, d, k, algorithm, 1 << 30, 2, RowSplit::default());
                    same(&lloyd, &b, &what);
                    if k > 1 && algorithm == Algorithm::Bounded && lloyd.n_iter > 3 {
                        assert!(b.skip_share.iter().skip(2).any(|&s| s > 0.3), "{what}: {:?}", b.skip_share);
                    }
                }
                assert!(lloyd.skip_share.iter().all(|&s| s == 0.0));
                let l32 = run::<f32>(&x, weights, n, d, k, Algorithm::Lloyd, 1 << 30, 1, RowSplit::default());
                let b32 = run::<f32>(&x, weights, n, d, k, Algorithm::Bounded, 1 << 30, 2, RowSplit::default());
                same(&l32, &b32, &format!("{what} float32"));
            }
        }
    }
}

#[test]
fn bounds_on_disk_threads_and_row_ranges_change_no_bit() {
    let (_, x, n, d) = datasets().remove(0);
    let k = 30;
    let lloyd = run::<f64>(&x, None, n, d, k, Algorithm::Lloyd, 1 << 30, 1, RowSplit::default());
    // A limit below the bounds of every row puts them in a scratch file.
    let src = Source::memory(ArrayRef::c_order(Values::F64(&x), n, d).unwrap());
    let params = KMeansParams { n_clusters: k, algorithm: Algorithm::Bounded, ..Default::default() };
    let plan_at = |limit: u64| plan_kmeans(&params, &Job::new(&src, None, 8, 0, &RunOptions::with_limit(limit)));
    // Below the bounds of every row (16 B each, 2.1 MB here).
    let small = 1 << 20;
    let plan = plan_at(small).unwrap();
    assert_eq!(plan.schedule.bounds_on_disk, Some(true), "{plan}");
    for (limit, threads, split) in [
        (small, 1, RowSplit::default()),
        (small, 3, RowSplit::at(vec![CHUNK_ROWS])),
        (1 << 30, 2, RowSplit::at(vec![CHUNK_ROWS, 2 * CHUNK_ROWS])),
    ] {
        let b = run::<f64>(&x, None, n, d, k, Algorithm::Bounded, limit, threads, split);
        same(&lloyd, &b, &format!("limit {limit} threads {threads}"));
    }
}

#[test]
fn a_bounded_fit_writes_lloyds_labels_converged_or_stopped() {
    let (_, x, n, d) = datasets().remove(0);
    let src = Source::memory(ArrayRef::c_order(Values::F64(&x), n, d).unwrap());
    let init: Vec<f64> = (0..12).flat_map(|j| x[(j * 7919 % n) * d..][..d].to_vec()).collect();
    // In memory, and below the bounds of every row (a scratch file);
    // strictly converged (labels from the bounds) and stopped by max_iter
    // (a bounded final pass).
    for (algorithm, limit, max_iter) in [
        (Algorithm::Lloyd, 1 << 30, 100),
        (Algorithm::Bounded, 1 << 30, 100),
        (Algorithm::Bounded, 1 << 20, 100),
        (Algorithm::Bounded, 1 << 30, 1),
        (Algorithm::Bounded, 1 << 20, 1),
    ] {
        let params = KMeansParams {
            n_clusters: 12,
            init: Init::Centers { values: init.clone(), n_rows: 12, n_cols: d },
            max_iter,
            tol: 0.0,
            algorithm,
            ..Default::default()
        };
        let opts = RunOptions::with_limit(limit);
        let (f, labels) = fit_with_labels(&params, &src, &opts);
        assert_eq!(f.converged, max_iter == 100, "{algorithm:?} {max_iter} {}", f.n_iter);
        assert_eq!(labels.len(), n);
        // The labels are the exact nearest centres of the final centres.
        let c = &f.cluster_centers;
        let sq = |i: usize, j: usize| (0..d).map(|q| (x[i * d + q] - c[j * d + q]).powi(2)).sum::<f64>();
        for (i, &l) in labels.iter().enumerate() {
            let best = (0..12).min_by(|&a, &b| sq(i, a).total_cmp(&sq(i, b))).unwrap();
            assert_eq!(sq(i, l as usize), sq(i, best), "row {i}");
        }
        let inertia: f64 = labels.iter().enumerate().map(|(i, &l)| sq(i, l as usize)).sum();
        assert!((inertia - f.inertia).abs() <= 1e-9 * inertia);
    }
}

/// Centres that move by less than `f64` can square (1e-161 apart: every
/// squared move underflows to zero) have not converged strictly: their
/// labels are not those of the last pass. Lloyd, bounded and auto write the
/// same labels, each the exact nearest of the final centres.
#[test]
fn moves_whose_squares_underflow_are_not_strict_convergence() {
    let (n, d, k) = (20_000, 17, 10);
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let x: Vec<f64> = (0..n)
        .flat_map(|_| {
            let first = if uniform(&mut s) < 0.5 { 0.0 } else { 3e-154 };
            let rest: Vec<f64> = (1..d).map(|_| (uniform(&mut s) - 0.5) * 1e-161).collect();
            std::iter::once(first).chain(rest)
        })
        .collect();
    let src = Source::memory(ArrayRef::c_order(Values::F64(&x), n, d).unwrap());
    let init: Vec<f64> = (0..k).flat_map(|j| x[(j * 7919 % n) * d..][..d].to_vec()).collect();
    let mut first: Option<Vec<u32>> = None;
    for algorithm in [Algorithm::Lloyd, Algorithm::Bounded, Algorithm::Auto] {
        let params = KMeansParams {
            n_clusters: k,
            init: Init::Centers { values: init.clone(), n_rows: k, n_cols: d },
            max_iter: 10,
            tol: 0.0,
            algorithm,
            ..Default::default()
        };
        let opts = RunOptions::with_limit(1 << 30);
        let (f, labels) = fit_with_labels(&params, &src, &opts);
        let c = &f.cluster_centers;
        for (i, &l) in labels.iter().enumerate() {
            let row = &x[i * d..(i + 1) * d];
            let dist: Vec<f64> = (0..k).map(|j| exact_sq_dist(row, &c[j * d..(j + 1) * d])).collect();
            let best = (0..k).min_by(|&a, &b| dist[a].total_cmp(&dist[b]).then(a.cmp(&b))).unwrap();
            assert_eq!(l as usize, best, "{algorithm:?} row {i}");
        }
        match &first {
            None => first = Some(labels),
            Some(want) => assert_eq!(&labels, want, "{algorithm:?}"),
        }
    }
}
