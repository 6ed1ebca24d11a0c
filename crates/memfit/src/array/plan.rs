//! Planning an expression job: each stage's tiles sized from the memory
//! limit, every buffer declared with its bytes, and the explanation
//! (`explain`) printed from it.

use std::fmt;
use std::sync::Arc;

use super::lower::{Ir, Lowered, Output, Shards, Src, Stage, Target, Work};
use super::node::Reduction;
use super::reduce::acc_bytes;
use super::store::READ_SLACK_ELEMENTS;
use super::tiling::{
    chunk_line, chunk_shape, default_chunks, einsum_chunk, n_tiles, tile_shape, volume, EINSUM_MIN_TILE,
    EINSUM_MIN_UNIT_BYTES, MAX_TILE, REDUCE_CHUNK,
};
use super::values::COL_BYTES;
use crate::error::Result;
use crate::plan::{check_fits, format_bytes, Ledger, Plan, Schedule};

/// Chunks under this many uncompressed bytes are grouped into shards by
/// [`Shards::Auto`].
pub const SMALL_CHUNK_BYTES: u64 = 1 << 20;

/// Largest shard [`Shards::Auto`] makes, in uncompressed bytes.
pub const MAX_SHARD_BYTES: u64 = 64 << 20;

/// Shards [`Shards::Auto`] sizes to be written at once within the memory
/// left (more when more fit): a constant, so that the layout depends on
/// the shape, dtype and limit only, never on the threads.
const SHARD_WRITERS: u64 = 2;

/// Largest slab of a file output written at once: each elementwise stage
/// writing a `.npy` file evaluates C-order slabs of its result into one
/// of two buffers of at most this many bytes (a quarter of the memory left
/// by held buffers), one being written by one positioned write while the
/// next is evaluated.
pub const MAX_WRITE_SLAB: u64 = 64 << 20;

/// Slabs of at least this many bytes start and end at multiples of it in
/// the file (whole pages).
pub const WRITE_ALIGN: u64 = 4096;

/// How a stage is cut into work.
#[derive(Debug, Clone, serde::Serialize)]
pub struct StagePlan {
    /// What the stage computes, in words.
    pub what: String,
    /// Shape of its result.
    pub shape: Vec<usize>,
    /// Dtype of its result.
    pub dtype: &'static str,
    /// Where the result goes (`output`, `memory`, `scratch file`).
    pub target: String,
    /// Tile extents: over the result (elementwise), over the kept axes
    /// (reductions) or over the output labels (einsum).
    pub tile: Vec<usize>,
    /// Fixed accumulation chunk over the reduced axes or contracted labels
    /// (empty for elementwise stages).
    pub chunk: Vec<usize>,
    /// Tiles × chunks: units of work.
    pub work_items: u64,
    /// Consecutive accumulation chunks a unit reads as one box (a Zarr
    /// input's chunk whole along the chunks' line, rather than decoded
    /// once per accumulation chunk): each chunk's statistics are still
    /// computed and folded one by one, so the bits do not depend on it.
    /// 1 for other stages.
    pub group: usize,
    /// Reduction rewrites: the factor the reduced axes were shrunk by
    /// (1: none).
    pub multiplier: u64,
    /// Bytes of working memory per thread.
    pub bytes_per_thread: u64,
    /// Most elements evaluated at once per thread (a Zarr chunk larger
    /// than this is evaluated in parts).
    pub eval_elems: usize,
    /// Threads working at once: the job's threads, or for a Zarr output
    /// the chunks (shards) buffered at a time.
    pub workers: usize,
    /// Bytes of each of the two write buffers of a stage writing a file
    /// by slabs (see [`MAX_WRITE_SLAB`]); 0 for other stages.
    pub write_slab: u64,
    /// A Zarr output's chunk shape (the tile is the shard when sharded);
    /// empty for other stages.
    pub zarr_chunks: Vec<usize>,
    /// Bytes of decoded Zarr input chunks the stage's threads share
    /// ([`crate::io::ChunkCache`]: at least a chunk per thread, more where
    /// units read the same chunks); 0 for stages that read no Zarr array.
    pub zarr_cache: u64,
}

/// How an expression job cuts its work: its stages, each one pass over
/// its inputs, run one after another. The [`Schedule`] of an array job's
/// [`Plan`]; its buffers are the ledger's "stage N" phases.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Stages {
    /// The stages in order.
    pub stages: Vec<StagePlan>,
    /// Bytes of scratch files on disk (deleted after use).
    pub scratch_bytes: u64,
    /// Where the result goes.
    pub output: String,
}

/// The job name an expression's plan shows.
const JOB: &str = "an array expression";

/// Copies of a Zarr chunk's bytes held while it is written, besides its
/// evaluated values: the encoded chunk, the padded edge chunk, the
/// compressed chunk.
const CHUNK_COPIES: u64 = 3;

