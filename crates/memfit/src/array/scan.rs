//! Running sums and products ([`super::node::Array::cumulative`]): a box of
//! values accumulated along one axis in order, continuing from the values
//! carried from the box before it along that axis, in the result's dtype as
//! NumPy's `add.accumulate` / `multiply.accumulate` loops do (float32 and
//! float16 rounded at each step, float16 through float32; integers wrap).

use super::node::Reduction;
use super::types::round_float;
use super::values::Col;
use crate::dtype::Dtype;
use crate::warning::FpException;

/// One step of the accumulation in `dtype`.
fn step_f(op: Reduction, dtype: Dtype) -> impl Fn(f64, f64) -> f64 {
    move |a, x| {
        let v = if op == Reduction::Prod { a * x } else { a + x };
        match dtype {
            // NumPy's float16 loops compute in float32, then round.
            Dtype::F16 => round_float(round_float(v, Dtype::F32), Dtype::F16),
            d => round_float(v, d),
        }
    }
}

/// Accumulates `v` (a C-order box of extents `ext`) along `axis` in place,
/// starting from `carry` (the values at the box's line positions just
/// before it, `ext` with `axis` removed) when given; returns the values at
/// the box's last position along `axis` (the next box's carry).
fn run<T: Copy>(v: &mut [T], ext: &[usize], axis: usize, carry: Option<Vec<T>>, f: impl Fn(T, T) -> T) -> Vec<T> {
    let outer: usize = ext[..axis].iter().product();
    let len = ext[axis];
    let inner: usize = ext[axis + 1..].iter().product();
    let mut last = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        let base = o * len * inner;
        for i in 0..inner {
            let mut acc: Option<T> = carry.as_ref().map(|c| c[o * inner + i]);
            for j in 0..len {
                let at = base + j * inner + i;
                let next = match acc {
                    Some(a) => f(a, v[at]),
                    None => v[at],
                };
                v[at] = next;
                acc = Some(next);
            }
            last.push(acc.expect("a non-empty box"));
        }
    }
    last
}

/// Accumulates the box `col` (extents `ext`, in `dtype`) along `axis`
/// with `op`, continuing from `carry`; returns the accumulated box, the
/// carry for the next box along `axis` and how many steps raised each
/// floating-point exception (indexed by `FpException::index`): finite
/// values that gave inf (overflow), non-NaN values that gave NaN (invalid:
/// `inf - inf`, `0 · inf`), as NumPy's "encountered in accumulate".
pub fn scan_box(
    mut col: Col,
    op: Reduction,
    dtype: Dtype,
    ext: &[usize],
    axis: usize,
    carry: Option<Col>,
) -> (Col, Col, [u64; 3]) {
    let prod = op == Reduction::Prod;
    let fresh = std::cell::Cell::new([0u64; 3]);

    let last = match (&mut col, carry) {
        (Col::F(v), c) => {
            let c = c.map(|c| if let Col::F(c) = c { c } else { unreachable!("a carry of the box's kind") });
            let step = step_f(op, dtype);
            Col::F(run(v, ext, axis, c, |a, x| {
                let next = step(a, x);
                let e = if next.is_nan() && !a.is_nan() && !x.is_nan() {
                    Some(FpException::Invalid)
                } else {
                    (next.is_infinite() && a.is_finite() && x.is_finite()).then_some(FpException::Overflow)
                };
                if let Some(e) = e {
                    let mut f = fresh.get();
                    f[e.index()] += 1;
                    fresh.set(f);
                }
                next
            }))
        }
        (Col::I(v), c) => {
            let c = c.map(|c| if let Col::I(c) = c { c } else { unreachable!("a carry of the box's kind") });
            Col::I(run(v, ext, axis, c, |a: i64, x| if prod { a.wrapping_mul(x) } else { a.wrapping_add(x) }))
        }
        (Col::U(v), c) => {
            let c = c.map(|c| if let Col::U(c) = c { c } else { unreachable!("a carry of the box's kind") });
            Col::U(run(v, ext, axis, c, |a: u64, x| if prod { a.wrapping_mul(x) } else { a.wrapping_add(x) }))
        }
        (Col::B(v), c) => {
            let c = c.map(|c| if let Col::B(c) = c { c } else { unreachable!("a carry of the box's kind") });
            Col::B(run(v, ext, axis, c, |a, x| if prod { a & x } else { a | x }))
        }
    };
    (col, last, fresh.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boxes_continue_from_their_carry_as_one_accumulation() {
        // A (2, 5, 3) box accumulated along axis 1 in one piece and in two.
        let ext = [2, 5, 3];
        let vals: Vec<f64> = (0..30).map(|i| 0.1 * i as f64 + 0.3).collect();
        let (whole, ..) = scan_box(Col::F(vals.clone()), Reduction::Sum, Dtype::F64, &ext, 1, None);
        let pick = |j0: usize, j1: usize| -> Vec<f64> {
            let mut out = Vec::new();
            for o in 0..2 {
                for j in j0..j1 {
                    out.extend_from_slice(&vals[(o * 5 + j) * 3..(o * 5 + j + 1) * 3]);
                }
            }
            out
        };
        let (a, carry, _) = scan_box(Col::F(pick(0, 2)), Reduction::Sum, Dtype::F64, &[2, 2, 3], 1, None);
        let (b, ..) = scan_box(Col::F(pick(2, 5)), Reduction::Sum, Dtype::F64, &[2, 3, 3], 1, Some(carry));
        let (Col::F(whole), Col::F(a), Col::F(b)) = (whole, a, b) else { panic!("floats") };
        for o in 0..2 {
            assert_eq!(&whole[o * 15..o * 15 + 6], &a[o * 6..o * 6 + 6]);
            assert_eq!(&whole[o * 15 + 6..o * 15 + 15], &b[o * 9..o * 9 + 9]);
        }
        // Integers wrap as NumPy's do.
        let (Col::I(w), ..) = scan_box(Col::I(vec![i64::MAX, 1]), Reduction::Sum, Dtype::I64, &[2], 0, None) else {
            panic!("ints")
        };
        assert_eq!(w, [i64::MAX, i64::MIN]);
    }
}
