//! Passes run as separate row ranges merge to the same bits as whole passes:
//! k-means, Gaussian mixtures of every covariance type and the weighted
//! scatter, over 1, 2 and 7 ranges of a `.npy` file, and over 4 ranges run
//! as tasks on in-memory copies of their rows (as a cluster's workers do),
//! bounded k-means with its rows' bounds kept by the tasks (or lost).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use memfit::cluster::{plan_kmeans, Algorithm, KMeansParams, Metric};
use memfit::estimator::run_task;
use memfit::exec::{Cancel, Remote, RowSplit, RunOptions, Task};
use memfit::io::{write_matrix, ArrayRef, Source, Values};
use memfit::linalg::{plan_weighted_scatter, weighted_scatter_split};
use memfit::mixture::{plan_gmm, CovarianceType, GmmParams, InitMethod, Outputs};
use memfit::plan::{Job, CHUNK_ROWS};

/// Seven chunks and a partial one of 3-D rows around four centres.
fn data_file(dir: &std::path::Path) -> std::path::PathBuf {
    let n = 7 * CHUNK_ROWS + 1234;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let x: Vec<f64> = (0..n)
        .flat_map(|i| {
            let c = (i % 4) as f64;
            [c * 5.0 + uniform() * 2.0 + 1e3, -c * 3.0 + uniform(), c * c + uniform() * 0.5]
        })
        .collect::<Vec<_>>();
    let path = dir.join("x.npy");
    write_matrix(&path, &x, n, 3).unwrap();
    path
}

/// Runs each range's task on a copy of its rows in memory, numbered as in
/// the file, through the bytes a cluster would ship.
/// With `empty_too`, each task is also run over an empty piece at the
/// start of its range (a Dask chunk of zero rows), which must plan and run
/// without panicking (statistics of no rows, or an error value). Per-row
/// states that tasks leave are kept by state id and range, and with
/// `lose_every = m` every m-th task is handed none (as after a lost worker).
#[derive(Debug, Default)]
struct Loopback {
    path: std::path::PathBuf,
    tasks: AtomicUsize,
    empty_too: bool,
    states: Mutex<HashMap<(u64, usize), Vec<f64>>>,
    lose_every: Option<usize>,
}

impl Loopback {
    fn new(path: &std::path::Path) -> Self {
        Loopback { path: path.to_path_buf(), ..Loopback::default() }
    }
}

impl Remote for Loopback {
    fn run(&self, task: &Task, ranges: &[Range<usize>]) -> memfit::Result<Vec<Vec<u8>>> {
        let x = Source::open_matrix(&self.path)?;
        let d = x.n_features();
        let bytes = task.encode();
        ranges
            .iter()
            .map(|r| {
                let t = self.tasks.fetch_add(1, Ordering::Relaxed);
                let mut rows = vec![0.0f64; r.len() * d];
                let mut scratch = vec![0u8; r.len() * x.scratch_bytes_per_row()];
                x.read_rows(r.start, r.len(), &vec![0.0; d], &mut scratch, &mut rows)?;
                let piece = Source::memory(ArrayRef::c_order(Values::F64(&rows), r.len(), d)?)
                    .starting_at(r.start)
                    .unit_rows(task.unit_rows);
                if self.empty_too {
                    let empty = Source::memory(ArrayRef::c_order(Values::F64(&[]), 0, d)?)
                        .starting_at(r.start)
                        .unit_rows(task.unit_rows);
                    let _ = run_task(&bytes, &empty, None, 8 << 20, true, &Cancel::new(), &mut None);
                }
                let mut states = self.states.lock().unwrap();
                let key = task.row_state.map(|s| (s.id, r.start));
                let lost = self.lose_every.is_some_and(|m| t % m == m - 1);
                let mut state = key.and_then(|k| states.remove(&k)).filter(|_| !lost);
                let out = run_task(&bytes, &piece, None, 8 << 20, true, &Cancel::new(), &mut state)?.1.expect("run");
                if let (Some(k), Some(s)) = (key, state) {
                    states.insert(k, s);
                }
                Ok(out)
            })
            .collect()
    }
}

fn splits(path: &std::path::Path) -> Vec<RowSplit> {
    let c = CHUNK_ROWS;
    let remote = Arc::new(Loopback::new(path));
    let empties = Arc::new(Loopback { empty_too: true, ..Loopback::new(path) });
    vec![
        RowSplit::default(),
        RowSplit::at(vec![3 * c]),
        RowSplit::at(vec![c, 2 * c, 3 * c, 4 * c, 5 * c, 6 * c]),
        RowSplit::remote(vec![c, 3 * c, 5 * c], remote),
        // Repeated boundaries (the ends of chunks of zero rows) cut no empty range.
        RowSplit::at(vec![0, c, c, 3 * c, 3 * c, 8 * c]),
        RowSplit::remote(vec![c, c, 3 * c, 5 * c, 5 * c], empties),
    ]
}

#[test]
fn kmeans_over_ranges_is_bitwise_the_whole_fit() {
    let dir = tempfile::tempdir().unwrap();
    let path = data_file(dir.path());
    for metric in [Metric::Euclidean, Metric::Cosine] {
        kmeans_over_ranges(&path, metric);
    }
}

