//! Reduction accumulators: per-element partial results of one chunk, folded
//! chunk after chunk in a fixed order, finished into the result's dtype.

use super::node::Reduction;
use super::types::{kind, Kind};
use super::values::{settle, Col};
use crate::dtype::Dtype;

/// Partial or accumulated results for a tile of output elements.
#[derive(Debug, Clone)]
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

/// The partial results of `col`, laid out as `n_out` runs of `run`
/// elements (one run per output element, its reduced elements in order);
/// `index[r]` is the flat index of the run's element `r` (for arg ops).
pub fn partial(op: Reduction, col: &Col, n_out: usize, run: usize, index: &[i64]) -> Acc {
    let runs = 0..n_out;
    let span = |o: usize| o * run..(o + 1) * run;
    match op {
        Reduction::Sum | Reduction::Mean | Reduction::Prod => {
            let prod = op == Reduction::Prod;
            match col {
                Col::F(v) => Acc::F(
                    runs.map(|o| if prod { v[span(o)].iter().product() } else { v[span(o)].iter().sum() }).collect(),
                ),
                _ if op == Reduction::Mean => Acc::F(runs.map(|o| span(o).map(|i| col.get_f64(i)).sum()).collect()),
                Col::U(v) => Acc::U(
                    runs.map(|o| {
                        v[span(o)].iter().fold(u64::from(prod), |a, &x| {
                            if prod {
                                a.wrapping_mul(x)
                            } else {
                                a.wrapping_add(x)
                            }
                        })
                    })
                    .collect(),
                ),
                Col::I(v) => Acc::I(
                    runs.map(|o| {
                        v[span(o)].iter().fold(i64::from(prod), |a, &x| {
                            if prod {
                                a.wrapping_mul(x)
                            } else {
                                a.wrapping_add(x)
                            }
                        })
                    })
                    .collect(),
                ),
                Col::B(v) => Acc::I(
                    runs.map(|o| {
                        if prod {
                            i64::from(v[span(o)].iter().all(|&x| x))
                        } else {
                            v[span(o)].iter().filter(|&&x| x).count() as i64
                        }
                    })
                    .collect(),
                ),
            }
        }
        Reduction::Min | Reduction::Max => {
            let min = op == Reduction::Min;
            match col {
                Col::F(v) => Acc::F(
                    runs.map(|o| {
                        v[span(o)].iter().copied().reduce(if min { nan_min } else { nan_max }).unwrap_or(f64::NAN)
                    })
                    .collect(),
                ),
                Col::I(v) => Acc::I(
                    runs.map(|o| {
                        if min { v[span(o)].iter().min() } else { v[span(o)].iter().max() }.copied().unwrap_or(0)
                    })
                    .collect(),
                ),
                Col::U(v) => Acc::U(
                    runs.map(|o| {
                        if min { v[span(o)].iter().min() } else { v[span(o)].iter().max() }.copied().unwrap_or(0)
                    })
                    .collect(),
                ),
                Col::B(v) => Acc::B(
                    runs.map(|o| if min { v[span(o)].iter().all(|&x| x) } else { v[span(o)].iter().any(|&x| x) })
                        .collect(),
                ),
            }
        }
        Reduction::Any | Reduction::All => {
            let truthy = |i: usize| match col {
                Col::B(v) => v[i],
                Col::F(v) => v[i] != 0.0,
                Col::I(v) => v[i] != 0,
                Col::U(v) => v[i] != 0,
            };
            Acc::B(runs.map(|o| if op == Reduction::Any { span(o).any(truthy) } else { span(o).all(truthy) }).collect())
        }
        Reduction::ArgMin | Reduction::ArgMax => {
            let min = op == Reduction::ArgMin;
            let (mut vals, mut idx) = (Vec::with_capacity(n_out), Vec::with_capacity(n_out));
            for o in runs {
                let (mut best, mut at) = (col.get_f64(o * run), index[0]);
                for r in 1..run {
                    let v = col.get_f64(o * run + r);
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
    pub fn fold(&mut self, op: Reduction, next: Acc) {
        use Reduction::*;
        match (self, next) {
            (Acc::F(a), Acc::F(b)) => a.iter_mut().zip(b).for_each(|(x, y)| {
                *x = match op {
                    Sum | Mean => *x + y,
                    Prod => *x * y,
                    Min => nan_min(*x, y),
                    _ => nan_max(*x, y),
                }
            }),
            (Acc::I(a), Acc::I(b)) => a.iter_mut().zip(b).for_each(|(x, y)| {
                *x = match op {
                    Sum => x.wrapping_add(y),
                    Prod => x.wrapping_mul(y),
                    Min => (*x).min(y),
                    _ => (*x).max(y),
                }
            }),
            (Acc::U(a), Acc::U(b)) => a.iter_mut().zip(b).for_each(|(x, y)| {
                *x = match op {
                    Sum => x.wrapping_add(y),
                    Prod => x.wrapping_mul(y),
                    Min => (*x).min(y),
                    _ => (*x).max(y),
                }
            }),
            (Acc::B(a), Acc::B(b)) => {
                a.iter_mut().zip(b).for_each(|(x, y)| *x = if matches!(op, Any | Max) { *x | y } else { *x & y })
            }
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
    pub fn finish(self, op: Reduction, dtype: Dtype, multiplier: u64, count: u64) -> Col {
        let col = match self {
            Acc::F(v) => Col::F(match op {
                Reduction::Sum if multiplier > 1 => v.into_iter().map(|x| x * multiplier as f64).collect(),
                Reduction::Prod if multiplier > 1 => v.into_iter().map(|x| x.powf(multiplier as f64)).collect(),
                Reduction::Mean => v.into_iter().map(|x| x / count as f64).collect(),
                _ => v,
            }),
            Acc::I(v) => Col::I(match op {
                Reduction::Sum => v.into_iter().map(|x| x.wrapping_mul(multiplier as i64)).collect(),
                Reduction::Prod => v.into_iter().map(|x| x.wrapping_pow(multiplier as u32)).collect(),
                _ => v,
            }),
            Acc::U(v) => Col::U(match op {
                Reduction::Sum => v.into_iter().map(|x| x.wrapping_mul(multiplier)).collect(),
                Reduction::Prod => v.into_iter().map(|x| x.wrapping_pow(multiplier as u32)).collect(),
                _ => v,
            }),
            Acc::B(v) => Col::B(v),
            Acc::Arg(_, i) => Col::I(i),
        };
        super::values::cast(settle(col, dtype_of_kind(dtype)), dtype)
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
