//! The validation pass shared by the fits: non-finite values, sample
//! weights, column means and variances, column ranges, and the
//! initialisation sample, in one read of the data.
//!
//! Column moments: Welford's update row by row within an accumulation
//! chunk, and Chan, Golub & LeVeque's pairwise update to fold chunks
//! ("Updating formulae and a pairwise algorithm for computing sample
//! variances", 1979): no `E[x²] − E[x]²` cancellation, and the same bits
//! for any split of the rows into chunk-aligned ranges.

use multiversion::multiversion;
use rayon::prelude::*;

use super::sample::{InitSample, KeyedSample};
use super::{decode, encode, run_pass, run_split, task_result, Block, Cancel, Leaf, Merge, Observer, Pass, RowSplit};
use crate::dtype::Real;
use crate::error::{Error, Remedy, Result};
use crate::io::{BlockReader, Dtype, Source};
use crate::plan::{check_fits, pick_block_rows, Ledger, Plan, SampleLayout, TILE_ROWS};

/// What the validation pass learns.
#[derive(Debug)]
pub struct Scan {
    /// An origin the rows can be read relative to without rounding any
    /// value, `(n_features,)`: per column its mean when every value lies
    /// within a factor of 2 of it (then `x − mean` is exact, by Sterbenz's
    /// lemma: data far from the origin, such as `1e8 + noise`, keep every
    /// bit of their spread), else 0. A column whose values span the origin
    /// or orders of magnitude gains nothing from a shift, and would lose
    /// the low bits of its values far smaller than the mean (a tight
    /// cluster at 0 beside one at 1e13).
    pub shift: Vec<f64>,
    /// Mean of the column variances (population variances, over rows).
    pub mean_variance: f64,
    /// The initialisation sample, in row order.
    pub sample: InitSample,
    /// Sum of the sample weights (`n_samples` without weights).
    pub weight_sum: f64,
}

/// Per-chunk statistics of the validation pass.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ScanStats {
    rows: f64,
    mean: Vec<f64>,
    m2: Vec<f64>,
    lo: Vec<f64>,
    hi: Vec<f64>,
    /// First non-finite value (row, column) and how many there are.
    bad: Option<(usize, usize)>,
    bad_count: u64,
    weight_sum: f64,
    /// The largest weight (0 without weights).
    #[serde(default)]
    weight_max: f64,
    /// Sparse rows: per column, how many values are stored; `mean`, `m2`,
    /// `lo` and `hi` then describe the stored values only, and the zeros
    /// join them once the pass is done ([`ScanStats::with_zeros`]). Empty
    /// for dense rows.
    #[serde(default)]
    stored: Vec<f64>,
}

impl ScanStats {
    /// Folds each column's zeros (the rows that store no value in it) into
    /// the moments and ranges of its stored values, by Chan et al.'s
    /// pairwise update with a group of zeros (mean 0, no spread).
    fn with_zeros(mut self) -> Self {
        let rows = self.rows;
        for (j, &m) in std::mem::take(&mut self.stored).iter().enumerate() {
            let zeros = rows - m;
            if zeros > 0.0 {
                let delta = -self.mean[j];
                self.m2[j] += delta * delta * m * (zeros / rows);
                self.mean[j] += delta * (zeros / rows);
                self.lo[j] = self.lo[j].min(0.0);
                self.hi[j] = self.hi[j].max(0.0);
            }
        }
        self
    }

    /// Bytes of the statistics of `d` columns.
    pub fn bytes(d: usize) -> u64 {
        (4 * d * 8 + size_of::<ScanStats>()) as u64
    }
}

impl Merge for ScanStats {
    fn merge(&mut self, next: &Self) {
        if !self.stored.is_empty() {
            // Per column, the stored values' groups.
            for j in 0..self.mean.len() {
                let (a, b) = (self.stored[j], next.stored[j]);
                if b > 0.0 {
                    let n = a + b;
                    let fb = b / n;
                    let delta = next.mean[j] - self.mean[j];
                    self.mean[j] += delta * fb;
                    self.m2[j] += next.m2[j] + delta * delta * a * fb;
                    self.stored[j] = n;
                }
            }
            self.rows += next.rows;
        } else if next.rows > 0.0 {
            let n = self.rows + next.rows;
            let fb = next.rows / n;
            for j in 0..self.mean.len() {
                let delta = next.mean[j] - self.mean[j];
                self.mean[j] += delta * fb;
                self.m2[j] += next.m2[j] + delta * delta * self.rows * fb;
            }
            self.rows = n;
        }
        for (a, b) in self.lo.iter_mut().zip(&next.lo) {
            *a = a.min(*b);
        }
        for (a, b) in self.hi.iter_mut().zip(&next.hi) {
            *a = a.max(*b);
        }
        self.bad = match (self.bad, next.bad) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.bad_count += next.bad_count;
        self.weight_sum += next.weight_sum;
        self.weight_max = self.weight_max.max(next.weight_max);
    }

