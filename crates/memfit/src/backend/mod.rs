//! The backend seam: the kernel-level operations the algorithms' passes
//! call, and the bytes each holds in host and in device memory. k-means,
//! mini-batch k-means, the Gaussian mixtures and the weighted scatter call
//! these operations ([`Ops`]) of the run's [`crate::exec::Backend`]
//! (`Backend::ops`), never a kernel, faer or a device library directly, so
//! that a device backend (CUDA, issue 26) slots in under the same passes,
//! plans and runner.
//!
//! Every operation keeps the contract of the CPU kernel it names:
//! - [`Ops::assign_block`]: the exact nearest centre of every row
//!   (first index on float64 ties) and its exact float64 squared distance,
//!   for any tile size and worker count;
//! - [`Ops::cluster_sums`]: compensated float64 per-cluster sums in row
//!   order;
//! - [`Ops::log_prob_block`] and [`Ops::log_sum_exp_rows`]: a
//!   mixture's log-densities of a block and the responsibilities of one
//!   tile, in row order (a device backend's log-densities are the host's to
//!   rounding, not bit for bit: see `device::cuda`);
//! - [`Ops::scatter_tile`]: one tile's weighted scatter `Xᵀ diag(w) X`;
//! - [`Ops::assign_sparse`], [`Ops::sparse_sums`], [`Ops::sq_distances_sparse`]:
//!   the same for sparse (CSR) rows (see `kernels::assign_csr`).
//!
//! So a backend gives the CPU's bits, or is not a backend. [`Cpu`] is the
//! host's: today's kernels, unchanged.

mod cpu;

pub(crate) use cpu::Cpu;

use faer::Par;

use crate::error::Result;
use crate::exec::CsrIndex;
use crate::kernels::{self, ClusterSums, Estep, PreparedCenters, Scratch, SparseScratch};
use crate::Real;

/// Bytes an operation's buffers hold: in host memory (counted by the host
/// planner) and in device memory (counted by the device planner).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct OpBytes {
    /// Host bytes.
    pub host: u64,
    /// Device bytes (0 on the CPU).
    pub device: u64,
}

/// The operations of the passes over rows of `T`, on one device. The
/// provided methods run on the host (the CPU's kernels): a device backend
/// overrides those it runs on its device.
pub(crate) trait Ops<T: Real>: Sync {
    /// The bytes of one worker's assignment buffers ([`Scratch`] on the
    /// CPU) for tiles of `tile_rows` rows, `n_clusters` centres taken
    /// `k_tile` at a time, `n_features` features and a compute type of
    /// `compute_bytes` bytes.
    fn assign_bytes(
        &self,
        tile_rows: usize,
        n_clusters: usize,
        k_tile: usize,
        n_features: usize,
        compute_bytes: usize,
    ) -> OpBytes;

    /// The nearest centre of every row of the block `x` (row-major
    /// `(rows, d)`, `rows = labels.len()`) into `labels`, and its exact
    /// squared distance into `min_dist`; tiles of `tile_rows` rows dealt to
    /// the workers of `scratch`. Results depend on neither.
    ///
    /// # Errors
    /// A device backend's device errors (the CPU's never fails).
    #[allow(clippy::too_many_arguments)]
    fn assign_block(
        &self,
        x: &[T],
        centers: &PreparedCenters<T>,
        tile_rows: usize,
        k_tile: usize,
        scratch: &mut [Scratch<T>],
        labels: &mut [u32],
        min_dist: &mut [f64],
    ) -> Result<()>;

    /// [`Ops::assign_block`] for one tile on one worker, with each
    /// row's lower bound on its second-nearest distance into `second`.
    #[allow(clippy::too_many_arguments)]
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

    /// Exact squared distances of every row of `x` to every centre into
    /// `out` (row-major `(rows, n_clusters)`).
    fn sq_distances_block(&self, x: &[T], centers: &PreparedCenters<T>, out: &mut [f64]) {
        kernels::sq_distances_block(x, centers, out);
    }

    /// Adds `w_i · x_i` and `w_i` to the sums of cluster `labels[i]` for
    /// every row of `x` (row-major `(rows, d)`), in row order; with
    /// `split_clusters` the clusters are shared out between workers (the
    /// same bits).
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

    /// Weighted log-densities `ln π_k + log N(x_i | μ_k, Σ_k)` of every row
    /// of the block `xb` (row-major `(rows, d)`) into `out` (row-major
    /// `(rows, n_components)`); on the CPU, tiles dealt to the workers whose
    /// E-step buffers are `bufs`.
    ///
    /// # Errors
    /// A device backend's device errors (the CPU's never fails).
    fn log_prob_block(&self, xb: &[T], estep: &Estep<T>, bufs: &mut [Vec<T>], out: &mut [f64]) -> Result<()> {
        kernels::log_prob_block(xb, estep, bufs, out);
        Ok(())
    }

