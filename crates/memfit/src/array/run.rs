//! Running a planned expression job: stage after stage, tiles in parallel
//! on the rayon pool, reductions and contractions folded chunk after chunk
//! in a fixed order (so results are bitwise the same for any thread count
//! and memory limit), results written to memory, a `.npy` file (positioned
//! writes) or a Zarr array (one write per chunk).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rayon::prelude::*;

use super::eval::{eval, offsets, Ctx};
use super::lower::{lower, Lowered, Target, Work};
use super::node::{Array, Reduction};
use super::plan::{plan, ArrayPlan, Output, StagePlan};
use super::reduce::{partial, Acc};
use super::store::Stored;
use super::tiling::{n_tiles, tile_box, volume};
use super::values::Col;
use super::view::ViewMap;
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::io::{PositionedNpy, ZarrOutput};
use crate::linalg::einsum::{contract, Dense};
use crate::Warning;

/// How to run a job: every job's [`crate::exec::RunOptions`] (array jobs
/// read its memory limit and threads).
pub use crate::exec::RunOptions as Options;

/// A result returned in memory: C-order little-endian elements.
#[derive(Debug, Clone)]
pub struct Computed {
    /// Shape.
    pub shape: Vec<usize>,
    /// Dtype.
    pub dtype: Dtype,
    /// The elements' bytes.
    pub bytes: Vec<u8>,
}

/// What a run reports besides its result.
#[derive(Debug, Clone)]
pub struct Report {
    /// The plan it ran.
    pub plan: ArrayPlan,
    /// Warnings (values that became NaN or infinite).
    pub warnings: Vec<Warning>,
}

/// Intermediates in memory beyond this share of the limit go to scratch files.
const MEMORY_SLOT_SHARE: u64 = 4;

fn lowered_for(root: &Array, output: &Output, limit: u64) -> Lowered {
    let mut lowered = lower(root, limit / MEMORY_SLOT_SHARE);
    // Zarr is written a chunk at a time and rows are read a block at a time:
    // a final reduction or contraction goes to an intermediate first.
    if matches!(output, Output::Zarr { .. } | Output::Rows) {
        let last = lowered.stages.last_mut().expect("a final stage");
        if !matches!(last.work, Work::Map { .. }) {
            let slot = super::lower::Slot { shape: last.shape.clone(), dtype: last.dtype, on_disk: false };
            let on_disk = slot.bytes() > limit / MEMORY_SLOT_SHARE;
            lowered.slots.push(super::lower::Slot { on_disk, ..slot });
            let id = lowered.slots.len() - 1;
            last.target = Target::Slot(id);
            let (shape, dtype) = (last.shape.clone(), last.dtype);
            let ir = super::lower::Ir {
                kind: super::lower::IrKind::Leaf { src: super::lower::Src::Slot(id), map: ViewMap::c_order(&shape) },
                dtype,
            };
            lowered.stages.push(super::lower::Stage { shape, dtype, work: Work::Map { ir }, target: Target::Out });
        }
    }
    lowered
}

fn threads_of(opts: &Options) -> usize {
    opts.threads.unwrap_or_else(rayon::current_num_threads).max(1)
}

/// The plan `root` would run with (reads no data).
///
/// # Errors
/// [`Error::DoesNotFit`] when even one minimal tile per thread does not fit.
pub fn explain(root: &Array, output: &Output, opts: &Options) -> Result<ArrayPlan> {
    plan(&lowered_for(root, output, opts.memory_limit), output, opts.memory_limit, threads_of(opts))
}

/// The chunk shape a Zarr output of `root` gets when none is given, within
/// `opts` (reads no data): see [`default_chunks`](super::tiling::default_chunks),
/// applied to the memory the plan's held buffers leave.
///
/// # Errors
/// [`Error::DoesNotFit`] when not even one such chunk fits the limit,
/// naming the smallest limit that works.
pub fn default_zarr_chunks(root: &Array, opts: &Options) -> Result<Vec<usize>> {
    let output = Output::Zarr { path: std::path::PathBuf::new(), chunks: None, overwrite: true };
    let plan = explain(root, &output, opts)?;
    Ok(plan.stages.last().expect("a final stage").tile.clone())
}

/// Where a stage's result goes.
enum Sink {
    Memory(Mutex<Vec<u8>>),
    Npy(Box<PositionedNpy>),
    Zarr(Box<ZarrOutput>),
}

