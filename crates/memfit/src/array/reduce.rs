//! Reduction accumulators: per-element partial results of one chunk, folded
//! chunk after chunk in a fixed order, finished into the result's dtype.

use super::node::Reduction;
use super::types::{kind, Kind};
use super::values::{pow_wrapping, settle, Col};
use crate::dtype::Dtype;

/// Partial or accumulated results for a tile of output elements.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum Acc {
    /// Float sums, products, means (in `f64`), minima, maxima.
    F(Vec<f64>),
    /// Signed integer sums, products, minima, maxima (wrapping).
    I(Vec<i64>),
    /// Unsigned integer results.
    U(Vec<u64>),
    /// `any` / `all`, boolean minima and maxima.
    B(Vec<bool>),
    /// Best value and its flat index over the reduced axes.
    Arg(Vec<f64>, Vec<i64>),
}

/// Bytes per output element of an [`Acc`].
pub const ACC_BYTES: u64 = 16;

fn nan_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

/// Whether `v` replaces `best` for `argmin` (`min = true`) or `argmax`:
/// strictly better, or the first NaN.
fn better(v: f64, best: f64, min: bool) -> bool {
    if best.is_nan() {
        false
    } else if v.is_nan() {
        true
    } else if min {
        v < best
    } else {
        v > best
    }
}

/// Folds each output element's values in order: `o_at[o] + r_at[r]` is the
/// position in `v` of output `o`'s reduced element `r`. The loop order
/// follows the memory layout, the order of each fold does not.
fn fold_runs<T: Copy, A: Copy>(
    v: &[T],
    o_at: &[i64],
    r_at: &[i64],
    init: impl Fn(T) -> A,
    step: impl Fn(A, T) -> A,
) -> Vec<A> {
    let at = |o: i64, r: i64| v[(o + r) as usize];
    let r_inner = r_at.len() > 1 && r_at[1] - r_at[0] == 1;
    if r_inner || o_at.len() == 1 {
        o_at.iter().map(|&o| r_at[1..].iter().fold(init(at(o, r_at[0])), |a, &r| step(a, at(o, r)))).collect()
    } else {
        let mut acc: Vec<A> = o_at.iter().map(|&o| init(at(o, r_at[0]))).collect();
        for &r in &r_at[1..] {
            for (a, &o) in acc.iter_mut().zip(o_at) {
                *a = step(*a, at(o, r));
            }
        }
        acc
    }
}

fn same<T>(x: T) -> T {
    x
}

