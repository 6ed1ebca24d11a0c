//! Initial centres: greedy k-means++ on an in-memory sample, and uniform or
//! weighted random rows.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};

use rand::{Rng, RngCore};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

use crate::dtype::Real;
use crate::error::{Error, Result};
use crate::exec::{row_unit, run_split, Block, Cancel, Column, InitSample, Leaf, Pass, RowSplit, SAMPLE_CHUNK};
use crate::io::BlockReader;

/// Rows per chunk of the k-means++ potential sums.
const CHUNK: usize = SAMPLE_CHUNK;

/// Greedy k-means++ seeding over the rows of `sample` (in memory or in
/// scratch files, `n` rows, not all weights zero): the first centre is drawn
/// with probability ∝ `w`; each further one is the best (lowest resulting
/// potential) of `2 + ⌊ln k⌋` candidates drawn with probability ∝ `w · D²`,
/// where `D` is the distance to the nearest chosen centre. Rows at distance
/// 0 are never drawn while rows at positive distance remain; once none
/// remain (fewer distinct weighted rows than `k`), candidates are drawn
/// ∝ `w`, so a row of weight 0 is never chosen.
///
/// Returns the chosen positions in the sample. Work is O(n · k · d · trials);
/// memory is `n` doubles beyond an in-memory sample (the running distances),
/// and for a spilled sample, whose running distances go to a scratch file
/// beside it, one read piece and two [`SAMPLE_CHUNK`]s per thread, the
/// candidates' values and `trials + 1` doubles per chunk.
///
/// With `skip_zero_rows` (cosine k-means, whose rows of zeros have no
/// direction to seed), rows of zeros are drawn as rows of weight 0 are,
/// unless every row of positive weight is a row of zeros. The result does
/// not depend on how the sample is held or on the thread count: potentials
/// are summed row by row within fixed chunks, the chunks' sums in order.
///
/// Reference: Arthur & Vassilvitskii, "k-means++: the advantages of careful
/// seeding" (SODA 2007); the greedy variant follows scikit-learn's
/// `_kmeans_plusplus`.
///
/// `cancel` is checked once per centre.
///
/// # Errors
/// [`Error::Cancelled`] when `cancel` is cancelled; scratch read and write
/// errors.
///
/// # Panics
/// If `k == 0` or `k > n`.
pub fn kmeans_plusplus(
    sample: &InitSample,
    k: usize,
    rng: &mut ChaCha8Rng,
    skip_zero_rows: bool,
    cancel: &crate::exec::Cancel,
) -> Result<Vec<usize>> {
    let n = sample.len();
    assert!(k >= 1 && k <= n);
    let trials = 2 + (k as f64).ln() as usize;
    let sq = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(p, q)| (p - q) * (p - q)).sum::<f64>();
    let chunk_rows = |c: usize| c * CHUNK..((c + 1) * CHUNK).min(n);
    let n_chunks = n.div_ceil(CHUNK);
    let mut chosen = Vec::with_capacity(k);
    // Chunk `c`'s weights, those of rows of zeros as 0 with `skip`.
    let chunk_weights = |c: usize, skip: bool| -> Result<Vec<f64>> {
        let mut w = sample.weights(c, &mut Vec::new())?.to_vec();
        if skip {
            sample.for_each_row(chunk_rows(c), &mut Vec::new(), |i, row| {
                if row.iter().all(|&v| v == 0.0) {
                    w[i - c * CHUNK] = 0.0;
                }
            })?;
        }
        Ok(w)
    };
    // The weights' sum in row order (as `Iterator::sum`, from -0.0).
    let total = |skip: bool| -> Result<f64> {
        (0..n_chunks).try_fold(-0.0, |t, c| Ok(chunk_weights(c, skip)?.iter().fold(t, |a, w| a + w)))
    };
    let mut skip = skip_zero_rows;
    let mut total_w = total(skip)?;
    if skip && total_w <= 0.0 {
        (skip, total_w) = (false, total(false)?);
    }
    let weights = |c: usize| chunk_weights(c, skip);
    let first = pick(n, None, rng.random::<f64>() * total_w, weights)?;
    chosen.push(first);
    let mut closest = Column::zeros(n, sample.scratch_dir())?;
    // `closest` lowered to the distances to `centre`, chunk by chunk.
    let lower = |closest: &mut Column, centre: &[f64], fresh: bool| -> Result<()> {
        closest.update_chunks(n, |buf, c, out| {
            sample.for_each_row(chunk_rows(c), buf, |i, row| {
                let o = &mut out[i - c * CHUNK];
                // A skipped row of zeros counts as seeded already.
                let dist = if skip && row.iter().all(|&v| v == 0.0) { 0.0 } else { sq(row, centre) };
                *o = if fresh { dist } else { o.min(dist) };
            })
        })
    };
    lower(&mut closest, &sample.gather(&[first])?, true)?;
    // `w · closest` of chunk `c`.
    let mass = |closest: &Column, c: usize| -> Result<Vec<f64>> {
        let (mut wb, mut cb) = (Vec::new(), Vec::new());
        let (w, v) = (sample.weights(c, &mut wb)?, closest.chunk(c, n, &mut cb)?);
        Ok(w.iter().zip(v).map(|(w, v)| w * v).collect())
    };
    let chunk_pot = |closest: &Column| -> Result<Vec<f64>> {
        (0..n_chunks)
            .into_par_iter()
            .map_init(
                || (Vec::new(), Vec::new()),
                |(wb, cb), c| {
                    let (w, v) = (sample.weights(c, wb)?, closest.chunk(c, n, cb)?);
                    Ok(w.iter().zip(v).map(|(w, v)| w * v).sum())
                },
            )
            .collect()
    };
    let mut pots = chunk_pot(&closest)?;
    let mut cand = Vec::with_capacity(trials);
    for _ in 1..k {
        if cancel.is_cancelled() {
            return Err(Error::Cancelled);
        }
        let pot: f64 = pots.iter().sum();
        cand.clear();
        for _ in 0..trials {
            let r = rng.random::<f64>() * pot;
            cand.push(if pot > 0.0 {
                pick(n, Some(&pots), r, |c| mass(&closest, c))?
            } else {
                pick(n, None, rng.random::<f64>() * total_w, weights)?
            });
        }
        let values = sample.gather(&cand)?;
        let d = sample.n_features();
        // Potential each candidate would leave, summed per chunk in order:
        // the same sums whether a task takes a chunk's candidates together
        // or one candidate (when chunks are fewer than threads: a small
        // sample of wide rows).
        let per_chunk: Vec<Vec<f64>> = if n_chunks < rayon::current_num_threads() {
            let flat: Vec<f64> = (0..n_chunks * cand.len())
                .into_par_iter()
                .map_init(
                    || (Vec::new(), Vec::new(), Vec::new()),
                    |(buf, wb, cb), ct| {
                        let (c, t) = (ct / cand.len(), ct % cand.len());
                        let (w, near) = (sample.weights(c, wb)?, closest.chunk(c, n, cb)?);
                        let centre = &values[t * d..(t + 1) * d];
                        let mut a = 0.0;
                        sample.for_each_row(chunk_rows(c), buf, |i, row| {
                            let j = i - c * CHUNK;
                            a += w[j] * near[j].min(sq(row, centre));
                        })?;
                        Ok(a)
                    },
                )
                .collect::<Result<_>>()?;
            flat.chunks(cand.len()).map(<[f64]>::to_vec).collect()
        } else {
            (0..n_chunks)
                .into_par_iter()
                .map_init(
                    || (Vec::new(), Vec::new(), Vec::new()),
                    |(buf, wb, cb), c| {
                        let mut acc = vec![0.0; cand.len()];
                        let (w, near) = (sample.weights(c, wb)?, closest.chunk(c, n, cb)?);
                        sample.for_each_row(chunk_rows(c), buf, |i, row| {
                            let j = i - c * CHUNK;
                            for (t, a) in acc.iter_mut().enumerate() {
                                *a += w[j] * near[j].min(sq(row, &values[t * d..(t + 1) * d]));
                            }
                        })?;
                        Ok(acc)
                    },
                )
                .collect::<Result<_>>()?
        };
        let mut best = (f64::INFINITY, 0);
        for t in 0..cand.len() {
            let p: f64 = per_chunk.iter().map(|a| a[t]).sum();
            if p < best.0 {
                best = (p, t);
            }
        }
        chosen.push(cand[best.1]);
        lower(&mut closest, &values[best.1 * d..(best.1 + 1) * d], false)?;
        pots = chunk_pot(&closest)?;
    }
    Ok(chosen)
}