impl Sink {
    /// Writes the box `lo..hi` of an array of `shape` (values in C order).
    fn write(&self, shape: &[usize], lo: &[usize], hi: &[usize], col: &Col, dtype: Dtype) -> Result<()> {
        let mut bytes = Vec::with_capacity(col.len() * dtype.itemsize());
        col.encode(dtype, &mut bytes);
        if let Sink::Zarr(z) = self {
            let chunk = z.chunk_shape();
            let index: Vec<u64> = lo.iter().zip(chunk).map(|(&l, &c)| (l / c) as u64).collect();
            return z.write_chunk(&index, &bytes);
        }
        // Runs: the box's rows over the axes after the last partial one.
        let nd = shape.len();
        let mut k = nd;
        while k > 0 && lo[k - 1] == 0 && hi[k - 1] == shape[k - 1] {
            k -= 1;
        }
        let (outer_lo, outer_hi) = if k == 0 { (vec![], vec![]) } else { (lo[..k - 1].to_vec(), hi[..k - 1].to_vec()) };
        let inner: usize = shape[k..].iter().product();
        let run = if k == 0 { inner } else { (hi[k - 1] - lo[k - 1]) * inner };
        let first_inner = if k == 0 { 0 } else { lo[k - 1] * inner };
        let map = ViewMap::c_order(shape);
        let outer_shape_map = ViewMap {
            base: 0,
            shape: map.shape[..k.saturating_sub(1)].to_vec(),
            axes: map.axes[..k.saturating_sub(1)].to_vec(),
        };
        let starts = offsets(&outer_shape_map, &outer_lo, &outer_hi);
        let size = dtype.itemsize();
        for (r, &s) in starts.iter().enumerate() {
            let first = s as u64 + first_inner as u64;
            let piece = &bytes[r * run * size..(r + 1) * run * size];
            match self {
                Sink::Memory(m) => {
                    let mut out = m.lock().expect("no panics while writing");
                    out[first as usize * size..first as usize * size + piece.len()].copy_from_slice(piece);
                }
                Sink::Npy(f) => f.write_at(first, piece)?,
                Sink::Zarr(_) => unreachable!("handled above"),
            }
        }
        Ok(())
    }
}

/// Intermediate results being filled, and where scratch files go.
pub(crate) struct Slots {
    /// One per intermediate, set when its stage has run.
    pub cells: Vec<OnceLock<Arc<Stored>>>,
    /// Scratch folder (deleted when dropped).
    pub scratch: Option<tempfile::TempDir>,
    /// Values that became NaN or infinite from finite operands.
    pub overflow: AtomicU64,
}

impl Slots {
    pub(crate) fn new(lowered: &Lowered, output: &Output) -> Result<Slots> {
        let scratch = if lowered.slots.iter().any(|s| s.on_disk) {
            let near = match output {
                Output::Npy { path, .. } | Output::Zarr { path, .. } => {
                    path.parent().filter(|p| !p.as_os_str().is_empty())
                }
                _ => None,
            };
            Some(match near {
                Some(dir) => tempfile::Builder::new()
                    .prefix(".memfit-scratch.")
                    .tempdir_in(dir)
                    .map_err(|e| Error::io(dir, "create", e))?,
                None => tempfile::Builder::new()
                    .prefix("memfit-scratch.")
                    .tempdir()
                    .map_err(|e| Error::io(std::env::temp_dir(), "create", e))?,
            })
        } else {
            None
        };
        Ok(Slots {
            cells: (0..lowered.slots.len()).map(|_| OnceLock::new()).collect(),
            scratch,
            overflow: AtomicU64::new(0),
        })
    }

    /// The warnings so far.
    pub fn warnings(&self) -> Vec<Warning> {
        let count = self.overflow.load(Ordering::Relaxed);
        if count > 0 {
            vec![Warning::NonFiniteProduced { count }]
        } else {
            Vec::new()
        }
    }
}

/// Lowers and plans `root` for `output`.
pub(crate) fn prepare(root: &Array, output: &Output, opts: &Options) -> Result<(Lowered, ArrayPlan)> {
    let lowered = lowered_for(root, output, opts.memory_limit);
    let the_plan = plan(&lowered, output, opts.memory_limit, threads_of(opts))?;
    Ok((lowered, the_plan))
}

