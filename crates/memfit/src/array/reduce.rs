//! Reduction accumulators: per-element partial results of one chunk, folded
//! chunk after chunk in a fixed order, finished into the result's dtype.

use super::node::Reduction;
use super::types::{kind, Kind};
use super::values::{pow_wrapping, settle, Col};
use crate::dtype::Dtype;
use crate::warning::FpException;

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
    /// Best value and its flat index over the reduced axes (floats, bools).
    Arg(Vec<f64>, Vec<i64>),
    /// Best signed integer and its flat index (compared exactly, also
    /// beyond 2^53).
    ArgI(Vec<i64>, Vec<i64>),
    /// Best unsigned integer and its flat index.
    ArgU(Vec<u64>, Vec<i64>),
    /// Count, mean and sum of squared deviations.
    M(Vec<Moments>),
}

/// The moments of some values: their count, their mean as the unevaluated
/// sum `mean + mean_lo` (about twice float64's precision) and the sum of
/// their squared deviations from it (`m2`).
///
/// A chunk's moments come from its values in memory by the corrected
/// two-pass algorithm; chunks merge by the pairwise update of Chan, Golub
/// and LeVeque ("Algorithms for computing the sample variance", 1983):
/// `m2 = m2_a + m2_b + δ² n_a n_b / n` with `δ` the difference of the two
/// means. Every term is non-negative, and `δ` is taken from the
/// double-length means (the high parts' difference exactly, by Knuth's
/// two-sum), so a merge adds a few units of rounding relative to `m2`
/// however far the data lie from the origin: the shortcut the one-pass
/// formula `Σx² − n·mean²` takes (cancellation when the mean is large
/// against the spread) is never taken: the error does not grow with the
/// distance from the origin. Within a chunk the sums run in order (as
/// memfit's `sum` does), so the relative error of `m2` is of the order of
/// the chunk's length times float64's epsilon in the worst case (about
/// 1e-13 observed; NumPy's pairwise sums do better on integer-valued data,
/// worse far from the origin), while the values are read once.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Moments {
    /// How many values.
    pub count: f64,
    /// Their mean (high part).
    pub mean: f64,
    /// Their mean (low part).
    pub mean_lo: f64,
    /// The sum of their squared deviations from the mean.
    pub m2: f64,
}

/// `a + b` as the rounded sum and its exact error (Knuth's two-sum).
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

impl Moments {
    const NONE: Moments = Moments { count: 0.0, mean: 0.0, mean_lo: 0.0, m2: 0.0 };

    /// Folds in `b`, the moments of the values after these.
    fn merge(&mut self, b: &Moments) {
        if b.count == 0.0 {
            return;
        }
        if self.count == 0.0 {
            *self = *b;
            return;
        }
        let n = self.count + b.count;
        let (hi, lo) = two_sum(b.mean, -self.mean);
        let delta = hi + (lo + (b.mean_lo - self.mean_lo));
        if !delta.is_finite() {
            // A mean that overflowed (or infinite values): NumPy's two
            // passes give an infinite mean and inf for the squares of
            // x − mean; NaN where the data or opposite infinities make it.
            let mean = self.mean + b.mean;
            let m2 = if mean.is_nan() || self.m2.is_nan() || b.m2.is_nan() { f64::NAN } else { f64::INFINITY };
            *self = Moments { count: n, mean, mean_lo: 0.0, m2 };
            return;
        }
        let m2 = self.m2 + b.m2 + delta * delta * (self.count * b.count / n);
        let (mean, err) = two_sum(self.mean, delta * (b.count / n));
        *self = Moments { count: n, mean, mean_lo: err + self.mean_lo, m2 };
    }
}

