//! Fused blocked kernels and their slow reference twins.

mod accumulate;
mod argmin;
#[cfg(target_arch = "x86_64")]
mod argmin_avx512;
mod assign;
mod scatter;

pub use accumulate::{accumulate_block, accumulate_rows, MAX_PARTIAL_BYTES};
pub use argmin::LANES;
pub use assign::{
    assign_block, assign_reference, assign_rows, exact_sq_dist, sq_distances_block, PreparedCenters, Scratch,
    DIRECT_MAX_FEATURES,
};
pub use scatter::add_tile_scatter;
