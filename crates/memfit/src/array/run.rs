//! Running a planned expression job on the runner ([`crate::exec`]): stage
//! after stage, each a grid of units (tiles × fixed accumulation chunks) run
//! by [`run_grid`] on the threads [`install`] gives, reductions and
//! contractions folded chunk after chunk in a fixed order (so results are
//! bitwise the same for any thread count and memory limit), results written
//! to a [`Sink`]: memory, a `.npy` file (positioned writes) or a Zarr array
//! (one write per chunk).

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use super::eval::{eval, eval_all, offsets, Ctx};
use super::lower::{lower, lower_all, share_passes, Ir, Lowered, Target, Work};
use super::lower::{Output, Shards};
use super::node::{Array, Reduction};
use super::plan::{plan, StagePlan, Stages};
use super::reduce::{Acc, InOrder, Partials, Stats, Sums};
use super::remote::{OnCluster, Placed};
use super::store::Stored;
use super::tiling::{chunk_groups, n_tiles, tile_box, volume};
use super::values::{Col, FpCounts};
use super::view::ViewMap;
use crate::dtype::Dtype;
use crate::error::{Error, Result};
use crate::exec::{install, run_grid, run_tiles, Cancel, Context, MemorySink, NpySink, Progress, Sink, ZarrSink};
use crate::io::ChunkCache;
use crate::linalg::einsum::{contract, Dense};
use crate::plan::Plan;
use crate::{FpException, Warning};

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
    pub plan: Plan<Stages>,
    /// Warnings (values that became NaN or infinite).
    pub warnings: Vec<Warning>,
}

/// Intermediates in memory beyond this share of the limit go to scratch files.
const MEMORY_SLOT_SHARE: u64 = 4;

/// Lowers `root` for `output` within `limit`; with `share`, reduction
/// stages of one iteration space are joined ([`share_passes`]).
pub(crate) fn lowered_for(root: &Array, output: &Output, limit: u64, share: bool) -> Lowered {
    let mut lowered = lower(root, limit / MEMORY_SLOT_SHARE);
    // Zarr is written a chunk at a time and rows are read a block at a time:
    // a final reduction or contraction goes to an intermediate first.
    if matches!(output, Output::Zarr { .. } | Output::Rows) {
        let last = lowered.stages.last_mut().expect("a final stage");
        if !matches!(last.work, Work::Map { .. }) {
            let slot =
                super::lower::Slot { shape: last.shape.clone(), dtype: last.dtype, on_disk: false, result: None };
            let on_disk = slot.bytes() > limit / MEMORY_SLOT_SHARE;
            lowered.slots.push(super::lower::Slot { on_disk, ..slot });
            let id = lowered.slots.len() - 1;
            last.target = Target::Slot(id);
            let (shape, dtype) = (last.shape.clone(), last.dtype);
            let ir = Ir::leaf(super::lower::Src::Slot(id), ViewMap::c_order(&shape), dtype);
            lowered.stages.push(super::lower::Stage { shape, dtype, work: Work::Map { ir }, target: Target::Out });
        }
    }
    if share {
        share_passes(&mut lowered);
    }
    lowered
}

/// Plans `lower(share)` within `opts`: with reductions joined into shared
/// passes, unless the joined stages need more memory than the limit has
/// and the separate ones fit (a joined stage holds every result's
/// operands and statistics per tile).
fn plan_shared(lower: impl Fn(bool) -> Lowered, output: &Output, opts: &Options) -> Result<(Lowered, Plan<Stages>)> {
    let shared = lower(true);
    match plan_threads(&shared, output, opts) {
        Err(Error::DoesNotFit { .. }) if shared.shared => {
            let plain = lower(false);
            let the_plan = plan_threads(&plain, output, opts)?;
            Ok((plain, the_plan))
        }
        planned => Ok((shared, planned?)),
    }
}

/// Plans `lowered` on the threads `opts` asks for or, when their buffers
/// do not fit the limit, on fewer (halving; results are the same bits on
/// any number): the plan's `threads` are those the job runs on. Fails as
/// one thread fails.
fn plan_threads(lowered: &Lowered, output: &Output, opts: &Options) -> Result<Plan<Stages>> {
    let mut threads = threads_of(opts);
    loop {
        match plan(lowered, output, opts.memory_limit, threads) {
            Err(Error::DoesNotFit { .. }) if threads > 1 => threads = threads.div_ceil(2).min(threads - 1),
            planned => return planned,
        }
    }
}

fn threads_of(opts: &Options) -> usize {
    opts.threads.unwrap_or_else(rayon::current_num_threads).max(1)
}

/// The plan `root` would run with (reads no data).
///
/// # Errors
/// [`Error::DoesNotFit`] when even one minimal tile per thread does not fit.
pub fn explain(root: &Array, output: &Output, opts: &Options) -> Result<Plan<Stages>> {
    Ok(prepare(root, output, opts)?.1)
}

