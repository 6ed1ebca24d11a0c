//! Keyed sampling: each row's key is a hash of the seed and the row index,
//! and a sample of `m` rows keeps the `m` smallest keys. The sample depends on
//! the seed and the data alone, not on the order or the pieces in which rows
//! are seen, so samples of row ranges merge exactly.
//!
//! Reference: the random keys of Efraimidis & Spirakis, "Weighted random
//! sampling with a reservoir" (2006), with uniform weights; the hash is
//! SplitMix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number
//! generators", 2014).

use std::collections::BinaryHeap;

use super::Merge;

/// The 64-bit key of row `row` under `seed`: SplitMix64's finaliser applied
/// to the seed and then to the row index.
pub fn row_key(seed: u64, row: usize) -> u64 {
    mix(mix(seed) ^ (row as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// A uniform number in the open interval (0, 1) from [`row_key`].
pub fn row_unit(seed: u64, row: usize) -> f64 {
    ((row_key(seed, row) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

fn mix(z: u64) -> u64 {
    let z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A uniform sample without replacement of at most `m` rows (their values
/// in `f64` and their weights), kept by smallest [`row_key`].
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct KeyedSample {
    m: usize,
    seed: u64,
    d: usize,
    /// `(key, row, slot)`: the largest kept key on top.
    heap: BinaryHeap<(u64, usize, usize)>,
    values: Vec<f64>,
    weights: Vec<f64>,
}

impl KeyedSample {
    /// Bytes held per sampled row of `d` features: values, weight, and the
    /// heap entry (key, row, slot).
    pub const fn bytes_per_row(d: usize) -> u64 {
        (d * 8 + 8 + 24) as u64
    }

    /// An empty sample of at most `m` rows of `d` features under `seed`.
    pub fn new(m: usize, d: usize, seed: u64) -> Self {
        KeyedSample {
            m,
            seed,
            d,
            heap: BinaryHeap::with_capacity(m.min(1 << 20)),
            values: Vec::new(),
            weights: Vec::new(),
        }
    }

    /// An empty sample with the same capacity, width and seed.
    pub fn emptied(&self) -> KeyedSample {
        KeyedSample::new(self.m, self.d, self.seed)
    }

    /// The most rows the sample keeps.
    pub fn capacity(&self) -> usize {
        self.m
    }

    /// Whether row `row` would enter the sample now (call before
    /// converting its values).
    #[inline]
    pub fn wants(&self, row: usize) -> bool {
        self.m > 0
            && (self.heap.len() < self.m
                || self.heap.peek().is_some_and(|&(k, r, _)| (row_key(self.seed, row), row) < (k, r)))
    }

    /// Offers row `row` with `values` and `weight`.
    pub fn offer(&mut self, row: usize, values: impl Iterator<Item = f64>, weight: f64) {
        if !self.wants(row) {
            return;
        }
        let key = row_key(self.seed, row);
        let slot = if self.heap.len() < self.m {
            self.values.resize(self.values.len() + self.d, 0.0);
            self.weights.push(0.0);
            self.weights.len() - 1
        } else {
            self.heap.pop().expect("full").2
        };
        for (dst, v) in self.values[slot * self.d..(slot + 1) * self.d].iter_mut().zip(values) {
            *dst = v;
        }
        self.weights[slot] = weight;
        self.heap.push((key, row, slot));
    }

    /// The sample in row order: row-major values `(rows, d)`, weights and
    /// row indices.
    pub fn into_rows(self) -> (Vec<f64>, Vec<f64>, Vec<usize>) {
        let d = self.d;
        let mut order: Vec<(usize, usize)> = self.heap.into_iter().map(|(_, r, s)| (r, s)).collect();
        order.sort_unstable();
        let values = order.iter().flat_map(|&(_, s)| self.values[s * d..(s + 1) * d].iter().copied()).collect();
        let weights = order.iter().map(|&(_, s)| self.weights[s]).collect();
        (values, weights, order.into_iter().map(|(r, _)| r).collect())
    }
}

impl Merge for KeyedSample {
    fn merge(&mut self, next: &Self) {
        for &(_, row, slot) in &next.heap {
            let d = self.d;
            self.offer(row, next.values[slot * d..(slot + 1) * d].iter().copied(), next.weights[slot]);
        }
    }
    fn clear(&mut self) {
        self.heap.clear();
        self.values.clear();
        self.weights.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_does_not_depend_on_order_or_pieces() {
        let n = 10_000;
        let all = |order: &mut dyn Iterator<Item = usize>| {
            let mut s = KeyedSample::new(100, 1, 7);
            for r in order {
                s.offer(r, std::iter::once(r as f64), 1.0);
            }
            s
        };
        let a = all(&mut (0..n)).into_rows();
        let b = all(&mut (0..n).rev()).into_rows();
        assert_eq!(a, b);
        let mut first = all(&mut (0..3000));
        first.merge(&all(&mut (3000..n)));
        assert_eq!(first.into_rows(), a);
        assert_eq!(a.2.len(), 100);
        assert!(a.2.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(a.0, a.2.iter().map(|&r| r as f64).collect::<Vec<_>>());
        // Roughly uniform: the sample's mean row is near the middle.
        let mean = a.2.iter().sum::<usize>() as f64 / 100.0;
        assert!((mean - n as f64 / 2.0).abs() < 0.15 * n as f64, "{mean}");
        assert!((0..1000).all(|r| (0.0..1.0).contains(&row_unit(3, r))));
    }
}
