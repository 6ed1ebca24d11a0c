//! `q_i = x_iᵀ Q x_i` for every row, blocked (NumPy: `np.sum((X @ Q) * X, axis=1)`).

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use rayon::prelude::*;

use crate::dtype::Real;
use crate::error::{Error, Remedy, Result};
use crate::exec::{run_split, Block, Leaf, Pass, RowSplit};
use crate::io::{npy_writer_bytes, BlockReader, Dtype, Source};
use crate::plan::{check_fits, pick_block_rows, Job, Plan, TILE_ROWS};

/// Plans [`row_quadratic_form`] of `job`'s data (shape `(n_samples,
/// n_features)`). Buffers: what the input holds ([`Job::ledger`]), `Q` as
/// read (float64) when `q_read` (the job read it from a file), `Q` in
/// the compute type, one `(256, n_features)` product tile per thread, the
/// output writer's buffers when `job.n_outputs` is 1, and
/// per block row the read scratch, the converted row and the result.
///
/// # Errors
/// [`Error::DoesNotFit`] when these with one tile of rows exceed
/// `job.limit_bytes`.
pub fn plan_row_quadratic_form(job: &Job, q_read: bool) -> Result<Plan> {
    let (n, d, c) = (job.n_samples as u64, job.n_features as u64, job.compute_bytes as u64);
    let (threads, limit_bytes) = (job.threads as u64, job.limit_bytes);
    let mut led = job.ledger();
    if q_read {
        led.add("Q as read (float64)", d * d, 8, format!("{d} × {d} × 8 B"));
    }
    led.add("Q (compute dtype)", d * d, c, format!("{d} × {d} × {c} B"));
    led.add(
        "product tiles (per thread)",
        threads * TILE_ROWS as u64 * d,
        c,
        format!("{threads} × {TILE_ROWS} × {d} × {c} B"),
    );
    if job.n_outputs > 0 {
        let bytes = job.n_outputs as u64 * npy_writer_bytes(Dtype::F64, &[job.n_samples]);
        led.add("output writer buffers", bytes, 1, "file buffer + encode buffer".into());
    }
    let per_row = BlockReader::<f64>::bytes_per_row(job.x_scratch_per_row, job.n_features, job.compute_bytes, None) + 8;
    let required = led.total() + per_row * (TILE_ROWS as u64).min(n);
    check_fits(
        required,
        limit_bytes,
        &led,
        || format!("row_quadratic_form with n_features = {d} on {}", crate::units::threads(threads)),
        Vec::new,
    )?;
    let rows = pick_block_rows(limit_bytes - led.total(), per_row, n, d * c, threads);
    led.add("read blocks", rows, per_row, format!("{rows} rows × {per_row} B (scratch, values, result)"));
    Ok(Plan::blocked("row_quadratic_form", limit_bytes, led, rows as usize, job.n_samples, job.threads))
}

/// Whether `v`, an entry of `Q`, keeps its value in float32: 0 or within
/// float32's normal range (beyond it a value becomes infinite or loses its
/// digits: 1e-50 becomes 0). [`row_quadratic_form`] in float32 refuses a
/// `Q` with another value; a caller free to choose computes in float64.
pub fn holds_in_float32(v: f64) -> bool {
    v == 0.0 || (f64::from(f32::MIN_POSITIVE)..=f64::from(f32::MAX)).contains(&v.abs())
}