/// The chunk shape a Zarr output of `root` gets when none is given, within
/// `opts` (reads no data): see [`default_chunks`](super::tiling::default_chunks),
/// applied to the memory the plan's held buffers leave.
///
/// # Errors
/// [`Error::DoesNotFit`] when not even one such chunk fits the limit,
/// naming the smallest limit that works.
pub fn default_zarr_chunks(root: &Array, opts: &Options) -> Result<Vec<usize>> {
    let output = Output::Zarr { path: std::path::PathBuf::new(), chunks: None, shards: Shards::Off, overwrite: true };
    let plan = explain(root, &output, opts)?;
    Ok(plan.schedule.stages.last().expect("a final stage").zarr_chunks.clone())
}

/// Writes the box `lo..hi` of a stage's result (values in C order).
fn put(sink: &dyn Sink, lo: &[usize], hi: &[usize], col: &Col, dtype: Dtype) -> Result<()> {
    let mut bytes = Vec::with_capacity(col.len() * dtype.itemsize());
    col.encode(dtype, &mut bytes);
    sink.write(lo, hi, &bytes)
}

/// Intermediate results being filled, and where scratch files go.
pub(crate) struct Slots {
    /// One per intermediate, set when its stage has run.
    pub cells: Vec<OnceLock<Arc<Stored>>>,
    /// Scratch folder (deleted when dropped).
    pub scratch: Option<tempfile::TempDir>,
    /// Values that became NaN or infinite from finite operands.
    pub fp: FpCounts,
    /// Exceptions that fail the job before an output is committed
    /// ([`Options::raise_on`]).
    pub raise_on: Vec<FpException>,
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
                None => {
                    let dir = crate::io::temp_dir();
                    tempfile::Builder::new()
                        .prefix("memfit-scratch.")
                        .tempdir_in(&dir)
                        .map_err(|e| Error::io(dir, "create", e))?
                }
            })
        } else {
            None
        };
        Ok(Slots {
            cells: (0..lowered.slots.len()).map(|_| OnceLock::new()).collect(),
            scratch,
            fp: FpCounts::default(),
            raise_on: Vec::new(),
        })
    }

    /// The warnings so far.
    pub fn warnings(&self) -> Vec<Warning> {
        self.fp.warnings()
    }

    /// Fails with [`Error::FloatingPoint`] when an exception of
    /// [`Slots::raise_on`] was raised so far: called before a result is
    /// committed, so that none is.
    pub fn check_raise(&self) -> Result<()> {
        let counts = self.fp.get();
        match self.raise_on.iter().find(|e| counts[e.index()] > 0) {
            Some(&exception) => Err(Error::FloatingPoint { exception, count: counts[exception.index()] }),
            None => Ok(()),
        }
    }
}

/// Lowers and plans `root` for `output`.
pub(crate) fn prepare(root: &Array, output: &Output, opts: &Options) -> Result<(Lowered, Plan<Stages>)> {
    at_a_limit_that_works(opts, |opts| {
        plan_shared(|share| lowered_for(root, output, opts.memory_limit, share), output, opts)
    })
}

/// `attempt` within `opts`; when it does not fit, the refusal names a limit
/// at which `attempt` does fit. The lowering depends on the limit (an
/// intermediate goes to memory where the limit's share holds it, to disk
/// where not), so the bytes a refused plan needs may not suffice at that
/// limit: it is tried there (a few times at most) until it fits.
///
/// # Errors
/// `attempt`'s; [`Error::DoesNotFit`] naming the limit found.
fn at_a_limit_that_works<T>(opts: &Options, attempt: impl Fn(&Options) -> Result<T>) -> Result<T> {
    let (required_bytes, limit_bytes, what, remedies) = match attempt(opts) {
        Err(Error::DoesNotFit { required_bytes, limit_bytes, what, remedies }) => {
            (required_bytes, limit_bytes, what, remedies)
        }
        done => return done,
    };
    let mut need = required_bytes;
    for _ in 0..8 {
        match attempt(&Options { memory_limit: need, ..opts.clone() }) {
            Err(Error::DoesNotFit { required_bytes, .. }) if required_bytes > need => need = required_bytes,
            _ => break,
        }
    }
    let remedies = remedies
        .into_iter()
        .map(|r| match r {
            crate::error::Remedy::RaiseMemoryLimit { .. } => crate::error::Remedy::RaiseMemoryLimit { to_bytes: need },
            other => other,
        })
        .collect();
    Err(Error::DoesNotFit { required_bytes: need, limit_bytes, what, remedies })
}

/// Reports stage `i` of `n` starting.
fn stage_event(ctx: &mut Context<'_>, i: usize, n: usize) {
    ctx.event(&Progress::Phase(&format!("stage {} of {n}", i + 1)));
}

