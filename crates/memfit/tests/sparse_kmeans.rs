//! k-means on sparse (CSR) rows gives the dense fit's labels, centres and
//! iteration count, for float32 and float64, weighted or not, with the
//! k-means++ and random inits, many exact ties (integer values), empty
//! rows, several block sizes and thread counts; its inertia agrees to
//! rounding; predict and transform agree with the dense ones.

use memfit::cluster::{fit, plan_kmeans, plan_predict, predict, Algorithm, Init, KMeansFit, KMeansParams};
use memfit::dtype::Real;
use memfit::exec::{Backend, RunOptions};
use memfit::io::{ArrayRef, CsrBlock, CsrRef, CsrRowSource, Index, Source, SparseValues, Values};
use memfit::plan::{Job, CHUNK_ROWS};

/// A deterministic uniform in [0, 1).
fn uniform(state: &mut u64) -> f64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state >> 11) as f64 / (1u64 << 53) as f64
}

/// A bag-of-words-like matrix: `n` rows of `d` columns, each row a topic's
/// columns with small integer counts (many exact ties), some rows empty;
/// CSR arrays (int32 offsets and columns) and the dense twin.
fn corpus(n: usize, d: usize, seed: u64) -> (Vec<i32>, Vec<i32>, Vec<f64>, Vec<f64>) {
    let mut s = seed;
    let (mut indptr, mut indices, mut data, mut dense) = (vec![0i32], Vec::new(), Vec::new(), vec![0.0; n * d]);
    for i in 0..n {
        let topic = (uniform(&mut s) * 6.0) as usize;
        if i % 97 != 0 {
            for f in 0..d {
                let p = if f % 6 == topic { 0.5 } else { 0.03 };
                if uniform(&mut s) < p {
                    let v = (1 + (uniform(&mut s) * 3.0) as usize) as f64;
                    indices.push(f as i32);
                    data.push(v);
                    dense[i * d + f] = v;
                }
            }
        }
        indptr.push(data.len() as i32);
    }
    (indptr, indices, data, dense)
}

fn params(k: usize, init: Init) -> KMeansParams {
    KMeansParams { n_clusters: k, init, max_iter: 50, tol: 0.0, algorithm: Algorithm::Auto, ..Default::default() }
}

fn run<T: Real>(
    src: &Source<'_>,
    w: Option<&Source<'_>>,
    p: &KMeansParams,
    limit: u64,
    threads: usize,
) -> (KMeansFit<T>, Vec<u32>) {
    let mut opts = RunOptions::with_limit(limit);
    opts.threads = Some(threads);
    let plan = plan_kmeans(p, &Job::new(src, w, size_of::<T>(), 0, &opts)).unwrap();
    let mut labels = Vec::new();
    let mut sink = |l: &[u32]| {
        labels.extend_from_slice(l);
        Ok(())
    };
    let f = memfit::exec::install(threads, || fit::<T>(p, src, w, &plan, &opts, Some(&mut sink), &mut ()))
        .unwrap()
        .unwrap();
    (f, labels)
}

fn same<T: Real>(what: &str, a: &(KMeansFit<T>, Vec<u32>), b: &(KMeansFit<T>, Vec<u32>)) {
    assert_eq!(a.1, b.1, "{what}: labels");
    assert_eq!(a.0.n_iter, b.0.n_iter, "{what}: n_iter");
    let bits = |f: &KMeansFit<T>| f.cluster_centers.iter().map(|v| v.to_f64().to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&a.0), bits(&b.0), "{what}: centres");
    let (x, y) = (a.0.inertia, b.0.inertia);
    assert!((x - y).abs() <= 1e-12 * y, "{what}: inertia {x} against {y}");
}

#[test]
fn sparse_fits_have_the_dense_fits_labels_and_centres() {
    let (n, d) = (CHUNK_ROWS + 3_001, 24);
    let (indptr, indices, data, dense) = corpus(n, d, 7);
    let w: Vec<f64> = (0..n).map(|i| ((i * 13) % 5) as f64 * 0.25).collect();
    let data32: Vec<f32> = data.iter().map(|&v| v as f32).collect();
    for (name, init) in [
        ("k-means++", Init::KMeansPlusPlus),
        ("random", Init::Random),
        ("rows", Init::Centers { values: dense[..9 * d].to_vec(), n_rows: 9, n_cols: d }),
    ] {
        let p = params(9, init);
        for weighted in [false, true] {
            let ws = weighted.then(|| Source::memory(ArrayRef::c_order(Values::F64(&w), n, 1).unwrap()));
            let dense_src = Source::memory(ArrayRef::c_order(Values::F64(&dense), n, d).unwrap());
            let csr = CsrRef::new(Index::I32(&indptr), Index::I32(&indices), SparseValues::F64(&data), n, d).unwrap();
            let sparse_src = Source::csr(csr);
            let want = run::<f64>(&dense_src, ws.as_ref(), &p, 1 << 30, 2);
            for (limit, threads) in [(1 << 30, 2), (3 << 20, 1), (3 << 20, 3)] {
                let got = run::<f64>(&sparse_src, ws.as_ref(), &p, limit, threads);
                same(&format!("{name} weighted {weighted} float64 limit {limit} threads {threads}"), &got, &want);
            }
            let csr32 =
                CsrRef::new(Index::I32(&indptr), Index::I32(&indices), SparseValues::F32(&data32), n, d).unwrap();
            let want = run::<f32>(&dense_src, ws.as_ref(), &p, 1 << 30, 2);
            let got = run::<f32>(&Source::csr(csr32), ws.as_ref(), &p, 1 << 30, 2);
            same(&format!("{name} weighted {weighted} float32"), &got, &want);
        }
    }
}

