//! Engine-level tests of `memfit::array`: results against naive float64
//! references, bitwise identical for any memory limit and thread count,
//! refusals before anything runs, and outputs that are complete or absent.

mod common;
use common::{compute, f64s, MIB};
use memfit::array::{run, Array, Computed, Distribution, Op, Options, Output, Reduction, Scalar, Shards, ViewOp};
use memfit::exec::{Cancel, Context};
use memfit::{Error, Warning};

/// A context whose token is already cancelled.
fn cancelled() -> Context<'static> {
    let mut ctx = Context::new(Box::leak(Box::new(())));
    ctx.cancel = Cancel::new();
    ctx.cancel.cancel();
    ctx
}

fn i64s(c: &Computed) -> Vec<i64> {
    c.bytes.chunks_exact(8).map(|b| i64::from_le_bytes(b.try_into().unwrap())).collect()
}

/// A (n, m) float64 array with values of every sign and scale.
fn matrix(n: usize, m: usize, seed: u64) -> (Array, Vec<f64>) {
    let v: Vec<f64> = (0..n * m)
        .map(|i| {
            let x = ((i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15 ^ seed) >> 11) as f64 / (1u64 << 53) as f64;
            (x - 0.3) * 10f64.powi((i % 7) as i32 - 3)
        })
        .collect();
    (Array::from_f64(v.clone(), &[n, m]).unwrap(), v)
}

/// Every (limit, threads) pair gives the same bits.
fn same_bits(a: &Array) -> Computed {
    let first = compute(a, 256 * MIB, 2);
    for (limit, threads) in [(3 * MIB, 1), (3 * MIB, 2), (64 * MIB, 1)] {
        let other = compute(a, limit, threads);
        assert_eq!(other.bytes, first.bytes, "limit {limit}, threads {threads}");
    }
    first
}

#[test]
fn reductions_are_exact_and_independent_of_limit_and_threads() {
    let (n, m) = (700, 1300);
    let (a, v) = matrix(n, m, 1);
    for axes in [vec![0], vec![1], vec![0, 1]] {
        let got = f64s(&same_bits(&a.reduce(Reduction::Sum, &axes, false, None).unwrap()));
        let mut want = vec![
            0.0;
            if axes.len() == 2 {
                1
            } else if axes[0] == 0 {
                m
            } else {
                n
            }
        ];
        for i in 0..n {
            for j in 0..m {
                let k = if axes.len() == 2 {
                    0
                } else if axes[0] == 0 {
                    j
                } else {
                    i
                };
                want[k] += v[i * m + j];
            }
        }
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "{axes:?}: {g} vs {w}");
        }
    }
    let arg = i64s(&same_bits(&a.reduce(Reduction::ArgMax, &[0], false, None).unwrap()));
    for j in 0..m {
        let best = (0..n).max_by(|&x, &y| v[x * m + j].partial_cmp(&v[y * m + j]).unwrap().then(y.cmp(&x))).unwrap();
        assert_eq!(arg[j], best as i64);
    }
    let var = f64s(&same_bits(&a.var(&[1], false, 1.0, None, false).unwrap()));
    for i in 0..n {
        let row = &v[i * m..(i + 1) * m];
        let mean = row.iter().sum::<f64>() / m as f64;
        let want = row.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (m - 1) as f64;
        assert!((var[i] - want).abs() <= 1e-12 * want, "{} vs {want}", var[i]);
    }
}

#[test]
fn sums_over_tiled_and_broadcast_axes_read_the_input_once() {
    // sum(tile(a[None], (50, 1, 1)) * s[:, None], axis=0) == 50 · a · s
    let (a, v) = matrix(40, 30, 2);
    let (s, sv) = matrix(40, 1, 3);
    let tiled = a.view(ViewOp::ExpandDims(vec![0])).unwrap().view(ViewOp::Tile(vec![50, 1, 1])).unwrap();
    let prod = Array::ufunc(Op::Multiply, &[tiled, s]).unwrap();
    let total = prod.reduce(Reduction::Sum, &[0], false, None).unwrap();
    let opts = Options { threads: Some(2), ..Options::with_limit(64 * MIB) };
    let plan = memfit::array::explain(&total, &Output::Memory, &opts).unwrap();
    assert_eq!(plan.schedule.stages[0].multiplier, 50, "{plan}");
    let got = f64s(&same_bits(&total));
    for i in 0..40 {
        for j in 0..30 {
            let want = 50.0 * v[i * 30 + j] * sv[i];
            assert!((got[i * 30 + j] - want).abs() <= 1e-15 * want.abs().max(1e-300));
        }
    }
}