/// Runs stage `si` of `lowered` (planned as `sp`) into `sinks` (one per
/// result of the stage, [`super::lower::Stage::targets`]): here on
/// `threads` threads, or as tasks when `placed` gives it ranges of chunks.
#[allow(clippy::too_many_arguments)]
fn run_one(
    lowered: &Lowered,
    si: usize,
    sp: &StagePlan,
    sinks: &[&dyn Sink],
    slots: &Slots,
    threads: usize,
    placed: Option<&Placed<'_>>,
    cancel: &Cancel,
) -> Result<()> {
    let stage = &lowered.stages[si];
    let zarr = ChunkCache::new(sp.zarr_cache);
    let ectx = Ctx { slots: &slots.cells, fp: &slots.fp, zarr: &zarr };
    match placed {
        Some(p) if !p.ranges[si].is_empty() => super::remote::run_stage(lowered, si, sp, sinks, &ectx, p, cancel),
        _ => install(threads, || run_stage(stage, sp, sinks, &ectx, threads, cancel))?,
    }
}

/// The sink of a result of `shape` and `dtype` going to `output`, planned
/// as `sp` (a Zarr output's chunks and shards), created before anything
/// runs (so an existing file is refused first).
fn result_sink(output: &Output, shape: &[usize], dtype: Dtype, sp: &StagePlan) -> Result<Box<dyn Sink>> {
    Ok(match output {
        Output::Memory | Output::Rows => Box::new(MemorySink::new(shape, dtype)),
        Output::Npy { path, overwrite } => Box::new(NpySink::create(path, dtype, shape, *overwrite)?),
        Output::Zarr { path, overwrite, shards, .. } => {
            let sharded = matches!(shards, Shards::Shape(_)) || sp.tile != sp.zarr_chunks;
            let shards = sharded.then_some(sp.tile.as_slice());
            Box::new(ZarrSink::create(path, shape, dtype, &sp.zarr_chunks, shards, *overwrite)?)
        }
    })
}

/// Runs the stages of `lowered` that fill slots (all but a last
/// [`Target::Out`] one) on `threads` threads, or as tasks where `placed`
/// says, cancelled by `ctx`'s token, reporting each stage. A result slot
/// is written to its sink in `results` (by slot), then read from there.
pub(crate) fn run_intermediates(
    lowered: &Lowered,
    the_plan: &Plan<Stages>,
    slots: &Slots,
    threads: usize,
    placed: Option<&Placed<'_>>,
    ctx: &mut Context<'_>,
) -> Result<()> {
    run_slots(lowered, the_plan, slots, threads, placed, &mut Vec::new(), ctx)
}

fn run_slots(
    lowered: &Lowered,
    the_plan: &Plan<Stages>,
    slots: &Slots,
    threads: usize,
    placed: Option<&Placed<'_>>,
    results: &mut [Option<Box<dyn Sink>>],
    ctx: &mut Context<'_>,
) -> Result<()> {
    let total = lowered.stages.len();
    let n = lowered.stages.iter().take_while(|s| s.target != Target::Out).count();
    for (si, (stage, sp)) in lowered.stages[..n].iter().zip(&the_plan.schedule.stages).enumerate() {
        stage_event(ctx, si, total);
        let mut sinks: Vec<(usize, Option<std::path::PathBuf>, Box<dyn Sink>)> = Vec::new();
        for (target, _) in stage.targets() {
            let Target::Slot(i) = target else { unreachable!("only the last stage writes the output") };
            let s = &lowered.slots[i];
            let path = slots.scratch.as_ref().map(|d| d.path().join(format!("intermediate{i}.npy")));
            let sink: Box<dyn Sink> = match results.get_mut(i).and_then(Option::take) {
                Some(sink) => sink,
                None if s.on_disk => {
                    Box::new(NpySink::create(path.as_ref().expect("a scratch folder"), s.dtype, &s.shape, true)?)
                }
                None => Box::new(MemorySink::new(&s.shape, s.dtype)),
            };
            sinks.push((i, path, sink));
        }
        // An einsum's plan may run fewer threads than the job has (its
        // smallest unit fits fewer times).
        let workers = if matches!(stage.work, Work::Einsum { .. }) { sp.workers.min(threads) } else { threads };
        let each: Vec<&dyn Sink> = sinks.iter().map(|(_, _, s)| &**s).collect();
        run_one(lowered, si, sp, &each, slots, workers, placed, &ctx.cancel)?;
        if sinks.iter().any(|(i, _, _)| lowered.slots[*i].result.is_some()) {
            slots.check_raise()?;
        }
        for (i, path, sink) in sinks {
            let s = &lowered.slots[i];
            let stored = match (sink.commit()?, &s.result) {
                (Some(bytes), _) => Stored::owned(bytes, s.dtype, s.shape.clone()),
                (None, Some(Output::Npy { path, .. })) => Stored::npy(path)?,
                (None, Some(Output::Zarr { path, .. })) => Stored::zarr(path)?,
                (None, _) => Stored::npy(path.as_ref().expect("a scratch folder"))?,
            };
            let _ = slots.cells[i].set(Arc::new(stored));
        }
    }
    Ok(())
}

