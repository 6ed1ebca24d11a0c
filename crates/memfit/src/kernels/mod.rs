//! Fused blocked kernels and their slow reference twins.

mod accumulate;
#[cfg(target_arch = "x86_64")]
mod argmin_avx512;
mod assign;

pub use accumulate::{accumulate_block, Accumulator, CHUNK_ROWS};
pub use assign::{
    assign_block, assign_reference, assign_rows, exact_sq_dist, sq_distances_block, PreparedCenters,
    DIRECT_MAX_FEATURES, LANES,
};

/// The AVX-512 direct kernel for `f64` when this CPU has one; see [`crate::Real::direct_argmin_simd`].
pub(crate) fn direct_argmin_f64_simd(
    x: &[f64],
    d: usize,
    origin: &[f64],
    t: &[f64],
    n: &[f64],
    labels: &mut [u32],
    gaps: &mut [f64],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    return argmin_avx512::run_f64(x, d, origin, t, n, labels, gaps);
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// The AVX-512 direct kernel for `f32` when this CPU has one; see [`crate::Real::direct_argmin_simd`].
pub(crate) fn direct_argmin_f32_simd(
    x: &[f32],
    d: usize,
    origin: &[f32],
    t: &[f32],
    n: &[f32],
    labels: &mut [u32],
    gaps: &mut [f32],
) -> bool {
    #[cfg(target_arch = "x86_64")]
    return argmin_avx512::run_f32(x, d, origin, t, n, labels, gaps);
    #[cfg(not(target_arch = "x86_64"))]
    false
}
