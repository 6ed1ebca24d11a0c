//! Engine-level tests of issue 23, item 6: values that become NaN or
//! infinite from finite values are counted wherever they arise (scalars
//! cast to a narrower float, `astype`, folded constants, reductions with a
//! NaN in another output), the same for any limit and thread count; `prod`
//! over a tiled or repeated axis keeps its sign; 0-d results go to Zarr.
//! Expected values are NumPy 2's.

use memfit::array::{run, Array, Computed, Op, Options, Output, Reduction, Scalar, ViewOp};
use memfit::dtype::Dtype;
use memfit::exec::Context;
use memfit::{FpException, Warning};

const MIB: u64 = 1 << 20;

/// Counts by exception (overflow, divide by zero, invalid) of `warnings`,
/// which hold nothing else.
fn exceptions(warnings: &[Warning]) -> [u64; 3] {
    let mut c = [0; 3];
    for w in warnings {
        match w {
            Warning::FloatingPoint { exception, count } => c[exception.index()] += count,
            other => panic!("unexpected warning {other:?}"),
        }
    }
    c
}

/// The result and the count of floating-point exceptions, the same for
/// every (limit, threads).
fn computed(a: &Array) -> (Computed, u64) {
    let mut first: Option<(Computed, u64)> = None;
    for (limit, threads) in [(64 * MIB, 1), (3 * MIB, 2)] {
        let opts = Options { threads: Some(threads), ..Options::with_limit(limit) };
        let (got, report) = run(a, &Output::Memory, &opts, &mut Context::new(&mut ())).unwrap();
        let count = exceptions(&report.warnings).iter().sum();
        let got = (got.unwrap(), count);
        match &first {
            None => first = Some(got),
            Some((c, n)) => {
                assert_eq!((&c.bytes, *n), (&got.0.bytes, got.1), "limit {limit}, threads {threads}");
            }
        }
    }
    first.unwrap()
}

fn f64s(c: &Computed) -> Vec<f64> {
    match c.dtype {
        Dtype::F64 => c.bytes.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().unwrap())).collect(),
        Dtype::F32 => c.bytes.chunks_exact(4).map(|b| f64::from(f32::from_le_bytes(b.try_into().unwrap()))).collect(),
        Dtype::F16 => {
            c.bytes.chunks_exact(2).map(|b| half::f16::from_le_bytes(b.try_into().unwrap()).to_f64()).collect()
        }
        d => panic!("not a float dtype: {d:?}"),
    }
}

fn weak(x: f64) -> Array {
    Array::scalar(Scalar::Float(x), None, true)
}

fn floats(v: &[f64], dtype: Dtype) -> Array {
    Array::from_f64(v.to_vec(), &[v.len()]).unwrap().astype(dtype)
}

#[test]
fn python_scalars_cast_to_a_narrower_float_count_their_overflow() {
    // numpy: float16([1, 2, 3]) + 70000.0 -> [inf, inf, inf], "overflow encountered in cast"
    let a = Array::ufunc(Op::Add, &[floats(&[1.0, 2.0, 3.0], Dtype::F16), weak(70000.0)]).unwrap();
    let (got, count) = computed(&a);
    assert_eq!((got.dtype, f64s(&got), count), (Dtype::F16, vec![f64::INFINITY; 3], 3));
    // numpy: float32([1, 2]) * 1e300 -> [inf, inf]
    let a = Array::ufunc(Op::Multiply, &[floats(&[1.0, -2.0], Dtype::F32), weak(1e300)]).unwrap();
    let (got, count) = computed(&a);
    assert_eq!((f64s(&got), count), (vec![f64::INFINITY, f64::NEG_INFINITY], 2));
    // numpy: where([True, False, True], 1e5, float16([1, 2, 3])) -> [inf, 2, inf]
    let cond = Array::from_f64(vec![1.0, 0.0, 1.0], &[3]).unwrap().astype(Dtype::Bool);
    let a = Array::where_(&cond, &weak(1e5), &floats(&[1.0, 2.0, 3.0], Dtype::F16)).unwrap();
    let (got, count) = computed(&a);
    assert_eq!(f64s(&got), [f64::INFINITY, 2.0, f64::INFINITY]);
    assert!(count > 0);
    // An infinite scalar propagates: numpy is silent.
    let a = Array::ufunc(Op::Add, &[floats(&[1.0], Dtype::F16), weak(f64::INFINITY)]).unwrap();
    assert_eq!(computed(&a).1, 0);
}