/// Computes several results in one job (lowered together): intermediates they
/// share (equal subexpressions, statistics of the same input) are computed
/// once; result `k` goes to `outputs[k]` (returned in memory for
/// [`Output::Memory`], else written to the file). Each stage is reported
/// to `ctx` as a phase.
///
/// # Errors
/// As [`run`]; [`Error::Expression`] (a value fault) when `roots` and
/// `outputs` differ in length or an output is [`Output::Rows`].
pub fn run_all(
    roots: &[Array],
    outputs: &[Output],
    opts: &Options,
    ctx: &mut Context<'_>,
) -> Result<(Vec<Option<Computed>>, Report)> {
    let (lowered, at, the_plan) = prepare_all(roots, outputs, opts)?;
    check_no_later_reads(&lowered)?;
    let mut results: Vec<Option<Box<dyn Sink>>> = (0..lowered.slots.len()).map(|_| None).collect();
    for (stage, sp) in lowered.stages.iter().zip(&the_plan.schedule.stages) {
        for (target, dtype) in stage.targets() {
            if let Target::Slot(i) = target {
                if let Some(o) = &lowered.slots[i].result {
                    results[i] = Some(result_sink(o, &stage.shape, dtype, sp)?);
                }
            }
        }
    }
    let mut slots = Slots::new(&lowered, outputs.first().unwrap_or(&Output::Memory))?;
    slots.raise_on.clone_from(&opts.raise_on);
    run_slots(&lowered, &the_plan, &slots, the_plan.threads, None, &mut results, ctx)?;
    slots.check_raise()?;
    let warnings = slots.warnings();
    let mut cells: Vec<Option<Arc<Stored>>> = slots.cells.into_iter().map(OnceLock::into_inner).collect();
    let mut computed = Vec::with_capacity(roots.len());
    for (root, (output, &i)) in roots.iter().zip(outputs.iter().zip(&at)) {
        if *output != Output::Memory {
            computed.push(None);
            continue;
        }
        let stored = cells[i].take().expect("results computed");
        let bytes = match Arc::try_unwrap(stored) {
            Ok(Stored { storage: super::store::Storage::Owned(b), .. }) => b,
            Ok(_) => unreachable!("results in memory are owned"),
            Err(shared) => match &shared.storage {
                super::store::Storage::Owned(b) => b.clone(),
                _ => unreachable!("results in memory are owned"),
            },
        };
        computed.push(Some(Computed { shape: root.shape().to_vec(), dtype: root.dtype(), bytes }));
    }
    Ok((computed, Report { plan: the_plan, warnings }))
}

/// Refuses a result written to a file or folder (its stage's end replaces
/// it) that a later stage of the same job reads, contains (a group holding
/// a Zarr input) or lies inside: that stage would read the result, or
/// nothing, in place of the input.
///
/// # Errors
/// [`Error::Expression`] (a value fault) naming the file.
fn check_no_later_reads(lowered: &Lowered) -> Result<()> {
    // Whether a result at `target` would replace the input at `input`:
    // `Some("it")` for the same path, `Some` what else when one holds the other.
    let overlap = |input: &std::path::Path, target: &std::path::Path| {
        let (a, b) = (crate::io::resolved_path(input), crate::io::resolved_path(target));
        if a == b {
            Some("it".to_string())
        } else if a.starts_with(&b) {
            Some(format!("{}, which it holds", input.display()))
        } else if b.starts_with(&a) {
            Some(format!("{}, which holds it", input.display()))
        } else {
            None
        }
    };
    for (si, stage) in lowered.stages.iter().enumerate() {
        for (target, _) in stage.targets() {
            let Target::Slot(i) = target else { continue };
            let Some(Output::Npy { path, .. } | Output::Zarr { path, .. }) = &lowered.slots[i].result else {
                continue;
            };
            let read_later =
                lowered.stages[si + 1..].iter().flat_map(|s| s.irs()).flat_map(|ir| ir.leaves()).find_map(|src| {
                    match src {
                        super::lower::Src::Stored(s) => overlap(&s.path()?, path),
                        _ => None,
                    }
                });
            if let Some(input) = read_later {
                return Err(Error::Expression {
                    kind: crate::error::ExpressionFault::Value,
                    message: format!(
                        "{}: a result would replace it while a later stage of the same job still reads {input}; hint: store that result in a call of its own, or to another path",
                        path.display()
                    ),
                });
            }
        }
    }
    Ok(())
}