    fn clear(&mut self) {
        self.rows = 0.0;
        self.mean.fill(0.0);
        self.m2.fill(0.0);
        self.lo.fill(f64::INFINITY);
        self.hi.fill(f64::NEG_INFINITY);
        self.bad = None;
        self.bad_count = 0;
        self.weight_sum = 0.0;
        self.weight_max = 0.0;
        self.stored.fill(0.0);
    }
}

/// Most rows a leaf of the validation pass lists for the sample (8 bytes
/// each); a leaf with more offers its rows one by one afterwards.
const CANDIDATES: usize = 256;

/// Lists `row` for the sample, or gives up listing (`None`: the leaf's
/// rows are offered one by one) once [`CANDIDATES`] are listed.
fn list_candidate(wanted: &mut Option<Vec<usize>>, row: usize) {
    if let Some(list) = wanted {
        if list.len() == CANDIDATES {
            *wanted = None;
        } else {
            list.push(row);
        }
    }
}

impl ScanStats {
    /// Welford's update of column `j` with the finite value `v`, `inv`
    /// being one over the values counted in it so far (this one included).
    #[inline]
    fn add(&mut self, j: usize, v: f64, inv: f64) {
        let delta = v - self.mean[j];
        self.mean[j] += delta * inv;
        self.m2[j] += delta * (v - self.mean[j]);
        self.lo[j] = self.lo[j].min(v);
        self.hi[j] = self.hi[j].max(v);
    }

    /// Counts a non-finite value at `(row, j)`, keeping the first.
    fn note_bad(&mut self, row: usize, j: usize) {
        self.bad_count += 1;
        self.bad.get_or_insert((row, j));
    }
}

/// [`ScanStats::add`] of every value of `row` (column `j` its `j`-th), the
/// same operations in the same order per column, vectorised across the
/// columns, when every value is finite; returns `false`, changing nothing,
/// when one is not.
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn add_finite_row<T: Real>(
    row: &[T],
    inv: f64,
    mean: &mut [f64],
    m2: &mut [f64],
    lo: &mut [f64],
    hi: &mut [f64],
) -> bool {
    if !row.iter().fold(true, |ok, v| ok & v.to_f64().is_finite()) {
        return false;
    }
    let d = row.len();
    let (mean, m2, lo, hi) = (&mut mean[..d], &mut m2[..d], &mut lo[..d], &mut hi[..d]);
    for j in 0..d {
        let v = row[j].to_f64();
        let delta = v - mean[j];
        mean[j] += delta * inv;
        m2[j] += delta * (v - mean[j]);
        lo[j] = lo[j].min(v);
        hi[j] = hi[j].max(v);
    }
    true
}

/// The validation pass over a source (and its weights).
/// The sample is the pass's own (it does not depend on the order rows
/// come in, so it needs no per-chunk copy).
struct ScanPass {
    d: usize,
    /// Whether the rows are sparse (CSR blocks).
    sparse: bool,
    sample: KeyedSample,
    weights_name: Option<std::path::PathBuf>,
}

impl<T: Real> Pass<T> for ScanPass {
    type Stats = ScanStats;

    fn new_stats(&self) -> ScanStats {
        let d = self.d;
        ScanStats {
            rows: 0.0,
            mean: vec![0.0; d],
            m2: vec![0.0; d],
            lo: vec![f64::INFINITY; d],
            hi: vec![f64::NEG_INFINITY; d],
            bad: None,
            bad_count: 0,
            weight_sum: 0.0,
            weight_max: 0.0,
            stored: vec![0.0; if self.sparse { d } else { 0 }],
        }
    }