#[test]
fn astype_and_folded_constants_count_their_overflow() {
    // numpy: array([1e300, 1.0, inf]).astype(float32) -> [inf, 1, inf], one fresh
    let (got, count) = computed(&floats(&[1e300, 1.0, f64::INFINITY], Dtype::F32));
    assert_eq!((f64s(&got), count), (vec![f64::INFINITY, 1.0, f64::INFINITY], 1));
    // numpy: full(4, 1e300) * 1e300 -> inf x 4; constant operands are not folded away
    let a = Array::ufunc(Op::Multiply, &[Array::full(&[4], Scalar::Float(1e300), Dtype::F64), weak(1e300)]).unwrap();
    let (got, count) = computed(&a);
    assert_eq!((f64s(&got), count), (vec![f64::INFINITY; 4], 4));
    // Folding that stays finite still happens (the plan reads no operand).
    let a = Array::ufunc(Op::Multiply, &[Array::full(&[4], Scalar::Float(3.0), Dtype::F64), weak(2.0)]).unwrap();
    let (got, count) = computed(&a);
    assert_eq!((f64s(&got), count), (vec![6.0; 4], 0));
}

#[test]
fn a_nan_in_one_output_of_a_reduction_does_not_hide_another_outputs_overflow() {
    // numpy: float32([[3e38, 3e38], [nan, 1], [1, 2]]).sum(axis=1) -> [inf, nan, 3]
    let x = floats(&[3e38, 3e38, f64::NAN, 1.0, 1.0, 2.0], Dtype::F32).view(ViewOp::Reshape(vec![3, 2])).unwrap();
    let (got, count) = computed(&x.reduce(Reduction::Sum, &[1], false, None).unwrap());
    let v = f64s(&got);
    assert!(v[0] == f64::INFINITY && v[1].is_nan() && v[2] == 3.0);
    assert_eq!(count, 1);
    // Along axis 0 of a tall array (many tiles and accumulation chunks).
    let n = 40_000;
    let mut v = vec![1.0; 2 * n];
    v[0] = 1e308;
    v[2] = 1e308; // column 0 overflows
    v[3] = f64::NAN; // column 1 is NaN from its input
    let x = Array::from_f64(v, &[n, 2]).unwrap();
    let (got, count) = computed(&x.reduce(Reduction::Sum, &[0], false, None).unwrap());
    let v = f64s(&got);
    assert!(v[0] == f64::INFINITY && v[1].is_nan());
    assert_eq!(count, 1);
}

#[test]
fn prod_over_a_tiled_or_repeated_axis_keeps_its_sign() {
    for k in [1usize, 2, 3, 7, 40, 41] {
        let sign = if k % 2 == 1 { -1.0 } else { 1.0 };
        // numpy: prod(tile([-1.0], k)) == (-1)^k; prod(repeat([-2.0, 0.5], k)) == (-1)^k
        let a = Array::from_f64(vec![-1.0], &[1]).unwrap().view(ViewOp::Tile(vec![k])).unwrap();
        let (got, _) = computed(&a.reduce(Reduction::Prod, &[0], false, None).unwrap());
        assert_eq!(f64s(&got), [sign], "tile {k}");
        let a = Array::from_f64(vec![-2.0, 0.5], &[2]).unwrap().view(ViewOp::Repeat { repeats: k, axis: 0 }).unwrap();
        let (got, _) = computed(&a.reduce(Reduction::Prod, &[0], false, None).unwrap());
        assert_eq!(f64s(&got), [sign], "repeat {k}");
        // -0.0 and -inf keep their signs too.
        let a =
            Array::from_f64(vec![-0.0, f64::NEG_INFINITY], &[2, 1]).unwrap().view(ViewOp::Tile(vec![1, k])).unwrap();
        let (got, _) = computed(&a.reduce(Reduction::Prod, &[1], false, None).unwrap());
        let v = f64s(&got);
        assert_eq!((v[0].is_sign_negative(), v[1]), (k % 2 == 1, sign * f64::INFINITY), "signed zero / inf {k}");
    }
}

