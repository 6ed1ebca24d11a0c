//! Component groups: what a mixture keeps on disk and per row when its `K`
//! components' factors and sums do not fit the memory limit together.
//!
//! - [`Groups`]: `K` components cut into equal contiguous groups.
//! - [`merge_max`], [`add_exps`], [`log_norm`], [`responsibilities`]: the
//!   per-row log-sum-exp across groups (max and label, then the sum of
//!   exponentials), with the bits of the in-memory E-step.
//! - [`RowState`]: that running state for every row, in memory or in a
//!   scratch file read and written block by block.
//! - [`ParamStore`]: each component's covariance and precision factor in a
//!   scratch file, in one or two slots (the current run, and the best run so
//!   far when `n_init > 1`).

use std::ops::Range;
use std::path::Path;

use super::components::{component_cov_len, factor_len};
use super::params::CovarianceType;
use crate::error::Result;
use crate::io::ScratchFile;
use crate::kernels::{exp_or_zero, first_max};

/// `K` components cut into `count` contiguous groups of at most `size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Groups {
    pub(crate) k: usize,
    pub(crate) size: usize,
    pub(crate) count: usize,
}

impl Groups {
    /// The fewest equal groups of at most `max_size` components.
    pub(crate) fn of(k: usize, max_size: usize) -> Self {
        let count = k.div_ceil(max_size.max(1)).max(1);
        Groups { k, size: k.div_ceil(count), count }
    }

    /// Components of group `g`.
    pub(crate) fn range(&self, g: usize) -> Range<usize> {
        g * self.size..((g + 1) * self.size).min(self.k)
    }
}

/// Values per row of [`RowState`]: the largest weighted log-density `M`,
/// the sum `S = Σ_k e^(v_k − M)` so far, and the label (the first
/// component whose log-density is `M`).
///
/// The groups' passes compute what the in-memory E-step
/// (`kernels::log_sum_exp_rows`) computes, in the same order, so that a
/// grouped fit has the bits of the fit in memory whatever the groups:
/// [`merge_max`] visits the groups from the last to the first (`M` is exact
/// in any order; the label keeps the first maximum), then [`add_exps`]
/// adds each group's `e^(v − M)` in component order, starting with group 0
/// (whose pass is the last of the max sweep, so it adds at once), and
/// [`log_norm`] and [`responsibilities`] finish as in memory.
pub(crate) const ROW_STATE: usize = 3;

/// The state of a row before any group: no density, label 0.
pub(crate) const FRESH_ROW: [f64; ROW_STATE] = [f64::NEG_INFINITY, 0.0, 0.0];

/// Merges the weighted log-densities `v` of components `first..first +
/// v.len()` of one row into the max and label of its state `s`, for groups
/// visited from the last to the first: the group's first maximum
/// ([`first_max`]) replaces the state's when it is at least as large, so
/// the label is the first maximum over all components (numpy's `argmax`).
#[inline]
pub(crate) fn merge_max(s: &mut [f64], v: &[f64], first: usize) {
    let (m, at) = first_max(v);
    if m >= s[0] {
        s[0] = m;
        s[2] = (first + at) as f64;
    }
}

/// Adds `e^(v − M)` of the group's log-densities `v` to the state's sum, in
/// component order, once `M` is final (nothing when every density is 0).
#[inline]
pub(crate) fn add_exps(s: &mut [f64], v: &[f64]) {
    if s[0] > f64::NEG_INFINITY {
        for &x in v {
            s[1] += exp_or_zero(x - s[0]);
        }
    }
}

/// `log p(x_i) = M + ln S` of a finished state (−∞ when every density is 0).
#[inline]
pub(crate) fn log_norm(s: &[f64]) -> f64 {
    if s[0] == f64::NEG_INFINITY {
        f64::NEG_INFINITY
    } else {
        s[0] + s[1].ln()
    }
}

/// Turns the group's log-densities `v` into responsibilities
/// `e^(v − M) · (1 / S)` in place (NaN when every density is 0).
#[inline]
pub(crate) fn responsibilities(v: &mut [f64], s: &[f64]) {
    if s[0] == f64::NEG_INFINITY {
        v.fill(f64::NAN);
        return;
    }
    let inv = 1.0 / s[1];
    for x in v {
        *x = exp_or_zero(*x - s[0]) * inv;
    }
}

/// Every row's [`ROW_STATE`] values, held in memory or in a scratch file.
pub(crate) struct RowState {
    first_row: usize,
    memory: Vec<f64>,
    file: Option<ScratchFile>,
    /// One block's states when they live on disk.
    block: Vec<f64>,
}

impl RowState {
    /// Bytes per row.
    pub(crate) const BYTES_PER_ROW: u64 = (ROW_STATE * 8) as u64;