    fn block(&mut self, block: Block<'_, T>, leaves: &mut [Leaf<'_, ScanStats>]) -> Result<()> {
        let d = self.d;
        // The leaves in parallel; each lists the rows that the sample would
        // take now (at most CANDIDATES, else it marks itself to be offered
        // row by row), and they are offered afterwards (the sample keeps the
        // smallest keys whatever the order, so the result is the same as
        // offering every row in order).
        let sample = &self.sample;
        let weights_name = &self.weights_name;
        let wanted = leaves
            .par_iter_mut()
            .map(|leaf| {
                let b = block.sub(leaf.rows.clone());
                let s = &mut *leaf.stats;
                if let Some(wb) = b.w {
                    for (i, &wi) in wb.iter().enumerate() {
                        if !(wi.is_finite() && wi >= 0.0) {
                            return Err(Error::InvalidWeight {
                                path: weights_name.clone().unwrap_or_default(),
                                row: b.start + i,
                                value: wi,
                            });
                        }
                        s.weight_sum += wi;
                        s.weight_max = s.weight_max.max(wi);
                    }
                } else {
                    s.weight_sum += b.rows() as f64;
                }
                let mut wanted = Some(Vec::new());
                if let Some(csr) = b.csr {
                    // Welford's update per column over its stored values.
                    s.rows += b.rows() as f64;
                    for i in 0..b.rows() {
                        for p in csr.indptr[i]..csr.indptr[i + 1] {
                            let (j, v) = (csr.indices[p] as usize, b.x[p].to_f64());
                            if v.is_finite() {
                                s.stored[j] += 1.0;
                                s.add(j, v, 1.0 / s.stored[j]);
                            } else {
                                s.note_bad(b.start + i, j);
                            }
                        }
                        if sample.wants(b.start + i) {
                            list_candidate(&mut wanted, b.start + i);
                        }
                    }
                    return Ok((b.start..b.start + b.rows(), wanted));
                }
                for (i, row) in b.x.chunks_exact(d).enumerate() {
                    // Welford's update (Chan et al.'s with a one-row second part).
                    s.rows += 1.0;
                    let inv = 1.0 / s.rows;
                    if !add_finite_row(row, inv, &mut s.mean, &mut s.m2, &mut s.lo, &mut s.hi) {
                        for (j, &v) in row.iter().enumerate() {
                            let v = v.to_f64();
                            if v.is_finite() {
                                s.add(j, v, inv);
                            } else {
                                s.note_bad(b.start + i, j);
                            }
                        }
                    }
                    if sample.wants(b.start + i) {
                        list_candidate(&mut wanted, b.start + i);
                    }
                }
                Ok((b.start..b.start + b.rows(), wanted))
            })
            .collect::<Vec<Result<_>>>();
        // The first leaf's error, as a pass in one piece reports it.
        let wanted = wanted.into_iter().collect::<Result<Vec<_>>>()?;
        for (rows, list) in wanted {
            let offered: Box<dyn Iterator<Item = usize>> = match list {
                Some(list) => Box::new(list.into_iter()),
                None => Box::new(rows),
            };
            for row in offered {
                if self.sample.wants(row) {
                    let i = row - block.start;
                    let w = block.w.map_or(1.0, |w| w[i]);
                    match block.csr {
                        Some(_) => self.sample.offer(row, block.dense_row(i).into_iter(), w)?,
                        None => self.sample.offer(row, block.x[i * d..(i + 1) * d].iter().map(|v| v.to_f64()), w)?,
                    }
                }
            }
        }
        Ok(())
    }

    fn task(&self) -> Option<(&'static str, Vec<u8>)> {
        (!self.sparse).then(|| (SCAN, encode(&(self.d, self.sample.emptied()))))
    }

    fn side(&self) -> Vec<u8> {
        encode(&self.sample)
    }

    fn merge_side(&mut self, side: &[u8]) -> Result<()> {
        let s: KeyedSample = decode(side, "initialisation sample")?;
        self.sample.merge_from(&s)
    }
}

/// The task kind of the validation pass (payload: `n_features` and the
/// empty sample to fill).
pub(crate) const SCAN: &str = "scan";

/// The validation pass's task: `n_features` and the empty sample to fill.
pub(crate) type ScanTask = (usize, KeyedSample);

