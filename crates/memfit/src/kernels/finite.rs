//! Finding a non-finite value fast: every validated block and every
//! mini-batch step scans all its values.

use multiversion::multiversion;
use rayon::prelude::*;

use crate::dtype::Real;

/// Values per chunk: the scan adds a chunk's values in lanes and searches
/// value by value only a chunk whose lanes are not all zero.
const CHUNK: usize = 512;

/// Lanes of the per-chunk sums.
const LANES: usize = 16;

/// Values per piece scanned by one thread.
const PIECE: usize = 64 * CHUNK;

/// The position of the first value of `x` that is not finite (NaN or
/// infinite), if any.
///
/// `v − v` is `0` for every finite `v` and NaN for the others, and a sum of
/// zeros is zero: a chunk's sixteen lanes of such sums vectorise, and only a
/// chunk that holds a non-finite value has a lane that is not zero. Pieces
/// of 32,768 values are scanned by the current pool's threads.
pub fn first_non_finite<T: Real>(x: &[T]) -> Option<usize> {
    if x.len() <= PIECE {
        return first_in(x);
    }
    x.par_chunks(PIECE).enumerate().find_map_first(|(p, piece)| first_in(piece).map(|i| p * PIECE + i))
}

/// [`first_non_finite`] on one thread.
#[allow(clippy::eq_op, reason = "v − v is the test: 0 when v is finite, NaN otherwise")]
#[multiversion(targets("x86_64+avx512f+avx512vl+avx512dq+avx2+fma", "x86_64+avx2+fma", "aarch64+neon"))]
fn first_in<T: Real>(x: &[T]) -> Option<usize> {
    for (c, chunk) in x.chunks(CHUNK).enumerate() {
        let mut lanes = [0.0f64; LANES];
        let mut full = chunk.chunks_exact(LANES);
        for v in &mut full {
            for (l, &v) in lanes.iter_mut().zip(v) {
                let v = v.to_f64();
                *l += v - v;
            }
        }
        let tail: f64 = full.remainder().iter().map(|v| v.to_f64() - v.to_f64()).sum();
        if tail != 0.0 || lanes.iter().any(|&l| l != 0.0) {
            return chunk.iter().position(|v| !v.to_f64().is_finite()).map(|i| c * CHUNK + i);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_first_non_finite_value_anywhere() {
        for n in [0, 1, 15, 16, 17, 511, 512, 513, 2000, PIECE - 1, PIECE, 3 * PIECE + 5] {
            let clean: Vec<f64> = (0..n).map(|i| (i as f64 - 700.0) * 1e300).collect();
            assert_eq!(first_non_finite(&clean), None, "{n}");
            for at in [0, n / 3, PIECE + 7, n.saturating_sub(1)].into_iter().filter(|&a| a < n) {
                for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
                    let mut x = clean.clone();
                    x[at] = bad;
                    if at + 1 < n {
                        x[n - 1] = f64::NAN;
                    }
                    assert_eq!(first_non_finite(&x), Some(at), "{n} {at} {bad}");
                    let x32: Vec<f32> = x.iter().map(|&v| if v.is_finite() { 1.5 } else { v as f32 }).collect();
                    assert_eq!(first_non_finite(&x32), Some(at));
                }
            }
        }
        assert_eq!(first_non_finite(&[f32::MAX, f32::MIN, f32::MIN_POSITIVE]), None);
    }
}
