//! Tiles: boxes of an iteration space, their shapes chosen from a budget
//! of elements, and the fixed accumulation chunks of reductions.

/// Elements per reduction chunk: partial results are summed element by
/// element within a chunk and chunks are folded in order, so a result does
/// not depend on the tile sizes the memory limit picks.
pub const REDUCE_CHUNK: usize = 1 << 14;

/// Most elements of one einsum operand block at the smallest output tile
/// (its output labels at most [`EINSUM_MIN_TILE`] elements together): the
/// contracted labels' chunks are halved until every operand fits (see
/// [`einsum_chunk`]). 2 MiB of `f64`: two threads' units of `(X.T * w) @ X`
/// (100,000 × 64) then fit a 64 MiB limit with whole output tiles, 0.05 s
/// where 4 MiB blocks cut the output and took 0.16 s (the GEMM is as fast
/// at a depth of 4096 as at 8192).
pub const EINSUM_BLOCK: usize = 1 << 18;

/// Bytes of the smallest einsum unit (operand blocks and outputs) the plan
/// cuts output tiles down to, unless the whole output takes fewer: a unit
/// costs some 20 µs besides its work, which a unit of one output of a
/// 1003 × 1003 `x.T @ x` (48 KiB of operand blocks) repeated 1,006,009
/// times.
pub const EINSUM_MIN_UNIT_BYTES: u64 = 256 << 10;

/// The output-label elements of an operand block that [`einsum_chunk`]
/// leaves room for: a GEMM of this many rows is efficient.
pub const EINSUM_MIN_TILE: usize = 256;

/// Largest tile, in elements: bigger tiles gain nothing.
pub const MAX_TILE: usize = 1 << 16;

/// Number of elements of a box.
pub fn volume(ext: &[usize]) -> usize {
    ext.iter().try_fold(1usize, |a, &b| a.checked_mul(b)).unwrap_or(usize::MAX)
}

/// Number of tiles of extents `ext` covering `shape`.
pub fn n_tiles(shape: &[usize], ext: &[usize]) -> usize {
    shape.iter().zip(ext).map(|(&n, &e)| n.div_ceil(e.max(1))).product()
}

/// Tile `t` (C order over the grid) of extents `ext` over `shape`: its box
/// `lo..hi`.
pub fn tile_box(shape: &[usize], ext: &[usize], mut t: usize) -> (Vec<usize>, Vec<usize>) {
    let nd = shape.len();
    let (mut lo, mut hi) = (vec![0; nd], vec![0; nd]);
    for k in (0..nd).rev() {
        let g = shape[k].div_ceil(ext[k].max(1));
        let i = t % g.max(1);
        t /= g.max(1);
        lo[k] = i * ext[k];
        hi[k] = (lo[k] + ext[k]).min(shape[k]);
    }
    (lo, hi)
}

/// Tile extents over `shape` with at most `budget` elements (at least one
/// element per axis): the `hot` axes (where reads or writes are contiguous)
/// share the budget first, then the axes grow from the innermost outwards.
pub fn tile_shape(shape: &[usize], budget: usize, hot: &[usize]) -> Vec<usize> {
    let budget = budget.max(1);
    let nd = shape.len();
    let mut ext = vec![1usize; nd];
    if nd == 0 {
        return ext;
    }
    let hot: Vec<usize> = hot.iter().copied().filter(|&k| k < nd && shape[k] > 1).collect();
    if !hot.is_empty() {
        let share = (budget as f64).powf(1.0 / hot.len() as f64).floor().max(1.0) as usize;
        for &k in &hot {
            ext[k] = shape[k].min(share);
        }
    }
    for k in (0..nd).rev() {
        let others: usize = (0..nd).filter(|&j| j != k).map(|j| ext[j]).product();
        ext[k] = ext[k].max(shape[k].min(budget / others.max(1)).max(1));
    }
    ext
}

/// The fixed accumulation chunk over the reduced axes `shape`: the
/// innermost axes whole while they fit `target` elements, part of the next
/// axis, one element of the outer ones.
pub fn chunk_shape(shape: &[usize], target: usize) -> Vec<usize> {
    let mut ext = vec![1usize; shape.len()];
    let mut room = target.max(1);
    for k in (0..shape.len()).rev() {
        ext[k] = shape[k].clamp(1, room.max(1));
        if shape[k] > room {
            break;
        }
        room /= shape[k].max(1);
    }
    ext
}

/// The axis along which consecutive accumulation chunks of extent `chunk`
/// over `shape` (C order over their grid) follow each other: the last
/// axis the chunk cuts (the axes after it are whole). `None` when one
/// chunk covers `shape`.
pub fn chunk_line(shape: &[usize], chunk: &[usize]) -> Option<usize> {
    (0..shape.len()).rev().find(|&k| chunk[k] < shape[k])
}