/// Computes `q_i = x_iᵀ Q x_i` for every row of `x` (shape `(n_samples,
/// n_features)`, any supported dtype, converted per block to `T`) with `q`
/// row-major `(n_features, n_features)`, handing the results (`f64`, in row
/// order, one block at a time) to `out`. Per tile of 256 rows, `X_t Q` is
/// one GEMM (faer) into a per-thread tile, and each row's dot product with
/// its own values is summed in `f64`; no `n_samples × n_features` array is
/// ever held. Results do not depend on the thread count or the limit.
///
/// # Errors
/// [`Error::ShapeMismatch`] when `q` is not `(n_features, n_features)`;
/// [`Error::NonFinite`] for a non-finite value in `q` or `x`;
/// [`Error::InvalidParameter`] (`X`) for a result that overflows `f64`; read errors;
/// [`Error::Cancelled`]; and whatever `out` returns.
pub fn row_quadratic_form<T: Real>(
    x: &Source<'_>,
    q: &[f64],
    plan: &Plan,
    out: &mut dyn FnMut(&[f64]) -> Result<()>,
    cancel: &crate::exec::Cancel,
) -> Result<()> {
    let d = x.n_features();
    if q.len() != d * d {
        return Err(Error::ShapeMismatch {
            what: "Q".into(),
            expected: vec![d, d],
            found: vec![q.len()],
            hint: "Q must be square with one row and column per feature of X",
        });
    }
    if let Some(i) = q.iter().position(|v| !v.is_finite()) {
        let (row, column) = (i / d, i % d);
        return Err(Error::param("Q", format!("row {row}, column {column} is {}; hint: Q must be finite", q[i])));
    }
    if d == 0 {
        // No features: every q_i is the empty sum, 0 (NumPy's answer).
        let rows = plan.schedule.block_rows.max(1);
        let zeros = vec![0.0; rows.min(x.n_samples())];
        for start in (0..x.n_samples()).step_by(rows) {
            cancel.check()?;
            out(&zeros[..rows.min(x.n_samples() - start)])?;
        }
        return Ok(());
    }
    if T::DTYPE == Dtype::F32 {
        if let Some(i) = q.iter().position(|&v| !holds_in_float32(v)) {
            return Err(Error::param_with(
                "Q",
                format!(
                    "Q[{}, {}] = {:e} is outside float32's normal range, and float32 is the compute dtype of these rows",
                    i / d,
                    i % d,
                    q[i]
                ),
                vec![Remedy::ComputeIn(Dtype::F64), Remedy::RescaleData],
            ));
        }
    }
    let qt: Vec<T> = q.iter().map(|&v| T::from_f64(v)).collect();
    let workers = plan.threads.max(1);
    let mut pass = QuadraticPass {
        qt,
        d,
        tiles: (0..workers).map(|_| vec![T::default(); TILE_ROWS * d]).collect(),
        result: vec![0.0; plan.schedule.block_rows],
        out,
        name: x.name(),
    };
    let mut blocks = BlockReader::<T>::new(x, None, plan.schedule.block_rows);
    run_split(&mut pass, &mut blocks, &RowSplit::default(), &vec![0.0; d], cancel)
}

/// The pass of [`row_quadratic_form`]: tiles of 256 rows dealt to threads.
struct QuadraticPass<'f, T> {
    /// `Q` in the compute type, row-major `(d, d)`.
    qt: Vec<T>,
    d: usize,
    /// One `(256, d)` product tile per thread.
    tiles: Vec<Vec<T>>,
    /// One block of results.
    result: Vec<f64>,
    out: &'f mut dyn FnMut(&[f64]) -> Result<()>,
    /// The data's name, for errors.
    name: std::path::PathBuf,
}

