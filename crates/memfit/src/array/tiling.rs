//! Tiles: boxes of an iteration space, their shapes chosen from a budget
//! of elements, and the fixed accumulation chunks of reductions.

/// Elements per reduction chunk: partial results are summed element by
/// element within a chunk and chunks are folded in order, so a result does
/// not depend on the tile sizes the memory limit picks.
pub const REDUCE_CHUNK: usize = 1 << 14;

/// Most elements of one einsum operand block, counting its output labels
/// whole: the contracted labels' chunks are halved until every operand
/// fits (see [`einsum_chunk`]).
pub const EINSUM_BLOCK: usize = 1 << 20;

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

/// The fixed chunk of each contracted label (`sizes[c]` for the labels
/// `contracted`) of an einsum whose operands carry `labels`, `size_of`
/// giving every label's size: whole labels, the largest chunk of the
/// largest operand block halved until every block (output labels whole)
/// holds at most [`EINSUM_BLOCK`] elements. It depends on the shapes only,
/// so results do not depend on the memory limit.
pub fn einsum_chunk(contracted: &[u8], labels: &[Vec<u8>], size_of: impl Fn(u8) -> usize) -> Vec<usize> {
    let mut chunk: Vec<usize> = contracted.iter().map(|&c| size_of(c).max(1)).collect();
    let block = |chunk: &[usize], op: &[u8]| -> usize {
        op.iter()
            .map(|&c| match contracted.iter().position(|&x| x == c) {
                Some(q) => chunk[q],
                None => size_of(c).max(1),
            })
            .product()
    };
    while let Some(op) = labels.iter().filter(|op| block(&chunk, op) > EINSUM_BLOCK).max_by_key(|op| block(&chunk, op))
    {
        let Some(q) =
            (0..contracted.len()).filter(|&q| op.contains(&contracted[q]) && chunk[q] > 1).max_by_key(|&q| chunk[q])
        else {
            break;
        };
        chunk[q] = chunk[q].div_ceil(2);
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
}
