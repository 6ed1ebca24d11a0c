//! Fused blocked kernels and their slow reference twins.

mod accumulate;
mod argmin;
#[cfg(target_arch = "x86_64")]
mod argmin_avx2;
#[cfg(target_arch = "x86_64")]
mod argmin_avx512;
mod assign;
mod finite;
mod gaussian;
mod half_rows;
mod scatter;
mod sparse;
#[cfg(target_arch = "x86_64")]
mod sq_avx512;
mod unit;

pub use accumulate::{accumulate_block, accumulate_rows, ClusterSums, MAX_PARTIAL_BYTES};
pub use argmin::LANES;
pub use assign::{
    assign_block, assign_reference, assign_rows, decision_dist, exact_sq_dist, second_bound, sq_distances_block,
    underflow_slack, unit_sq_dist, PreparedCenters, Scratch, DIRECT_MAX_FEATURES,
};
pub use finite::first_non_finite;
pub use gaussian::STACKED_MAX_FEATURES;
pub(crate) use gaussian::{
    add_weighted_log_norm, clear_upper_vector_state, exp_or_zero, first_max, log_prob_block, log_sum_exp_rows,
    stacked_group, Estep, Prec,
};
pub use scatter::add_tile_scatter;
pub use sparse::{accumulate_csr, assign_csr, sq_distances_csr, SparseCenters, SparseScratch};
pub use unit::{unit_row, unit_sparse_row};
