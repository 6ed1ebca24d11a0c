//! The host's backend: the blocked CPU kernels of [`crate::kernels`].

use faer::Par;

use super::{OpBytes, Ops};
use crate::error::Result;
use crate::kernels::{self, ClusterSums, Estep, PreparedCenters, Scratch};
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

    fn assign_rows(
        &self,
        x: &[T],
        centers: &PreparedCenters<T>,
        k_tile: usize,
        scratch: &mut Scratch<T>,
        labels: &mut [u32],
        min_dist: &mut [f64],
        second: Option<&mut [f64]>,
    ) {
        kernels::assign_rows(x, centers, k_tile, scratch, labels, min_dist, second);
    }

    fn sq_distances_block(&self, x: &[T], centers: &PreparedCenters<T>, out: &mut [f64]) {
        kernels::sq_distances_block(x, centers, out);
    }

    fn cluster_sums(
        &self,
        x: &[T],
        d: usize,
        labels: &[u32],
        sample_weight: Option<&[f64]>,
        sums: &mut ClusterSums,
        split_clusters: bool,
    ) {
        if split_clusters {
            kernels::accumulate_block(x, d, labels, sample_weight, sums);
        } else {
            kernels::accumulate_rows(x, d, labels, sample_weight, sums);
        }
    }

    fn log_prob_tile(&self, xt: &[T], estep: &Estep<T>, buf: &mut [T], out: &mut [f64]) {
        kernels::log_prob_tile(xt, estep, buf, out);
    }

    fn log_sum_exp_rows(&self, r: &mut [f64], k: usize, log_norm: &mut [f64], w: Option<&[f64]>) -> f64 {
        kernels::log_sum_exp_rows(r, k, log_norm, w)
    }

    fn scatter_tile(&self, xt: &[f64], w: Option<&[f64]>, d: usize, weighted: &mut [f64], s: &mut [f64], par: Par) {
        kernels::add_tile_scatter(xt, w, d, weighted, s, par);
    }
}