/// Runs the stages of `lowered` that fill intermediates (all but the last).
pub(crate) fn run_intermediates(
    lowered: &Lowered,
    the_plan: &ArrayPlan,
    slots: &Slots,
    threads: usize,
    cancelled: &AtomicBool,
) -> Result<()> {
    let pool = pool(threads)?;
    let n = lowered.stages.len() - 1;
    for (stage, sp) in lowered.stages[..n].iter().zip(&the_plan.stages) {
        let Target::Slot(i) = stage.target else { unreachable!("only the last stage writes the output") };
        let ctx = Ctx { slots: &slots.cells, overflow: &slots.overflow };
        let s = &lowered.slots[i];
        let path = slots.scratch.as_ref().map(|d| d.path().join(format!("intermediate{i}.npy")));
        let sink = if s.on_disk {
            Sink::Npy(Box::new(PositionedNpy::create(
                path.as_ref().expect("a scratch folder"),
                s.dtype,
                &s.shape,
                true,
            )?))
        } else {
            Sink::Memory(Mutex::new(vec![0u8; s.bytes() as usize]))
        };
        pool.install(|| run_stage(&stage.work, &stage.shape, stage.dtype, sp, &sink, &ctx, threads, cancelled))?;
        let stored = match sink {
            Sink::Memory(m) => {
                Stored::owned(m.into_inner().expect("no panics while writing"), s.dtype, s.shape.clone())
            }
            Sink::Npy(f) => {
                f.commit()?;
                Stored::npy(path.as_ref().expect("a scratch folder"))?
            }
            Sink::Zarr(_) => unreachable!("intermediates are in memory or .npy"),
        };
        let _ = slots.cells[i].set(Arc::new(stored));
    }
    Ok(())
}

fn pool(threads: usize) -> Result<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().map_err(|e| Error::Expression {
        kind: crate::error::ExpressionFault::Value,
        message: format!("cannot start {threads} threads: {e}"),
    })
}

/// Runs `root` into `output`; returns the result when `output` is
/// [`Output::Memory`], and the report.
///
/// # Errors
/// [`Error::DoesNotFit`] before anything runs; [`Error::OutputExists`];
/// I/O errors; [`Error::Cancelled`] when `cancelled` is set.
pub fn run(
    root: &Array,
    output: &Output,
    opts: &Options,
    cancelled: &AtomicBool,
) -> Result<(Option<Computed>, Report)> {
    let threads = threads_of(opts);
    let (lowered, the_plan) = prepare(root, output, opts)?;
    let last = lowered.stages.last().expect("a final stage");
    let sink = match output {
        Output::Memory | Output::Rows => {
            Sink::Memory(Mutex::new(vec![0u8; volume(&last.shape) * last.dtype.itemsize()]))
        }
        Output::Npy { path, overwrite } => {
            Sink::Npy(Box::new(PositionedNpy::create(path, last.dtype, &last.shape, *overwrite)?))
        }
        Output::Zarr { path, overwrite, .. } => {
            let tile = &the_plan.stages.last().expect("a final stage").tile;
            Sink::Zarr(Box::new(ZarrOutput::create(path, &last.shape, last.dtype, tile, *overwrite)?))
        }
    };
    let slots = Slots::new(&lowered, output)?;
    run_intermediates(&lowered, &the_plan, &slots, threads, cancelled)?;
    let ctx = Ctx { slots: &slots.cells, overflow: &slots.overflow };
    let sp = the_plan.stages.last().expect("a final stage");
    // A Zarr output's chunks are buffered whole: only `sp.workers` at a time.
    pool(sp.workers)?
        .install(|| run_stage(&last.work, &last.shape, last.dtype, sp, &sink, &ctx, sp.workers, cancelled))?;
    let computed = match sink {
        Sink::Memory(m) => {
            Some(Computed { shape: last.shape.clone(), dtype: last.dtype, bytes: m.into_inner().expect("no panics") })
        }
        Sink::Npy(f) => {
            f.commit()?;
            None
        }
        Sink::Zarr(z) => {
            z.commit()?;
            None
        }
    };
    Ok((computed, Report { plan: the_plan, warnings: slots.warnings() }))
}

fn check(cancelled: &AtomicBool) -> Result<()> {
    if cancelled.load(Ordering::Relaxed) {
        Err(Error::Cancelled)
    } else {
        Ok(())
    }
}