/// The partial results of one chunk: `col` holds a box of the operand,
/// `o_at` / `r_at` the positions of its kept and reduced coordinates (see
/// [`fold_runs`]); `index[r]` is the flat index over all reduced axes of
/// the chunk's element `r` (for `argmin` / `argmax`).
pub fn partial(op: Reduction, col: &Col, o_at: &[i64], r_at: &[i64], index: &[i64]) -> Acc {
    use Reduction::*;
    match op {
        Sum | Prod | Mean => {
            let prod = op == Prod;
            match col {
                Col::F(v) => Acc::F(fold_runs(v, o_at, r_at, same, |a, x| if prod { a * x } else { a + x })),
                Col::I(v) if op == Mean => Acc::F(fold_runs(v, o_at, r_at, |x| x as f64, |a, x| a + x as f64)),
                Col::U(v) if op == Mean => Acc::F(fold_runs(v, o_at, r_at, |x| x as f64, |a, x| a + x as f64)),
                Col::B(v) if op == Mean => {
                    Acc::F(fold_runs(v, o_at, r_at, |x| f64::from(u8::from(x)), |a, x| a + f64::from(u8::from(x))))
                }
                Col::I(v) => {
                    Acc::I(fold_runs(
                        v,
                        o_at,
                        r_at,
                        same,
                        |a, x| if prod { a.wrapping_mul(x) } else { a.wrapping_add(x) },
                    ))
                }
                Col::U(v) => {
                    Acc::U(fold_runs(
                        v,
                        o_at,
                        r_at,
                        same,
                        |a, x| if prod { a.wrapping_mul(x) } else { a.wrapping_add(x) },
                    ))
                }
                Col::B(v) => {
                    Acc::I(fold_runs(
                        v,
                        o_at,
                        r_at,
                        i64::from,
                        |a, x| {
                            if prod {
                                a * i64::from(x)
                            } else {
                                a + i64::from(x)
                            }
                        },
                    ))
                }
            }
        }
        Min | Max => {
            let min = op == Min;
            match col {
                Col::F(v) => Acc::F(fold_runs(v, o_at, r_at, same, if min { nan_min } else { nan_max })),
                Col::I(v) => Acc::I(fold_runs(v, o_at, r_at, same, if min { i64::min } else { i64::max })),
                Col::U(v) => Acc::U(fold_runs(v, o_at, r_at, same, if min { u64::min } else { u64::max })),
                Col::B(v) => Acc::B(fold_runs(v, o_at, r_at, same, |a, x| if min { a & x } else { a | x })),
            }
        }
        Any | All => {
            let any = op == Any;
            let f = |a: bool, x: bool| if any { a | x } else { a & x };
            Acc::B(match col {
                Col::B(v) => fold_runs(v, o_at, r_at, same, f),
                Col::F(v) => fold_runs(v, o_at, r_at, |x| x != 0.0, |a, x| f(a, x != 0.0)),
                Col::I(v) => fold_runs(v, o_at, r_at, |x| x != 0, |a, x| f(a, x != 0)),
                Col::U(v) => fold_runs(v, o_at, r_at, |x| x != 0, |a, x| f(a, x != 0)),
            })
        }
        ArgMin | ArgMax => {
            let min = op == ArgMin;
            let (mut vals, mut idx) = (Vec::with_capacity(o_at.len()), Vec::with_capacity(o_at.len()));
            for &o in o_at {
                let (mut best, mut at) = (col.get_f64((o + r_at[0]) as usize), index[0]);
                for (r, &ra) in r_at.iter().enumerate().skip(1) {
                    let v = col.get_f64((o + ra) as usize);
                    if better(v, best, min) {
                        (best, at) = (v, index[r]);
                    }
                }
                vals.push(best);
                idx.push(at);
            }
            Acc::Arg(vals, idx)
        }
    }
}

impl Acc {
    /// Folds `next` (the following chunk's partials) into `self`.
    ///
    /// # Panics
    /// If the two are of different kinds.
    pub fn fold(&mut self, op: Reduction, next: &Acc) {
        use Reduction::*;
        match (self, next) {
            (Acc::F(a), Acc::F(b)) => a.iter_mut().zip(b.iter().copied()).for_each(|(x, y)| {
                *x = match op {
                    Sum | Mean => *x + y,
                    Prod => *x * y,
                    Min => nan_min(*x, y),
                    _ => nan_max(*x, y),
                }
            }),
            (Acc::I(a), Acc::I(b)) => a.iter_mut().zip(b.iter().copied()).for_each(|(x, y)| {
                *x = match op {
                    Sum => x.wrapping_add(y),
                    Prod => x.wrapping_mul(y),
                    Min => (*x).min(y),
                    _ => (*x).max(y),
                }
            }),
            (Acc::U(a), Acc::U(b)) => a.iter_mut().zip(b.iter().copied()).for_each(|(x, y)| {
                *x = match op {
                    Sum => x.wrapping_add(y),
                    Prod => x.wrapping_mul(y),
                    Min => (*x).min(y),
                    _ => (*x).max(y),
                }
            }),
            (Acc::B(a), Acc::B(b)) => a
                .iter_mut()
                .zip(b.iter().copied())
                .for_each(|(x, y)| *x = if matches!(op, Any | Max) { *x | y } else { *x & y }),
            (Acc::Arg(av, ai), Acc::Arg(bv, bi)) => {
                for k in 0..av.len() {
                    if better(bv[k], av[k], op == ArgMin) {
                        (av[k], ai[k]) = (bv[k], bi[k]);
                    }
                }
            }
            _ => panic!("accumulators of different kinds"),
        }
    }

