//! Blocked linear-algebra kernels over data larger than memory, each with a
//! memory plan: the row-wise quadratic form `x_iᵀ Q x_i` and the weighted
//! scatter `Xᵀ diag(w) X`; and [`einsum`], NumPy-style contractions of dense
//! in-memory blocks for the lazy array engine.

pub mod einsum;
mod quadratic_form;
mod scatter;

pub use quadratic_form::{holds_in_float32, plan_row_quadratic_form, row_quadratic_form};
pub use scatter::{plan_weighted_scatter, weighted_scatter, weighted_scatter_split};
pub(crate) use scatter::{run_scatter_task, SCATTER};