/// Euclidean or spherical k-means (whose tasks read unit rows) over every split.
fn kmeans_over_ranges(path: &std::path::Path, metric: Metric) {
    let x = Source::open_matrix(path).unwrap().unit_rows(metric == Metric::Cosine);
    let mut fits = Vec::new();
    for split in splits(path) {
        let params = KMeansParams { n_clusters: 4, n_init: Some(2), max_iter: 20, metric, ..Default::default() };
        let run = RunOptions { row_split: split, ..RunOptions::with_limit(8 << 20) };
        let plan = plan_kmeans(&params, &Job::new(&x, None, 8, 0, &run)).unwrap();
        let mut labels = Vec::new();
        let mut sink = |l: &[u32]| {
            labels.extend_from_slice(l);
            Ok(())
        };
        let fit = memfit::cluster::fit::<f64>(&params, &x, None, &plan, &run, Some(&mut sink), &mut ()).unwrap();
        fits.push((fit.cluster_centers, fit.inertia.to_bits(), fit.n_iter, labels));
    }
    assert_eq!(fits[0].3.len(), x.n_samples());
    assert!(fits.windows(2).all(|w| w[0] == w[1]));
}

/// Bounded k-means whose tasks keep their rows' bounds between passes skips
/// distances as the fit in one process does, with the same bits; states
/// lost between passes (a range then assigned in full) change no bit.
#[test]
fn bounded_kmeans_keeps_its_bounds_with_the_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let path = data_file(dir.path());
    let x = Source::open_matrix(&path).unwrap();
    let c = CHUNK_ROWS;
    let lossy = Loopback { lose_every: Some(3), ..Loopback::new(&path) };
    let mut fits = Vec::new();
    for (split, keeps) in [
        (RowSplit::default(), true),
        (RowSplit::remote(vec![c, 3 * c, 5 * c], Arc::new(Loopback::new(&path))), true),
        (RowSplit::remote(vec![c, 3 * c, 5 * c], Arc::new(lossy)), false),
    ] {
        let params = KMeansParams {
            n_clusters: 6,
            n_init: Some(2),
            max_iter: 15,
            tol: 0.0,
            algorithm: Algorithm::Bounded,
            ..Default::default()
        };
        let run = RunOptions { row_split: split, ..RunOptions::with_limit(64 << 20) };
        let plan = plan_kmeans(&params, &Job::new(&x, None, 8, 0, &run)).unwrap();
        let fit = memfit::cluster::fit::<f64>(&params, &x, None, &plan, &run, None, &mut ()).unwrap();
        let skipped: f64 = fit.skip_share.iter().sum();
        assert!(fit.skip_share[0] == 0.0 && skipped > 0.5, "{:?}", fit.skip_share);
        if keeps {
            fits.push(fit.skip_share.clone());
        }
        fits.push(vec![fit.inertia, fit.n_iter as f64]);
        fits.push(fit.cluster_centers);
    }
    assert_eq!(fits[0], fits[3], "kept bounds skip as in one process");
    assert_eq!((&fits[1], &fits[2]), (&fits[4], &fits[5]));
    assert_eq!((&fits[1], &fits[2]), (&fits[6], &fits[7]));
}

#[test]
fn gaussian_mixtures_over_ranges_are_bitwise_the_whole_fit() {
    let dir = tempfile::tempdir().unwrap();
    let path = data_file(dir.path());
    let x = Source::open_matrix(&path).unwrap();
    for t in [CovarianceType::Full, CovarianceType::Tied, CovarianceType::Diag, CovarianceType::Spherical] {
        for init in [InitMethod::KMeans, InitMethod::Random] {
            let mut fits = Vec::new();
            for split in splits(&path) {
                let params = GmmParams {
                    n_components: 4,
                    covariance_type: t,
                    max_iter: 5,
                    init_params: init,
                    ..GmmParams::default()
                };
                let run = RunOptions { row_split: split, ..RunOptions::with_limit(16 << 20) };
                let plan = plan_gmm(&params, &Job::new(&x, None, 8, 0, &run), false).unwrap();
                let fit = memfit::mixture::fit::<f64>(&params, &x, None, &plan, &run, &mut Outputs::default(), &mut ())
                    .unwrap();
                fits.push((fit.lower_bounds, fit.means, fit.covariances, fit.weights, fit.score.to_bits()));
            }
            assert!(fits.windows(2).all(|w| w[0] == w[1]), "{t:?} {init:?}");
        }
    }
}

#[test]
fn weighted_scatter_over_ranges_is_bitwise_the_whole_pass() {
    let dir = tempfile::tempdir().unwrap();
    let path = data_file(dir.path());
    let x = Source::open_matrix(&path).unwrap();
    let plan = plan_weighted_scatter(&Job::new(&x, None, 8, 0, &RunOptions::with_limit(4 << 20))).unwrap();
    let all: Vec<_> =
        splits(&path).iter().map(|s| weighted_scatter_split(&x, None, &plan, s, &Cancel::new()).unwrap()).collect();
    assert!(all.windows(2).all(|w| w[0] == w[1]));
    // Ranges must start on chunk boundaries.
    let bad = weighted_scatter_split(&x, None, &plan, &RowSplit::at(vec![1000]), &Cancel::new());
    assert!(bad.is_err());
}