#[test]
fn einsums_match_naive_loops_without_their_intermediates() {
    let (i, j, k) = (60, 500, 70);
    let (a, av) = matrix(i, j, 4);
    let (b, bv) = matrix(j, k, 5);
    let (c, cv) = matrix(i, k, 6);
    let got = f64s(&same_bits(&Array::einsum("ij,jk,ik->i", &[a.clone(), b.clone(), c]).unwrap()));
    for x in 0..i {
        let want: f64 =
            (0..j).map(|y| (0..k).map(|z| av[x * j + y] * bv[y * k + z] * cv[x * k + z]).sum::<f64>()).sum();
        assert!((got[x] - want).abs() <= 1e-10 * want.abs().max(1.0), "{} vs {want}", got[x]);
    }
    // "ji,j,jk->ik": A is (j, i), w (j,), B (j, k).
    let (at, atv) = matrix(j, i, 7);
    let (w, wv) = matrix(j, 1, 8);
    let w = w.view(ViewOp::Squeeze(vec![1])).unwrap();
    let got = f64s(&same_bits(&Array::einsum("ji,j,jk->ik", &[at, w, b]).unwrap()));
    for x in 0..i {
        for z in 0..k {
            let want: f64 = (0..j).map(|y| atv[y * i + x] * wv[y] * bv[y * k + z]).sum();
            assert!((got[x * k + z] - want).abs() <= 1e-10 * want.abs().max(1.0));
        }
    }
}

#[test]
fn views_compose_and_non_separable_reshapes_materialise() {
    let (a, v) = matrix(6, 4, 9);
    // (6, 4).T -> (4, 6) -> reshape (3, 8) -> [::-1, 1::3]
    let e = a
        .view(ViewOp::Transpose(vec![1, 0]))
        .unwrap()
        .view(ViewOp::Reshape(vec![3, 8]))
        .unwrap()
        .view(ViewOp::Slice(vec![(2, -1, 3), (1, 3, 3)]))
        .unwrap();
    let got = f64s(&same_bits(&e));
    let t: Vec<f64> = (0..4).flat_map(|c| (0..6).map(move |r| (r, c))).map(|(r, c)| v[r * 4 + c]).collect();
    let want: Vec<f64> = [2, 1, 0].iter().flat_map(|&r| [1, 4, 7].map(|c| t[r * 8 + c])).collect();
    assert_eq!(got, want);
}

#[test]
fn random_values_do_not_depend_on_blocking() {
    let r = Array::random(Distribution::Normal, &[300, 700], 42, 1.0, 2.0, memfit::dtype::Dtype::F64).unwrap();
    let got = f64s(&same_bits(&r));
    let mean = got.iter().sum::<f64>() / got.len() as f64;
    assert!((mean - 1.0).abs() < 0.02, "{mean}");
}

#[test]
fn results_that_do_not_fit_are_refused_before_running() {
    let (v, _) = matrix(3000, 1001, 10);
    let outer = Array::ufunc(
        Op::Minimum,
        &[v.view(ViewOp::ExpandDims(vec![1])).unwrap(), v.view(ViewOp::ExpandDims(vec![0])).unwrap()],
    )
    .unwrap();
    let opts = Options { threads: Some(2), ..Options::with_limit(256 * MIB) };
    let e = run(&outer, &Output::Memory, &opts, &mut Context::new(&mut ())).unwrap_err();
    match &e {
        Error::DoesNotFit { required_bytes, remedies, .. } => {
            assert!(*required_bytes >= 3000 * 3000 * 1001 * 8, "{e}");
            assert!(remedies.contains(&memfit::Remedy::WriteToFile), "{e}");
        }
        other => panic!("{other}"),
    }
    let e = Array::ufunc(Op::Add, &[matrix(2, 3, 0).0, matrix(4, 1, 0).0.view(ViewOp::Squeeze(vec![1])).unwrap()]);
    assert_eq!(e.unwrap_err().to_string(), "operands could not be broadcast together with shapes (2,3) (4,) ");
    let e = Array::einsum("ij,jk->il", &[matrix(2, 3, 0).0, matrix(3, 2, 0).0]).unwrap_err();
    assert!(e.to_string().contains('l'), "{e}");
}

#[test]
fn outputs_are_complete_or_absent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.npy");
    std::fs::write(&path, b"old").unwrap();
    let (a, _) = matrix(500, 500, 11);
    let opts = Options { threads: Some(2), ..Options::with_limit(4 * MIB) };
    let out = Output::Npy { path: path.clone(), overwrite: false };
    assert!(matches!(run(&a, &out, &opts, &mut Context::new(&mut ())), Err(Error::OutputExists { .. })));
    assert_eq!(std::fs::read(&path).unwrap(), b"old");
    // Cancelled: the old file stays, no temporary is left.
    let out = Output::Npy { path: path.clone(), overwrite: true };
    assert!(matches!(run(&a, &out, &opts, &mut cancelled()), Err(Error::Cancelled)));
    assert_eq!(std::fs::read(&path).unwrap(), b"old");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    run(&a, &out, &opts, &mut Context::new(&mut ())).unwrap();
    let (back, shape) = memfit::io::read_array_f64(&path, 2).unwrap();
    assert_eq!(shape, [500, 500]);
    assert_eq!(back, f64s(&compute(&a, 64 * MIB, 1)));
}

