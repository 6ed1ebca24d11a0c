//! The weighted scatter `Xᵀ diag(w) X`, blocked (NumPy: `(X.T * w) @ X`).

use faer::Par;

use crate::error::{Error, Result};
use crate::exec::Backend;
use crate::exec::{encode, run_pass, run_split, task_result, Block, Leaf, Merge, Pass, RowSplit};
use crate::io::{BlockReader, Source};
use crate::plan::{check_fits, check_square_matrices, pick_block_rows, Job, Plan, TILE_ROWS};

/// Plans [`weighted_scatter`] of `job`'s data (shape `(n_samples,
/// n_features)`, computed in `f64`: build `job` with 8 compute bytes) with
/// its optional weights. Buffers: what the input holds ([`Job::ledger`]),
/// the result and one weighted tile, `(n_features, n_features)` and `(256,
/// n_features)` `f64`; per block row the read scratch, the row in `f64` and
/// its weight.
///
/// # Errors
/// [`Error::DoesNotFit`] when these exceed `job.limit_bytes`.
pub fn plan_weighted_scatter(job: &Job) -> Result<Plan> {
    let (n, d) = (job.n_samples as u64, job.n_features as u64);
    let (threads, limit_bytes) = (job.threads as u64, job.limit_bytes);
    check_square_matrices(
        job.n_features,
        2,
        limit_bytes,
        || format!("weighted_scatter with n_features = {d}"),
        Vec::new(),
    )?;
    let mut led = job.ledger();
    led.add("scatter (float64): folded chunks + open chunk", 2 * d * d, 8, format!("2 × {d} × {d} × 8 B"));
    led.add("weighted tile (float64)", TILE_ROWS as u64 * d, 8, format!("{TILE_ROWS} × {d} × 8 B"));
    let per_row = BlockReader::<f64>::bytes_per_row(job.x_scratch_per_row, job.n_features, 8, job.w_scratch_per_row);
    let required = led.total() + per_row * (TILE_ROWS as u64).min(n);
    check_fits(required, limit_bytes, &led, || format!("weighted_scatter with n_features = {d}"), Vec::new)?;
    let rows = pick_block_rows(limit_bytes - led.total(), per_row, n, d * 8, threads);
    led.add("read blocks", rows, per_row, format!("{rows} rows × {per_row} B (scratch, values, weight)"));
    Ok(Plan::blocked("weighted_scatter", limit_bytes, led, rows as usize, job.n_samples, job.threads))
}

/// Computes `S = Xᵀ diag(w) X = Σ_i w_i x_i x_iᵀ` (row-major `(n_features,
/// n_features)`, `f64`) for `x` of shape `(n_samples, n_features)` (any
/// supported dtype, read in blocks and computed in `f64`) and weights `w` of
/// shape `(n_samples,)` (all ones when `None`; any finite sign). Each tile
/// of 256 rows adds `X_tᵀ (w_t ∘ X_t)` to `S` by one GEMM (faer, parallel
/// over the output); tiles are added in row order, so the result does not
/// depend on the memory limit or the thread count. No `n_samples ×
/// n_features` temporary is made.
///
/// # Errors
/// [`Error::ShapeMismatch`] for weights of the wrong length; [`Error::NonFinite`]
/// for a non-finite value or weight; [`Error::InvalidParameter`] (`X`) for a
/// result that overflows `f64`; read errors; [`Error::Cancelled`].
pub fn weighted_scatter(
    x: &Source<'_>,
    w: Option<&Source<'_>>,
    plan: &Plan,
    cancel: &crate::exec::Cancel,
) -> Result<Vec<f64>> {
    weighted_scatter_split(x, w, plan, &RowSplit::default(), cancel)
}

