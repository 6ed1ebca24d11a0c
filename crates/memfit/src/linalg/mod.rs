//! Blocked linear-algebra kernels over data larger than memory, each with a
//! memory plan: the row-wise quadratic form `x_iᵀ Q x_i` and the weighted
//! scatter `Xᵀ diag(w) X`.

mod quadratic_form;
mod scatter;

pub use quadratic_form::{plan_row_quadratic_form, row_quadratic_form};
pub use scatter::{plan_weighted_scatter, weighted_scatter, weighted_scatter_split};

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