/// Index `i` where the running sum of the masses first exceeds `r`, the
/// masses of chunk `c` given by `mass(c)`; with `pots` (the chunks' sums)
/// whole chunks are skipped by their sums. Falls back to the last index
/// with positive mass when rounding leaves `r` beyond the total.
///
/// # Errors
/// The errors of `mass`.
fn pick(n: usize, pots: Option<&[f64]>, r: f64, mass: impl Fn(usize) -> Result<Vec<f64>>) -> Result<usize> {
    let n_chunks = n.div_ceil(CHUNK);
    let mut acc = 0.0;
    for c in 0..n_chunks {
        if let Some(&p) = pots.and_then(|p| p.get(c)) {
            if acc + p <= r {
                acc += p;
                continue;
            }
        }
        for (j, &m) in mass(c)?.iter().enumerate() {
            acc += m;
            if acc > r && m > 0.0 {
                return Ok(c * CHUNK + j);
            }
        }
    }
    for c in (0..n_chunks).rev() {
        if let Some(j) = mass(c)?.iter().rposition(|&m| m > 0.0) {
            return Ok(c * CHUNK + j);
        }
    }
    Ok(0)
}

/// `k` distinct indices drawn uniformly from `0..n` (Floyd's algorithm), in
/// the order drawn.
///
/// # Panics
/// If `k > n`.
pub fn uniform_distinct(n: usize, k: usize, rng: &mut ChaCha8Rng) -> Vec<usize> {
    assert!(k <= n);
    let mut set = HashSet::with_capacity(k);
    let mut out = Vec::with_capacity(k);
    for j in n - k..n {
        let t = rng.random_range(0..=j);
        let v = if set.contains(&t) { j } else { t };
        set.insert(v);
        out.push(v);
    }
    out
}

