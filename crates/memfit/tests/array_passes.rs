//! Several statistics in one pass (issue 23, item 2): reductions of one
//! iteration space share a stage (one read, shared elementwise work), and
//! `var` / `std` are one pass (Chan, Golub and LeVeque's pairwise update of
//! chunk moments), as accurate as the two-pass formula far from the origin,
//! bitwise the same for any limit and thread count.

mod common;
use common::{compute, f64s, MIB};

use memfit::array::{explain, explain_all, run_all, Array, Op, Options, Output, Reduction};
use memfit::exec::Context;

fn ufunc(op: Op, args: &[Array]) -> Array {
    Array::ufunc(op, args).unwrap()
}

fn values(n: usize, m: usize, f: impl Fn(usize, usize) -> f64) -> Array {
    Array::from_f64((0..n * m).map(|i| f(i / m, i % m)).collect(), &[n, m]).unwrap()
}

/// Exact-enough reference: two passes in long double-like care (Kahan sums).
fn reference_var(col: &[f64]) -> f64 {
    let kahan = |it: &mut dyn Iterator<Item = f64>| {
        let (mut s, mut c) = (0.0f64, 0.0f64);
        for v in it {
            let y = v - c;
            let t = s + y;
            c = (t - s) - y;
            s = t;
        }
        s
    };
    let n = col.len() as f64;
    let mean = kahan(&mut col.iter().copied()) / n;
    kahan(&mut col.iter().map(|v| (v - mean) * (v - mean))) / n
}

/// `compute(x.mean(0), x.var(0), x.min(0), x.max(0))` is one pass over x,
/// plus `var`'s division.
#[test]
fn statistics_of_one_array_share_one_pass() {
    let x = values(3000, 4, |i, j| ((i * 31 + j * 7) % 97) as f64 * 0.5 - 3.0);
    let roots = [
        x.reduce(Reduction::Mean, &[0], false, None).unwrap(),
        x.var(&[0], false, 0.0, None, false).unwrap(),
        x.reduce(Reduction::Min, &[0], false, None).unwrap(),
        x.reduce(Reduction::Max, &[0], false, None).unwrap(),
    ];
    let outputs = vec![Output::Memory; roots.len()];
    let plan = explain_all(&roots, &outputs, &Options::with_limit(64 * MIB)).unwrap();
    let reads = plan.schedule.stages.iter().filter(|s| !s.chunk.is_empty()).count();
    assert_eq!(reads, 1, "{plan}");
    assert_eq!(plan.schedule.stages.len(), 2, "{plan}");
    let mut first: Option<Vec<Vec<f64>>> = None;
    for limit in [MIB / 2, 64 * MIB] {
        for threads in [1, 2] {
            let opts = Options { threads: Some(threads), ..Options::with_limit(limit) };
            let (got, _) = run_all(&roots, &outputs, &opts, &mut Context::new(&mut ())).unwrap();
            let got: Vec<Vec<f64>> = got.iter().map(|c| f64s(c.as_ref().unwrap())).collect();
            // Each result has the bits it has when computed alone.
            for (r, g) in roots.iter().zip(&got) {
                assert_eq!(&f64s(&compute(r, limit, threads)), g);
            }
            match &first {
                None => first = Some(got),
                Some(f) => assert_eq!(f, &got, "limit {limit}, {threads} threads"),
            }
        }
    }
    let got = first.unwrap();
    for (j, (var, min)) in got[1].iter().zip(&got[2]).enumerate() {
        let col: Vec<f64> = (0..3000).map(|i| ((i * 31 + j * 7) % 97) as f64 * 0.5 - 3.0).collect();
        assert!((var - reference_var(&col)).abs() <= 1e-13 * reference_var(&col));
        assert_eq!(*min, col.iter().copied().fold(f64::INFINITY, f64::min));
    }
}

/// Standardise, then reduce: one pass for x's statistics, one for z's.
#[test]
fn standardise_then_reduce_is_two_passes() {
    let x = values(2000, 3, |i, j| ((i * 13 + j) % 17) as f64 + j as f64 * 100.0);
    let mean = x.reduce(Reduction::Mean, &[0], true, None).unwrap();
    let std = x.var(&[0], true, 0.0, None, true).unwrap();
    let z = ufunc(Op::TrueDivide, &[ufunc(Op::Subtract, &[x.clone(), mean]), std]);
    let roots = [z.reduce(Reduction::Mean, &[0], false, None).unwrap(), z.var(&[0], false, 1.0, None, false).unwrap()];
    let outputs = vec![Output::Memory; 2];
    let plan = explain_all(&roots, &outputs, &Options::with_limit(64 * MIB)).unwrap();
    let reads = plan.schedule.stages.iter().filter(|s| !s.chunk.is_empty()).count();
    assert_eq!(reads, 2, "{plan}");
    let (got, _) = run_all(&roots, &outputs, &Options::with_limit(64 * MIB), &mut Context::new(&mut ())).unwrap();
    let (m, v) = (f64s(got[0].as_ref().unwrap()), f64s(got[1].as_ref().unwrap()));
    for j in 0..3 {
        assert!(m[j].abs() < 1e-14, "{m:?}");
        assert!((v[j] - 2000.0 / 1999.0).abs() < 1e-12, "{v:?}");
    }
}