/// Plans the validation pass's task `(d, sample)` over the rows of `x` (a
/// piece, see [`Source::starting_at`]) within `limit_bytes`: the sample, the
/// statistics and read blocks.
///
/// # Errors
/// [`Error::DoesNotFit`] when one tile of rows does not fit.
pub(crate) fn plan_scan_task(
    (d, sample): &ScanTask,
    x: &Source<'_>,
    w: Option<&Source<'_>>,
    compute_bytes: usize,
    limit_bytes: u64,
) -> Result<Plan> {
    let d = *d;
    let n = (x.n_samples() - x.first_row()) as u64;
    let threads = rayon::current_num_threads() as u64;
    let mut led = Ledger::default();
    // The rows of this piece the settled sample keeps, from their keys.
    let m = sample.kept_in(x.first_row()..x.n_samples()) as u64;
    let per = KeyedSample::bytes_per_row(d);
    led.add("initialisation sample", m, per, format!("{m} rows × {per} B"));
    led.add("statistics: folded chunks + open chunk", 2, ScanStats::bytes(d), "column moments and ranges".into());
    let per_row = BlockReader::<f64>::bytes_per_row(
        x.scratch_bytes_per_row(),
        d,
        compute_bytes,
        w.map(Source::scratch_bytes_per_row),
    );
    let required = led.total() + per_row * (TILE_ROWS as u64).min(n);
    check_fits(required, limit_bytes, &led, || format!("the validation pass with n_features = {d}"), Vec::new)?;
    let rows = pick_block_rows(limit_bytes - led.total(), per_row, n, d as u64 * 8, threads);
    led.add("read blocks", rows, per_row, format!("{rows} rows × {per_row} B"));
    Ok(Plan::blocked("validation", limit_bytes, led, rows as usize, n as usize, threads as usize))
}

/// Runs the validation pass's task (see [`plan_scan_task`]) over `rows` of
/// `x` (all of a piece's rows) and returns its
/// [`task_result`]: the statistics, and the sample as side results.
///
/// # Errors
/// As [`scan`]'s pass: [`Error::InvalidWeight`], read errors,
/// [`Error::Cancelled`].
pub(crate) fn run_scan_task<T: Real>(
    (d, sample): ScanTask,
    x: &Source<'_>,
    w: Option<&Source<'_>>,
    plan: &Plan,
    rows: std::ops::Range<usize>,
    cancel: &Cancel,
) -> Result<Vec<u8>> {
    let mut pass = ScanPass { d, sparse: x.sparse_row_nnz().is_some(), sample, weights_name: w.map(Source::name) };
    let mut blocks = BlockReader::<T>::new(x, w, plan.schedule.block_rows);
    let partial = run_pass(&mut pass, &mut blocks, Some(rows), &vec![0.0; d], cancel)?;
    Ok(task_result::<T, _>(&pass, partial))
}