    /// Turns a tile's log-densities `r` (row-major `(rows, k)`) into
    /// responsibilities in place, writes each row's `log p(x_i)` into
    /// `ln` and its label into `labels` (when not empty), and returns
    /// `Σ_i w_i log p(x_i)` in row order (see `kernels::log_sum_exp_rows`).
    fn log_sum_exp_rows(&self, r: &mut [f64], k: usize, ln: &mut [f64], labels: &mut [u32], w: Option<&[f64]>) -> f64 {
        kernels::log_sum_exp_rows(r, k, ln, labels, w)
    }

    /// Adds one tile's `X_tᵀ diag(w) X_t` (`xt` row-major `(rows, d)`) to
    /// `s` (row-major `(d, d)`); `weighted` holds the weighted tile.
    fn scatter_tile(&self, xt: &[f64], w: Option<&[f64]>, d: usize, weighted: &mut [f64], s: &mut [f64], par: Par) {
        kernels::add_tile_scatter(xt, w, d, weighted, s, par);
    }

    /// [`Ops::assign_block`] for the rows of a CSR block (values `x`,
    /// structure `csr`): the dense kernel's labels, each row's distance
    /// from its stored values (see `kernels::assign_csr`); rows dealt to
    /// the workers of `scratch`.
    ///
    /// # Errors
    /// A device backend's device errors (the CPU's never fails).
    #[allow(clippy::too_many_arguments)]
    fn assign_sparse(
        &self,
        x: &[T],
        csr: CsrIndex<'_>,
        centers: &PreparedCenters<T>,
        scratch: &mut [SparseScratch<T>],
        labels: &mut [u32],
        min_dist: &mut [f64],
    ) -> Result<()> {
        kernels::assign_csr(x, csr, centers, scratch, labels, min_dist);
        Ok(())
    }

    /// [`Ops::cluster_sums`] for the rows of a CSR block, in row order (the
    /// dense sums' bits); with `split_clusters` the clusters are shared out
    /// between workers (the same bits).
    fn sparse_sums(
        &self,
        x: &[T],
        csr: CsrIndex<'_>,
        labels: &[u32],
        sample_weight: Option<&[f64]>,
        sums: &mut ClusterSums,
        split_clusters: bool,
    ) {
        kernels::accumulate_csr(x, csr, labels, sample_weight, sums, split_clusters);
    }

    /// [`Ops::sq_distances_block`] for the rows of a CSR block.
    fn sq_distances_sparse(&self, x: &[T], csr: CsrIndex<'_>, centers: &PreparedCenters<T>, out: &mut [f64]) {
        kernels::sq_distances_csr(x, csr, centers, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::Backend;

    #[test]
    fn the_cpu_backend_declares_host_bytes_only() {
        let bytes = Backend::Cpu.assign_bytes(256, 200, 200, 3, 8);
        assert_eq!(bytes, OpBytes { host: Scratch::<f64>::bytes(256, 200, 200, 3, 8), device: 0 });
        assert!(bytes.host > 0);
    }

    #[test]
    fn the_cpu_backend_gives_the_kernels_bits() {
        // Through the seam or straight to the kernel: the same labels,
        // distances and sums.
        let (n, d, k) = (1000, 5, 7);
        let x: Vec<f64> = (0..n * d).map(|i| ((i * 7919) % 1013) as f64 / 17.0).collect();
        let c: Vec<f64> = x[..k * d].to_vec();
        let p = PreparedCenters::<f64>::new(&c, k, d);
        let b = Backend::Cpu.ops::<f64>();
        let mut tiles = vec![Scratch::new(128, k, k, d); 2];
        let (mut l1, mut d1) = (vec![0; n], vec![0.0; n]);
        b.assign_block(&x, &p, 128, k, &mut tiles, &mut l1, &mut d1).unwrap();
        let (mut l2, mut d2) = (vec![0; n], vec![0.0; n]);
        crate::kernels::assign_reference(&x, &p, &mut l2, &mut d2);
        assert_eq!(l1, l2);
        assert_eq!(
            d1.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            d2.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        let (mut s1, mut s2) = (ClusterSums::new(k, d), ClusterSums::new(k, d));
        b.cluster_sums(&x, d, &l1, None, &mut s1, true);
        b.cluster_sums(&x, d, &l1, None, &mut s2, false);
        for j in 0..k {
            assert_eq!(s1.weight(j).to_bits(), s2.weight(j).to_bits());
            for q in 0..d {
                assert_eq!(s1.mean(j, q, d).to_bits(), s2.mean(j, q, d).to_bits());
            }
        }
    }
}