/// Each output's [`Moments`] of one chunk: the mean, then the deviations'
/// sum (which corrects the mean) and their squares' sum.
fn moments(v: &[f64], o_at: &[i64], r_at: &[i64]) -> Vec<Moments> {
    let n = r_at.len() as f64;
    let sums = fold_runs(v, o_at, r_at, same, |a, x| a + x);
    let means: Vec<f64> = sums.iter().map(|s| s / n).collect();
    let at = |o: i64, r: i64| v[(o + r) as usize];
    let mut dev: Vec<(f64, f64)> = vec![(0.0, 0.0); o_at.len()];
    let r_inner = r_at.len() > 1 && r_at[1] - r_at[0] == 1;
    if r_inner || o_at.len() == 1 {
        for ((d, &o), m) in dev.iter_mut().zip(o_at).zip(&means) {
            *d = r_at.iter().fold((0.0, 0.0), |(s1, s2), &r| {
                let e = at(o, r) - m;
                (s1 + e, s2 + e * e)
            });
        }
    } else {
        for &r in r_at {
            for ((d, &o), m) in dev.iter_mut().zip(o_at).zip(&means) {
                let e = at(o, r) - m;
                *d = (d.0 + e, d.1 + e * e);
            }
        }
    }
    means
        .iter()
        .zip(dev)
        .map(|(&mean, (s1, s2))| {
            // Corrected two-pass: never below zero (a NaN stays); squares
            // that overflow give inf, as NumPy's two passes do.
            let m2 = if s2.is_infinite() { s2 } else { s2 - s1 * s1 / n };
            Moments { count: n, mean, mean_lo: s1 / n, m2: if m2 < 0.0 { 0.0 } else { m2 } }
        })
        .collect()
}

/// Bytes per output element of an [`Acc`] (but [`Acc::M`]'s: see
/// [`acc_bytes`]).
pub const ACC_BYTES: u64 = 16;