#[test]
fn zero_d_results_are_written_to_zarr_and_npy() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        Array::scalar(Scalar::Float(3.0), Some(Dtype::F64), false),
        Array::from_f64((0..12).map(f64::from).collect(), &[3, 4])
            .unwrap()
            .reduce(Reduction::Sum, &[0, 1], false, None)
            .unwrap(),
    ];
    for (i, a) in cases.iter().enumerate() {
        let want = computed(a).0;
        assert!(want.shape.is_empty());
        let path = dir.path().join(format!("x{i}.zarr"));
        let opts = Options::with_limit(64 * MIB);
        let out =
            Output::Zarr { path: path.clone(), chunks: None, shards: memfit::array::Shards::Auto, overwrite: false };
        run(a, &out, &opts, &mut Context::new(&mut ())).unwrap();
        let back = Array::from_zarr(&path).unwrap();
        assert!(back.shape().is_empty());
        assert_eq!(computed(&back).0.bytes, want.bytes);
        let npy = dir.path().join(format!("x{i}.npy"));
        run(a, &Output::Npy { path: npy.clone(), overwrite: false }, &opts, &mut Context::new(&mut ())).unwrap();
        assert_eq!(computed(&Array::from_npy(&npy).unwrap()).0.bytes, want.bytes);
    }
}

/// Each exception counted as NumPy names it: `1 / 0` and `log(0)` divide
/// by zero, `0 / 0` and `sqrt(-1)` are invalid, `1e300 * 1e10` and
/// `1e300 / 1e-300` overflow; integer `// 0` and `% 0` divide by zero
/// (giving 0, as NumPy does).
#[test]
fn exceptions_are_counted_by_kind() {
    let kinds = |a: &Array| {
        let opts = Options { threads: Some(2), ..Options::with_limit(64 * MIB) };
        let (_, report) = run(a, &Output::Memory, &opts, &mut Context::new(&mut ())).unwrap();
        exceptions(&report.warnings)
    };
    let x = floats(&[1.0, 0.0, -1.0, 1e300], Dtype::F64);
    let over = FpException::Overflow.index();
    let (div, inv) = (FpException::DivideByZero.index(), FpException::Invalid.index());
    let zero = floats(&[0.0; 4], Dtype::F64);
    let mut want = [0; 3];
    (want[div], want[inv]) = (3, 1);
    assert_eq!(kinds(&Array::ufunc(Op::TrueDivide, &[x.clone(), zero]).unwrap()), want);
    let mut want = [0; 3];
    (want[div], want[inv]) = (1, 1);
    assert_eq!(kinds(&Array::ufunc(Op::Log, std::slice::from_ref(&x)).unwrap()), want);
    let mut want = [0; 3];
    want[inv] = 1;
    assert_eq!(kinds(&Array::ufunc(Op::Sqrt, std::slice::from_ref(&x)).unwrap()), want);
    let mut want = [0; 3];
    want[over] = 1;
    assert_eq!(kinds(&Array::ufunc(Op::Multiply, &[x.clone(), weak(1e10)]).unwrap()), want);
    assert_eq!(kinds(&Array::ufunc(Op::TrueDivide, &[x, weak(1e-300)]).unwrap()), want);
    let (ints, divisors) = (floats(&[7.0, 8.0, 9.0], Dtype::I64), floats(&[0.0, 3.0, 0.0], Dtype::I64));
    let mut want = [0; 3];
    want[div] = 2;
    for op in [Op::FloorDivide, Op::Remainder] {
        let a = Array::ufunc(op, &[ints.clone(), divisors.clone()]).unwrap();
        assert_eq!(kinds(&a), want, "{op:?}");
        let want: Vec<u8> = [0i64, 2, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(computed(&a).0.bytes, want, "{op:?}");
    }
}