/// Lowers and plans several results ([`run_all`]); also gives each
/// result's slot.
///
/// # Errors
/// As [`run_all`].
#[allow(clippy::type_complexity)]
pub(crate) fn prepare_all(
    roots: &[Array],
    outputs: &[Output],
    opts: &Options,
) -> Result<(Lowered, Vec<usize>, Plan<Stages>)> {
    if roots.is_empty() || roots.len() != outputs.len() || outputs.contains(&Output::Rows) {
        return Err(Error::Expression {
            kind: crate::error::ExpressionFault::Value,
            message: format!(
                "{} results need {} destinations in memory or files (at least one)",
                roots.len(),
                roots.len()
            ),
        });
    }
    let first = outputs.first().unwrap_or(&Output::Memory);
    at_a_limit_that_works(opts, |opts| {
        let (lowered, at) = lower_all(roots, outputs, opts.memory_limit / MEMORY_SLOT_SHARE);
        let lower = |share: bool| {
            let mut l = lowered.clone();
            if share {
                share_passes(&mut l);
            }
            l
        };
        let (lowered, the_plan) = plan_shared(lower, first, opts)?;
        Ok((lowered, at, the_plan))
    })
}

/// The plan of several results computed together ([`run_all`]; reads no
/// data).
///
/// # Errors
/// As [`run_all`], before anything runs.
pub fn explain_all(roots: &[Array], outputs: &[Output], opts: &Options) -> Result<Plan<Stages>> {
    Ok(prepare_all(roots, outputs, opts)?.2)
}

/// Runs `root` into `output`; returns the result when `output` is
/// [`Output::Memory`], and the report. Each stage is reported to `ctx` as a
/// phase (`"stage 1 of 3"`); `ctx`'s token is checked before every tile or
/// batch of work units.
///
/// # Errors
/// [`Error::DoesNotFit`] before anything runs; [`Error::OutputExists`];
/// I/O errors; [`Error::Cancelled`] when `ctx`'s token is cancelled;
/// [`Error::InvalidParameter`] (`threads`) when the threads cannot start.
pub fn run(root: &Array, output: &Output, opts: &Options, ctx: &mut Context<'_>) -> Result<(Option<Computed>, Report)> {
    run_placed(root, output, opts, None, ctx)
}

/// Runs `root` into `output` as [`run`] does, its reduction stages as
/// tasks on `cluster` (see [`OnCluster`]): each such stage's fixed
/// accumulation chunks are cut into consecutive ranges, each range runs as
/// one task ([`crate::array::run_task`] where it runs) returning the
/// statistics of its chunks, and they are folded here in chunk order, so
/// the result has the same bits as [`run`] for any number of ranges. The
/// other stages (elementwise steps that combine reductions' results, as
/// `var`'s last one) run here, within `opts`.
///
/// # Errors
/// As [`run`]; [`Error::Expression`] (a value fault) before anything runs
/// when the job cannot run on a cluster (see [`super::check_on_cluster`]);
/// [`Error::DoesNotFit`] before anything runs when one chunk's task does
/// not fit [`OnCluster::task_limit`]; the remote's errors.
pub fn run_on(
    root: &Array,
    output: &Output,
    opts: &Options,
    cluster: &OnCluster<'_>,
    ctx: &mut Context<'_>,
) -> Result<(Option<Computed>, Report)> {
    run_placed(root, output, opts, Some(cluster), ctx)
}

fn run_placed(
    root: &Array,
    output: &Output,
    opts: &Options,
    cluster: Option<&OnCluster<'_>>,
    ctx: &mut Context<'_>,
) -> Result<(Option<Computed>, Report)> {
    let (lowered, the_plan) = prepare(root, output, opts)?;
    let threads = the_plan.threads;
    let placed = cluster.map(|c| super::remote::place(root, &lowered, &the_plan, c)).transpose()?;
    let last = lowered.stages.last().expect("a final stage");
    let sp = the_plan.schedule.stages.last().expect("a final stage");
    let sink = result_sink(output, &last.shape, last.dtype, sp)?;
    let mut slots = Slots::new(&lowered, output)?;
    slots.raise_on.clone_from(&opts.raise_on);
    run_intermediates(&lowered, &the_plan, &slots, threads, placed.as_ref(), ctx)?;
    let n = lowered.stages.len();
    stage_event(ctx, n - 1, n);
    // An einsum's plan may run fewer threads than the job has.
    let workers = if matches!(last.work, Work::Einsum { .. }) { sp.workers.min(threads) } else { threads };
    run_one(&lowered, n - 1, sp, &[&*sink], &slots, workers, placed.as_ref(), &ctx.cancel)?;
    slots.check_raise()?;
    let computed = sink.commit()?.map(|bytes| Computed { shape: last.shape.clone(), dtype: last.dtype, bytes });
    Ok((computed, Report { plan: the_plan, warnings: slots.warnings() }))
}

