//! Contractions of `memfit::array` at GEMM shape: the contracted labels in
//! fixed chunks from the shapes (never shrinking with the rows), output
//! tiles from the limit, results bitwise the same for any limit and thread
//! count and right against naive float64 sums; the plain-NumPy forms of the
//! E- and M-step (`np.sum(X.dot(Q) * X, axis=1)`, `(X.T * w) @ X`) run as
//! the same fused contraction as their einsum.

mod common;
use common::{compute, f64s, MIB};
use memfit::array::{explain, Array, Distribution, Op, Options, Output, Reduction, ViewOp};
use memfit::dtype::Dtype;

/// A float64 array of `shape` with values of both signs.
fn array(shape: &[usize], seed: u64) -> (Array, Vec<f64>) {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n)
        .map(|i| {
            let x = ((i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15 ^ seed) >> 11) as f64 / (1u64 << 53) as f64;
            x - 0.4
        })
        .collect();
    (Array::from_f64(v.clone(), shape).unwrap(), v)
}

/// Runs `a` at two limits (one that cuts the output into many tiles) on
/// one and two threads: the same bits every time.
fn same_bits(a: &Array) -> Vec<f64> {
    let first = compute(a, 256 * MIB, 2);
    for (limit, threads) in [(2 * MIB, 1), (2 * MIB, 2), (256 * MIB, 1)] {
        assert_eq!(compute(a, limit, threads).bytes, first.bytes, "limit {limit}, threads {threads}");
    }
    let opts = Options { threads: Some(2), ..Options::with_limit(2 * MIB) };
    let plan = explain(a, &Output::Memory, &opts).unwrap();
    assert!(plan.schedule.stages.iter().any(|s| s.work_items > 2), "one tile only: {plan}");
    f64s(&first)
}

/// `got` against `want` to 1e-12 of the sum of the terms' magnitudes.
fn close(got: &[f64], want: &[(f64, f64)]) {
    assert_eq!(got.len(), want.len());
    for (i, (g, (w, scale))) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-12 * scale.max(1e-300), "[{i}]: {g} vs {w}");
    }
}

#[test]
fn row_quadratic_forms_are_exact_for_any_limit_and_threads() {
    let (n, d) = (3000, 40);
    let (x, xv) = array(&[n, d], 1);
    let (q, qv) = array(&[d, d], 2);
    let got = same_bits(&Array::einsum("ij,jk,ik->i", &[x.clone(), q.clone(), x.clone()]).unwrap());
    let want: Vec<(f64, f64)> = (0..n)
        .map(|i| {
            let terms = (0..d).flat_map(|a| (0..d).map(move |b| (a, b)));
            let t: Vec<f64> = terms.map(|(a, b)| xv[i * d + a] * qv[a * d + b] * xv[i * d + b]).collect();
            (t.iter().sum(), t.iter().map(|v| v.abs()).sum())
        })
        .collect();
    close(&got, &want);
    // NumPy's own E-step, `np.sum(X.dot(Q) * X, axis=1)`: the same
    // contraction, the same bits, one stage and no scratch.
    let xq = Array::einsum("ij,jk->ik", &[x.clone(), q]).unwrap();
    let plain = Array::ufunc(Op::Multiply, &[xq, x]).unwrap().reduce(Reduction::Sum, &[1], false, None).unwrap();
    assert_eq!(same_bits(&plain), got);
    let plan = explain(&plain, &Output::Memory, &Options::with_limit(2 * MIB)).unwrap();
    assert_eq!((plan.schedule.stages.len(), plan.schedule.scratch_bytes), (1, 0), "{plan}");
}

#[test]
fn batched_quadratic_forms_are_one_product_per_row_tile() {
    // The E-step with K precisions: x_iᵀ P_k x_i for every row and k.
    let (n, d, k) = (700, 12, 5);
    let (x, xv) = array(&[n, d], 3);
    let (p, pv) = array(&[k, d, d], 4);
    let e = Array::einsum("ij,kjl,il->ik", &[x.clone(), p, x]).unwrap();
    let plan = explain(&e, &Output::Memory, &Options::with_limit(256 * MIB)).unwrap();
    assert!(plan.schedule.stages[0].what.contains("ij,kjl,il->ik"), "{plan}");
    let got = same_bits(&e);
    let want: Vec<(f64, f64)> = (0..n)
        .flat_map(|i| (0..k).map(move |c| (i, c)))
        .map(|(i, c)| {
            let t: Vec<f64> = (0..d)
                .flat_map(|a| (0..d).map(move |b| (a, b)))
                .map(|(a, b)| xv[i * d + a] * pv[(c * d + a) * d + b] * xv[i * d + b])
                .collect();
            (t.iter().sum(), t.iter().map(|v| v.abs()).sum())
        })
        .collect();
    close(&got, &want);
}

