//! Passes over a selection of rows rather than a range: rows given by
//! their sorted indices, or keyed by [`row_key`] (a uniform sample that
//! depends on the seed and the row index only, so it is the same whichever
//! pieces the rows are read in).

use super::{row_key, run_split, Block, Cancel, Leaf, Pass, RowSplit};
use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::io::BlockReader;

/// Which rows a pass sees.
#[derive(Debug, Clone, PartialEq)]
pub enum Selection {
    /// These rows (source indices, strictly increasing).
    Indices(Vec<usize>),
    /// Each row whose [`row_key`] under `seed` falls in the lowest
    /// `fraction` (in `[0, 1]`) of the key space: a uniform sample of about
    /// `fraction × n_samples` rows.
    Keyed {
        /// The sample's seed.
        seed: u64,
        /// The share of rows kept.
        fraction: f64,
    },
}

impl Selection {
    /// Rows `indices`.
    ///
    /// # Errors
    /// [`Error::InvalidParameter`] (`rows`) unless they strictly increase.
    pub fn indices(indices: Vec<usize>) -> Result<Self> {
        if let Some(w) = indices.windows(2).find(|w| w[1] <= w[0]) {
            return Err(Error::param(
                "rows",
                format!("row indices must strictly increase; {} comes after {}", w[1], w[0]),
            ));
        }
        Ok(Selection::Indices(indices))
    }

    /// Whether source row `row` is selected.
    pub fn contains(&self, row: usize) -> bool {
        match self {
            Selection::Indices(ix) => ix.binary_search(&row).is_ok(),
            Selection::Keyed { seed, fraction } => (row_key(*seed, row) as f64) < fraction * u64::MAX as f64,
        }
    }
}

/// Hands a pass only the selected rows of each block (compacted, with
/// [`Block::index`] naming them); their statistics go to the leaf of the
/// accumulation chunk the rows come from, so the fold is the one of the
/// rows' own positions.
struct Selected<'p, 's, T, P> {
    pass: &'p mut P,
    selection: &'s Selection,
    x: Vec<T>,
    w: Vec<f64>,
    index: Vec<usize>,
}

impl<T: Real, P: Pass<T>> Pass<T> for Selected<'_, '_, T, P> {
    type Stats = P::Stats;

    fn new_stats(&self) -> P::Stats {
        self.pass.new_stats()
    }

    fn checks_finite(&self) -> bool {
        self.pass.checks_finite()
    }

    fn block(&mut self, block: Block<'_, T>, leaves: &mut [Leaf<'_, P::Stats>]) -> Result<()> {
        let d = block.n_features;
        let (x, w, index) = (&mut self.x, &mut self.w, &mut self.index);
        x.clear();
        w.clear();
        index.clear();
        for i in 0..block.rows() {
            let row = block.row(i);
            if self.selection.contains(row) {
                index.push(row);
                x.extend_from_slice(&block.x[i * d..(i + 1) * d]);
                if let Some(bw) = block.w {
                    w.push(bw[i]);
                }
            }
        }
        if index.is_empty() {
            return Ok(());
        }
        let picked = Block {
            start: index[0],
            x,
            w: block.w.map(|_| &w[..]),
            n_features: d,
            layout: block.layout,
            index: Some(index),
            csr: None,
        };
        let n = picked.rows();
        self.pass.block(picked, &mut [Leaf { rows: 0..n, stats: &mut *leaves[0].stats }])
    }
}

/// Runs `pass` over the rows of `blocks`' source that `selection` keeps
/// (every block is read; the pass sees the kept rows only, each block's
/// compacted with [`Block::index`] naming them) and returns its statistics,
/// folded by accumulation chunk of the rows' own positions (see
/// [`super::run_pass`]): the same bits as a pass over the kept rows'
/// chunks. A pass that checks finiteness checks every row read.
///
/// # Errors
/// As [`run_split`].
pub fn run_selected<T: Real, P: Pass<T>>(
    pass: &mut P,
    blocks: &mut BlockReader<'_, '_, T>,
    selection: &Selection,
    shift: &[f64],
    cancel: &Cancel,
) -> Result<P::Stats> {
    let mut adapter = Selected { pass, selection, x: Vec::new(), w: Vec::new(), index: Vec::new() };
    run_split(&mut adapter, blocks, &RowSplit::default(), shift, cancel)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::{Merge, CHUNK_ROWS};
    use crate::io::{ArrayRef, Source, Values};

    /// Sum of the first column and the rows seen.
    struct Sum;
    impl Pass<f64> for Sum {
        type Stats = (f64, f64);
        fn new_stats(&self) -> (f64, f64) {
            (0.0, 0.0)
        }
        fn block(&mut self, b: Block<'_, f64>, leaves: &mut [Leaf<'_, (f64, f64)>]) -> Result<()> {
            for leaf in leaves.iter_mut() {
                let sub = b.sub(leaf.rows.clone());
                for i in 0..sub.rows() {
                    leaf.stats.0 += sub.x[i * 2];
                    leaf.stats.1 += 1.0;
                    assert_eq!(sub.x[i * 2 + 1], sub.row(i) as f64, "the index names the row");
                }
            }
            Ok(())
        }
    }

    #[test]
    fn passes_see_the_selected_rows_folded_by_chunk() {
        let n = 2 * CHUNK_ROWS + 77;
        let x: Vec<f64> = (0..n).flat_map(|i| [((i as f64) * 0.37).sin(), i as f64]).collect();
        let src = Source::memory(ArrayRef::c_order(Values::F64(&x), n, 2).unwrap());
        let picks: Vec<usize> = (0..n).filter(|i| i % 3 == 1 || *i == n - 1).collect();
        // The reference: each chunk's picked rows summed in order, chunks folded.
        let mut want = (0.0, 0.0);
        for c in 0..n.div_ceil(CHUNK_ROWS) {
            let mut leaf = (0.0, 0.0);
            for &i in picks.iter().filter(|&&i| i / CHUNK_ROWS == c) {
                leaf.0 += x[2 * i];
                leaf.1 += 1.0;
            }
            want.merge(&leaf);
        }
        for block_rows in [100, 4096, n] {
            let mut blocks = BlockReader::<f64>::new(&src, None, block_rows);
            let sel = Selection::indices(picks.clone()).unwrap();
            let got = run_selected(&mut Sum, &mut blocks, &sel, &[0.0; 2], &Cancel::new()).unwrap();
            assert_eq!(got, want, "blocks of {block_rows}");
        }
        // A keyed selection keeps about its fraction, the same rows for any block size.
        let keyed = Selection::Keyed { seed: 7, fraction: 0.25 };
        let mut a = BlockReader::<f64>::new(&src, None, 1000);
        let mut b = BlockReader::<f64>::new(&src, None, 333);
        let ka = run_selected(&mut Sum, &mut a, &keyed, &[0.0; 2], &Cancel::new()).unwrap();
        let kb = run_selected(&mut Sum, &mut b, &keyed, &[0.0; 2], &Cancel::new()).unwrap();
        assert_eq!(ka, kb);
        let kept = (0..n).filter(|&i| keyed.contains(i)).count();
        assert_eq!(ka.1, kept as f64);
        assert!((kept as f64 - 0.25 * n as f64).abs() < 0.05 * n as f64, "{kept} of {n}");
        assert!(Selection::indices(vec![3, 3]).is_err());
    }
}