/// The chunks `range` (C order over the grid of extent `chunk` over
/// `shape`) cut into runs of at most `group` consecutive chunks that stay
/// on one line (see [`chunk_line`]), so that each run's chunks make one
/// box.
pub fn chunk_groups(
    shape: &[usize],
    chunk: &[usize],
    range: std::ops::Range<usize>,
    group: usize,
) -> Vec<std::ops::Range<usize>> {
    let line = chunk_line(shape, chunk).map_or(1, |k| shape[k].div_ceil(chunk[k].max(1)));
    let mut out = Vec::new();
    let mut s = range.start;
    while s < range.end {
        let e = (s + group.max(1)).min((s / line + 1) * line).min(range.end);
        out.push(s..e);
        s = e;
    }
    out
}

/// Smallest default Zarr chunk, in uncompressed bytes (unless the whole
/// array is smaller): smaller chunks make more files than data.
pub const MIN_CHUNK_BYTES: u64 = 64 << 10;

/// Largest default Zarr chunk, in uncompressed bytes (Zarr's guidance is
/// 1–100 MB per chunk; a few MB keeps memory low and files few).
pub const MAX_CHUNK_BYTES: u64 = 8 << 20;

/// The memory budget a default chunk's bytes may take a share of: a chunk
/// of `budget / CHUNK_SHARE` bytes, between [`MIN_CHUNK_BYTES`] and
/// [`MAX_CHUNK_BYTES`].
pub const CHUNK_SHARE: u64 = 32;

/// The default chunk shape (elements per axis, each at least 1) of a Zarr
/// array of `shape` whose elements have `itemsize` bytes, written within a
/// memory budget of `budget` bytes: about `budget / 32` bytes per chunk,
/// clamped to 64 KiB–8 MiB uncompressed (the whole array when it is
/// smaller). Chunks are contiguous in C order: the innermost axes whole
/// while they fit, then part of the next axis (balanced so the chunks along
/// it are about equal), one element of the outer axes. It depends on the
/// shape, item size and budget only (never on threads or the expression),
/// so every writer picks the same chunks.
pub fn default_chunks(shape: &[usize], itemsize: usize, budget: u64) -> Vec<usize> {
    let item = itemsize.max(1) as u64;
    let target = (budget / CHUNK_SHARE).clamp(MIN_CHUNK_BYTES, MAX_CHUNK_BYTES) / item;
    let least = MIN_CHUNK_BYTES.div_ceil(item);
    let (target, least) = (usize::try_from(target).unwrap_or(usize::MAX), least as usize);
    let mut ext = chunk_shape(shape, target.max(1));
    for e in ext.iter_mut() {
        *e = (*e).max(1);
    }
    // The axis cut in part: at least `least` elements per chunk, the chunks
    // along it balanced.
    if let Some(k) = (0..shape.len()).rev().find(|&k| ext[k] < shape[k]) {
        let inner = volume(&ext[k + 1..]).max(1);
        let cut = ext[k].max(least.div_ceil(inner)).min(shape[k]);
        let balanced = shape[k].div_ceil(shape[k].div_ceil(cut));
        ext[k] = balanced.max(least.div_ceil(inner)).min(shape[k]);
    }
    ext
}

