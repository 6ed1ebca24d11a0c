//! Engine-level tests of `memfit::array` as a DAG: shared and structurally
//! equal subexpressions are computed once, and graphs of any depth build,
//! lower, plan, evaluate and drop without recursion.

mod common;
use common::{compute, f64s, MIB};
use std::time::Instant;

use memfit::array::{explain, Array, Op, Options, Output, Reduction, Scalar};

fn weak(v: f64) -> Array {
    Array::scalar(Scalar::Float(v), None, true)
}

fn ufunc(op: Op, args: &[Array]) -> Array {
    Array::ufunc(op, args).unwrap()
}

/// Case T3-09: Newton's iteration for sqrt(2) reuses `e` twice per step; 40
/// steps are a graph of 160 nodes, not a tree of 2^40.
#[test]
fn t3_09_newton_iteration_evaluates_each_subexpression_once() {
    let n = 1000;
    let mut e = Array::from_f64(vec![3.0; n], &[n]).unwrap();
    let mut want = vec![3.0f64; n];
    for _ in 0..40 {
        e = ufunc(Op::Multiply, &[weak(0.5), ufunc(Op::Add, &[e.clone(), ufunc(Op::TrueDivide, &[weak(2.0), e])])]);
        want.iter_mut().for_each(|w| *w = 0.5 * (*w + 2.0 / *w));
    }
    let started = Instant::now();
    for (limit, threads) in [(64 * MIB, 2), (MIB, 1)] {
        assert_eq!(f64s(&compute(&e, limit, threads)), want);
    }
    assert!(started.elapsed().as_secs_f64() < 20.0, "took {:?}", started.elapsed());
}

/// Case T3-10's kind: a chain of 100,000 operations (Python's `sum()` over
/// many terms) builds, plans, computes and drops; long chains are cut into
/// stages rather than one tile holding them all.
#[test]
fn chains_of_any_length_compute_and_drop() {
    let n = 64;
    let x = Array::from_f64((0..n).map(|i| i as f64).collect(), &[n]).unwrap();
    let mut total = x.clone();
    let steps = 100_000;
    for i in 0..steps {
        let term = ufunc(Op::Multiply, &[x.clone(), weak((i % 3) as f64)]);
        total = ufunc(Op::Add, &[total, term]);
    }
    let plan = explain(&total, &Output::Memory, &Options::with_limit(64 * MIB)).unwrap();
    assert!(plan.schedule.stages.len() > 1, "a chain of {steps} is cut into stages");
    let got = f64s(&compute(&total, 64 * MIB, 2));
    let coef: f64 = (0..steps).map(|i| (i % 3) as f64).sum::<f64>() + 1.0;
    let want: Vec<f64> = (0..n).map(|i| i as f64 * coef).collect();
    assert_eq!(got, want);
    assert_eq!(f64s(&compute(&total, MIB, 1)), want);
    drop(total); // no stack overflow
}

/// A deep chain of reductions (each step subtracts its own mean) lowers
/// without recursion.
#[test]
fn chains_of_reductions_lower_without_recursion() {
    let n = 16;
    let mut x = Array::from_f64((0..n).map(|i| (i * i) as f64).collect(), &[n]).unwrap();
    for _ in 0..3_000 {
        let mean = x.reduce(Reduction::Mean, &[0], true, None).unwrap();
        x = ufunc(Op::Subtract, &[x, mean]);
    }
    let got = f64s(&compute(&x, 64 * MIB, 2));
    assert!(got.iter().all(|v| v.is_finite()));
    assert!(got.iter().sum::<f64>().abs() < 1e-6);
}

/// Equal subexpressions built separately are one node: the statistics of
/// `(x - mean(x)) / std(x)` and of `std(x)` itself read `x` for its mean once.
#[test]
fn equal_subexpressions_are_one_node_and_one_stage() {
    let (n, m) = (200, 3);
    let x = Array::from_f64((0..n * m).map(|i| ((i * 7) % 11) as f64).collect(), &[n, m]).unwrap();
    let a = x.reduce(Reduction::Mean, &[0], true, None).unwrap();
    let b = x.reduce(Reduction::Mean, &[0], true, None).unwrap();
    assert!(std::ptr::eq(a.shape(), b.shape()), "one node");
    let std = x.var(&[0], true, 0.0, None, true).unwrap();
    let z = ufunc(Op::TrueDivide, &[ufunc(Op::Subtract, &[x.clone(), a]), std]);
    let plan = explain(&z, &Output::Memory, &Options::with_limit(64 * MIB)).unwrap();
    // mean(x) and the sum of squared deviations in one pass, then the map.
    assert_eq!(plan.schedule.stages.len(), 2, "{plan}");
    let got = f64s(&compute(&z, 64 * MIB, 2));
    for j in 0..m {
        let col: Vec<f64> = (0..n).map(|i| ((i * m + j) * 7 % 11) as f64).collect();
        let mean = col.iter().sum::<f64>() / n as f64;
        let sd = (col.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64).sqrt();
        for i in 0..n {
            assert!((got[i * m + j] - (col[i] - mean) / sd).abs() < 1e-12);
        }
    }
}

/// A view of a view of ... 20,000 deep (reversals, transposes) plans in
/// linear time and memory: the pending views are shared lists, and stacked
/// slices compose into one step.
#[test]
fn chains_of_views_plan_in_linear_space() {
    let (n, m) = (3, 4);
    let v: Vec<f64> = (0..n * m).map(|i| i as f64).collect();
    let mut a = Array::from_f64(v.clone(), &[n, m]).unwrap();
    for _ in 0..20_000 {
        a = a.view(memfit::array::ViewOp::Slice(vec![(2, -1, 3), (3, -1, 4)])).unwrap();
        a = a.view(memfit::array::ViewOp::Transpose(vec![1, 0])).unwrap();
        a = a.view(memfit::array::ViewOp::Transpose(vec![1, 0])).unwrap();
    }
    let started = Instant::now();
    assert_eq!(f64s(&compute(&a, 64 * MIB, 2)), v, "an even number of reversals");
    assert!(started.elapsed().as_secs_f64() < 20.0, "took {:?}", started.elapsed());
}