/// [`weighted_scatter`] with its pass run as the row ranges of `split`
/// (the same bits for any split).
///
/// # Errors
/// As [`weighted_scatter`]; [`Error::InvalidParameter`] (`rows`) for a
/// split not on multiples of [`crate::plan::CHUNK_ROWS`].
pub fn weighted_scatter_split(
    x: &Source<'_>,
    w: Option<&Source<'_>>,
    plan: &Plan,
    split: &RowSplit,
    cancel: &crate::exec::Cancel,
) -> Result<Vec<f64>> {
    let d = x.n_features();
    if let Some(w) = w {
        if w.n_samples() != x.n_samples() {
            return Err(Error::ShapeMismatch {
                what: "weights".into(),
                expected: vec![x.n_samples()],
                found: vec![w.n_samples()],
                hint: "give one weight per row of X",
            });
        }
    }
    if d == 0 {
        // No features: S is 0 × 0 (NumPy's answer), whatever the rows.
        return Ok(Vec::new());
    }
    let mut blocks = BlockReader::<f64>::new(x, w, plan.schedule.block_rows);
    let mut pass = ScatterPass::new(d, w, plan);
    let s = run_split(&mut pass, &mut blocks, split, &vec![0.0; d], cancel)?.0;
    if let Some(i) = s.iter().position(|v| !v.is_finite()) {
        return Err(Error::param(
            "X",
            format!(
                "{}: the weighted scatter overflows float64 (S[{}, {}] = {}); hint: rescale X or the weights",
                x.name().display(),
                i / d,
                i % d,
                s[i]
            ),
        ));
    }
    Ok(s)
}

/// The task kind of the scatter pass (its payload: `n_features`).
pub(crate) const SCATTER: &str = "weighted-scatter";

/// Runs the scatter pass of a task over `d` features for `rows` of `x` (a
/// piece's rows, see [`Source::starting_at`]) within `plan` (from
/// [`plan_weighted_scatter`]) and returns its encoded statistics.
///
/// # Errors
/// As [`weighted_scatter`].
pub(crate) fn run_scatter_task(
    d: usize,
    x: &Source<'_>,
    w: Option<&Source<'_>>,
    plan: &Plan,
    rows: std::ops::Range<usize>,
    cancel: &crate::exec::Cancel,
) -> Result<Vec<u8>> {
    let mut blocks = BlockReader::<f64>::new(x, w, plan.schedule.block_rows);
    let mut pass = ScatterPass::new(d, w, plan);
    let partial = run_pass(&mut pass, &mut blocks, Some(rows), &vec![0.0; d], cancel)?;
    Ok(task_result(&pass, partial))
}

/// `S` of some rows, row-major `(d, d)`.
#[derive(serde::Serialize, serde::Deserialize)]
struct Scatter(Vec<f64>);

impl Merge for Scatter {
    fn merge(&mut self, next: &Self) {
        self.0.iter_mut().zip(&next.0).for_each(|(a, b)| *a += b);
    }
    fn clear(&mut self) {
        self.0.fill(0.0);
    }
}

/// The pass of [`weighted_scatter`]: one GEMM per tile of 256 rows, tiles
/// added in row order within a chunk.
struct ScatterPass {
    backend: Backend,
    d: usize,
    /// One weighted tile, `(256, d)`.
    weighted: Vec<f64>,
    /// The weights' name, for errors.
    weights_name: std::path::PathBuf,
    par: Par,
}

impl ScatterPass {
    /// The pass over rows of `d` features weighted by `w`, on `plan`'s
    /// threads.
    fn new(d: usize, w: Option<&Source<'_>>, plan: &Plan) -> Self {
        ScatterPass {
            backend: Backend::Cpu,
            d,
            weighted: vec![0.0; TILE_ROWS * d],
            weights_name: w.map(Source::name).unwrap_or_default(),
            par: Par::rayon(plan.threads.max(1)),
        }
    }
}

impl Pass<f64> for ScatterPass {
    type Stats = Scatter;

    fn new_stats(&self) -> Scatter {
        Scatter(vec![0.0; self.d * self.d])
    }