/// The fixed chunk of each contracted label (`contracted`, in order) of an
/// einsum whose operands carry `labels`, `size_of` giving every label's
/// size. Each label starts whole; while an operand's block — its contracted
/// labels at their chunks, its output labels at most [`EINSUM_MIN_TILE`]
/// elements together — holds more than [`EINSUM_BLOCK`] elements, the
/// largest chunk of the largest such block is halved (a whole label first
/// drops to the largest power of two below its size). The chunk depends on
/// the shapes only (never on the memory limit or the threads), so results
/// do not either; and it does not shrink as an output label (the rows of a
/// row-wise contraction) grows: `ij,jk,ik->i` over `(n, 300)` rows
/// contracts `j` and `k` whole for every `n`, and the rows of
/// `ij,ik->jk` come in chunks of 1024 for any `n` above it (`d` ≥ 256).
pub fn einsum_chunk(contracted: &[u8], labels: &[Vec<u8>], size_of: impl Fn(u8) -> usize) -> Vec<usize> {
    let mut chunk: Vec<usize> = contracted.iter().map(|&c| size_of(c).max(1)).collect();
    let block = |chunk: &[usize], op: &[u8]| -> usize {
        let mut out = 1usize;
        let mut inner = 1usize;
        for &c in op {
            match contracted.iter().position(|&x| x == c) {
                Some(q) => inner = inner.saturating_mul(chunk[q]),
                None => out = out.saturating_mul(size_of(c).max(1)),
            }
        }
        inner.saturating_mul(out.min(EINSUM_MIN_TILE))
    };
    while let Some(op) = labels.iter().filter(|op| block(&chunk, op) > EINSUM_BLOCK).max_by_key(|op| block(&chunk, op))
    {
        let Some(q) =
            (0..contracted.len()).filter(|&q| op.contains(&contracted[q]) && chunk[q] > 1).max_by_key(|&q| chunk[q])
        else {
            break;
        };
        // A whole label first drops to a power of two, so the chunk is
        // the same for every size above it.
        let whole = chunk[q] == size_of(contracted[q]).max(1);
        chunk[q] = if whole && !chunk[q].is_power_of_two() { chunk[q].next_power_of_two() / 2 } else { chunk[q] / 2 };
    }
    chunk
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_cover_the_space_once() {
        let shape = [5, 7, 3];
        let ext = tile_shape(&shape, 20, &[2]);
        assert!(volume(&ext) <= 20);
        let mut seen = vec![0; 105];
        for t in 0..n_tiles(&shape, &ext) {
            let (lo, hi) = tile_box(&shape, &ext, t);
            for i in lo[0]..hi[0] {
                for j in lo[1]..hi[1] {
                    for k in lo[2]..hi[2] {
                        seen[(i * 7 + j) * 3 + k] += 1;
                    }
                }
            }
        }
        assert!(seen.iter().all(|&s| s == 1));
    }

    #[test]
    fn chunks_take_inner_axes_first() {
        assert_eq!(chunk_shape(&[100, 10, 10], 1000), [10, 10, 10]);
        assert_eq!(chunk_shape(&[100, 10, 10], 250), [2, 10, 10]);
        assert_eq!(chunk_shape(&[3, 100_000], 1 << 14), [1, 1 << 14]);
        assert_eq!(chunk_shape(&[], 10), Vec::<usize>::new());
    }

    #[test]
    fn chunk_groups_stay_on_a_line() {
        assert_eq!(chunk_line(&[100, 10, 10], &[2, 10, 10]), Some(0));
        assert_eq!(chunk_line(&[3, 100], &[1, 30]), Some(1));
        assert_eq!(chunk_line(&[3, 100], &[3, 100]), None);
        // Lines of 4 chunks (100 / 30 rounded up): groups never cross one.
        assert_eq!(chunk_groups(&[3, 100], &[1, 30], 0..12, 3), [0..3, 3..4, 4..7, 7..8, 8..11, 11..12]);
        assert_eq!(chunk_groups(&[3, 100], &[1, 30], 2..7, 2), [2..4, 4..6, 6..7]);
        assert_eq!(chunk_groups(&[3, 100], &[3, 100], 0..1, 5), vec![(0..1)]);
        assert_eq!(chunk_groups(&[30], &[7], 0..5, 1), [0..1, 1..2, 2..3, 3..4, 4..5]);
    }

    #[test]
    fn default_chunks_are_whole_inner_axes_of_a_few_mib() {
        const MIB: u64 = 1 << 20;
        // T3-08: (5, 200, 76, 76) float64 (46 MB) at 64 MiB: 25 chunks of 1.8 MB.
        assert_eq!(default_chunks(&[5, 200, 76, 76], 8, 64 * MIB), [1, 40, 76, 76]);
        // Small arrays are one chunk; a zero-length axis still gets a positive length.
        assert_eq!(default_chunks(&[10], 8, 8 * MIB), [10]);
        assert_eq!(default_chunks(&[0, 1000], 8, 8 * MIB), [1, 1000]);
        assert_eq!(default_chunks(&[], 8, 8 * MIB), Vec::<usize>::new());
        // Long 1-D arrays and a huge trailing axis: 8 MiB at most, budget / 32 below.
        assert_eq!(default_chunks(&[1 << 34], 8, 8 << 30), [1 << 20]);
        assert_eq!(default_chunks(&[3, 1 << 33], 8, 8 * MIB), [1, 1 << 15]);
        // Never below 64 KiB: two rows of 40 kB rather than one.
        assert_eq!(default_chunks(&[3, 5000], 8, MIB), [2, 5000]);
        // Balanced along the cut axis: 300 rows as 3 × 100, not 128 + 128 + 44.
        assert_eq!(default_chunks(&[300, 1024], 8, 32 * MIB), [100, 1024]);
    }

    #[test]
    fn einsum_chunks_do_not_shrink_with_the_rows() {
        let sizes = |n: usize, d: usize| move |c: u8| if c == b'i' { n } else { d };
        let quad = [b"ij".to_vec(), b"jk".to_vec(), b"ik".to_vec()];
        // T3-12: (200,000, 300) rows, j and k whole, as for 1,000 rows.
        for n in [1000, 200_000, 1_000_000] {
            assert_eq!(einsum_chunk(b"jk", &quad, sizes(n, 300)), [300, 300]);
        }
        // (1M, 900): Q's block is cut, never to [1, 1].
        assert_eq!(einsum_chunk(b"jk", &quad, sizes(1_000_000, 900)), [512, 512]);
        // The scatter's rows in fixed chunks, whatever their number.
        let scatter = [b"ij".to_vec(), b"i".to_vec(), b"ik".to_vec()];
        for n in [200_000, 1 << 20, 12_345_678] {
            assert_eq!(einsum_chunk(b"i", &scatter, sizes(n, 300)), [1024]);
        }
    }
}