/// Evaluates `ir` over the box in parts of at most `max` elements, split
/// along the outermost axes (so the parts concatenate in C order).
pub(crate) fn eval_limited(
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
    let mut out = Col::with_capacity(ir.dtype(), n);
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

/// Runs one stage as a grid of units on the current pool: an elementwise
/// stage's tiles independently ([`run_tiles`]); a reduction's or a
/// contraction's (output tile, accumulation chunk) units with
/// [`run_grid`], `threads` at a time, each tile's chunks folded in order.
fn run_stage(
    stage: &super::lower::Stage,
    sp: &StagePlan,
    sinks: &[&dyn Sink],
    ctx: &Ctx<'_>,
    threads: usize,
    cancel: &Cancel,
) -> Result<()> {
    let (shape, dtype, sink) = (&stage.shape[..], stage.dtype, sinks[0]);
    match &stage.work {
        Work::Map { ir } if sp.write_slab > 0 && sink.file_offset().is_some() => {
            super::write::run_slabs(ir, shape, dtype, sp, sink, ctx, cancel)
        }
        Work::Map { ir } => {
            // A Zarr output's chunks (shards) are buffered whole: only
            // `sp.workers` at a time, their compression on every thread.
            let tiles = n_tiles(shape, &sp.tile);
            let batch = if sink.chunk().is_some() && sp.workers < threads { sp.workers.max(1) } else { tiles.max(1) };
            (0..tiles).step_by(batch).try_for_each(|start| {
                run_tiles(batch.min(tiles - start), cancel, Vec::new, |buf, i| {
                    let (lo, hi) = tile_box(shape, &sp.tile, start + i);
                    let col = eval_limited(ir, &lo, &hi, sp.eval_elems, ctx, buf)?;
                    put(sink, &lo, &hi, &col, dtype)
                })
            })
        }
        Work::Reduce { ir, axes, reduced, .. } => {
            let n_c = n_tiles(reduced, &sp.chunk);
            let ops = reductions(stage);
            if n_c == 0 {
                for o in 0..n_tiles(shape, &sp.tile) {
                    let (lo, hi) = tile_box(shape, &sp.tile, o);
                    let n = lo.iter().zip(&hi).map(|(a, b)| b - a).product();
                    for ((op, input, dtype), sink) in ops.iter().zip(sinks) {
                        let col = Acc::empty(*op, *input, n).finish(*op, *dtype, 1, 0);
                        // The mean of nothing: 0 / 0, NumPy's invalid value.
                        if let Col::F(v) = &col {
                            ctx.fp.add(FpException::Invalid, v.iter().filter(|x| x.is_nan()).count() as u64);
                        }
                        put(*sink, &lo, &hi, &col, *dtype)?;
                    }
                }
                return Ok(());
            }
            let ops: Vec<Reduction> = ops.iter().map(|o| o.0).collect();
            let units = ReduceUnits::new(ir, axes, &ops, reduced, shape, &sp.tile, &sp.chunk);
            let groups = chunk_groups(reduced, &sp.chunk, 0..n_c, sp.group);
            let unit = |buf: &mut Vec<u8>, o: usize, g: usize| units.unit(ctx, buf, o, groups[g].clone()).map(InOrder);
            fold_reduce(stage, &sp.tile, groups.len(), threads, cancel, sinks, ctx, unit)
        }
        Work::Scan { ir, axis, op } => {
            // Tiles of the other axes in parallel, each along `axis` in order.
            let ax = *axis;
            let (mut lines, mut line_tile) = (shape.to_vec(), sp.tile.clone());
            (lines[ax], line_tile[ax]) = (1, 1);
            let step = sp.tile[ax].max(1);
            run_tiles(n_tiles(&lines, &line_tile), cancel, Vec::new, |buf, i| {
                let (mut lo, mut hi) = tile_box(&lines, &line_tile, i);
                let mut carry = None;
                let mut s = 0;
                while s < shape[ax] {
                    (lo[ax], hi[ax]) = (s, (s + step).min(shape[ax]));
                    let col = eval_limited(ir, &lo, &hi, sp.eval_elems, ctx, buf)?;
                    let ext: Vec<usize> = lo.iter().zip(&hi).map(|(a, b)| b - a).collect();
                    let (col, last, fresh) = super::scan::scan_box(col, *op, dtype, &ext, ax, carry.take());
                    ctx.fp.add_all(fresh);
                    put(sink, &lo, &hi, &col, dtype)?;
                    carry = Some(last);
                    s = hi[ax];
                }
                Ok(())
            })
        }
        Work::Einsum { sub, irs, path, sizes } => {
            let contracted: Vec<u8> = sizes.keys().copied().filter(|c| !sub.output.contains(c)).collect();
            let csizes: Vec<usize> = contracted.iter().map(|c| sizes[c]).collect();
            let (n_o, n_c) = (n_tiles(shape, &sp.tile), n_tiles(&csizes, &sp.chunk).max(1));
            // Non-finite and NaN inputs; infinite and NaN outputs.
            let (bad_in, nan_in) = (AtomicU64::new(0), AtomicU64::new(0));
            let (inf_out, nan_out) = (AtomicU64::new(0), AtomicU64::new(0));
            let nans = |col: &Col| match col {
                Col::F(v) => v.iter().filter(|x| x.is_nan()).count() as u64,
                _ => 0,
            };
            let unit = |buf: &mut Vec<u8>, o: usize, c: usize| -> Result<Sums> {
                let (olo, ohi) = tile_box(shape, &sp.tile, o);
                let (clo, chi) = tile_box(&csizes, &sp.chunk, c);
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
                    nan_in.fetch_add(nans(&col), Ordering::Relaxed);
                    let Col::F(data) = col else { unreachable!("einsum operands are float64") };
                    dense.push(Dense { shape: lo.iter().zip(&hi).map(|(a, b)| b - a).collect(), data });
                }
                Ok(Sums(contract(sub, &dense, path).data))
            };
            let finish = |o: usize, s: Sums| -> Result<()> {
                let (lo, hi) = tile_box(shape, &sp.tile, o);
                let mut sums = s.0;
                if !contracted.is_empty() {
                    // Sums from NumPy's identity 0.0: products that are all
                    // -0.0 sum to 0.0, as NumPy's einsum and matmul give.
                    sums.iter_mut().for_each(|v| *v += 0.0);
                }
                let col = Col::F(sums);
                let nan = nans(&col);
                nan_out.fetch_add(nan, Ordering::Relaxed);
                inf_out.fetch_add(col.count_non_finite() - nan, Ordering::Relaxed);
                put(sink, &lo, &hi, &col, dtype)
            };
            run_grid(n_o, n_c, threads, cancel, Vec::new, unit, finish)?;
            // NaN from operands without NaN (inf · 0, inf − inf) is invalid,
            // inf from finite operands overflow, as NumPy's matmul reports.
            if nan_in.load(Ordering::Relaxed) == 0 {
                ctx.fp.add(FpException::Invalid, nan_out.load(Ordering::Relaxed));
            }
            if bad_in.load(Ordering::Relaxed) == 0 {
                ctx.fp.add(FpException::Overflow, inf_out.load(Ordering::Relaxed));
            }
            Ok(())
        }
    }
}

