//! Fused blocked kernels and their slow reference twins.

mod accumulate;
mod assign;

pub use accumulate::accumulate_block;
pub use assign::{
    assign_block, assign_reference, assign_rows, exact_sq_dist, PreparedCenters, DIRECT_MAX_FEATURES, LANES,
};