/// Evaluates `ir` over the box in parts of at most `max` elements, split
/// along the outermost axes (so the parts concatenate in C order).
fn eval_limited(
    ir: &super::lower::Ir,
    lo: &[usize],
    hi: &[usize],
    max: usize,
    ctx: &Ctx<'_>,
    buf: &mut Vec<u8>,
) -> Result<Col> {
    let n: usize = lo.iter().zip(hi).map(|(a, b)| b - a).product();
    if n <= max.max(1) {
        return eval(ir, lo, hi, ctx, buf);
    }
    let k = (0..lo.len()).find(|&k| hi[k] - lo[k] > 1).expect("a box of more than one element");
    let inner: usize = lo[k + 1..].iter().zip(&hi[k + 1..]).map(|(a, b)| b - a).product();
    let step = (max / inner.max(1)).max(1);
    let mut out = Col::with_capacity(ir.dtype, n);
    let mut s = lo[k];
    while s < hi[k] {
        let e = (s + step).min(hi[k]);
        let (mut plo, mut phi) = (lo.to_vec(), hi.to_vec());
        (plo[k], phi[k]) = (s, e);
        let part = eval_limited(ir, &plo, &phi, max, ctx, buf)?;
        out.extend_from(&part, 0..part.len());
        s = e;
    }
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn run_stage(
    work: &Work,
    shape: &[usize],
    dtype: Dtype,
    sp: &StagePlan,
    sink: &Sink,
    ctx: &Ctx<'_>,
    threads: usize,
    cancelled: &AtomicBool,
) -> Result<()> {
    match work {
        Work::Map { ir } => {
            let n = n_tiles(shape, &sp.tile);
            (0..n).into_par_iter().try_for_each_init(Vec::new, |buf, t| {
                check(cancelled)?;
                let (lo, hi) = tile_box(shape, &sp.tile, t);
                let col = eval_limited(ir, &lo, &hi, sp.eval_elems, ctx, buf)?;
                sink.write(shape, &lo, &hi, &col, dtype)
            })
        }
        Work::Reduce { ir, axes, op, reduced, multiplier, input_dtype } => {
            let (n_o, n_c) = (n_tiles(shape, &sp.tile), n_tiles(reduced, &sp.chunk));
            let count = volume(reduced) as u64;
            if n_c == 0 {
                for o in 0..n_o {
                    let (lo, hi) = tile_box(shape, &sp.tile, o);
                    let n = lo.iter().zip(&hi).map(|(a, b)| b - a).product();
                    let col = Acc::empty(*op, *input_dtype, n).finish(*op, dtype, 1, 0);
                    sink.write(shape, &lo, &hi, &col, dtype)?;
                }
                return Ok(());
            }
            let nd = shape.len() + axes.len();
            let kept: Vec<usize> = (0..nd).filter(|k| !axes.contains(k)).collect();
            let rmap = ViewMap::c_order(reduced);
            let items = n_o * n_c;
            let mut accs: Vec<(usize, Acc)> = Vec::new();
            // Results that are not finite although every value read was.
            let (bad_in, mut bad_out) = (AtomicU64::new(0), 0u64);
            let mut start = 0;
            while start < items {
                check(cancelled)?;
                let end = (start + threads).min(items);
                let parts: Vec<Result<Acc>> = (start..end)
                    .into_par_iter()
                    .map_init(Vec::new, |buf, i| {
                        let (olo, ohi) = tile_box(shape, &sp.tile, i / n_c);
                        let (clo, chi) = tile_box(reduced, &sp.chunk, i % n_c);
                        // The box in the operand's own axis order.
                        let (mut lo, mut hi) = (vec![0; nd], vec![0; nd]);
                        for (j, &k) in kept.iter().enumerate() {
                            (lo[k], hi[k]) = (olo[j], ohi[j]);
                        }
                        for (j, &k) in axes.iter().enumerate() {
                            (lo[k], hi[k]) = (clo[j], chi[j]);
                        }
                        let col = eval(ir, &lo, &hi, ctx, buf)?;
                        bad_in.fetch_add(col.count_non_finite(), Ordering::Relaxed);
                        // Positions in the box of each kept / reduced coordinate.
                        let ext: Vec<usize> = lo.iter().zip(&hi).map(|(a, b)| b - a).collect();
                        let bmap = ViewMap::c_order(&ext);
                        let pick = |ax: &[usize]| ViewMap {
                            base: 0,
                            shape: ax.iter().map(|&k| ext[k]).collect(),
                            axes: ax.iter().map(|&k| bmap.axes[k].clone()).collect(),
                        };
                        let zeros = |ax: &[usize]| vec![0usize; ax.len()];
                        let ends = |ax: &[usize]| ax.iter().map(|&k| ext[k]).collect::<Vec<_>>();
                        let o_at = offsets(&pick(&kept), &zeros(&kept), &ends(&kept));
                        let r_at = offsets(&pick(axes), &zeros(axes), &ends(axes));
                        let index = if matches!(op, Reduction::ArgMin | Reduction::ArgMax) {
                            offsets(&rmap, &clo, &chi)
                        } else {
                            Vec::new()
                        };
                        Ok(partial(*op, &col, &o_at, &r_at, &index))
                    })
                    .collect();
                for (i, p) in (start..end).zip(parts) {
                    let (o, c) = (i / n_c, i % n_c);
                    let p = p?;
                    match accs.iter_mut().find(|(t, _)| *t == o) {
                        Some((_, acc)) => acc.fold(*op, p),
                        None => accs.push((o, p)),
                    }
                    if c == n_c - 1 {
                        let at = accs.iter().position(|(t, _)| *t == o).expect("accumulated");
                        let (_, acc) = accs.swap_remove(at);
                        let (lo, hi) = tile_box(shape, &sp.tile, o);
                        let col = acc.finish(*op, dtype, *multiplier, count);
                        bad_out += col.count_non_finite();
                        sink.write(shape, &lo, &hi, &col, dtype)?;
                    }
                }
                start = end;
            }
            if bad_in.load(Ordering::Relaxed) == 0 {
                ctx.overflow.fetch_add(bad_out, Ordering::Relaxed);
            }
            Ok(())
        }
        Work::Einsum { sub, irs, path, sizes } => {
            let contracted: Vec<u8> = sizes.keys().copied().filter(|c| !sub.output.contains(c)).collect();
            let csizes: Vec<usize> = contracted.iter().map(|c| sizes[c]).collect();
            let (n_o, n_c) = (n_tiles(shape, &sp.tile), n_tiles(&csizes, &sp.chunk).max(1));
            let items = n_o * n_c;
            let mut accs: Vec<(usize, Vec<f64>)> = Vec::new();
            let (bad_in, mut bad_out) = (AtomicU64::new(0), 0u64);
            let mut start = 0;
            while start < items {
                check(cancelled)?;
                let end = (start + threads).min(items);
                let parts: Vec<Result<Dense>> = (start..end)
                    .into_par_iter()
                    .map_init(Vec::new, |buf, i| {
                        let (olo, ohi) = tile_box(shape, &sp.tile, i / n_c);
                        let (clo, chi) = tile_box(&csizes, &sp.chunk, i % n_c);
                        let range = |c: &u8| match sub.output.iter().position(|o| o == c) {
                            Some(p) => (olo[p], ohi[p]),
                            None => {
                                let q = contracted.iter().position(|x| x == c).expect("contracted");
                                (clo[q], chi[q])
                            }
                        };
                        let mut dense = Vec::with_capacity(irs.len());
                        for (ir, labels) in irs.iter().zip(&sub.inputs) {
                            let (lo, hi): (Vec<usize>, Vec<usize>) = labels.iter().map(range).unzip();
                            let col = eval(ir, &lo, &hi, ctx, buf)?;
                            bad_in.fetch_add(col.count_non_finite(), Ordering::Relaxed);
                            let Col::F(data) = col else { unreachable!("einsum operands are float64") };
                            dense.push(Dense { shape: lo.iter().zip(&hi).map(|(a, b)| b - a).collect(), data });
                        }
                        Ok(contract(sub, &dense, path))
                    })
                    .collect();
                for (i, p) in (start..end).zip(parts) {
                    let (o, c) = (i / n_c, i % n_c);
                    let p = p?;
                    match accs.iter_mut().find(|(t, _)| *t == o) {
                        Some((_, acc)) => acc.iter_mut().zip(&p.data).for_each(|(a, b)| *a += b),
                        None => accs.push((o, p.data)),
                    }
                    if c == n_c - 1 {
                        let at = accs.iter().position(|(t, _)| *t == o).expect("accumulated");
                        let (_, acc) = accs.swap_remove(at);
                        let (lo, hi) = tile_box(shape, &sp.tile, o);
                        let col = Col::F(acc);
                        bad_out += col.count_non_finite();
                        sink.write(shape, &lo, &hi, &col, dtype)?;
                    }
                }
                start = end;
            }
            if bad_in.load(Ordering::Relaxed) == 0 {
                ctx.overflow.fetch_add(bad_out, Ordering::Relaxed);
            }
            Ok(())
        }
    }
}