#[test]
fn weighted_scatters_fold_fixed_row_chunks() {
    let (n, d) = (9000, 20);
    let (x, xv) = array(&[n, d], 5);
    let (w, wv) = array(&[n], 6);
    let e = Array::einsum("ij,i,ik->jk", &[x.clone(), w.clone(), x.clone()]).unwrap();
    let got = same_bits(&e);
    let want: Vec<(f64, f64)> = (0..d)
        .flat_map(|a| (0..d).map(move |b| (a, b)))
        .map(|(a, b)| {
            let t: Vec<f64> = (0..n).map(|i| xv[i * d + a] * wv[i] * xv[i * d + b]).collect();
            (t.iter().sum(), t.iter().map(|v| v.abs()).sum())
        })
        .collect();
    close(&got, &want);
    // The M-step in plain NumPy, `(X.T * w) @ X`: the factors of the product
    // are the contraction's operands, read as they lie; the same bits as
    // the einsum written with the same letters.
    let xt = x.view(ViewOp::Transpose(vec![1, 0])).unwrap();
    let weighted = Array::ufunc(Op::Multiply, &[xt, w.clone()]).unwrap();
    let plain = Array::einsum("ij,jk->ik", &[weighted, x.clone()]).unwrap();
    let same = Array::einsum("ji,j,jk->ik", &[x.clone(), w, x]).unwrap();
    assert_eq!(same_bits(&plain), f64s(&compute(&same, 256 * MIB, 2)));
    let plan = explain(&plain, &Output::Memory, &Options::with_limit(2 * MIB)).unwrap();
    assert_eq!((plan.schedule.stages.len(), plan.schedule.scratch_bytes), (1, 0), "{plan}");
}

#[test]
fn t3_12_chunks_do_not_shrink_with_the_rows() {
    // T3-12: einsum('ij,jk,ik->i') over (200,000, 300) at 64 MiB was cut
    // into [5, 5] chunks (> 600 s). The contracted labels are now whole and
    // the row tiles large, for any number of rows.
    let q = Array::random(Distribution::Normal, &[300, 300], 2, 0.0, 1.0, Dtype::F64).unwrap();
    for n in [20_000, 200_000, 2_000_000] {
        let x = Array::random(Distribution::Normal, &[n, 300], 1, 0.0, 1.0, Dtype::F64).unwrap();
        let e = Array::einsum("ij,jk,ik->i", &[x.clone(), q.clone(), x]).unwrap();
        let opts = Options { threads: Some(2), ..Options::with_limit(64 * MIB) };
        let plan = explain(&e, &Output::Memory, &opts).unwrap();
        let stage = plan.schedule.stages.last().unwrap();
        assert_eq!(stage.chunk, [300, 300], "{plan}");
        assert!(stage.tile[0] >= 1000, "{plan}");
        assert!(stage.work_items as usize <= n / 1000 + 1, "{plan}");
        assert!(plan.total_bytes <= 64 * MIB, "{plan}");
    }
    // At a small size, right against the two-step form computed in memory.
    let (n, d) = (20_000, 30);
    let x = Array::random(Distribution::Normal, &[n, d], 1, 0.0, 1.0, Dtype::F64).unwrap();
    let q = Array::random(Distribution::Normal, &[d, d], 2, 0.0, 1.0, Dtype::F64).unwrap();
    let got = f64s(&compute(&Array::einsum("ij,jk,ik->i", &[x.clone(), q.clone(), x.clone()]).unwrap(), 64 * MIB, 2));
    let (xv, qv) = (f64s(&compute(&x, 64 * MIB, 2)), f64s(&compute(&q, 64 * MIB, 2)));
    for i in (0..n).step_by(97) {
        let t: Vec<f64> = (0..d * d).map(|ab| xv[i * d + ab / d] * qv[ab] * xv[i * d + ab % d]).collect();
        let (want, scale) = (t.iter().sum::<f64>(), t.iter().map(|v| v.abs()).sum::<f64>());
        assert!((got[i] - want).abs() <= 1e-12 * scale, "row {i}: {} vs {want}", got[i]);
    }
}
