//! Elementwise results written to a `.npy` file by slabs: C-order ranges
//! of the result evaluated in parallel into one of two planned buffers
//! while the other is written by one large positioned write (no `mmap`),
//! so evaluation and writing overlap.

use std::sync::mpsc::{channel, sync_channel};
use std::sync::Mutex;

use rayon::prelude::*;

use super::eval::Ctx;
use super::lower::Ir;
use super::plan::{StagePlan, WRITE_ALIGN};
use super::run::eval_limited;
use crate::dtype::Dtype;
use crate::error::Result;
use crate::exec::{box_runs, range_boxes, Cancel, Sink};

/// The ends (in elements) of the slabs of `n` elements of `item` bytes
/// written `slab` bytes at a time to a file where element 0 is at byte
/// `offset`: every slab but the last ends on a multiple of
/// [`WRITE_ALIGN`] in the file when `slab` is at least that.
pub(crate) fn slab_ends(n: u64, item: u64, slab: u64, offset: u64) -> Vec<u64> {
    let per = (slab / item).max(1);
    let first = if slab >= WRITE_ALIGN {
        ((offset + slab) / WRITE_ALIGN * WRITE_ALIGN).saturating_sub(offset) / item
    } else {
        per
    };
    let mut ends = Vec::new();
    let mut end = first.max(1);
    while end < n {
        ends.push(end);
        end += per;
    }
    ends.push(n);
    ends
}

/// The boxes evaluated for the slab `first..end` of a result of `shape`
/// tiled by `tile`, each of at most `max` elements: contiguous ranges
/// when the tile spans the last axis (reads and writes both run along
/// it), else the slab's boxes cut by the tile grid (a transpose's square
/// tiles keep their reads long).
fn pieces(shape: &[usize], tile: &[usize], first: u64, end: u64, max: usize) -> Vec<(Vec<usize>, Vec<usize>)> {
    let along_rows = shape.last().zip(tile.last()).is_none_or(|(s, t)| t >= s);
    if along_rows {
        let max = max.max(1) as u64;
        return (first..end).step_by(max as usize).flat_map(|a| range_boxes(shape, a, (a + max).min(end))).collect();
    }
    let mut out = Vec::new();
    for (lo, hi) in range_boxes(shape, first, end) {
        // Every cell of the tile grid the box meets, C order.
        let mut cell: Vec<usize> = lo.iter().zip(tile).map(|(l, t)| l / t).collect();
        'cells: loop {
            let plo: Vec<usize> = (0..lo.len()).map(|k| lo[k].max(cell[k] * tile[k])).collect();
            let phi: Vec<usize> = (0..lo.len()).map(|k| hi[k].min((cell[k] + 1) * tile[k])).collect();
            out.push((plo, phi));
            let mut k = lo.len();
            loop {
                if k == 0 {
                    break 'cells;
                }
                k -= 1;
                cell[k] += 1;
                if cell[k] * tile[k] < hi[k] {
                    break;
                }
                cell[k] = lo[k] / tile[k];
            }
        }
    }
    out
}