    fn checks_finite(&self) -> bool {
        true
    }

    fn task(&self) -> Option<(&'static str, Vec<u8>)> {
        Some((SCATTER, encode(&self.d)))
    }

    fn block(&mut self, block: Block<'_, f64>, leaves: &mut [Leaf<'_, Scatter>]) -> Result<()> {
        if let Some(wb) = block.w {
            if let Some(i) = wb.iter().position(|v| !v.is_finite()) {
                return Err(Error::InvalidWeight {
                    path: self.weights_name.clone(),
                    row: block.start + i,
                    value: wb[i],
                });
            }
        }
        let d = self.d;
        for leaf in leaves.iter_mut() {
            let b = block.sub(leaf.rows.clone());
            for (t, xt) in b.x.chunks(TILE_ROWS * d).enumerate() {
                let w = b.w.map(|w| &w[t * TILE_ROWS..]);
                self.backend.ops::<f64>().scatter_tile(xt, w, d, &mut self.weighted, &mut leaf.stats.0, self.par);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::RunOptions;
    use crate::io::{ArrayRef, Values};
    use rand::{Rng, SeedableRng};

    #[test]
    fn empty_shapes_give_numpys_answers() {
        // (n, 0): S is 0 × 0; (0, d): S is d × d zeros; neither panics.
        let x = [0.0f64; 0];
        for (n, d) in [(5, 0), (0, 3), (0, 0)] {
            let src = Source::memory(ArrayRef::c_order(Values::F64(&x), n, d).unwrap());
            let plan = plan_weighted_scatter(&Job::new(&src, None, 8, 0, &RunOptions::with_limit(1 << 20))).unwrap();
            let s = weighted_scatter(&src, None, &plan, &crate::exec::Cancel::new()).unwrap();
            assert_eq!(s, vec![0.0; d * d], "({n}, {d})");
        }
    }

    #[test]
    fn matches_naive_reference_and_ignores_limit() {
        let (n, d) = (14000, 30);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(4);
        let x: Vec<f32> = (0..n * d).map(|_| rng.random_range(-1.0..1.0)).collect();
        let w: Vec<f64> = (0..n).map(|_| rng.random_range(0.0..2.0)).collect();
        let src = Source::memory(ArrayRef::c_order(Values::F32(&x), n, d).unwrap());
        let ws = Source::memory(ArrayRef::c_order(Values::F64(&w), n, 1).unwrap());
        let mut results = Vec::new();
        for limit in [200 << 10, 1 << 30] {
            let plan = plan_weighted_scatter(&Job::new(&src, Some(&ws), 8, 0, &RunOptions::with_limit(limit))).unwrap();
            assert!(plan.total_bytes <= limit);
            if limit < 1 << 20 {
                // The data are 1.68 MB, 8.4× the limit.
                assert!((n * d * 4) as u64 >= 8 * limit && plan.schedule.n_blocks > 1, "{plan}");
            }
            results.push(weighted_scatter(&src, Some(&ws), &plan, &crate::exec::Cancel::new()).unwrap());
        }
        assert_eq!(results[0], results[1], "the limit changed the result");
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap().install(|| {
            let plan =
                plan_weighted_scatter(&Job::new(&src, Some(&ws), 8, 0, &RunOptions::with_limit(1 << 30))).unwrap();
            weighted_scatter(&src, Some(&ws), &plan, &crate::exec::Cancel::new()).unwrap()
        });
        assert_eq!(one, results[1], "the thread count changed the result");
        for a in 0..d {
            for b in 0..d {
                let want: f64 = (0..n).map(|i| w[i] * f64::from(x[i * d + a]) * f64::from(x[i * d + b])).sum();
                let got = results[0][a * d + b];
                assert!((got - want).abs() <= 1e-10 * want.abs().max(1.0), "({a}, {b}): {got} vs {want}");
            }
        }
    }
}