/// Bytes of each write buffer of a file output by slabs, within `avail`
/// bytes: a quarter of them, at most [`MAX_WRITE_SLAB`], whole pages when
/// at least one, at least one element of `item` bytes.
fn write_slab_bytes(avail: u64, item: u64) -> u64 {
    let slab = (avail / 4).min(MAX_WRITE_SLAB);
    let slab = if slab >= WRITE_ALIGN { slab / WRITE_ALIGN * WRITE_ALIGN } else { slab / item * item };
    slab.max(item)
}

/// A Zarr output's chunk shape and shard shape (`None`: unsharded) for a
/// result of `shape` with `item`-byte elements, written within `avail`
/// bytes: `chunks` as given or [`default_chunks`], `shards` as [`Shards`]
/// says (automatic shards sized for [`SHARD_WRITERS`] at once). Shapes
/// that do not fit the array are returned as given (the writer refuses
/// them).
fn zarr_layout(
    shape: &[usize],
    item: u64,
    avail: u64,
    chunks: Option<Vec<usize>>,
    shards: &Shards,
) -> (Vec<usize>, Option<Vec<usize>>) {
    let default = || default_chunks(shape, item as usize, avail);
    match shards {
        Shards::Off => (chunks.unwrap_or_else(default), None),
        Shards::Shape(s) => {
            let c = chunks.unwrap_or_else(|| {
                let largest_divisor =
                    |s: usize, d: usize| (1..=d.min(s).max(1)).rev().find(|&c| s.is_multiple_of(c)).unwrap_or(1);
                default().iter().zip(s).map(|(&d, &s)| largest_divisor(s, d)).collect()
            });
            (c, Some(s.clone()))
        }
        Shards::Auto => {
            let c = chunks.unwrap_or_else(default);
            let chunk = volume(&c) as u64;
            if c.len() != shape.len() || c.contains(&0) || chunk * item >= SMALL_CHUNK_BYTES {
                return (c, None);
            }
            let per = COL_BYTES + (CHUNK_COPIES + 1) * item;
            let target = (MAX_SHARD_BYTES / item).min(avail / (2 * SHARD_WRITERS) / per);
            let mut room = target / chunk.max(1);
            let mut shard = c.clone();
            for k in (0..shape.len()).rev() {
                let grid = shape[k].div_ceil(c[k]) as u64;
                let m = grid.min(room).max(1);
                shard[k] = c[k] * m as usize;
                room /= m;
                if m < grid {
                    break;
                }
            }
            let sharded = shard != c;
            (c, sharded.then_some(shard))
        }
    }
}

/// Working bytes per element of an expression's tile: the columns held at
/// once ([`Ir::peak_columns`]), and the offsets and read buffer of the leaf
/// being read (leaves are read one at a time into one buffer).
pub(crate) fn elem_bytes(ir: &Ir, lowered: &Lowered) -> u64 {
    let leaf = ir
        .leaves()
        .iter()
        .map(|src| {
            8 + match src {
                Src::Stored(s) => {
                    s.read_buffer_bytes(1).saturating_sub((READ_SLACK_ELEMENTS * s.dtype.itemsize()) as u64)
                }
                Src::Slot(i) if lowered.slots[*i].on_disk => 2 * lowered.slots[*i].dtype.itemsize() as u64 + 12,
                _ => 0,
            }
        })
        .max()
        .unwrap_or(0);
    ir.peak_columns() as u64 * COL_BYTES + leaf
}

/// Fixed working bytes per thread of an expression (the read slack of the
/// file leaf being read).
fn ir_fixed_bytes(ir: &Ir, lowered: &Lowered) -> u64 {
    ir.leaves()
        .iter()
        .map(|src| match src {
            Src::Stored(s) if s.on_disk() => (READ_SLACK_ELEMENTS * s.dtype.itemsize()) as u64,
            Src::Slot(i) if lowered.slots[*i].on_disk => {
                (READ_SLACK_ELEMENTS * lowered.slots[*i].dtype.itemsize()) as u64
            }
            _ => 0,
        })
        .max()
        .unwrap_or(0)
}

/// The expression's large leaves and their maps: those of at least an
/// eighth of the largest leaf's elements.
fn large_leaves<'a>(ir: &'a Ir, lowered: &Lowered) -> Vec<(&'a Src, &'a super::view::ViewMap)> {
    let size = |src: &Src| match src {
        Src::Stored(s) => volume(&s.shape),
        Src::Slot(i) => volume(&lowered.slots[*i].shape),
        _ => 0,
    };
    let leaves = ir.leaf_maps();
    let largest = leaves.iter().map(|(src, _)| size(src)).max().unwrap_or(0);
    leaves.into_iter().filter(|(src, _)| size(src) >= largest / 8).collect()
}

