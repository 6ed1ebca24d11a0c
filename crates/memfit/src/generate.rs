//! Synthetic data sets streamed to `.npy` of any size.

use std::path::Path;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};
use rayon::prelude::*;

use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::io::{check_free_space, npy_file_bytes, Dtype, NpyWriter};

/// Rows per independently seeded chunk: the output does not depend on the
/// block size or the thread count.
pub const SEED_CHUNK_ROWS: usize = 8192;

/// Parameters of an isotropic Gaussian blobs data set, as scikit-learn's
/// `make_blobs`: `centers` centres drawn uniformly in `center_box`, each row
/// drawn from one centre (chosen uniformly at random) plus
/// `N(0, cluster_std²)` noise per feature.
#[derive(Debug, Clone, PartialEq)]
pub struct Blobs {
    /// Rows.
    pub n_samples: usize,
    /// Columns.
    pub n_features: usize,
    /// Number of blobs.
    pub centers: usize,
    /// Standard deviation of each blob.
    pub cluster_std: f64,
    /// Box the centres are drawn in (low, high).
    pub center_box: (f64, f64),
    /// Seed.
    pub seed: u64,
}

impl Default for Blobs {
    /// scikit-learn's `make_blobs` defaults: 100 rows, 2 features, 3 centres,
    /// standard deviation 1, centres in (-10, 10), seed 0.
    fn default() -> Self {
        Blobs { n_samples: 100, n_features: 2, centers: 3, cluster_std: 1.0, center_box: (-10.0, 10.0), seed: 0 }
    }
}