/// Runs an elementwise stage (`ir`, a result of `shape` and `dtype`
/// planned as `sp`, with `sp.write_slab > 0`) into `sink` by slabs of
/// `sp.write_slab` bytes: the pieces of each slab ([`pieces`]) are
/// evaluated on the current pool's threads into a buffer, which a writer
/// thread writes with one positioned write ([`Sink::write_range`]) while
/// the next slab is evaluated into the second buffer. `cancel` is checked
/// before each piece.
///
/// # Errors
/// The first evaluation or write error; [`crate::Error::Cancelled`].
pub(crate) fn run_slabs(
    ir: &Ir,
    shape: &[usize],
    dtype: Dtype,
    sp: &StagePlan,
    sink: &dyn Sink,
    ctx: &Ctx<'_>,
    cancel: &Cancel,
) -> Result<()> {
    let item = dtype.itemsize() as u64;
    let n: u64 = shape.iter().map(|&s| s as u64).product();
    let ends = slab_ends(n, item, sp.write_slab, sink.file_offset().unwrap_or(0));
    std::thread::scope(|scope| {
        // Rendezvous: the writer holds one buffer while the next is filled.
        let (to_writer, slabs) = sync_channel::<(u64, Vec<u8>)>(0);
        let (give_back, written) = channel::<Vec<u8>>();
        let writer = scope.spawn(move || -> Result<()> {
            for (first, bytes) in slabs {
                sink.write_range(first, &bytes)?;
                let _ = give_back.send(bytes);
            }
            Ok(())
        });
        let mut buffers = 0;
        let mut first = 0;
        let mut filled = Ok(());
        for &end in &ends {
            let mut bytes = if buffers < 2 {
                buffers += 1;
                Vec::new()
            } else {
                match written.recv() {
                    Ok(b) => b,
                    Err(_) => break, // the writer failed: its error below
                }
            };
            bytes.clear();
            bytes.resize(((end - first) * item) as usize, 0);
            let slab = Mutex::new(bytes);
            filled = pieces(shape, &sp.tile, first, end, sp.eval_elems).par_iter().try_for_each_init(
                Vec::new,
                |buf, (lo, hi)| {
                    cancel.check()?;
                    let col = eval_limited(ir, lo, hi, sp.eval_elems, ctx, buf)?;
                    let mut enc = Vec::with_capacity(col.len() * item as usize);
                    col.encode(dtype, &mut enc);
                    let mut out = slab.lock().expect("no panics while copying");
                    let mut from = 0;
                    for (at, len) in box_runs(shape, lo, hi) {
                        let (at, len) = (((at - first) * item) as usize, len * item as usize);
                        out[at..at + len].copy_from_slice(&enc[from..from + len]);
                        from += len;
                    }
                    Ok(())
                },
            );
            if filled.is_err() {
                break;
            }
            if to_writer.send((first, slab.into_inner().expect("no panics while copying"))).is_err() {
                break; // the writer failed: its error below
            }
            first = end;
        }
        drop(to_writer);
        let wrote = writer.join().expect("the writer thread does not panic");
        filled.and(wrote)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slabs_end_on_whole_pages_of_the_file() {
        // 128-byte header, 8-byte items, 16 KiB slabs: ends at file bytes
        // 16384, 32768, ... then the last element.
        let ends = slab_ends(10_000, 8, 16384, 128);
        assert_eq!(ends[0], (16384 - 128) / 8);
        assert!(ends.windows(2).all(|w| w[1] - w[0] == 2048 || w[1] == 10_000));
        assert!(ends[..ends.len() - 1].iter().all(|e| (128 + e * 8) % WRITE_ALIGN == 0));
        assert_eq!(*ends.last().unwrap(), 10_000);
        // Small slabs: whole elements, no alignment; empty results: one empty slab.
        assert_eq!(slab_ends(5, 4, 8, 128), vec![2, 4, 5]);
        assert_eq!(slab_ends(0, 8, 4096, 128), vec![0]);
    }

    #[test]
    fn pieces_cover_the_slab_once() {
        let shape = [5, 7, 6];
        for tile in [[1, 3, 6], [2, 2, 4], [5, 7, 1]] {
            for (first, end) in [(0, 210), (3, 150), (40, 41), (7, 7)] {
                let mut seen = vec![0u8; 210];
                for (lo, hi) in pieces(&shape, &tile, first, end, 10) {
                    let n: usize = lo.iter().zip(&hi).map(|(a, b)| b - a).product();
                    if tile[2] == 6 {
                        assert!(n <= 10, "{tile:?}: piece of {n}");
                    } else {
                        let cell = |x: usize, t: usize| x / t;
                        assert!(
                            (0..3).all(|k| cell(lo[k], tile[k]) == cell(hi[k] - 1, tile[k])),
                            "{tile:?}: {lo:?}..{hi:?}"
                        );
                    }
                    for (at, len) in box_runs(&shape, &lo, &hi) {
                        (at..at + len as u64).for_each(|i| seen[i as usize] += 1);
                    }
                }
                let want: Vec<u8> = (0..210).map(|i| u8::from(i >= first && i < end)).collect();
                assert_eq!(seen, want, "tile {tile:?}, slab {first}..{end}");
            }
        }
    }
}