/// Axes along which the expression's large leaves are contiguous (a small vector
/// broadcast against a large array must not pull the tiles across the
/// large array's rows: `d * s[:, None, None]` reads `d` in C-order blocks).
fn hot_axes(ir: &Ir, lowered: &Lowered) -> Vec<usize> {
    let mut out = Vec::new();
    for (_, map) in large_leaves(ir, lowered) {
        for (k, terms) in map.axes.iter().enumerate() {
            if terms.iter().any(|t| t.coef.abs() == 1 && t.chain.is_empty() && t.joint.is_none()) && !out.contains(&k) {
                out.push(k);
            }
        }
    }
    out
}

/// Tile extents over the axes of `ir`'s index space (of extents `shape`)
/// that hold whole chunks of its largest Zarr leaf, read through a
/// permutation of its axes (a transpose, a slice): a chunk is then decoded
/// once per tile that needs it, where tiles cut across the chunks decode
/// each chunk many times (rows of a tile's width in a transpose, a few
/// rows of it in C order). `None` when no Zarr leaf is among the largest
/// leaves, or its map is not a permutation.
fn zarr_tile(ir: &Ir, lowered: &Lowered, shape: &[usize]) -> Option<Vec<usize>> {
    let (stored, map, chunks) = large_leaves(ir, lowered).into_iter().find_map(|(src, map)| match src {
        Src::Stored(s) => s.zarr_chunks().map(|c| (s, map, c)),
        _ => None,
    })?;
    let mut ext = vec![1usize; shape.len()];
    for (k, terms) in map.axes.iter().enumerate() {
        match terms.as_slice() {
            // Broadcast along this axis: the same chunks for every index.
            [] => {}
            [t] if t.chain.is_empty() && t.joint.is_none() => {
                let j = (0..stored.shape.len()).find(|&j| stored.shape[j] > 1 && stored.strides[j] == t.coef.abs())?;
                ext[k] = chunks[j].clamp(1, shape[k].max(1));
            }
            _ => return None,
        }
    }
    Some(ext)
}

/// Bytes of decoded chunks of the stage's Zarr inputs its threads share
/// ([`crate::io::ChunkCache`]), out of `avail`, and what they hold. What
/// units read at a time, per input: a row of chunks (those with one index
/// along the outermost axis the chunks cut: units sweep an array in C
/// order), or the chunks one accumulation chunk of a reduction spans
/// through the input's view, when more (a reduction over the rows of a
/// transpose reads a column of chunks per unit). Twice that (the units in
/// flight and the next ones) where it fits in half of `avail`, else once,
/// else none (each unit then decodes the chunks it reads for itself, as
/// many times as units read them); never more than an input's decoded
/// bytes. At least a chunk per thread either way: every decoded chunk is
/// read from the cache, so no thread decodes one outside the plan. The
/// cache saves decoding only: values do not depend on it. Sharded inputs
/// are read by inner chunks, without it. Returns the bytes, the least of
/// them (a chunk per thread) and what they hold.
fn zarr_cache(stage: &Stage, avail: u64, threads: u64) -> (u64, u64, String) {
    // A unit's least extent over the iteration space: one element of each
    // kept axis, the accumulation chunk of the reduced ones.
    let least: Option<Vec<usize>> = match &stage.work {
        Work::Reduce { axes, reduced, .. } => {
            let chunk = accumulation_chunk(&stage.shape, axes, reduced);
            Some(
                (0..stage.shape.len() + axes.len())
                    .map(|k| axes.iter().position(|&a| a == k).map_or(1, |r| chunk[r]))
                    .collect(),
            )
        }
        _ => None,
    };
    let mut inputs: Vec<(&Arc<super::store::Stored>, u64)> = Vec::new();
    for ir in stage.irs() {
        for (src, map) in ir.leaf_maps() {
            let Src::Stored(s) = src else { continue };
            let Some(c) = s.cached_zarr_chunks() else { continue };
            let spanned = least.as_ref().and_then(|ext| chunks_spanned(s, &c, map, ext)).unwrap_or(0);
            match inputs.iter_mut().find(|(t, _)| Arc::ptr_eq(t, s)) {
                Some((_, n)) => *n += spanned,
                None => inputs.push((s, spanned)),
            }
        }
    }
    let (mut one, mut two, mut chunks) = (0u64, 0u64, 0u64);
    for (s, spanned) in &inputs {
        let c = s.cached_zarr_chunks().expect("a cached Zarr input");
        let grid: Vec<u64> = s.shape.iter().zip(&c).map(|(&n, &k)| n.div_ceil(k.max(1)) as u64).collect();
        let chunk_bytes = volume(&c) as u64 * s.dtype.itemsize() as u64;
        let all: u64 = grid.iter().product();
        let row = grid.iter().position(|&g| g > 1).map_or(1, |a| all / grid[a]);
        let unit = row.max(*spanned);
        one += unit.min(all) * chunk_bytes;
        two += (2 * unit).min(all) * chunk_bytes;
        chunks = chunks.max(chunk_bytes);
    }
    let least = threads * chunks;
    let half = avail.saturating_sub(least) / 2;
    let (bytes, held) = if two <= half {
        (two, "twice the chunks units read at a time")
    } else if one <= half {
        (one, "the chunks units read at a time")
    } else {
        (0, "a chunk per thread")
    };
    let what = format!(
        "decoded chunks of {} Zarr input{} shared by the threads: {held}, {} per chunk",
        inputs.len(),
        if inputs.len() == 1 { "" } else { "s" },
        format_bytes(chunks)
    );
    (bytes.max(least), least, what)
}