impl Blobs {
    /// Checks the parameters.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] for zero sizes, a negative or non-finite
    /// standard deviation or an empty box.
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [("n_samples", self.n_samples), ("n_features", self.n_features), ("centers", self.centers)] {
            if v == 0 {
                return Err(Error::param(name, "must be at least 1, got 0"));
            }
        }
        if !(self.cluster_std.is_finite() && self.cluster_std >= 0.0) {
            return Err(Error::param("cluster_std", format!("must be finite and >= 0, got {}", self.cluster_std)));
        }
        if !(self.center_box.0 < self.center_box.1 && self.center_box.0.is_finite() && self.center_box.1.is_finite()) {
            return Err(Error::param("center_box", "low must be below high"));
        }
        for (rows, name, param) in [(self.n_samples, "samples", "n_samples"), (self.centers, "centres", "centers")] {
            if rows.checked_mul(self.n_features).and_then(|n| n.checked_mul(8)).is_none_or(|b| b > isize::MAX as usize)
            {
                // The larger factor is the one to lower.
                return Err(Error::param(
                    if rows >= self.n_features { param } else { "n_features" },
                    format!(
                        "{rows} {name} × {} features of 8 bytes exceed the largest array this machine can address",
                        self.n_features
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The blob centres, row-major `(centers, n_features)`.
    pub fn centers(&self) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        (0..self.centers * self.n_features).map(|_| rng.random_range(self.center_box.0..self.center_box.1)).collect()
    }

    /// Fills `out` (row-major) with rows `[start, start + out.len() / n_features)`;
    /// `start` must be a multiple of [`SEED_CHUNK_ROWS`].
    ///
    /// # Panics
    /// If `start` is not a multiple of [`SEED_CHUNK_ROWS`].
    pub fn fill<T: Real>(&self, centers: &[f64], start: usize, out: &mut [T], labels: Option<&mut [u32]>) {
        assert_eq!(start % SEED_CHUNK_ROWS, 0);
        let d = self.n_features;
        let normal = Normal::new(0.0, self.cluster_std).expect("validated std");
        let first_chunk = start / SEED_CHUNK_ROWS;
        let fill_chunk = |(c, (rows, mut labs)): (usize, (&mut [T], Option<&mut [u32]>))| {
            let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
            rng.set_stream(1 + (first_chunk + c) as u64);
            for (i, row) in rows.chunks_mut(d).enumerate() {
                let b = rng.random_range(0..self.centers);
                if let Some(l) = labs.as_deref_mut() {
                    l[i] = b as u32;
                }
                for (j, v) in row.iter_mut().enumerate() {
                    *v = T::from_f64(centers[b * d + j] + normal.sample(&mut rng));
                }
            }
        };
        match labels {
            Some(l) => out
                .par_chunks_mut(SEED_CHUNK_ROWS * d)
                .zip(l.par_chunks_mut(SEED_CHUNK_ROWS).map(Some))
                .enumerate()
                .for_each(fill_chunk),
            None => out.par_chunks_mut(SEED_CHUNK_ROWS * d).map(|r| (r, None)).enumerate().for_each(fill_chunk),
        }
    }

    /// Generates the whole data set in memory (row-major).
    pub fn to_vec<T: Real>(&self) -> Vec<T> {
        let mut out = vec![T::default(); self.n_samples * self.n_features];
        self.fill(&self.centers(), 0, &mut out, None);
        out
    }

    /// Streams the data set to a `.npy` file of dtype `T` atomically, holding
    /// at most `block_rows` (rounded up to [`SEED_CHUNK_ROWS`]) rows in memory; with
    /// `labels_path` also writes the true blob of each row (`int32`).
    /// `cancel` is checked once per block.
    ///
    /// # Errors
    /// [`Error::Io`] on write failures; [`Error::NoDiskSpace`] before
    /// anything is written when the files' filesystem has less free space
    /// than they need (see [`check_free_space`]); [`Error::Cancelled`]. No
    /// partial file is left behind.
    pub fn write_npy<T: Real>(
        &self,
        path: &Path,
        labels_path: Option<&Path>,
        block_rows: usize,
        cancel: &crate::exec::Cancel,
    ) -> Result<()> {
        self.validate()?;
        let (n, d) = (self.n_samples, self.n_features);
        let centers = self.centers();
        let block = block_rows.div_ceil(SEED_CHUNK_ROWS).max(1) * SEED_CHUNK_ROWS;
        // Both files are refused before either is written when their
        // filesystem cannot hold them together.
        let mut outputs = vec![(path, npy_file_bytes(T::DTYPE, &[n, d]))];
        outputs.extend(labels_path.map(|p| (p, npy_file_bytes(Dtype::I32, &[n]))));
        check_free_space(&outputs)?;
        let mut w = NpyWriter::create(path, T::DTYPE, &[n, d])?;
        let mut lw = labels_path.map(|p| NpyWriter::create(p, Dtype::I32, &[n])).transpose()?;
        let mut buf = vec![T::default(); block.min(n) * d];
        let mut labels = vec![0u32; if lw.is_some() { block.min(n) } else { 0 }];
        let mut start = 0;
        while start < n {
            if cancel.is_cancelled() {
                return Err(Error::Cancelled);
            }
            let rows = block.min(n - start);
            let l = lw.as_ref().map(|_| &mut labels[..rows]);
            self.fill(&centers, start, &mut buf[..rows * d], l);
            if let Some(i) = crate::kernels::first_non_finite(&buf[..rows * d]) {
                return Err(Error::param(
                    "cluster_std",
                    format!(
                        "row {}, column {} of the blobs is {}: the centres' box and a standard deviation of {:e} \
                         overflow {}",
                        start + i / d,
                        i % d,
                        buf[i].to_f64(),
                        self.cluster_std,
                        T::DTYPE.name()
                    ),
                ));
            }
            w.write_with(&buf[..rows * d], T::write_le)?;
            if let Some(lw) = lw.as_mut() {
                lw.write_with(&labels[..rows], |v, o| o.extend_from_slice(&(v as i32).to_le_bytes()))?;
            }
            start += rows;
        }
        w.commit()?;
        if let Some(lw) = lw {
            lw.commit()?;
        }
        Ok(())
    }
}
