//! The host's backend: the blocked CPU kernels of [`crate::kernels`] (the
//! operations it does not name here are [`Ops`]'s provided ones, the host's).

use super::{OpBytes, Ops};
use crate::error::Result;
use crate::kernels::{self, PreparedCenters, Scratch};
use crate::Real;

/// The CPU backend (the rayon pool of the run).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cpu;

impl<T: Real> Ops<T> for Cpu {
    fn assign_bytes(
        &self,
        tile_rows: usize,
        n_clusters: usize,
        k_tile: usize,
        n_features: usize,
        compute_bytes: usize,
    ) -> OpBytes {
        OpBytes { host: Scratch::<T>::bytes(tile_rows, n_clusters, k_tile, n_features, compute_bytes), device: 0 }
    }

    fn assign_block(
        &self,
        x: &[T],
        centers: &PreparedCenters<T>,
        tile_rows: usize,
        k_tile: usize,
        scratch: &mut [Scratch<T>],
        labels: &mut [u32],
        min_dist: &mut [f64],
    ) -> Result<()> {
        kernels::assign_block(x, centers, tile_rows, k_tile, scratch, labels, min_dist);
        Ok(())
    }
}