    /// The result of an empty reduction over `n` output elements (`sum` 0,
    /// `prod` 1, `mean` NaN, `any` false, `all` true).
    pub fn empty(op: Reduction, input: Dtype, n: usize) -> Acc {
        match op {
            Reduction::Mean => Acc::F(vec![0.0; n]),
            Reduction::Any => Acc::B(vec![false; n]),
            Reduction::All => Acc::B(vec![true; n]),
            _ => {
                let one = op == Reduction::Prod;
                match kind(input) {
                    Kind::Float => Acc::F(vec![f64::from(u8::from(one)); n]),
                    _ if input.is_unsigned_int() => Acc::U(vec![u64::from(one); n]),
                    _ => Acc::I(vec![i64::from(one); n]),
                }
            }
        }
    }

    /// The finished results in `dtype`: sums multiplied by `multiplier`,
    /// products raised to it, means divided by `count`.
    pub fn finish(self, op: Reduction, dtype: Dtype, multiplier: u128, count: u64) -> Col {
        let wrapped = multiplier as u64; // integers wrap modulo 2^64, as NumPy's sums do
        let col = match self {
            Acc::F(v) => Col::F(match op {
                Reduction::Sum if multiplier > 1 => v.into_iter().map(|x| x * multiplier as f64).collect(),
                Reduction::Prod if multiplier > 1 => v.into_iter().map(|x| x.powf(multiplier as f64)).collect(),
                Reduction::Mean => v.into_iter().map(|x| x / count as f64).collect(),
                _ => v,
            }),
            Acc::I(v) => Col::I(match op {
                Reduction::Sum => v.into_iter().map(|x| x.wrapping_mul(wrapped as i64)).collect(),
                Reduction::Prod => v.into_iter().map(|x| pow_wrapping(x as u64, multiplier) as i64).collect(),
                _ => v,
            }),
            Acc::U(v) => Col::U(match op {
                Reduction::Sum => v.into_iter().map(|x| x.wrapping_mul(wrapped)).collect(),
                Reduction::Prod => v.into_iter().map(|x| pow_wrapping(x, multiplier)).collect(),
                _ => v,
            }),
            Acc::B(v) => Col::B(v),
            Acc::Arg(_, i) => Col::I(i),
        };
        super::values::cast(settle(col, dtype_of_kind(dtype)), dtype)
    }
}

/// A reduction's statistics of some chunks of one output tile, as the
/// runner folds them ([`crate::exec::run_grid`]): `None` before any chunk.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Partials {
    /// The reduction.
    pub op: Reduction,
    /// The accumulated results, once a chunk is in.
    pub acc: Option<Acc>,
}

impl crate::exec::Merge for Partials {
    fn merge(&mut self, next: &Self) {
        match (&mut self.acc, &next.acc) {
            (Some(a), Some(b)) => a.fold(self.op, b),
            (None, b) => self.acc = b.clone(),
            (_, None) => {}
        }
    }
    fn clear(&mut self) {
        self.acc = None;
    }
}

/// A contraction's sums of some chunks of one output tile (empty before
/// any chunk), as the runner folds them.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Sums(pub Vec<f64>);

impl crate::exec::Merge for Sums {
    fn merge(&mut self, next: &Self) {
        if self.0.is_empty() {
            self.0.clone_from(&next.0);
        } else {
            self.0.iter_mut().zip(&next.0).for_each(|(a, b)| *a += b);
        }
    }
    fn clear(&mut self) {
        self.0.clear();
    }
}

/// A dtype of the accumulator's kind (so that `settle` leaves it alone).
fn dtype_of_kind(d: Dtype) -> Dtype {
    match kind(d) {
        Kind::Float => Dtype::F64,
        Kind::Bool => Dtype::Bool,
        _ if d.is_unsigned_int() => Dtype::U64,
        _ => Dtype::I64,
    }
}