    /// States for rows `first_row..first_row + n_rows`, in memory, or with
    /// `on_disk` in a scratch file in `dir` read through a buffer of
    /// `block_rows` rows.
    ///
    /// # Errors
    /// As [`ScratchFile::create`].
    pub(crate) fn new(first_row: usize, n_rows: usize, on_disk: bool, dir: &Path, block_rows: usize) -> Result<Self> {
        let values = n_rows * ROW_STATE;
        Ok(if on_disk {
            RowState {
                first_row,
                memory: Vec::new(),
                file: Some(ScratchFile::create(dir, values as u64)?),
                block: vec![0.0; block_rows * ROW_STATE],
            }
        } else {
            RowState { first_row, memory: vec![0.0; values], file: None, block: Vec::new() }
        })
    }

    /// The states of `rows` rows from row `start` (fresh ones with `fresh`),
    /// to change and then [`Self::store`].
    ///
    /// # Errors
    /// Scratch read errors.
    pub(crate) fn rows(&mut self, start: usize, rows: usize, fresh: bool) -> Result<&mut [f64]> {
        let at = (start - self.first_row) * ROW_STATE;
        let s = match &self.file {
            Some(f) => {
                let s = &mut self.block[..rows * ROW_STATE];
                if !fresh {
                    f.read(at as u64, s)?;
                }
                s
            }
            None => &mut self.memory[at..at + rows * ROW_STATE],
        };
        if fresh {
            for r in s.chunks_exact_mut(ROW_STATE) {
                r.copy_from_slice(&FRESH_ROW);
            }
        }
        Ok(s)
    }

    /// Writes back the states [`Self::rows`] returned for row `start`.
    ///
    /// # Errors
    /// Scratch write errors.
    pub(crate) fn store(&mut self, start: usize, rows: usize) -> Result<()> {
        match &self.file {
            Some(f) => f.write(((start - self.first_row) * ROW_STATE) as u64, &self.block[..rows * ROW_STATE]),
            None => Ok(()),
        }
    }
}

/// Each component's covariance and precision factor (as
/// [`super::components::factor_of_cov`] stores them) in a scratch file.
pub(crate) struct ParamStore {
    file: ScratchFile,
    k: usize,
    cov: usize,
    factor: usize,
}

impl ParamStore {
    /// Values per component.
    pub(crate) fn record_len(t: CovarianceType, d: usize) -> usize {
        component_cov_len(t, d) + factor_len(t, d)
    }

    /// Bytes on disk for `slots` sets of `k` components.
    pub(crate) fn bytes(t: CovarianceType, k: usize, d: usize, slots: usize) -> u64 {
        (slots * k * Self::record_len(t, d) * 8) as u64
    }

    /// A store of `slots` sets of `k` components in `dir`.
    ///
    /// # Errors
    /// As [`ScratchFile::create`].
    pub(crate) fn new(t: CovarianceType, k: usize, d: usize, slots: usize, dir: &Path) -> Result<Self> {
        let file = ScratchFile::create(dir, Self::bytes(t, k, d, slots) / 8)?;
        Ok(ParamStore { file, k, cov: component_cov_len(t, d), factor: factor_len(t, d) })
    }

    fn at(&self, slot: usize, c: usize) -> u64 {
        ((slot * self.k + c) * (self.cov + self.factor)) as u64
    }

    /// Stores component `c`'s covariance in `slot`.
    ///
    /// # Errors
    /// Scratch write errors.
    pub(crate) fn put_cov(&self, slot: usize, c: usize, cov: &[f64]) -> Result<()> {
        self.file.write(self.at(slot, c), &cov[..self.cov])
    }

    /// Stores component `c`'s precision factor in `slot`.
    ///
    /// # Errors
    /// Scratch write errors.
    pub(crate) fn put_factor(&self, slot: usize, c: usize, factor: &[f64]) -> Result<()> {
        self.file.write(self.at(slot, c) + self.cov as u64, &factor[..self.factor])
    }

    /// Reads component `c`'s covariance from `slot` into `out`.
    ///
    /// # Errors
    /// Scratch read errors.
    pub(crate) fn cov(&self, slot: usize, c: usize, out: &mut [f64]) -> Result<()> {
        self.file.read(self.at(slot, c), &mut out[..self.cov])
    }

    /// Reads component `c`'s precision factor from `slot` into `out`.
    ///
    /// # Errors
    /// Scratch read errors.
    pub(crate) fn factor(&self, slot: usize, c: usize, out: &mut [f64]) -> Result<()> {
        self.file.read(self.at(slot, c) + self.cov as u64, &mut out[..self.factor])
    }
}