/// Bytes per output element of the statistics of `op`.
pub fn acc_bytes(op: Reduction) -> u64 {
    match op {
        Reduction::SquaredDeviations => std::mem::size_of::<Moments>() as u64,
        _ => ACC_BYTES,
    }
}

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
    } else if o_at.windows(2).all(|w| w[1] - w[0] == 1) {
        // Outputs adjacent in memory: each reduced element's row of
        // them is one slice (a loop the compiler vectorises).
        let (o0, n) = (o_at[0], o_at.len());
        let row = |r: i64| &v[(o0 + r) as usize..][..n];
        let mut acc: Vec<A> = row(r_at[0]).iter().map(|&x| init(x)).collect();
        for &r in &r_at[1..] {
            for (a, &x) in acc.iter_mut().zip(row(r)) {
                *a = step(*a, x);
            }
        }
        acc
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

/// Whether integer `v` replaces `best` for `argmin` (`min = true`) or
/// `argmax`: strictly better (compared exactly).
fn exact<T: PartialOrd>(min: bool) -> impl Fn(T, T) -> bool {
    move |v, best| if min { v < best } else { v > best }
}

/// Folds the next chunk's best values and indices (`bv`, `bi`) into
/// `av`, `ai`: the earlier one wins unless the later is `better`.
fn fold_best<T: Copy>(av: &mut [T], ai: &mut [i64], bv: &[T], bi: &[i64], better: impl Fn(T, T) -> bool) {
    for k in 0..av.len() {
        if better(bv[k], av[k]) {
            (av[k], ai[k]) = (bv[k], bi[k]);
        }
    }
}

/// Each output's best value (`better(v, best)`) over its reduced elements
/// and its flat index (`index[r]`), the first of equal ones.
fn arg_runs<T: Copy>(
    o_at: &[i64],
    r_at: &[i64],
    index: &[i64],
    value: impl Fn(usize) -> T,
    better: impl Fn(T, T) -> bool,
) -> (Vec<T>, Vec<i64>) {
    let (mut vals, mut idx) = (Vec::with_capacity(o_at.len()), Vec::with_capacity(o_at.len()));
    for &o in o_at {
        let (mut best, mut at) = (value((o + r_at[0]) as usize), index[0]);
        for (r, &ra) in r_at.iter().enumerate().skip(1) {
            let v = value((o + ra) as usize);
            if better(v, best) {
                (best, at) = (v, index[r]);
            }
        }
        vals.push(best);
        idx.push(at);
    }
    (vals, idx)
}

/// NumPy's pairwise summation (`pairwise_sum` in its loops): fewer than 8
/// values in order; up to 128 in 8 interleaved partial sums combined as a
/// tree; more split in halves (a multiple of 8 first). The error grows as
/// `O(log n)` rather than `O(n)`, and a contiguous run sums to NumPy's bits.
fn pairwise_sum(a: &[f64]) -> f64 {
    const BLOCK: usize = 128;
    let n = a.len();
    if n < 8 {
        let mut s = 0.0;
        for &x in a {
            s += x;
        }
        s
    } else if n <= BLOCK {
        let mut r = [0.0f64; 8];
        r.copy_from_slice(&a[..8]);
        let mut i = 8;
        while i < n - n % 8 {
            for (k, rk) in r.iter_mut().enumerate() {
                *rk += a[i + k];
            }
            i += 8;
        }
        let mut s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for &x in &a[i..] {
            s += x;
        }
        s
    } else {
        let mut half = n / 2;
        half -= half % 8;
        pairwise_sum(&a[..half]) + pairwise_sum(&a[half..])
    }
}

fn same<T>(x: T) -> T {
    x
}

/// The partial results of one chunk: `col` holds a box of the operand,
/// `o_at` / `r_at` the positions of its kept and reduced coordinates (see
/// [`fold_runs`]); `index[r]` is the flat index over all reduced axes of
/// the chunk's element `r` (for `argmin` / `argmax`). Float sums and means
/// follow NumPy's reduction loop: with `run` > 0 (NumPy's inner loop runs
/// over the operand's trailing reduced axes, `run` elements of them in this
/// box, adjacent in `r_at`), each run is summed pairwise and the runs are
/// added in `r_at`'s order; with `run` = 0 (the operand's last axis is
/// kept), a running sum in `r_at`'s order. `run` is decided by the
/// operand, not by the box.
fn partial(op: Reduction, col: &Col, o_at: &[i64], r_at: &[i64], index: &[i64], run: usize) -> Acc {
    use Reduction::*;
    match op {
        Sum | Prod | Mean => {
            let prod = op == Prod;
            let runs = run > 0
                && r_at.len().is_multiple_of(run)
                && r_at.chunks(run).all(|g| g.windows(2).all(|w| w[1] - w[0] == 1));
            match col {
                // NumPy's mean of integers sums them as float64 (each run
                // pairwise), as `sum(dtype=float64)` does.
                Col::I(_) | Col::U(_) | Col::B(_) if op == Mean && runs => {
                    partial(op, &super::values::cast(col.clone(), Dtype::F64), o_at, r_at, index, run)
                }
                Col::F(v) if !prod && runs => {
                    // From NumPy's identity 0.0 (so -0.0 values sum to 0.0,
                    // as NumPy's do), each run's pairwise sum added in turn.
                    Acc::F(
                        o_at.iter()
                            .map(|&o| {
                                r_at.chunks(run).fold(0.0, |s, g| s + pairwise_sum(&v[(o + g[0]) as usize..][..run]))
                            })
                            .collect(),
                    )
                }
                // Sums from NumPy's identity 0.0 here too (a column of -0.0 sums to 0.0).
                Col::F(v) => Acc::F(fold_runs(
                    v,
                    o_at,
                    r_at,
                    |x| if prod { x } else { 0.0 + x },
                    |a, x| if prod { a * x } else { a + x },
                )),
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
            match col {
                Col::I(v) => {
                    let (vals, idx) = arg_runs(o_at, r_at, index, |i| v[i], exact(min));
                    Acc::ArgI(vals, idx)
                }
                Col::U(v) => {
                    let (vals, idx) = arg_runs(o_at, r_at, index, |i| v[i], exact(min));
                    Acc::ArgU(vals, idx)
                }
                _ => {
                    let (vals, idx) = arg_runs(o_at, r_at, index, |i| col.get_f64(i), |a, b| better(a, b, min));
                    Acc::Arg(vals, idx)
                }
            }
        }
        SquaredDeviations => match col {
            Col::F(v) => Acc::M(moments(v, o_at, r_at)),
            _ => unreachable!("squared deviations of float64 values"),
        },
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
            (Acc::M(a), Acc::M(b)) => a.iter_mut().zip(b).for_each(|(x, y)| x.merge(y)),
            (Acc::ArgI(av, ai), Acc::ArgI(bv, bi)) => fold_best(av, ai, bv, bi, exact(op == ArgMin)),
            (Acc::ArgU(av, ai), Acc::ArgU(bv, bi)) => fold_best(av, ai, bv, bi, exact(op == ArgMin)),
            (Acc::Arg(av, ai), Acc::Arg(bv, bi)) => fold_best(av, ai, bv, bi, |v, b| better(v, b, op == ArgMin)),
            _ => panic!("accumulators of different kinds"),
        }
    }

    /// The result of an empty reduction over `n` output elements (`sum` 0,
    /// `prod` 1, `mean` NaN, `any` false, `all` true).
    pub fn empty(op: Reduction, input: Dtype, n: usize) -> Acc {
        match op {
            Reduction::Mean => Acc::F(vec![0.0; n]),
            Reduction::SquaredDeviations => Acc::M(vec![Moments::NONE; n]),
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
                Reduction::Prod if multiplier > 1 => v.into_iter().map(|x| pow_count(x, multiplier)).collect(),
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
            Acc::Arg(_, i) | Acc::ArgI(_, i) | Acc::ArgU(_, i) => Col::I(i),
            // The values repeated `multiplier` times: as many squared deviations.
            Acc::M(v) => Col::F(v.into_iter().map(|m| m.m2 * multiplier as f64).collect()),
        };
        super::values::cast(settle(col, dtype_of_kind(dtype)), dtype)
    }
}

/// `x` multiplied by itself `count` times, as the product of `x` repeated
/// `count` times is: the magnitude by `powf`, the sign from the parity of
/// `count` (exact for any count, also beyond 2^53 where `count as f64`
/// loses it).
fn pow_count(x: f64, count: u128) -> f64 {
    let magnitude = x.abs().powf(count as f64);
    if x.is_sign_negative() && count % 2 == 1 {
        -magnitude
    } else {
        magnitude
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
    /// Per output element of the tile: which non-finite values it reduced
    /// ([`SEEN_INF`], [`SEEN_NAN`] bits; empty while none were), so that a
    /// fresh inf or NaN is reported whatever the other outputs read.
    pub non_finite_in: Vec<u8>,
}

/// A [`Partials::non_finite_in`] bit: an infinite value was reduced.
pub const SEEN_INF: u8 = 1;
/// A [`Partials::non_finite_in`] bit: a NaN was reduced.
pub const SEEN_NAN: u8 = 2;

/// The [`Partials::non_finite_in`] bits of one value.
fn seen(x: f64) -> u8 {
    if x.is_nan() {
        SEEN_NAN
    } else if x.is_infinite() {
        SEEN_INF
    } else {
        0
    }
}

impl Partials {
    /// The statistics of one chunk: `col` holds a box of the operand,
    /// `finite` says that none of the box's values is infinite or NaN (so
    /// none of the chunk's is: the box may hold several chunks); see
    /// [`partial`] for `o_at`, `r_at`, `index` and `run`.
    pub fn of_chunk(
        op: Reduction,
        col: &Col,
        finite: bool,
        o_at: &[i64],
        r_at: &[i64],
        index: &[i64],
        run: usize,
    ) -> Partials {
        let non_finite_in = match col {
            Col::F(v) if !finite => fold_runs(v, o_at, r_at, seen, |a, x| a | seen(x)),
            _ => Vec::new(),
        };
        Partials { op, acc: Some(partial(op, col, o_at, r_at, index, run)), non_finite_in }
    }

    /// The finished results in `dtype` (see [`Acc::finish`]) and how many
    /// of them raised each floating-point exception (indexed by
    /// [`FpException::index`]): infinite although every value they reduced
    /// was finite (overflow), NaN although none was NaN (invalid: `inf -
    /// inf`, `0 · inf`, the variance of an infinite value), as NumPy's
    /// "encountered in reduce".
    ///
    /// # Panics
    /// Before any chunk.
    pub fn finish(self, dtype: Dtype, multiplier: u128, count: u64) -> (Col, [u64; 3]) {
        let col = self.acc.expect("a chunk").finish(self.op, dtype, multiplier, count);
        let mut fresh = [0u64; 3];
        if let Col::F(v) = &col {
            let seen = |i: usize| self.non_finite_in.get(i).copied().unwrap_or(0);
            for (i, x) in v.iter().enumerate().filter(|(_, x)| !x.is_finite()) {
                if x.is_nan() && seen(i) & SEEN_NAN == 0 {
                    fresh[FpException::Invalid.index()] += 1;
                } else if x.is_infinite() && seen(i) == 0 {
                    fresh[FpException::Overflow.index()] += 1;
                }
            }
        }
        (col, fresh)
    }
}

impl crate::exec::Merge for Partials {
    fn merge(&mut self, next: &Self) {
        match (&mut self.acc, &next.acc) {
            (Some(a), Some(b)) => a.fold(self.op, b),
            (None, b) => self.acc = b.clone(),
            (_, None) => {}
        }
        if self.non_finite_in.is_empty() {
            self.non_finite_in.clone_from(&next.non_finite_in);
        } else {
            self.non_finite_in.iter_mut().zip(&next.non_finite_in).for_each(|(a, b)| *a |= *b);
        }
    }
    fn clear(&mut self) {
        self.acc = None;
        self.non_finite_in.clear();
    }
}

/// The statistics of several reductions of one stage (one [`Partials`]
/// per output, in the stage's order), folded together.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Stats(pub Vec<Partials>);

impl crate::exec::Merge for Stats {
    fn merge(&mut self, next: &Self) {
        if self.0.is_empty() {
            self.0.clone_from(&next.0);
        } else {
            self.0.iter_mut().zip(&next.0).for_each(|(a, b)| a.merge(b));
        }
    }
    fn clear(&mut self) {
        self.0.clear();
    }
}

/// The statistics of consecutive accumulation chunks of one output tile,
/// one per chunk in chunk order, as a unit that reads several chunks in
/// one box returns them: merging folds `next`'s chunks one by one into the
/// fold of these, so the result has the bits of folding chunk after chunk
/// however the chunks were grouped into units.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct InOrder(pub Vec<Stats>);

impl InOrder {
    /// Folds the chunks held into one, in order.
    pub fn collapse(&mut self) {
        if self.0.len() > 1 {
            let rest = self.0.split_off(1);
            rest.iter().for_each(|p| crate::exec::Merge::merge(&mut self.0[0], p));
        }
    }

    /// The statistics of all the chunks held, folded in order.
    pub fn folded(mut self) -> Stats {
        self.collapse();
        self.0.pop().unwrap_or_default()
    }
}

impl crate::exec::Merge for InOrder {
    fn merge(&mut self, next: &Self) {
        self.collapse();
        if self.0.is_empty() {
            self.0.push(Stats::default());
        }
        next.0.iter().for_each(|p| self.0[0].merge(p));
    }
    fn clear(&mut self) {
        self.0.clear();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::Merge;

    #[test]
    fn products_of_repeated_values_keep_their_sign() {
        // numpy: prod(tile(x, k)) for k = 3 and 4
        for (x, odd, even) in [
            (-1.0, -1.0, 1.0),
            (-2.0, -8.0, 16.0),
            (f64::NEG_INFINITY, f64::NEG_INFINITY, f64::INFINITY),
            (0.5, 0.125, 0.0625),
        ] {
            assert_eq!((pow_count(x, 3), pow_count(x, 4)), (odd, even), "{x}");
        }
        assert!(pow_count(-0.0, 3).is_sign_negative() && pow_count(-0.0, 4).is_sign_positive());
        assert!(pow_count(f64::NAN, 3).is_nan());
        // An odd count beyond 2^53 (even as f64).
        assert_eq!(pow_count(-1.0, (1u128 << 53) + 1), -1.0);
        let acc = Acc::F(vec![-1.0, -3.0]);
        assert_eq!(acc.finish(Reduction::Prod, Dtype::F64, 3, 0), Col::F(vec![-1.0, -27.0]));
    }

    #[test]
    fn contiguous_sums_are_numpys_pairwise_sums() {
        // numpy: np.sum(0.1 * np.arange(n) + 1e-3) for these n (its bits).
        let sum = |n: usize| pairwise_sum(&(0..n).map(|i| 0.1 * i as f64 + 1e-3).collect::<Vec<_>>());
        assert_eq!(sum(5), 1.005_000_000_000_000_1);
        assert!((sum(1000) - 49951.0).abs() < 1e-9);
        // Far better than a running sum on a constant column.
        let c = vec![123_456_789.123; 16_380];
        assert!((pairwise_sum(&c) / 16_380.0 - 123_456_789.123).abs() < 1e-6);
    }

    #[test]
    fn overflow_is_counted_per_output() {
        // Outputs: [1e308 + 1e308, nan + 1, 1 + 2] (o_at: rows, r_at: columns)
        let col = Col::F(vec![1e308, 1e308, f64::NAN, 1.0, 1.0, 2.0]);
        let (o_at, r_at) = ([0, 2, 4], [0, 1]);
        let p = Partials::of_chunk(Reduction::Sum, &col, false, &o_at, &r_at, &[], 2);
        assert_eq!(p.non_finite_in, [0, SEEN_NAN, 0]);
        let (out, fresh) = p.clone().finish(Dtype::F64, 1, 2);
        assert_eq!(fresh, [1, 0, 0]);
        let Col::F(v) = out else { panic!("floats") };
        assert!(v[0].is_infinite() && v[1].is_nan() && v[2] == 3.0);
        // Folded with a finite chunk, the NaN stays seen; on its own a
        // finite chunk sees none.
        let finite = Partials::of_chunk(Reduction::Sum, &Col::F(vec![1.0; 6]), true, &o_at, &r_at, &[], 2);
        assert!(finite.non_finite_in.is_empty());
        let mut merged = finite.clone();
        merged.merge(&p);
        assert_eq!(merged.non_finite_in, [0, SEEN_NAN, 0]);
        assert_eq!(merged.finish(Dtype::F64, 1, 4).1, [1, 0, 0]);
        let mut merged = p;
        merged.merge(&finite);
        assert_eq!(merged.non_finite_in, [0, SEEN_NAN, 0]);
        // float32 results that overflow only when rounded are fresh too.
        let p = Partials::of_chunk(Reduction::Sum, &Col::F(vec![3e38, 3e38]), false, &[0], &[0, 1], &[], 2);
        assert_eq!(p.finish(Dtype::F32, 1, 2).1, [1, 0, 0]);
    }

    #[test]
    fn nan_from_infinities_is_invalid() {
        // Outputs: [inf + -inf, 0 * inf (prod), nan + inf, inf + 1]
        let col = Col::F(vec![f64::INFINITY, f64::NEG_INFINITY, f64::NAN, f64::INFINITY, f64::INFINITY, 1.0]);
        let p = Partials::of_chunk(Reduction::Sum, &col, false, &[0, 2, 4], &[0, 1], &[], 2);
        assert_eq!(p.non_finite_in, [SEEN_INF, SEEN_NAN | SEEN_INF, SEEN_INF]);
        assert_eq!(p.finish(Dtype::F64, 1, 2).1, [0, 0, 1]);
        let p = Partials::of_chunk(Reduction::Prod, &Col::F(vec![0.0, f64::INFINITY]), false, &[0], &[0, 1], &[], 2);
        assert_eq!(p.finish(Dtype::F64, 1, 2).1, [0, 0, 1]);
    }
}