/// CSR rows read on demand (as a Dask array of sparse chunks is), from
/// int32 arrays; `max_nnz` is what it declares of its densest row.
#[derive(Debug)]
struct OnDemand {
    indptr: Vec<i32>,
    indices: Vec<i32>,
    data: Vec<f64>,
    n_cols: usize,
    max_nnz: usize,
}

impl CsrRowSource for OnDemand {
    fn n_rows(&self) -> usize {
        self.indptr.len() - 1
    }
    fn n_cols(&self) -> usize {
        self.n_cols
    }
    fn dtype(&self) -> memfit::io::Dtype {
        memfit::io::Dtype::F64
    }
    fn max_row_nnz(&self) -> usize {
        self.max_nnz
    }
    fn held_bytes(&self) -> u64 {
        0
    }
    fn read(&self, start: usize, rows: usize) -> memfit::Result<CsrBlock> {
        let (a, b) = (self.indptr[start] as usize, self.indptr[start + rows] as usize);
        Ok(CsrBlock {
            indptr: self.indptr[start..=start + rows].iter().map(|&p| i64::from(p) - a as i64).collect(),
            indices: self.indices[a..b].iter().map(|&j| i64::from(j)).collect(),
            values: self.data[a..b].to_vec(),
        })
    }
}

#[test]
fn rows_read_on_demand_fit_as_the_matrix_in_memory() {
    let (n, d) = (2 * CHUNK_ROWS + 501, 30);
    let (indptr, indices, data, _) = corpus(n, d, 3);
    let max_nnz = indptr.windows(2).map(|w| (w[1] - w[0]) as usize).max().unwrap();
    let p = params(7, Init::KMeansPlusPlus);
    let csr = CsrRef::new(Index::I32(&indptr), Index::I32(&indices), SparseValues::F64(&data), n, d).unwrap();
    let want = run::<f64>(&Source::csr(csr), None, &p, 1 << 30, 2);
    let on_demand = |indices: Vec<i32>, max_nnz| {
        Source::csr_rows(Box::new(OnDemand { indptr: indptr.clone(), indices, data: data.clone(), n_cols: d, max_nnz }))
    };
    for (limit, threads) in [(1 << 30, 2), (3 << 20, 1)] {
        let got = run::<f64>(&on_demand(indices.clone(), max_nnz), None, &p, limit, threads);
        same(&format!("on demand, limit {limit} threads {threads}"), &got, &want);
    }
    // A block that breaks CSR's rules, or holds a row denser than its
    // reader declared, is an error naming its rows, not a wrong fit.
    let mut bad = indices.clone();
    let at = indptr[CHUNK_ROWS + 10] as usize;
    bad[at] = d as i32;
    let fit_err = |src: &Source<'_>| {
        let opts = RunOptions::with_limit(1 << 30);
        let plan = plan_kmeans(&p, &Job::new(src, None, 8, 0, &opts)).unwrap();
        fit::<f64>(&p, src, None, &plan, &opts, None, &mut ()).unwrap_err().to_string()
    };
    let e = fit_err(&on_demand(bad, max_nnz));
    assert!(e.contains(&format!("column index {d}, outside 0..{d}")) && e.contains("in rows "), "{e}");
    let e = fit_err(&on_demand(indices.clone(), max_nnz - 1));
    assert!(e.contains(&format!("a row of {max_nnz} stored values, more than the {}", max_nnz - 1)), "{e}");
}

#[test]
fn sparse_predict_is_the_dense_predict_and_bounded_runs_plain_passes() {
    let (n, d, k) = (5_000, 40, 12);
    let (indptr, indices, data, dense) = corpus(n, d, 11);
    let centers: Vec<f64> = dense[..k * d].iter().map(|v| v * 0.9 + 0.05).collect();
    let csr = CsrRef::new(Index::I32(&indptr), Index::I32(&indices), SparseValues::F64(&data), n, d).unwrap();
    let sparse_src = Source::csr(csr);
    let dense_src = Source::memory(ArrayRef::c_order(Values::F64(&dense), n, d).unwrap());
    let opts = RunOptions::with_limit(8 << 20);
    let out = |src: &Source<'_>| {
        let plan = plan_predict(&Job::new(src, None, 8, 0, &opts), k, false).unwrap();
        let (mut labels, mut dist) = (Vec::new(), Vec::new());
        let mut sink = |l: &[u32], v: &[f64]| {
            labels.extend_from_slice(l);
            dist.extend_from_slice(v);
            Ok(())
        };
        let inertia = predict::<f64>(src, None, &centers, k, &plan, Backend::Cpu, &mut sink, &()).unwrap();
        (labels, dist, inertia)
    };
    let (a, b) = (out(&sparse_src), out(&dense_src));
    assert_eq!(a.0, b.0);
    for (x, y) in a.1.iter().zip(&b.1) {
        assert!((x - y).abs() <= 1e-12 * (1.0 + y), "{x} {y}");
    }
    let mut p = params(k, Init::KMeansPlusPlus);
    p.algorithm = Algorithm::Bounded;
    let plan = plan_kmeans(&p, &Job::new(&sparse_src, None, 8, 0, &opts)).unwrap();
    assert_eq!(plan.schedule.bounds_on_disk, None);
}