impl std::fmt::Debug for ParamStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ParamStore({} components in a scratch file)", self.k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// One row's `(log p, label, responsibilities)` from groups of `size`
    /// components, in the order of the grouped passes.
    fn grouped(v: &[f64], size: usize) -> (f64, u32, Vec<f64>) {
        let mut s = FRESH_ROW;
        let parts: Vec<&[f64]> = v.chunks(size).collect();
        for (g, part) in parts.iter().enumerate().rev() {
            merge_max(&mut s, part, g * size);
        }
        for part in &parts {
            add_exps(&mut s, part);
        }
        let mut r = v.to_vec();
        for part in r.chunks_mut(size) {
            responsibilities(part, &s);
        }
        (log_norm(&s), s[2] as u32, r)
    }

    /// The same row through the in-memory E-step's kernel.
    fn whole(v: &[f64]) -> (f64, u32, Vec<f64>) {
        let (mut r, mut l, mut label) = (v.to_vec(), [0.0], [0u32]);
        crate::kernels::log_sum_exp_rows(&mut r, v.len(), &mut l, &mut label, None);
        (l[0], label[0], r)
    }

    fn same_bits(a: &(f64, u32, Vec<f64>), b: &(f64, u32, Vec<f64>)) -> bool {
        a.0.to_bits() == b.0.to_bits() && a.1 == b.1 && a.2.iter().zip(&b.2).all(|(x, y)| x.to_bits() == y.to_bits())
    }

    #[test]
    fn groups_give_the_bits_of_the_whole_log_sum_exp() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for trial in 0..500 {
            let k = rng.random_range(1..300);
            let scale = [1.0, 50.0, 2000.0, 1e6][trial % 4];
            let offset = rng.random_range(-1e4..1e4);
            let mut v: Vec<f64> = (0..k).map(|_| offset + scale * rng.random_range(-1.0..1.0)).collect();
            if trial % 3 == 0 {
                // Ties, and components of zero density.
                for i in (0..k).step_by(3) {
                    v[i] = if i % 2 == 0 { v[0] } else { f64::NEG_INFINITY };
                }
            }
            let want = whole(&v);
            for size in [1, 2, 7, 64, k] {
                assert!(same_bits(&grouped(&v, size), &want), "{k} {size}");
            }
        }
    }

    #[test]
    fn groups_without_density_and_ties() {
        let ninf = f64::NEG_INFINITY;
        for (v, size) in [
            // A group whose densities are all zero changes nothing.
            (vec![ninf, ninf, -3.0, -1.0, ninf, ninf], 2),
            // Ties keep the first component, across groups too.
            (vec![-1.0, -2.0, -1.0, -1.0], 2),
            (vec![-0.0, 0.0, -0.0], 1),
            // Far-apart groups: the smaller one underflows to nothing.
            (vec![-2000.0, 0.0], 1),
        ] {
            assert!(same_bits(&grouped(&v, size), &whole(&v)), "{v:?}");
        }
        assert_eq!(grouped(&[ninf, ninf, -3.0, -1.0, ninf, ninf], 2).1, 3);
        assert_eq!(grouped(&[-1.0, -2.0, -1.0, -1.0], 2).1, 0);
        // No density at all: −∞, label 0, NaN responsibilities (the caller
        // reports the row).
        let (l, label, r) = grouped(&[ninf; 4], 2);
        assert_eq!((l, label), (ninf, 0));
        assert!(r.iter().all(|x| x.is_nan()));
        assert_eq!(whole(&[ninf; 4]).0, ninf);
    }

    #[test]
    fn equal_groups_cover_the_components() {
        for (k, max) in [(10, 3), (64, 16), (7, 7), (7, 100), (200, 9)] {
            let g = Groups::of(k, max);
            assert!(g.size <= max.min(k));
            let all: Vec<usize> = (0..g.count).flat_map(|i| g.range(i)).collect();
            assert_eq!(all, (0..k).collect::<Vec<_>>(), "{k} {max}");
        }
    }

    #[test]
    fn row_states_on_disk_equal_those_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        for on_disk in [false, true] {
            let mut st = RowState::new(100, 10, on_disk, dir.path(), 4).unwrap();
            for (start, rows) in [(100, 4), (104, 4), (108, 2)] {
                let s = st.rows(start, rows, true).unwrap();
                for (i, r) in s.chunks_exact_mut(ROW_STATE).enumerate() {
                    merge_max(r, &[(start + i) as f64], 0);
                }
                st.store(start, rows).unwrap();
            }
            let s = st.rows(104, 4, false).unwrap();
            assert_eq!(s[0], 104.0);
            assert_eq!(s[ROW_STATE * 3], 107.0);
        }
    }

    #[test]
    fn the_store_keeps_slots_apart() {
        let dir = tempfile::tempdir().unwrap();
        let d = 3;
        let st = ParamStore::new(CovarianceType::Full, 2, d, 2, dir.path()).unwrap();
        st.put_cov(1, 1, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        st.put_factor(1, 1, &[7.0; 6]).unwrap();
        st.put_cov(0, 1, &[9.0; 6]).unwrap();
        let mut out = vec![0.0; 6];
        st.cov(1, 1, &mut out).unwrap();
        assert_eq!(out, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        st.factor(1, 1, &mut out).unwrap();
        assert_eq!(out, [7.0; 6]);
        st.factor(0, 0, &mut out).unwrap();
        assert_eq!(out, [0.0; 6]);
    }
}