/// `k` distinct rows for a random start: without weights, uniform from
/// `rng` ([`uniform_distinct`]); with them, each drawn with probability
/// proportional to its weight (scikit-learn's `p=sample_weight / sum`), a
/// [`WeightedDraw`] seeded from `rng` in one pass over `blocks` split as
/// `split`, so that a row of weight 0 is never drawn, as a missing row.
///
/// # Errors
/// Fewer than `k` rows with a positive weight ([`Error::InvalidParameter`]
/// of `k_name`, the parameter that set `k`); read errors;
/// [`Error::Cancelled`].
pub(crate) fn random_rows<T: Real>(
    blocks: &mut BlockReader<'_, '_, T>,
    split: &RowSplit,
    k: usize,
    k_name: &'static str,
    rng: &mut ChaCha8Rng,
    cancel: &Cancel,
) -> Result<Vec<usize>> {
    if blocks.weights().is_none() {
        return Ok(uniform_distinct(blocks.x().n_samples(), k, rng));
    }
    let mut draw = WeightedDraw::new(k, rng.next_u64());
    run_split(&mut draw, blocks, split, &vec![0.0; blocks.x().n_features()], cancel)?;
    let rows = draw.finish();
    if rows.len() < k {
        let rows = match rows.len() {
            1 => "1 row has".to_string(),
            r => format!("{r} rows have"),
        };
        let what = format!("only {rows} a positive sample_weight, fewer than {k_name} = {k}");
        return Err(Error::param(k_name, what));
    }
    Ok(rows)
}

/// Keeps the `k` largest keys of a weighted draw without replacement
/// (Efraimidis & Spirakis 2006: key = ln(u) / w, with `u` the row's keyed
/// uniform number [`row_unit`], so the draw does not depend on the order
/// rows are seen in); rows with weight 0 are never drawn. A pass over the
/// weights.
#[derive(Debug)]
pub struct WeightedDraw {
    k: usize,
    seed: u64,
    heap: BinaryHeap<Reverse<(Key, usize)>>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Key(f64);
impl Eq for Key {}
impl PartialOrd for Key {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Key {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&o.0)
    }
}

impl WeightedDraw {
    /// A draw of `k` rows under `seed`.
    pub fn new(k: usize, seed: u64) -> Self {
        WeightedDraw { k, seed, heap: BinaryHeap::with_capacity(k + 1) }
    }
    /// Offers row `index` with weight `w`.
    pub fn offer(&mut self, index: usize, w: f64) {
        if w <= 0.0 {
            return;
        }
        let key = Key(row_unit(self.seed, index).ln() / w);
        if self.heap.len() < self.k {
            self.heap.push(Reverse((key, index)));
        } else if self.heap.peek().is_some_and(|Reverse((m, _))| key > *m) {
            self.heap.pop();
            self.heap.push(Reverse((key, index)));
        }
    }
    /// The drawn indices, largest key first (fewer than `k` when fewer rows
    /// had positive weight).
    pub fn finish(self) -> Vec<usize> {
        let mut v: Vec<_> = self.heap.into_iter().map(|Reverse((key, i))| (key, i)).collect();
        v.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        v.into_iter().map(|(_, i)| i).collect()
    }
}