/// Each reduction of a [`Work::Reduce`] stage: its operation, input dtype
/// and result dtype, in the order of the stage's results.
pub(crate) fn reductions(stage: &super::lower::Stage) -> Vec<(Reduction, Dtype, Dtype)> {
    let Work::Reduce { op, input_dtype, also, .. } = &stage.work else { unreachable!("a reduction stage") };
    std::iter::once((*op, *input_dtype, stage.dtype))
        .chain(also.iter().map(|a| (a.op, a.input_dtype, a.dtype)))
        .collect()
}

/// The units of a reduction stage computed here: the statistics of one
/// accumulation chunk of one output tile, for each of the stage's
/// reductions (their operands evaluated together, shared work once).
pub(crate) struct ReduceUnits<'a> {
    ir: &'a Ir,
    axes: &'a [usize],
    ops: &'a [Reduction],
    shape: &'a [usize],
    tile: &'a [usize],
    reduced: &'a [usize],
    chunk: &'a [usize],
    /// The operand's kept axes.
    kept: Vec<usize>,
    /// Flat indices over the reduced axes (for `argmin` / `argmax`).
    rmap: ViewMap,
    /// How many of the last reduced axes make NumPy's inner loop: the
    /// operand's trailing axes that are reduced, past kept axes of extent
    /// 1 (0 when its last axis of extent above 1 is kept). Float sums add
    /// each inner run pairwise, then the runs in order (see
    /// [`Partials::of_chunk`]). Decided by the operand's shape, never by a
    /// tile's, so the bits do not depend on the limit or the threads.
    inner: usize,
}

impl<'a> ReduceUnits<'a> {
    /// The units of reducing the results of `ir` over `axes` with `ops`
    /// (one per result) into results of `shape` cut into tiles of extent
    /// `tile`, the reduced axes (of shape `reduced`) into accumulation
    /// chunks of extent `chunk`.
    pub(crate) fn new(
        ir: &'a Ir,
        axes: &'a [usize],
        ops: &'a [Reduction],
        reduced: &'a [usize],
        shape: &'a [usize],
        tile: &'a [usize],
        chunk: &'a [usize],
    ) -> Self {
        let nd = shape.len() + axes.len();
        let kept: Vec<usize> = (0..nd).filter(|k| !axes.contains(k)).collect();
        let rmap = ViewMap::c_order(reduced);
        debug_assert!(axes.windows(2).all(|w| w[0] < w[1]), "reduced axes in order");
        let mut inner = 0;
        for k in (0..nd).rev() {
            match kept.iter().position(|&q| q == k) {
                None => inner += 1,
                Some(j) if shape[j] == 1 => {}
                Some(_) => break,
            }
        }
        ReduceUnits { ir, axes, ops, shape, tile, reduced, chunk, kept, rmap, inner }
    }