#[test]
fn overflow_from_finite_operands_is_reported() {
    let (a, _) = matrix(10, 10, 12);
    let big = Array::ufunc(Op::Multiply, &[a, Array::scalar(Scalar::Float(1e308), None, true)]).unwrap();
    let twice = Array::ufunc(Op::Multiply, &[big, Array::scalar(Scalar::Float(1e10), None, true)]).unwrap();
    let opts = Options { threads: Some(1), ..Options::with_limit(16 * MIB) };
    let (_, report) = run(&twice, &Output::Memory, &opts, &mut Context::new(&mut ())).unwrap();
    assert!(
        matches!(report.warnings.as_slice(), [Warning::FloatingPoint { exception: memfit::FpException::Overflow, count }] if *count > 0)
    );
}

#[test]
fn an_output_larger_than_the_disk_is_refused_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.npy");
    // 8 PB of ones: no disk here holds it.
    let huge = Array::full(&[1 << 20, 1 << 30], Scalar::Float(1.0), memfit::dtype::Dtype::F64);
    let opts = Options { threads: Some(1), ..Options::with_limit(64 * MIB) };
    let e = run(&huge, &Output::Npy { path: path.clone(), overwrite: false }, &opts, &mut Context::new(&mut ()))
        .unwrap_err();
    assert!(matches!(&e, Error::NoDiskSpace { .. }), "{e}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    let z = dir.path().join("huge.zarr");
    let out = Output::Zarr { path: z, chunks: None, shards: Shards::Auto, overwrite: false };
    let e = run(&huge, &out, &opts, &mut Context::new(&mut ())).unwrap_err();
    assert!(matches!(&e, Error::NoDiskSpace { .. }), "{e}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// T3-08: `tile(data * scales[:, None, None], (5, 1, 1, 1))` with data
/// (200, 76, 76) float64, a (5, 200, 76, 76) result of 46 MB.
fn t3_08() -> (Array, Vec<f64>) {
    let (data, d) = matrix(200, 76 * 76, 13);
    let data = data.view(ViewOp::Reshape(vec![200, 76, 76])).unwrap();
    let s: Vec<f64> = (0..200).map(|i| 0.5 + i as f64).collect();
    let scales = Array::from_f64(s.clone(), &[200]).unwrap().view(ViewOp::ExpandDims(vec![1, 2])).unwrap();
    let scaled = Array::ufunc(Op::Multiply, &[data, scales]).unwrap();
    let tiled = scaled.view(ViewOp::ExpandDims(vec![0])).unwrap().view(ViewOp::Tile(vec![5, 1, 1, 1])).unwrap();
    let one: Vec<f64> = d.iter().enumerate().map(|(i, v)| v * s[i / (76 * 76)]).collect();
    (tiled, one.repeat(5))
}

/// The default Zarr chunks over limits from 8 MiB to 8 GiB, thread counts
/// and shapes from 1-D to 5-D: at least 64 KiB per chunk unless the array
/// is smaller, at most 8 MiB (Zarr's guidance: 1–100 MB), contiguous in C
/// order (outer axes 1, one axis cut, inner axes whole), and the plan
/// within the limit.
#[test]
fn default_zarr_chunks_are_sized_for_the_format_within_the_limit() {
    use memfit::array::{default_zarr_chunks, explain, MAX_CHUNK_BYTES, MIN_CHUNK_BYTES};
    use memfit::dtype::Dtype;
    let shapes: &[&[usize]] = &[
        &[1],
        &[1000],
        &[1 << 34],
        &[0],
        &[3, 5000],
        &[3, 1 << 33],
        &[1000, 0, 5],
        &[200, 76, 76],
        &[5, 200, 76, 76],
        &[2, 3, 4, 5, 6],
        &[7, 3, 50, 40, 30],
        &[100, 100, 100, 100, 100],
        &[1 << 20, 1, 1, 1, 3],
    ];
    for &shape in shapes {
        for dtype in [Dtype::F64, Dtype::F32, Dtype::Bool] {
            let r = Array::random(Distribution::Normal, shape, 1, 0.0, 1.0, Dtype::F64).unwrap();
            let expr = match dtype {
                Dtype::Bool => Array::ufunc(Op::Greater, &[r, Array::scalar(Scalar::Float(0.0), None, true)]).unwrap(),
                _ => Array::ufunc(Op::Multiply, &[r, Array::scalar(Scalar::Float(2.0), None, true)])
                    .unwrap()
                    .astype(dtype),
            };
            let item = dtype.itemsize() as u64;
            let array_bytes = shape.iter().map(|&n| n as u64).product::<u64>() * item;
            for limit in [8 * MIB, 64 * MIB, 1 << 30, 8 << 30] {
                for threads in [1, 4, 64] {
                    let opts = Options { threads: Some(threads), ..Options::with_limit(limit) };
                    let out =
                        Output::Zarr { path: "x.zarr".into(), chunks: None, shards: Shards::Auto, overwrite: true };
                    let plan = explain(&expr, &out, &opts).unwrap();
                    let c = &plan.schedule.stages.last().unwrap().zarr_chunks;
                    let at = format!("{shape:?} {} at {limit} B, {threads} threads: chunks {c:?}", dtype.name());
                    assert_eq!(c, &default_zarr_chunks(&expr, &opts).unwrap(), "{at}");
                    assert!(plan.total_bytes <= limit, "{at}: plan of {} B", plan.total_bytes);
                    assert!(c.iter().zip(shape).all(|(&e, &n)| e >= 1 && e <= n.max(1)), "{at}");
                    let bytes = c.iter().map(|&e| e as u64).product::<u64>() * item;
                    assert!(bytes >= MIN_CHUNK_BYTES.min(array_bytes), "{at}: {bytes} B");
                    assert!(bytes <= MAX_CHUNK_BYTES && bytes <= limit / 16, "{at}: {bytes} B");
                    // Outer axes 1, the axis cut, inner axes whole.
                    let inner = (0..shape.len()).rev().find(|&k| c[k] < shape[k]).map_or(0, |k| k + 1);
                    assert!((inner..shape.len()).all(|k| c[k] == shape[k].max(1)), "{at}");
                    assert!((0..inner.saturating_sub(1)).all(|k| c[k] == 1), "{at}");
                }
            }
        }
    }
}

/// T3-08 written to Zarr without chunks at 8 and 64 MiB: 25 to 200 chunk
/// files of whole 76 × 76 planes (not 2.9 million of two elements), the
/// values right; and a limit too small for one chunk is refused before
/// anything is written, naming the smallest limit that works.
#[test]
fn t3_08_zarr_default_chunks_are_few_and_the_values_right() {
    let (tiled, want) = t3_08();
    let dir = tempfile::tempdir().unwrap();
    for (limit, threads) in [(8 * MIB, 4), (64 * MIB, 2)] {
        let path = dir.path().join(format!("t{limit}.zarr"));
        let out = Output::Zarr { path: path.clone(), chunks: None, shards: Shards::Auto, overwrite: false };
        let opts = Options { threads: Some(threads), ..Options::with_limit(limit) };
        let (_, report) = run(&tiled, &out, &opts, &mut Context::new(&mut ())).unwrap();
        let chunks = &report.plan.schedule.stages.last().unwrap().tile;
        assert_eq!(&chunks[2..], [76, 76], "{chunks:?}");
        assert!(report.plan.total_bytes <= limit);
        let files = walk(&path);
        assert!(files > 5 && files <= 250, "{files} files for chunks {chunks:?}");
        let z = memfit::io::ZarrInput::open(&path).unwrap();
        assert_eq!(z.chunk_shape(), chunks.as_slice());
        let mut back = vec![0u8; want.len() * 8];
        z.read_region(&[0, 0, 0, 0], &[5, 200, 76, 76], &mut back, &memfit::io::ChunkCache::default()).unwrap();
        let back: Vec<f64> = back.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(back, want);
    }
    let opts = Options { threads: Some(4), ..Options::with_limit(100 << 10) };
    let out =
        Output::Zarr { path: dir.path().join("small.zarr"), chunks: None, shards: Shards::Auto, overwrite: false };
    let needed = match run(&tiled, &out, &opts, &mut Context::new(&mut ())).unwrap_err() {
        Error::DoesNotFit { required_bytes, .. } => required_bytes,
        other => panic!("{other}"),
    };
    assert!(!dir.path().join("small.zarr").exists());
    let fits =
        |limit| memfit::array::explain(&tiled, &out, &Options { threads: Some(4), ..Options::with_limit(limit) });
    assert!(fits(needed).unwrap().total_bytes <= needed);
    assert!(matches!(fits(needed - 1), Err(Error::DoesNotFit { required_bytes, .. }) if required_bytes == needed));
}

/// Files under `dir`, recursively.
fn walk(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                walk(&e.path())
            } else {
                1
            }
        })
        .sum()
}