impl<T: Real> Pass<T> for WeightedDraw {
    type Stats = ();
    fn new_stats(&self) {}
    fn block(&mut self, block: Block<'_, T>, _: &mut [Leaf<'_, ()>]) -> Result<()> {
        for (i, &wi) in block.w.unwrap_or(&[]).iter().enumerate() {
            self.offer(block.start + i, wi);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn kpp_never_picks_duplicates_while_distinct_points_remain() {
        // Case C09(b): 17 rows, 9 distinct points, k = 9.
        let pts = [
            (0., 0.),
            (1., 0.),
            (0., 1.),
            (100., 100.),
            (101., 100.),
            (100., 101.),
            (500., 0.),
            (501., 0.),
            (500., 1.),
        ];
        let mult = [3, 2, 2, 2, 2, 2, 2, 1, 1];
        let mut x = Vec::new();
        for (p, m) in pts.iter().zip(mult) {
            for _ in 0..m {
                x.extend_from_slice(&[p.0, p.1]);
            }
        }
        let w = vec![1.0; 17];
        for seed in 0..20 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let sample = InitSample::from_rows(x.clone(), 2, w.clone());
            let idx = kmeans_plusplus(&sample, 9, &mut rng, false, &crate::exec::Cancel::new()).unwrap();
            let mut distinct: Vec<(u64, u64)> =
                idx.iter().map(|&i| (x[2 * i].to_bits(), x[2 * i + 1].to_bits())).collect();
            distinct.sort_unstable();
            distinct.dedup();
            assert_eq!(distinct.len(), 9, "seed {seed}");
        }
    }

    #[test]
    fn zero_weight_rows_are_never_chosen() {
        let x: Vec<f64> = (0..200).map(f64::from).collect();
        let w: Vec<f64> = (0..200).map(|i| f64::from(u8::from(i % 2 == 0))).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let sample = InitSample::from_rows(x, 1, w.clone());
        let idx = kmeans_plusplus(&sample, 20, &mut rng, false, &crate::exec::Cancel::new()).unwrap();
        assert!(idx.iter().all(|i| i % 2 == 0));
        // Fewer weighted rows than centres: the rest repeat weighted rows.
        let few: Vec<f64> = (0..200).map(|i| f64::from(u8::from(i == 7 || i == 150))).collect();
        let sample = InitSample::from_rows((0..200).map(f64::from).collect(), 1, few);
        let idx = kmeans_plusplus(&sample, 5, &mut rng, false, &crate::exec::Cancel::new()).unwrap();
        assert!(idx.iter().all(|&i| i == 7 || i == 150), "{idx:?}");
        let mut draw = WeightedDraw::new(20, 9);
        for (i, &wi) in w.iter().enumerate() {
            draw.offer(i, wi);
        }
        let got = draw.finish();
        assert_eq!(got.len(), 20);
        assert!(got.iter().all(|i| i % 2 == 0));
    }

    #[test]
    fn rows_of_zeros_are_skipped_when_asked_unless_all_rows_are() {
        // Every third row of zeros (of two features), the rest on a circle.
        let row = |i: usize| if i.is_multiple_of(3) { [0.0, 0.0] } else { [(i as f64).cos(), (i as f64).sin()] };
        let x: Vec<f64> = (0..300).flat_map(row).collect();
        for seed in 0..20 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let sample = InitSample::from_rows(x.clone(), 2, vec![1.0; 300]);
            let idx = kmeans_plusplus(&sample, 30, &mut rng, true, &crate::exec::Cancel::new()).unwrap();
            assert!(idx.iter().all(|i| !i.is_multiple_of(3)), "seed {seed}: {idx:?}");
        }
        let sample = InitSample::from_rows(vec![0.0; 20], 2, vec![1.0; 10]);
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        assert_eq!(kmeans_plusplus(&sample, 3, &mut rng, true, &crate::exec::Cancel::new()).unwrap().len(), 3);
    }

    #[test]
    fn a_spilled_sample_seeds_the_same_centres() {
        // Several potential chunks, pieces that do not divide them, weights.
        let (n, d, k) = (3 * CHUNK + 123, 3, 40);
        let row = |r: usize| (0..d).map(move |j| ((r * 7 + j * 13) % 1000) as f64 * 0.01 + (r % 5) as f64);
        let weight = |r: usize| 1.0 + (r % 3) as f64;
        let dir = tempfile::tempdir().unwrap();
        let mut spilled = crate::exec::KeyedSample::spilled(n, d, 4, dir.path(), 1000).unwrap();
        for r in 0..n {
            spilled.offer(r, row(r), weight(r)).unwrap();
        }
        let spilled = spilled.into_sample().unwrap();
        assert!(spilled.scratch_dir().is_some());
        let memory = InitSample::from_rows((0..n).flat_map(row).collect(), d, (0..n).map(weight).collect());
        let seed = |s: &InitSample, threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let mut rng = ChaCha8Rng::seed_from_u64(11);
            pool.install(|| kmeans_plusplus(s, k, &mut rng, false, &crate::exec::Cancel::new())).unwrap()
        };
        let want = seed(&memory, 1);
        assert_eq!(seed(&spilled, 2), want);
        assert_eq!(seed(&memory, 2), want);
        // More threads than chunks: a task per chunk and candidate, the same sums.
        assert_eq!(seed(&spilled, 8), want);
        assert_eq!(seed(&memory, 8), want);
    }

    #[test]
    fn samplers_are_distinct_and_complete() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut u = uniform_distinct(50, 50, &mut rng);
        u.sort_unstable();
        assert_eq!(u, (0..50).collect::<Vec<_>>());
    }
}