impl<T: Real> Pass<T> for QuadraticPass<'_, T> {
    type Stats = ();

    fn new_stats(&self) {}

    fn checks_finite(&self) -> bool {
        true
    }

    fn block(&mut self, block: Block<'_, T>, _: &mut [Leaf<'_, ()>]) -> Result<()> {
        let (d, rows, xb) = (self.d, block.rows(), block.x);
        let qm = MatRef::from_row_major_slice(&self.qt, d, d);
        let per = rows.div_ceil(TILE_ROWS).div_ceil(self.tiles.len()).max(1) * TILE_ROWS;
        let result = &mut self.result[..rows];
        self.tiles.par_iter_mut().zip(result.par_chunks_mut(per)).enumerate().for_each(|(w, (tile, res))| {
            for (t, r) in res.chunks_mut(TILE_ROWS).enumerate() {
                let r0 = w * per + t * TILE_ROWS;
                let xt = &xb[r0 * d..(r0 + r.len()) * d];
                let dst = MatMut::from_row_major_slice_mut(&mut tile[..r.len() * d], r.len(), d);
                matmul(
                    dst,
                    Accum::Replace,
                    MatRef::from_row_major_slice(xt, r.len(), d),
                    qm,
                    T::from_f64(1.0),
                    Par::Seq,
                );
                for (i, qi) in r.iter_mut().enumerate() {
                    let (p, v) = (&tile[i * d..(i + 1) * d], &xt[i * d..(i + 1) * d]);
                    *qi = p.iter().zip(v).map(|(a, b)| a.to_f64() * b.to_f64()).sum();
                }
            }
        });
        if let Some(i) = result.iter().position(|v| !v.is_finite()) {
            // In float32 only the product X Q can overflow (x_i · (Q x_i)
            // of float32 values is far inside float64).
            if T::DTYPE == Dtype::F32 {
                return Err(Error::param_with(
                    "X",
                    format!(
                        "{}: (X Q) of row {} overflows float32, the compute dtype",
                        self.name.display(),
                        block.start + i
                    ),
                    vec![Remedy::ComputeIn(Dtype::F64), Remedy::RescaleData],
                ));
            }
            return Err(Error::param(
                "X",
                format!(
                    "{}: x_iᵀ Q x_i of row {} overflows float64 ({}); hint: rescale X or Q",
                    self.name.display(),
                    block.start + i,
                    result[i]
                ),
            ));
        }
        (self.out)(result)
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
        // (n, 0): q is n zeros (empty sums); (0, d): q is empty; neither panics.
        let x = [0.0f64; 0];
        for (n, d) in [(5, 0), (700, 0), (0, 3), (0, 0)] {
            let src = Source::memory(ArrayRef::c_order(Values::F64(&x), n, d).unwrap());
            let plan =
                plan_row_quadratic_form(&Job::new(&src, None, 8, 0, &RunOptions::with_limit(1 << 20)), false).unwrap();
            let mut got = Vec::new();
            let mut out = |b: &[f64]| {
                got.extend_from_slice(b);
                Ok(())
            };
            row_quadratic_form::<f64>(&src, &vec![1.0; d * d], &plan, &mut out, &crate::exec::Cancel::new()).unwrap();
            assert_eq!(got, vec![0.0; n], "({n}, {d})");
        }
    }

    #[test]
    fn matches_naive_reference_under_a_small_limit() {
        let (n, d) = (8000, 40);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let x: Vec<f64> = (0..n * d).map(|_| rng.random_range(-1.0..1.0)).collect();
        let q: Vec<f64> = (0..d * d).map(|_| rng.random_range(-1.0..1.0)).collect();
        let src = Source::memory(ArrayRef::c_order(Values::F64(&x), n, d).unwrap());
        // The data are 2.56 MB, 10× the limit.
        let plan =
            plan_row_quadratic_form(&Job::new(&src, None, 8, 0, &RunOptions::with_limit(256 << 10)), false).unwrap();
        assert!((n * d * 8) as u64 >= 8 * plan.limit_bytes);
        assert!(plan.schedule.n_blocks > 1 && plan.total_bytes <= 256 << 10, "{plan}");
        let mut got = Vec::new();
        row_quadratic_form::<f64>(
            &src,
            &q,
            &plan,
            &mut |b| {
                got.extend_from_slice(b);
                Ok(())
            },
            &crate::exec::Cancel::new(),
        )
        .unwrap();
        assert_eq!(got.len(), n);
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap().install(|| {
            let plan =
                plan_row_quadratic_form(&Job::new(&src, None, 8, 0, &RunOptions::with_limit(1 << 30)), false).unwrap();
            let mut v = Vec::new();
            row_quadratic_form::<f64>(
                &src,
                &q,
                &plan,
                &mut |b| {
                    v.extend_from_slice(b);
                    Ok(())
                },
                &crate::exec::Cancel::new(),
            )
            .unwrap();
            v
        });
        assert_eq!(one, got, "the thread count or the limit changed the result");
        for i in 0..n {
            let row = &x[i * d..(i + 1) * d];
            let want: f64 = (0..d).map(|a| (0..d).map(|b| row[a] * q[a * d + b] * row[b]).sum::<f64>()).sum();
            assert!((got[i] - want).abs() <= 1e-12 * want.abs().max(1.0), "row {i}: {} vs {want}", got[i]);
        }
    }

    #[test]
    fn rejects_bad_q() {
        let x = vec![1.0; 6];
        let src = Source::memory(ArrayRef::c_order(Values::F64(&x), 3, 2).unwrap());
        let plan =
            plan_row_quadratic_form(&Job::new(&src, None, 8, 0, &RunOptions::with_limit(1 << 20)), false).unwrap();
        let err = row_quadratic_form::<f64>(&src, &[1.0; 3], &plan, &mut |_| Ok(()), &crate::exec::Cancel::new())
            .unwrap_err();
        assert!(matches!(err, Error::ShapeMismatch { .. }));
        let err = row_quadratic_form::<f64>(
            &src,
            &[1.0, f64::NAN, 0.0, 1.0],
            &plan,
            &mut |_| Ok(()),
            &crate::exec::Cancel::new(),
        )
        .unwrap_err();
        assert!(matches!(err, Error::InvalidParameter { name: "Q", .. }), "{err}");
        assert!(err.to_string().contains("row 0, column 1 is NaN; hint: Q must be finite"), "{err}");
    }
}