/// Far from the origin (a mean 1e12 times the spread, N1-like data), the
/// one-pass variance is as accurate as the two-pass one: the naive
/// `Σx² − n·mean²` would lose every digit.
#[test]
fn one_pass_variance_is_accurate_far_from_the_origin() {
    for offset in [0.0, 1e6, 1e9, 1e12] {
        let n = 100_003;
        let x = values(n, 2, |i, j| offset + (i % 1000) as f64 * 0.25 + j as f64);
        let v = x.var(&[0], false, 0.0, None, false).unwrap();
        for (limit, threads) in [(MIB, 1), (64 * MIB, 2)] {
            let got = f64s(&compute(&v, limit, threads));
            let col: Vec<f64> = (0..n).map(|i| (i % 1000) as f64 * 0.25).collect();
            let want = reference_var(&col);
            for g in &got {
                assert!((g - want).abs() <= 1e-12 * want, "offset {offset}: {g} vs {want}");
            }
        }
    }
}

/// NaN and infinity propagate as NumPy's two-pass `var` does; an empty
/// reduction is NaN; a constant column is exactly 0.
#[test]
fn one_pass_variance_special_values() {
    let x = values(50, 4, |i, j| match (i, j) {
        (7, 0) => f64::NAN,
        (9, 1) => f64::INFINITY,
        (_, 2) => 1.5,
        _ => i as f64,
    });
    let got = f64s(&compute(&x.var(&[0], false, 0.0, None, false).unwrap(), 64 * MIB, 1));
    assert!(got[0].is_nan() && got[1].is_nan(), "{got:?}");
    assert_eq!(got[2], 0.0);
    assert!((got[3] - (2500.0 - 1.0) / 12.0).abs() < 1e-12);
    let empty = Array::from_f64(Vec::new(), &[0, 3]).unwrap();
    let v = f64s(&compute(&empty.var(&[0], false, 0.0, None, false).unwrap(), 64 * MIB, 1));
    assert!(v.iter().all(|x| x.is_nan()));
    // The variance of a tiled array: the rewrite reads one period.
    let tiled = x.view(memfit::array::ViewOp::BroadcastTo(vec![3, 50, 4])).unwrap();
    let plan =
        explain(&tiled.var(&[0, 1], false, 0.0, None, false).unwrap(), &Output::Memory, &Options::with_limit(64 * MIB))
            .unwrap();
    assert!(plan.schedule.stages.iter().any(|s| s.multiplier == 3), "{plan}");
    let t = f64s(&compute(&tiled.var(&[0, 1], false, 0.0, None, false).unwrap(), 64 * MIB, 1));
    assert_eq!(t[2], 0.0);
    assert!((t[3] - got[3]).abs() < 1e-12 * got[3]);
}

/// Where the joined stage does not fit the limit but each reduction alone
/// does, the reductions run as separate passes (with the same bits).
#[test]
fn joined_passes_fall_back_to_separate_ones_under_a_small_limit() {
    let x = values(40_000, 3, |i, j| ((i * 7 + j) % 23) as f64 - 11.0);
    let roots: Vec<Array> = (1..9)
        .map(|k| {
            let scaled = ufunc(Op::Multiply, &[x.clone(), Array::from_f64(vec![k as f64], &[1]).unwrap()]);
            ufunc(Op::Sqrt, &[ufunc(Op::Multiply, &[scaled.clone(), scaled])])
                .reduce(Reduction::Sum, &[0], false, None)
                .unwrap()
        })
        .collect();
    let outputs = vec![Output::Memory; roots.len()];
    // The least limit of a plan (from its refusal at one byte).
    let least = |p: memfit::Result<memfit::plan::Plan<memfit::array::Stages>>| match p {
        Err(memfit::Error::DoesNotFit { required_bytes, .. }) => required_bytes,
        other => panic!("{other:?}"),
    };
    let tiny = Options { threads: Some(2), ..Options::with_limit(1) };
    let alone = least(explain(&roots[0], &Output::Memory, &tiny));
    let joint = explain_all(&roots, &outputs, &Options::with_limit(64 * MIB)).unwrap();
    assert_eq!(joint.schedule.stages.len(), 1, "{joint}");
    // Between the least limit of one reduction and a roomy one, some limit
    // holds each pass alone but not the joined one.
    let limits = (1..40).map(|k| alone + alone * k / 8);
    let small = limits
        .map(|l| Options { threads: Some(2), ..Options::with_limit(l) })
        .find(|o| explain_all(&roots, &outputs, o).unwrap().schedule.stages.len() == roots.len())
        .expect("a limit where the passes run separately");
    let (got, _) = run_all(&roots, &outputs, &small, &mut Context::new(&mut ())).unwrap();
    let (big, _) = run_all(&roots, &outputs, &Options::with_limit(64 * MIB), &mut Context::new(&mut ())).unwrap();
    for (a, b) in got.iter().zip(&big) {
        assert_eq!(f64s(a.as_ref().unwrap()), f64s(b.as_ref().unwrap()));
    }
}
