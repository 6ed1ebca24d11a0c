//! Blocked linear-algebra kernels over data larger than memory, each with a
//! memory plan: the row-wise quadratic form `x_iᵀ Q x_i` and the weighted
//! scatter `Xᵀ diag(w) X`.

mod quadratic_form;
mod scatter;

pub use quadratic_form::{plan_row_quadratic_form, row_quadratic_form};
pub(crate) use scatter::add_tile_scatter;
pub use scatter::{plan_weighted_scatter, weighted_scatter};

use crate::error::{Error, Result};
use crate::plan::Ledger;

/// Fails with [`Error::DoesNotFit`] unless the held buffers plus one tile of
/// rows fit `limit_bytes`.
fn check_fits(led: &Ledger, per_row: u64, n: u64, limit_bytes: u64, what: String) -> Result<()> {
    let required = led.total() + per_row * (crate::plan::TILE_ROWS as u64).min(n);
    if required <= limit_bytes {
        return Ok(());
    }
    Err(Error::does_not_fit(required, limit_bytes, what, vec![]))
}

/// Fails with [`Error::NonFinite`] at the first non-finite value of a block
/// (row-major, `d` columns, first row `start`).
pub(crate) fn check_finite<T: crate::Real>(
    x: &crate::io::Source<'_>,
    block: &[T],
    d: usize,
    start: usize,
) -> Result<()> {
    match block.iter().position(|v| !v.to_f64().is_finite()) {
        None => Ok(()),
        Some(p) => {
            let (row, column) = (start + p / d, p % d);
            Err(Error::NonFinite { path: x.name(), row, column, value: x.value(row, column)?, count: 1 })
        }
    }
}
