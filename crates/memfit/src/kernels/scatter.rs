//! One tile's weighted scatter `X_tᵀ diag(w) X_t`, by one GEMM (the kernel
//! of [`crate::linalg::weighted_scatter`] and of the tied mixture's data
//! scatter).

use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};

/// Adds `X_tᵀ diag(w) X_t` for one tile `xt` (row-major `(rows, d)`, at most
/// [`crate::plan::TILE_ROWS`] rows; weights `w` for its rows, all ones when `None`) to
/// `s` (row-major `(d, d)`) by one GEMM; `weighted` holds the weighted tile.
pub fn add_tile_scatter(xt: &[f64], w: Option<&[f64]>, d: usize, weighted: &mut [f64], s: &mut [f64], par: Par) {
    let rows = xt.len() / d.max(1);
    let wt = &mut weighted[..rows * d];
    wt.copy_from_slice(xt);
    if let Some(w) = w {
        for (row, &wi) in wt.chunks_mut(d).zip(w) {
            row.iter_mut().for_each(|v| *v *= wi);
        }
    }
    let lhs = MatRef::from_row_major_slice(xt, rows, d).transpose();
    let rhs = MatRef::from_row_major_slice(wt, rows, d);
    matmul(MatMut::from_row_major_slice_mut(s, d, d), Accum::Add, lhs, rhs, 1.0, par);
}