/// The validation pass over `blocks`' source and weights, split as `split`:
/// fails on the first non-finite value (with the count of all), on a
/// negative or non-finite weight, on weights that sum to zero or overflow
/// or that are all subnormal,
/// and on a column range whose squared distances overflow the compute type
/// `T`; returns the column moments and a keyed uniform sample of
/// `sample.rows` rows under `seed`, held as `sample` says (spilled into
/// `scratch_dir`).
///
/// # Errors
/// As described ([`Error::NonFinite`], [`Error::InvalidWeight`],
/// [`Error::InvalidParameter`]); read errors; [`Error::Cancelled`].
pub fn scan<T: Real>(
    blocks: &mut BlockReader<'_, '_, T>,
    split: &RowSplit,
    sample: SampleLayout,
    scratch_dir: &std::path::Path,
    seed: u64,
    obs: &dyn Observer,
) -> Result<Scan> {
    let x: &Source<'_> = blocks.x();
    let (n, d) = (x.n_samples(), x.n_features());
    let weighted = blocks.weights().is_some();
    let mut kept = KeyedSample::for_layout(&SampleLayout { rows: sample.rows.min(n), ..sample }, d, seed, scratch_dir)?;
    kept.settle(x.first_row()..n);
    let sparse = x.sparse_row_nnz().is_some();
    let mut pass = ScanPass { d, sparse, sample: kept, weights_name: blocks.weights().map(Source::name) };
    let s = run_split(&mut pass, blocks, split, &vec![0.0; d], &obs.cancel())?;
    let s = if sparse { s.with_zeros() } else { s };
    if let Some((row, column)) = s.bad {
        let value = x.value(row, column)?;
        return Err(Error::bad_value(x.name(), row, column, value, s.bad_count, T::DTYPE));
    }
    // Squared distances between any two points must stay finite in the
    // compute type, with room for the GEMM identity's ‖c‖² − 2x·c.
    let spread: f64 = s.lo.iter().zip(&s.hi).map(|(l, h)| (h - l) * (h - l)).sum();
    if !(spread.is_finite() && spread <= T::MAX / 16.0) {
        return Err(Error::param_with(
            "X",
            format!(
                "{}: a column spans {:.3e}, so squared distances between rows (up to {:.3e}, summed over the columns) come within a factor of 16 of {}'s largest value ({:.3e}), the room the distances' sums need, or overflow it",
                x.name().display(),
                s.lo.iter().zip(&s.hi).map(|(l, h)| h - l).fold(0.0, f64::max),
                spread,
                T::DTYPE.name(),
                T::MAX,
            ),
            if T::DTYPE == Dtype::F32 {
                vec![Remedy::RescaleData, Remedy::ComputeIn(Dtype::F64)]
            } else {
                vec![Remedy::RescaleData]
            },
        ));
    }
    // And they must not all underflow `f64` (the exact distances' type),
    // which would make every row equally near every centre.
    let widest = s.lo.iter().zip(&s.hi).map(|(l, h)| h - l).fold(0.0, f64::max);
    if widest > 0.0 && widest * widest < f64::MIN_POSITIVE {
        return Err(Error::param_with(
            "X",
            format!(
                "{}: no column spans more than {widest:.3e}, so squared distances underflow float64",
                x.name().display()
            ),
            vec![Remedy::RescaleData],
        ));
    }
    if !s.weight_sum.is_finite() {
        return Err(Error::param(
            "sample_weight",
            format!("the weights sum to {} in float64; hint: scale the sample weights down (only their ratios matter for the centres)", s.weight_sum),
        ));
    }
    if weighted && s.weight_sum <= 0.0 {
        return Err(Error::param("sample_weight", crate::error::ALL_WEIGHTS_ZERO));
    }
    if weighted && s.weight_max < f64::MIN_POSITIVE {
        // Every weight subnormal: its products with the data and their sums
        // keep a few bits or none, and the centres would come out rounded.
        return Err(Error::param(
            "sample_weight",
            format!("the largest weight is {:e}, below float64's smallest normal number ({:e}), so its products with the data lose their precision; hint: scale the sample weights up (only their ratios matter for the centres)", s.weight_max, f64::MIN_POSITIVE),
        ));
    }
    let largest = s.lo.iter().chain(&s.hi).fold(0.0f64, |m, v| m.max(v.abs()));
    if weighted && largest > 0.0 && s.weight_max * largest < f64::MIN_POSITIVE {
        // Every product of a weight with a value subnormal (helper 133:
        // weights of 1e-300 on data of 1e-150 gave centres of zeros).
        return Err(Error::param(
            "sample_weight",
            format!("the largest weight ({:e}) times the largest absolute value of the data ({largest:e}) is below float64's smallest normal number ({:e}), so the weighted sums lose their precision; hint: scale the sample weights up (only their ratios matter for the centres)", s.weight_max, f64::MIN_POSITIVE),
        ));
    }
    let nf = s.rows.max(1.0);
    let mean_variance = s.m2.iter().map(|m| m / nf).sum::<f64>() / d as f64;
    let sample = pass.sample.into_sample()?;
    let shift = s.mean.iter().zip(s.lo.iter().zip(&s.hi)).map(|(&m, (&lo, &hi))| exact_shift(m, lo, hi)).collect();
    Ok(Scan { shift, mean_variance, sample, weight_sum: s.weight_sum })
}

/// `mean` when every value in `[lo, hi]` lies within a factor of 2 of it
/// (so that subtracting it is exact), else 0: see [`Scan::shift`].
pub(crate) fn exact_shift(mean: f64, lo: f64, hi: f64) -> f64 {
    let within = if mean > 0.0 { lo >= 0.5 * mean && hi <= 2.0 * mean } else { hi <= 0.5 * mean && lo >= 2.0 * mean };
    if within {
        mean
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::exact_shift;

    #[test]
    fn shift_is_the_mean_only_where_subtracting_it_is_exact() {
        // Far from the origin: every value within a factor of 2 of the mean.
        assert_eq!(exact_shift(1e8, 1e8 - 5.0, 1e8 + 5.0), 1e8);
        assert_eq!(exact_shift(-1e8, -1e8 - 5.0, -1e8 + 5.0), -1e8);
        assert_eq!(exact_shift(3.0, 1.5, 6.0), 3.0);
        // A tight cluster at 0 beside one at 1e13: 1e-3 − 5e12 would round.
        assert_eq!(exact_shift(5e12, -1e-3, 1e13), 0.0);
        assert_eq!(exact_shift(-5e12, -1e13, 1e-3), 0.0);
        // Values across the origin, or orders of magnitude apart.
        assert_eq!(exact_shift(0.01, -3.0, 3.0), 0.0);
        assert_eq!(exact_shift(3e8, 1e8, 5e8), 0.0);
        assert_eq!(exact_shift(0.0, 0.0, 0.0), 0.0);
    }
}