    /// The statistics of each accumulation chunk of `chunks` (consecutive
    /// on one line: see [`chunk_groups`]) of output tile `o`, in order,
    /// from one evaluation of their box.
    pub(crate) fn unit(&self, ctx: &Ctx<'_>, buf: &mut Vec<u8>, o: usize, chunks: Range<usize>) -> Result<Vec<Stats>> {
        let (axes, kept) = (self.axes, &self.kept);
        let nd = kept.len() + axes.len();
        let (olo, ohi) = tile_box(self.shape, self.tile, o);
        let (glo, _) = tile_box(self.reduced, self.chunk, chunks.start);
        let (_, ghi) = tile_box(self.reduced, self.chunk, chunks.end - 1);
        // The box in the operand's own axis order.
        let (mut lo, mut hi) = (vec![0; nd], vec![0; nd]);
        for (j, &k) in kept.iter().enumerate() {
            (lo[k], hi[k]) = (olo[j], ohi[j]);
        }
        for (j, &k) in axes.iter().enumerate() {
            (lo[k], hi[k]) = (glo[j], ghi[j]);
        }
        let (cols, at) = eval_all(self.ir, &lo, &hi, ctx, buf)?;
        // Positions in the box of each kept / reduced coordinate.
        let ext: Vec<usize> = lo.iter().zip(&hi).map(|(a, b)| b - a).collect();
        let bmap = ViewMap::c_order(&ext);
        let pick = |ax: &[usize]| ViewMap {
            base: 0,
            shape: ax.iter().map(|&k| ext[k]).collect(),
            axes: ax.iter().map(|&k| bmap.axes[k].clone()).collect(),
            joints: Vec::new(),
        };
        let o_at = offsets(&pick(kept), &vec![0; kept.len()], &kept.iter().map(|&k| ext[k]).collect::<Vec<_>>());
        let args = self.ops.iter().any(|op| matches!(op, Reduction::ArgMin | Reduction::ArgMax));
        let finite: Vec<bool> = cols.iter().map(|c| c.count_non_finite() == 0).collect();
        let stats = |c: usize| {
            let (clo, chi) = tile_box(self.reduced, self.chunk, c);
            let at_lo: Vec<usize> = clo.iter().zip(&glo).map(|(a, g)| a - g).collect();
            let at_hi: Vec<usize> = chi.iter().zip(&glo).map(|(a, g)| a - g).collect();
            let r_at = offsets(&pick(axes), &at_lo, &at_hi);
            // This chunk's elements of one inner run (it may cut the run).
            let run = if self.inner == 0 {
                0
            } else {
                (axes.len() - self.inner..axes.len()).map(|j| chi[j] - clo[j]).product()
            };
            let index = if args { offsets(&self.rmap, &clo, &chi) } else { Vec::new() };
            Stats(
                self.ops
                    .iter()
                    .zip(&at)
                    .map(|(&op, &k)| Partials::of_chunk(op, &cols[k], finite[k], &o_at, &r_at, &index, run))
                    .collect(),
            )
        };
        Ok(chunks.map(stats).collect())
    }
}

/// Runs reduction stage `stage` (a [`Work::Reduce`]) as `n_c` units per
/// output tile of extent `tile` with [`run_grid`]: `unit(buffer, tile, i)`
/// gives the statistics of the chunks of the tile's `i`-th unit (computed
/// here, or received from tasks), folded in chunk order, finished and written to `sinks`
/// (one per result). Fresh infinities and NaNs of the results are counted
/// in `ctx` (see [`Partials::finish`](super::reduce::Partials::finish)).
#[allow(clippy::too_many_arguments)]
pub(crate) fn fold_reduce(
    stage: &super::lower::Stage,
    tile: &[usize],
    n_c: usize,
    threads: usize,
    cancel: &Cancel,
    sinks: &[&dyn Sink],
    ctx: &Ctx<'_>,
    unit: impl Fn(&mut Vec<u8>, usize, usize) -> Result<InOrder> + Sync + Send,
) -> Result<()> {
    let Work::Reduce { reduced, multiplier, .. } = &stage.work else { unreachable!("a reduction stage") };
    let dtypes: Vec<Dtype> = stage.targets().into_iter().map(|t| t.1).collect();
    let count = volume(reduced) as u64;
    let shape = &stage.shape;
    let finish = |o: usize, stats: InOrder| -> Result<()> {
        let (lo, hi) = tile_box(shape, tile, o);
        for ((p, sink), &dtype) in stats.folded().0.into_iter().zip(sinks).zip(&dtypes) {
            let (col, fresh) = p.finish(dtype, *multiplier, count);
            ctx.fp.add_all(fresh);
            put(*sink, &lo, &hi, &col, dtype)?;
        }
        Ok(())
    };
    run_grid(n_tiles(shape, tile), n_c, threads, cancel, Vec::new, unit, finish)?;
    Ok(())
}