/// The chunks (of extent `chunks`) of the Zarr input `stored` that a box of
/// extent `ext` at the start of `map`'s space spans, when each axis of the
/// map reads one axis of the input with a unit step (else `None`).
fn chunks_spanned(
    stored: &super::store::Stored,
    chunks: &[usize],
    map: &super::view::ViewMap,
    ext: &[usize],
) -> Option<u64> {
    let mut along = vec![1usize; stored.shape.len()];
    for (k, terms) in map.axes.iter().enumerate() {
        match terms.as_slice() {
            [] => {}
            [t] if t.chain.is_empty() && t.joint.is_none() => {
                let j = (0..stored.shape.len()).find(|&j| stored.shape[j] > 1 && stored.strides[j] == t.coef.abs())?;
                along[j] = along[j].max(*ext.get(k)?);
            }
            _ => return None,
        }
    }
    Some(
        along
            .iter()
            .zip(chunks)
            .zip(&stored.shape)
            .map(|((&e, &c), &n)| e.div_ceil(c.max(1)).min(n.div_ceil(c.max(1))) as u64)
            .product(),
    )
}

/// The fixed accumulation chunk of a reduction of `axes` (its extents
/// `reduced`) keeping `kept`: short enough that a tile spans the kept
/// elements inside the last reduced axis whole (contiguous reads). It
/// depends on the shapes only, never on the limit.
fn accumulation_chunk(kept: &[usize], axes: &[usize], reduced: &[usize]) -> Vec<usize> {
    let last = *axes.last().unwrap_or(&0);
    let kept_inner: usize =
        (last + 1..kept.len() + axes.len()).map(|k| kept[k - axes.iter().filter(|&&a| a < k).count()]).product();
    let target = (MAX_TILE / kept_inner.max(1)).clamp(16, REDUCE_CHUNK);
    chunk_shape(reduced, target)
}

/// `ext` grown by whole multiples, innermost axes first, while the tile
/// stays within `budget` elements and `shape`.
fn grow_tile(mut ext: Vec<usize>, shape: &[usize], budget: usize) -> Vec<usize> {
    for k in (0..shape.len()).rev() {
        let room = budget / volume(&ext).max(1);
        let whole = shape[k].div_ceil(ext[k].max(1));
        ext[k] = (ext[k] * room.min(whole).max(1)).min(shape[k].max(1));
        if ext[k] < shape[k] {
            break;
        }
    }
    ext
}

/// The plan of a stage run as independent tiles of extent `tile`
/// (elementwise or scan), each evaluated in parts of `eval_elems`, `bytes`
/// per worker, `workers` at once.
fn tiled(what: String, stage: &Stage, tile: Vec<usize>, bytes: u64, eval_elems: usize, workers: usize) -> StagePlan {
    StagePlan {
        what,
        shape: stage.shape.clone(),
        dtype: stage.dtype.name(),
        target: String::new(),
        work_items: n_tiles(&stage.shape, &tile) as u64,
        group: 1,
        tile,
        chunk: Vec::new(),
        multiplier: 1,
        bytes_per_thread: bytes,
        eval_elems,
        workers,
        write_slab: 0,
        zarr_chunks: Vec::new(),
        zarr_cache: 0,
    }
}

/// Plans `lowered` for `output` within `limit` bytes on `threads` threads.
///
/// # Errors
/// [`crate::Error::DoesNotFit`] when even one minimal tile per thread does
/// not fit, naming the smallest limit that works.
pub fn plan(lowered: &Lowered, output: &Output, limit: u64, threads: usize) -> Result<Plan<Stages>> {
    let threads = threads.max(1);
    let t = threads as u64;
    let mut led = Ledger::default();
    let mut scratch_bytes = 0;
    for (i, s) in lowered.slots.iter().enumerate() {
        match (s.on_disk, &s.result) {
            (true, None) => scratch_bytes += s.bytes(),
            (true, Some(_)) => {}
            (false, None) => {
                led.add(&format!("intermediate#{i}"), s.bytes(), 1, format!("{:?} {}", s.shape, s.dtype.name()))
            }
            (false, Some(_)) => {
                led.add(&format!("result#{i}"), s.bytes(), 1, format!("{:?} {}", s.shape, s.dtype.name()))
            }
        }
    }
    let last = lowered.stages.last().expect("a final stage");
    let out_elems = volume(&last.shape) as u64;
    if *output == Output::Memory && last.target == Target::Out {
        led.add(
            "result",
            1,
            out_elems.saturating_mul(last.dtype.itemsize() as u64),
            format!("{:?} {}", last.shape, last.dtype.name()),
        );
    }
    let held = led.total();
    let avail = limit.saturating_sub(held);
    let mut stages = Vec::new();
    let mut required = held;
    for (si, stage) in lowered.stages.iter().enumerate() {
        let phase = format!("stage {si}");
        let item = stage.dtype.itemsize() as u64;
        let (zarr_cache, least, cached) = zarr_cache(stage, avail, t);
        if zarr_cache > 0 {
            led.add_in(&phase, "Zarr chunk cache", 1, zarr_cache, cached);
        }
        // What the stage's buffers share; the least cache is always needed.
        let (avail, held) = (avail.saturating_sub(zarr_cache), held + least);
        let goes_to = match stage.target {
            Target::Out => Some(output),
            Target::Slot(i) => lowered.slots[i].result.as_ref(),
        };
        let zarr_out = match goes_to {
            Some(Output::Zarr { chunks, shards, .. }) => Some((chunks.clone(), shards)),
            _ => None,
        };
        // Elementwise results written to a `.npy` file go by slabs.
        let to_file = match stage.target {
            Target::Out => matches!(output, Output::Npy { .. }),
            Target::Slot(i) => lowered.slots[i].on_disk,
        };
        let write_slab =
            if to_file && matches!(stage.work, Work::Map { .. }) { write_slab_bytes(avail, item) } else { 0 };
        if write_slab > 0 {
            led.add_in(
                &phase,
                "write buffers",
                2,
                write_slab,
                format!("2 slabs of {write_slab} B: one written while the next is evaluated"),
            );
        }
        let room = avail.saturating_sub(2 * write_slab) / t;
        let sp = match &stage.work {
            Work::Map { ir } => {
                let per = elem_bytes(ir, lowered) + item;
                let fixed = ir_fixed_bytes(ir, lowered);
                let mut hot = hot_axes(ir, lowered);
                hot.push(stage.shape.len().saturating_sub(1));
                hot.sort_unstable();
                hot.dedup();
                // Reads and writes contiguous along different axes (a
                // transpose): square-ish tiles, large enough for long runs.
                let max_tile = if hot.len() > 1 { MAX_TILE << 4 } else { MAX_TILE };
                let (tile, workers, e, chunk_buf, zarr_chunks) = match zarr_out {
                    Some((chunks, shards)) => {
                        // Chunks first (sized for the format, from the room
                        // left by held buffers), grouped into shards when
                        // small; then as many shards (chunks) at a time as
                        // fit, each evaluated in parts of `e` elements and
                        // its chunks compressed one after the other (see
                        // `ZarrOutput::write_chunk`).
                        let (c, shard) = zarr_layout(&stage.shape, item, avail, chunks, shards);
                        let unit = shard.clone().unwrap_or_else(|| c.clone());
                        let copies = CHUNK_COPIES + u64::from(shard.is_some());
                        let chunk_buf = volume(&unit) as u64 * (COL_BYTES + copies * item);
                        // A sharded write compresses one chunk at a time: a
                        // chunk's bytes and its compressed bytes, per thread
                        // at most.
                        let compress = if shard.is_some() { t * 2 * volume(&c) as u64 * item } else { 0 };
                        if compress > 0 {
                            led.add_in(
                                &phase,
                                "compression buffers",
                                t,
                                2 * volume(&c) as u64 * item,
                                format!("{t} threads × 2 chunks of {:?}", c),
                            );
                        }
                        let left = avail.saturating_sub(compress);
                        let want = volume(&unit).min(max_tile) as u64;
                        let fits = left / (fixed + chunk_buf + want * per).max(1);
                        let workers = fits.clamp(1, t);
                        let e = ((left / workers).saturating_sub(fixed + chunk_buf) / per).clamp(1, max_tile as u64);
                        required = required.max(held + compress + fixed + per + chunk_buf);
                        (unit, workers, e as usize, chunk_buf, c)
                    }
                    None => {
                        let e = (room.saturating_sub(fixed) / per).clamp(1, max_tile as u64) as usize;
                        required = required.max(held + 2 * write_slab.min(item) + t * (fixed + per));
                        // A Zarr input's chunks whole in a tile, when the
                        // room holds one (tiles do not change the values).
                        let fit = (room.saturating_sub(fixed) / per) as usize;
                        match zarr_tile(ir, lowered, &stage.shape).map(|z| grow_tile(z, &stage.shape, e)) {
                            Some(z) if volume(&z) <= fit => {
                                let e = volume(&z);
                                (z, t, e, 0, Vec::new())
                            }
                            _ => (tile_shape(&stage.shape, e, &hot), t, e, 0, Vec::new()),
                        }
                    }
                };
                let tile_elems = (volume(&tile) as u64).min(e as u64);
                let bytes = fixed + tile_elems * per + chunk_buf;
                let what = if chunk_buf > 0 { "chunks at a time" } else { "threads" };
                led.add_in(
                    &phase,
                    "tile buffers",
                    workers,
                    bytes,
                    format!(
                        "{workers} {what} × ({tile_elems} elements × {per} B + {fixed} B read slack + {chunk_buf} B chunk)"
                    ),
                );
                StagePlan { write_slab, zarr_chunks, ..tiled(ir.describe(), stage, tile, bytes, e, workers as usize) }
            }
            Work::Scan { ir, op, .. } => {
                // A tile's values, evaluated and accumulated in place, and
                // the line of values carried to the next tile along the axis.
                let per = elem_bytes(ir, lowered) + 2 * item;
                let fixed = ir_fixed_bytes(ir, lowered);
                let mut hot = hot_axes(ir, lowered);
                hot.push(stage.shape.len().saturating_sub(1));
                hot.sort_unstable();
                hot.dedup();
                let e = (room.saturating_sub(fixed) / per).clamp(1, MAX_TILE as u64) as usize;
                let tile = tile_shape(&stage.shape, e, &hot);
                let tile_elems = volume(&tile) as u64;
                required = required.max(held + t * (fixed + per));
                let bytes = fixed + tile_elems * per;
                led.add_in(
                    &phase,
                    "tile buffers",
                    t,
                    bytes,
                    format!("{t} threads × ({tile_elems} elements × {per} B + {fixed} B read slack)"),
                );
                let what = format!("cum{}({})", if *op == Reduction::Prod { "prod" } else { "sum" }, ir.describe());
                StagePlan { write_slab, ..tiled(what, stage, tile, bytes, e, threads) }
            }
            Work::Reduce { ir, axes, reduced, multiplier, .. } => {
                let chunk = accumulation_chunk(&stage.shape, axes, reduced);
                let cn = volume(&chunk) as u64;
                // Each result's statistics (a tile's, a chunk's and their
                // fold) and its value.
                let ops = super::run::reductions(stage);
                let stats: u64 = ops.iter().map(|(op, _, d)| acc_bytes(*op) * 3 + d.itemsize() as u64).sum();
                let chunk_bytes = cn * elem_bytes(ir, lowered);
                let per_out = chunk_bytes + stats + 8;
                let fixed = ir_fixed_bytes(ir, lowered) + cn * 8;
                let e = (room.saturating_sub(fixed) / per_out).clamp(1, (MAX_TILE as u64 / cn).max(1)) as usize;
                let kept = &stage.shape;
                let kept_axes: Vec<usize> = (0..kept.len() + axes.len()).filter(|k| !axes.contains(k)).collect();
                let hot: Vec<usize> =
                    hot_axes(ir, lowered).into_iter().filter_map(|k| kept_axes.iter().position(|&a| a == k)).collect();
                let mut tile = tile_shape(kept, e, &hot);
                // A Zarr input's chunks whole in a tile's kept axes, when
                // the room holds them (output tiles do not change values).
                let full: Vec<usize> = (0..kept.len() + axes.len())
                    .map(|k| match axes.iter().position(|&a| a == k) {
                        Some(r) => reduced[r],
                        None => kept[kept_axes.iter().position(|&a| a == k).expect("a kept axis")],
                    })
                    .collect();
                let zarr = zarr_tile(ir, lowered, &full);
                if let Some(z) = &zarr {
                    let z = grow_tile(kept_axes.iter().map(|&a| z[a]).collect(), kept, e);
                    if fixed + volume(&z) as u64 * per_out <= room {
                        tile = z;
                    }
                }
                // A Zarr input's chunks along the chunks' line read whole by
                // groups of accumulation chunks (of their extent: each chunk
                // decoded at most twice), as many as the room holds. Each
                // group chunk's elements and statistics are held.
                let line = chunk_line(reduced, &chunk);
                let group_bytes = |g: u64| fixed + volume(&tile) as u64 * (per_out + (g - 1) * (chunk_bytes + stats));
                let mut group = 1;
                if let (Some(z), Some(r)) = (&zarr, line) {
                    let want = z[axes[r]].div_ceil(chunk[r]).min(reduced[r].div_ceil(chunk[r]));
                    group = (1..=want.max(1)).rev().find(|&g| group_bytes(g as u64) <= room).unwrap_or(1);
                }
                let bytes = group_bytes(group as u64);
                required = required.max(held + t * (fixed + per_out));
                let together = if group > 1 { format!(", {group} chunks read together") } else { String::new() };
                led.add_in(
                    &phase,
                    "tile buffers",
                    t,
                    bytes,
                    format!("{t} threads × ({} outputs × {cn} chunk elements{together})", volume(&tile)),
                );
                let each: Vec<String> =
                    ops.iter().zip(ir.describe_each()).map(|((op, ..), d)| format!("{}({d})", op.name())).collect();
                StagePlan {
                    what: format!("{} over {} reduced elements", each.join(", "), volume(reduced)),
                    shape: stage.shape.clone(),
                    dtype: stage.dtype.name(),
                    target: String::new(),
                    work_items: (n_tiles(kept, &tile) * n_tiles(reduced, &chunk)) as u64,
                    group,
                    tile,
                    chunk,
                    multiplier: u64::try_from(*multiplier).unwrap_or(u64::MAX),
                    bytes_per_thread: bytes,
                    eval_elems: e,
                    workers: threads,
                    write_slab,
                    zarr_chunks: Vec::new(),
                    zarr_cache: 0,
                }
            }
            Work::Einsum { sub, irs, path, sizes } => {
                let contracted: Vec<u8> = sizes.keys().copied().filter(|c| !sub.output.contains(c)).collect();
                let csizes: Vec<usize> = contracted.iter().map(|c| sizes[c]).collect();
                let chunk = einsum_chunk(&contracted, &sub.inputs, |c| sizes[&c]);
                let per_label: Vec<f64> = irs.iter().map(|ir| (elem_bytes(ir, lowered) + COL_BYTES) as f64).collect();
                let fixed: u64 = irs.iter().map(|ir| ir_fixed_bytes(ir, lowered)).sum();
                let item_bytes = |ext: &[usize]| -> u64 {
                    let size_of = |c: &u8| match sub.output.iter().position(|o| o == c) {
                        Some(p) => ext[p],
                        None => chunk[contracted.iter().position(|x| x == c).expect("contracted")],
                    };
                    let mut sub_sizes = sizes.clone();
                    for (c, v) in sub_sizes.iter_mut() {
                        *v = size_of(c);
                    }
                    let operands: f64 = sub
                        .inputs
                        .iter()
                        .zip(&per_label)
                        .map(|(labels, b)| labels.iter().map(size_of).product::<usize>() as f64 * b)
                        .sum();
                    let out = volume(ext) as u64 * (COL_BYTES * 3);
                    operands as u64 + out + crate::linalg::einsum::scratch_bytes(sub, &sub_sizes, path) + fixed
                };
                // As many threads as one smallest unit each fits (at least
                // one), then output tiles as large as each thread's share
                // allows, cut further only to give every thread work. The
                // tile does not change the result (the chunk fixes the order).
                // Tiles are halved along their longest axis, no smaller
                // than a unit of EINSUM_MIN_UNIT_BYTES (or the whole
                // output): tiles of one output each re-read operand blocks
                // per element (1,006,009 units and 20 s for a 1003 × 1003
                // `x.T @ x` that takes 0.2 s in whole tiles), so a limit
                // that holds no smallest tile is refused rather than
                // crawled through.
                let halved = |tile: &mut Vec<usize>| {
                    let k = (0..tile.len()).filter(|&k| tile[k] > 1).max_by_key(|&k| tile[k])?;
                    let was = tile[k];
                    tile[k] = tile[k].div_ceil(2);
                    Some((k, was))
                };
                let whole: Vec<usize> = sub.output.iter().map(|c| sizes[c]).collect();
                let mut smallest = whole.clone();
                loop {
                    let mut next = smallest.clone();
                    if halved(&mut next).is_none() || item_bytes(&next) < EINSUM_MIN_UNIT_BYTES {
                        break;
                    }
                    smallest = next;
                }
                let least = item_bytes(&smallest);
                let workers = (avail / least.max(1)).clamp(1, t);
                let room = avail / workers;
                let n_c = n_tiles(&csizes, &chunk);
                let mut tile = whole;
                let good = |tile: &[usize]| {
                    item_bytes(tile) <= room
                        && (n_tiles(&stage.shape, tile) * n_c >= 2 * workers as usize
                            || volume(tile) <= EINSUM_MIN_TILE)
                };
                let mut last = None;
                while !good(&tile) && volume(&tile) > volume(&smallest) {
                    let Some(cut) = halved(&mut tile) else { break };
                    last = Some(cut);
                }
                // The last axis cut: as long as still fits (bisection).
                if let Some((k, mut bad)) = last.filter(|_| good(&tile)) {
                    while bad - tile[k] > 1 {
                        let mut t = tile.clone();
                        t[k] = (tile[k] + bad) / 2;
                        if good(&t) {
                            tile = t;
                        } else {
                            bad = t[k];
                        }
                    }
                }
                let bytes = item_bytes(&tile);
                required = required.max(held + least);
                led.add_in(
                    &phase,
                    "tile buffers",
                    workers,
                    bytes,
                    format!("{workers} threads × (operand blocks, contraction, {} outputs)", volume(&tile)),
                );
                StagePlan {
                    what: format!(
                        "einsum {}->{} (pairwise order {:?})",
                        sub.inputs
                            .iter()
                            .map(|l| String::from_utf8_lossy(l).into_owned())
                            .collect::<Vec<_>>()
                            .join(","),
                        String::from_utf8_lossy(&sub.output),
                        path.steps
                    ),
                    shape: stage.shape.clone(),
                    dtype: stage.dtype.name(),
                    target: String::new(),
                    work_items: (n_tiles(&stage.shape, &tile) * n_c) as u64,
                    group: 1,
                    tile,
                    chunk,
                    multiplier: 1,
                    bytes_per_thread: bytes,
                    eval_elems: 0,
                    workers: workers as usize,
                    write_slab,
                    zarr_chunks: Vec::new(),
                    zarr_cache: 0,
                }
            }
        };
        let target = stage
            .targets()
            .into_iter()
            .map(|(t, _)| {
                let goes_to = match t {
                    Target::Out => Some(output),
                    Target::Slot(i) => lowered.slots[i].result.as_ref(),
                };
                match (goes_to, t) {
                    (Some(o), _) => match o {
                        Output::Memory => "result in memory".to_string(),
                        Output::Rows => "read in row blocks by the consumer".to_string(),
                        Output::Npy { path, .. } => format!("{} (.npy, positioned writes by slabs)", path.display()),
                        Output::Zarr { path, .. } if sp.zarr_chunks != sp.tile => format!(
                            "{} (Zarr v3, chunks {:?} in shards {:?}, one write per shard)",
                            path.display(),
                            sp.zarr_chunks,
                            sp.tile
                        ),
                        Output::Zarr { path, .. } => format!("{} (Zarr v3, one write per chunk)", path.display()),
                    },
                    (None, Target::Out) => unreachable!("the output stage goes to the output"),
                    (None, Target::Slot(i)) if lowered.slots[i].on_disk => {
                        format!("intermediate#{i} in a scratch file")
                    }
                    (None, Target::Slot(i)) => format!("intermediate#{i} in memory"),
                }
            })
            .collect::<Vec<_>>()
            .join("; ");
        stages.push(StagePlan { target, zarr_cache, ..sp });
    }
    // Writing the result to a file helps only where holding it is a good
    // share of what the job needs (not for a sum's 8 bytes).
    let result_bytes = out_elems.saturating_mul(last.dtype.itemsize() as u64);
    let helps = *output == Output::Memory && result_bytes.saturating_mul(4) >= required;
    let also = || if helps { vec![crate::error::Remedy::WriteToFile] } else { Vec::new() };
    check_fits(required, limit, &led, || "evaluating the expression".to_string(), also)?;
    let output = match output {
        Output::Memory => "memory".into(),
        Output::Rows => "row blocks".into(),
        Output::Npy { path, .. } | Output::Zarr { path, .. } => path.display().to_string(),
    };
    Ok(Plan::new(JOB, limit, threads, led, Stages { stages, scratch_bytes, output }))
}

impl Schedule for Stages {
    const PHASES: &'static str = "stages run one after another, the largest counts";

    fn explain(&self, threads: usize, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "result -> {}; threads: {threads}", self.output)?;
        for (i, s) in self.stages.iter().enumerate() {
            writeln!(f, "stage {i}: {}", s.what)?;
            writeln!(f, "  result {:?} {} -> {}", s.shape, s.dtype, s.target)?;
            write!(f, "  tile {:?}", s.tile)?;
            if !s.chunk.is_empty() {
                write!(f, " × chunk {:?}", s.chunk)?;
            }
            if s.group > 1 {
                write!(f, " ({} chunks read together)", s.group)?;
            }
            writeln!(f, "; {} work items; {} per thread", s.work_items, format_bytes(s.bytes_per_thread))?;
            if s.multiplier > 1 {
                writeln!(
                    f,
                    "  rewrite: reduced axes come from tiles/repeats/broadcasts, {}× fewer elements read",
                    s.multiplier
                )?;
            }
        }
        Ok(())
    }

    fn passes(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "passes: {} (one per stage); scratch on disk: {}",
            self.stages.len(),
            format_bytes(self.scratch_bytes)
        )
    }
}
