//! Reductions on a cluster: an expression job's reduction stages run as
//! [`Task`]s through an [`crate::exec::Remote`], each over a consecutive
//! range of the stage's fixed accumulation chunks, and are folded here in
//! chunk order by the same [`crate::exec::run_grid`] fold as a local run,
//! so the result has the same bits for any number of ranges.
//!
//! The sending side ([`super::run_on`]) plans the ranges ([`place`]: each
//! task within [`OnCluster::task_limit`]) and ships, with each task, the
//! stage's index and the intermediate results the stage reads (an earlier
//! reduction's result, e.g. the mean `var` subtracts). The receiving side
//! ([`run_task`], through [`ReduceRunner`]) lowers the same expression,
//! runs the stage's units over its chunks, one output tile at a time, and
//! returns each tile's statistics: the fold of its chunks when the range
//! starts at chunk 0, else one per chunk (floats do not add
//! associatively, so only the sending side folds across ranges).

use std::ops::Range;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use super::eval::Ctx;
use super::lower::Output;
use super::lower::{Lowered, Src, Work};
use super::node::{Array, Reduction};
use super::plan::{plan, StagePlan, Stages};
use super::reduce::{acc_bytes, InOrder, Stats};
use super::run::{fold_reduce, lowered_for, reductions, ReduceUnits, Slots};
use super::store::Stored;
use super::tiling::{chunk_groups, n_tiles, volume};
use super::values::FpCounts;
use crate::error::{Error, ExpressionFault, Result};
use crate::exec::{decode, encode, run_grid, Cancel, Merge, Remote, Task, TaskRunner};
use crate::io::ChunkCache;
use crate::io::Dtype;
use crate::plan::Plan;
use crate::plan::{format_bytes, PlannedBuffer};

/// The task kind of a reduction stage's chunks ([`Task::kind`]).
pub const REDUCE_TASK: &str = "array-reduce";

/// Where an expression job's reduction stages run: as tasks on `remote`
/// (see [`super::run_on`]).
#[derive(Debug, Clone, Copy)]
pub struct OnCluster<'r> {
    /// Runs the tasks.
    pub remote: &'r dyn Remote,
    /// Ranges a stage's chunks are cut into (the cluster's threads, say):
    /// fewer when the stage has fewer chunks, more when one range's
    /// statistics do not fit a task.
    pub tasks: usize,
    /// The memory limit of one task, in bytes: every task is planned
    /// within it before any runs, and runs within it.
    pub task_limit: u64,
}

/// A job placed on a cluster: the ranges of chunks each stage runs as
/// (none: the stage runs here).
pub(crate) struct Placed<'r> {
    pub cluster: OnCluster<'r>,
    pub ranges: Vec<Vec<Range<usize>>>,
}

/// What a reduction task carries: the stage, its number of chunks (a
/// check that both sides lowered the same job) and the intermediate results
/// it reads (slot index, C-order little-endian bytes).
#[derive(serde::Serialize, serde::Deserialize)]
struct ReduceTask {
    stage: usize,
    n_chunks: usize,
    slots: Vec<(usize, Vec<u8>)>,
    /// Whether the sending side joined reductions into shared passes.
    shared: bool,
}

/// What a reduction task returns: its chunks, the output tiles it used,
/// the values its elementwise work turned non-finite from finite operands
/// (overflow) and each tile's statistics (one fold from chunk 0, else one
/// per chunk).
#[derive(serde::Serialize, serde::Deserialize)]
struct ChunkStats {
    chunks: Range<usize>,
    tile: Vec<usize>,
    fp: [u64; 3],
    tiles: Vec<Vec<Stats>>,
}

/// One tile's statistics of consecutive chunks: folded in order (`fold`,
/// from chunk 0) or kept one per chunk, as [`crate::exec::Partial`] keeps
/// row chunks.
#[derive(serde::Serialize, serde::Deserialize)]
struct Leaves {
    fold: bool,
    parts: InOrder,
}

impl Merge for Leaves {
    fn merge(&mut self, next: &Self) {
        if self.fold {
            self.parts.merge(&next.parts);
        } else {
            self.parts.0.extend(next.parts.0.iter().cloned());
        }
    }
    fn clear(&mut self) {
        self.parts.clear();
    }
}

fn refuse(message: String) -> Error {
    Error::Expression { kind: ExpressionFault::Value, message: format!("cannot run on a cluster: {message}") }
}

/// Bytes of one output element's statistics of a reduction stage (all
/// its results').
fn stat_bytes(stage: &super::lower::Stage) -> u64 {
    reductions(stage).iter().map(|r| acc_bytes(r.0)).sum()
}

/// The intermediate results stage `si` reads.
fn read_slots(lowered: &Lowered, si: usize) -> Vec<usize> {
    let mut out: Vec<usize> = lowered.stages[si]
        .irs()
        .into_iter()
        .flat_map(|ir| ir.leaves())
        .filter_map(|s| match s {
            Src::Slot(i) => Some(*i),
            _ => None,
        })
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Why `lowered` cannot run on a cluster, if it cannot: a contraction
/// (runs in one process), an elementwise stage that reads stored data
/// outside a reduction (it would read the data here), a reduction that
/// reads an intermediate too large for memory, or no reduction at all.
fn refusal(lowered: &Lowered) -> Option<Error> {
    let n = lowered.stages.len();
    if let Some(si) = lowered.stages.iter().position(|s| matches!(s.work, Work::Einsum { .. })) {
        return Some(refuse(format!("step {} of {n} is a contraction (einsum), which runs in one process", si + 1)));
    }
    if !lowered.stages.iter().any(|s| matches!(s.work, Work::Reduce { .. })) {
        return Some(refuse("the array has no reduction (sum, mean, min, argmax, ...) to run as tasks".into()));
    }
    lowered.stages.iter().enumerate().find_map(|(si, stage)| match &stage.work {
        Work::Einsum { .. } => None,
        Work::Scan { op, .. } => Some(refuse(format!(
            "step {} of {n} is a cumulative {}, which runs in one process",
            si + 1,
            if *op == Reduction::Prod { "product" } else { "sum" }
        ))),
        Work::Map { ir } if ir.leaves().iter().any(|s| matches!(s, Src::Stored(_))) => Some(refuse(format!(
            "step {} of {n} computes {} elementwise from stored data outside a reduction; only reductions run \
             as tasks",
            si + 1,
            ir.describe()
        ))),
        Work::Map { .. } => None,
        Work::Reduce { .. } => read_slots(lowered, si).into_iter().find(|&i| lowered.slots[i].on_disk).map(|i| {
            let s = &lowered.slots[i];
            refuse(format!(
                "step {} of {n} reads an intermediate result of {} (shape {:?}), too large to send to its tasks",
                si + 1,
                format_bytes(s.bytes()),
                s.shape
            ))
        }),
    })
}

/// Checks that `root` can run into `output` on a cluster ([`super::run_on`])
/// within `opts` (reads no data).
///
/// # Errors
/// [`Error::Expression`] (a value fault) saying why not; as
/// [`super::explain`].
pub fn check_on_cluster(root: &Array, output: &Output, opts: &super::Options) -> Result<()> {
    let (lowered, _) = super::run::prepare(root, output, opts)?;
    refusal(&lowered).map_or(Ok(()), Err)
}

/// The lowering a task of stage `si` uses within `limit`: the intermediates
/// the stage reads are in memory (shipped with the task).
fn task_lowering(root: &Array, si: usize, limit: u64, shared: bool) -> Result<Lowered> {
    let mut lowered = lowered_for(root, &Output::Memory, limit, shared);
    if !matches!(lowered.stages.get(si).map(|s| &s.work), Some(Work::Reduce { .. })) {
        return Err(Error::Remote { reason: format!("the expression has no reduction stage {si}") });
    }
    for i in read_slots(&lowered, si) {
        lowered.slots[i].on_disk = false;
    }
    Ok(lowered)
}

/// The plan of a task over `n` chunks of stage `si`, within `limit`: the
/// tiles' statistics it returns, held and encoded (`n` chunks × the stage's
/// outputs × their statistics' bytes ([`acc_bytes`]), twice), and the
/// job's plan on one thread within the rest (its tiles sized for it).
fn task_plan(lowered: &Lowered, si: usize, n: usize, limit: u64) -> Result<Plan<Stages>> {
    let outputs = volume(&lowered.stages[si].shape) as u64;
    let per = stat_bytes(&lowered.stages[si]);
    let bytes = (n as u64).saturating_mul(outputs).saturating_mul(2 * per);
    let detail = format!("{n} chunks × {outputs} outputs × {per} B, held and encoded");
    // The smallest limit: the plan's, with the statistics beside it.
    let mut the_plan = plan(lowered, &Output::Memory, limit.saturating_sub(bytes), 1).map_err(|e| {
        e.as_job_limit(
            limit,
            |b| b.saturating_add(bytes),
            |b| b,
            |what| format!("{what}, beside a task's chunk statistics ({detail})"),
        )
    })?;
    the_plan.buffers.push(PlannedBuffer { name: "chunk statistics".into(), bytes, detail, phase: None });
    the_plan.total_bytes = the_plan.total_bytes.saturating_add(bytes);
    the_plan.limit_bytes = limit;
    Ok(the_plan)
}

/// Places `lowered` (`root` planned as `the_plan`) on `cluster`: each
/// reduction stage's chunks cut into at most `cluster.tasks` consecutive
/// ranges (more when a range does not fit a task), every task planned
/// within the task limit.
///
/// # Errors
/// The refusal of [`check_on_cluster`]; [`Error::DoesNotFit`] when a task
/// of one chunk does not fit.
pub(crate) fn place<'r>(
    root: &Array,
    lowered: &Lowered,
    the_plan: &Plan<Stages>,
    cluster: &OnCluster<'r>,
) -> Result<Placed<'r>> {
    if let Some(e) = refusal(lowered) {
        return Err(e);
    }
    let mut ranges = Vec::with_capacity(lowered.stages.len());
    for (si, (stage, sp)) in lowered.stages.iter().zip(&the_plan.schedule.stages).enumerate() {
        let n_c = match &stage.work {
            Work::Reduce { reduced, .. } => n_tiles(reduced, &sp.chunk),
            _ => 0,
        };
        if n_c == 0 {
            ranges.push(Vec::new());
            continue;
        }
        // Ranges as even as the tasks allow, halved while a task's
        // statistics leave its plan no room (a task of one chunk must fit).
        let tl = task_lowering(root, si, cluster.task_limit, lowered.shared)?;
        let mut len = n_c.div_ceil(cluster.tasks.max(1)).max(1);
        while let Err(e) = task_plan(&tl, si, len, cluster.task_limit) {
            if len == 1 {
                return Err(e);
            }
            len = len.div_ceil(2);
        }
        ranges.push((0..n_c).step_by(len).map(|a| a..(a + len).min(n_c)).collect());
    }
    Ok(Placed { cluster: *cluster, ranges })
}

/// Runs reduction stage `si` of `lowered` (planned here as `sp`) as tasks
/// over the ranges `placed` gives it, folds their statistics in chunk order
/// and writes the results to `sinks` (one per result of the stage).
///
/// # Errors
/// [`Error::Cancelled`]; the remote's errors; [`Error::Remote`] for
/// statistics that do not match the ranges.
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_stage(
    lowered: &Lowered,
    si: usize,
    sp: &StagePlan,
    sinks: &[&dyn crate::exec::Sink],
    ctx: &Ctx<'_>,
    placed: &Placed<'_>,
    cancel: &Cancel,
) -> Result<()> {
    let stage = &lowered.stages[si];
    let Work::Reduce { reduced, .. } = &stage.work else { unreachable!("only reductions run as tasks") };
    let ranges = &placed.ranges[si];
    let n_chunks = n_tiles(reduced, &sp.chunk);
    let slots = read_slots(lowered, si)
        .into_iter()
        .map(|i| {
            let stored = ctx.slots[i].get().expect("an earlier stage's result");
            (i, stored.owned_bytes().expect("an intermediate in memory").to_vec())
        })
        .collect();
    let payload = encode(&ReduceTask { stage: si, n_chunks, slots, shared: lowered.shared });
    let task = Task {
        kind: REDUCE_TASK.into(),
        compute: Dtype::F64,
        shift: Vec::new(),
        payload,
        unit_rows: false,
        row_state: None,
    };
    cancel.check()?;
    let parts = placed.cluster.remote.run(&task, ranges)?;
    if parts.len() != ranges.len() {
        return Err(Error::Remote {
            reason: format!("{} statistics came back for {} ranges of chunks", parts.len(), ranges.len()),
        });
    }
    let (mut tile, mut tiles) = (None, Vec::new());
    for (bytes, r) in parts.iter().zip(ranges) {
        let got: ChunkStats = decode(bytes, "chunk statistics")?;
        let leaves = if r.start == 0 { 1 } else { r.len() };
        if got.chunks != *r || got.tiles.iter().any(|t| t.len() != leaves) {
            return Err(Error::Remote { reason: format!("statistics of chunks {:?} came back for {r:?}", got.chunks) });
        }
        match &tile {
            None => {
                tiles = got.tiles;
                tile = Some(got.tile);
            }
            Some(t) if *t == got.tile && tiles.len() == got.tiles.len() => {
                tiles.iter_mut().zip(got.tiles).for_each(|(a, b)| a.extend(b));
            }
            Some(t) => {
                return Err(Error::Remote {
                    reason: format!("tasks cut the output into different tiles ({t:?}, {:?})", got.tile),
                })
            }
        }
        ctx.fp.add_all(got.fp);
    }
    let tile = tile.expect("at least one range");
    let n_units = tiles.first().map_or(0, Vec::len);
    let unit = |_: &mut Vec<u8>, o: usize, c: usize| Ok(InOrder(vec![tiles[o][c].clone()]));
    fold_reduce(stage, &tile, n_units, 1, cancel, sinks, ctx, unit)
}

/// The receiving side of [`REDUCE_TASK`]: the chunks of a reduction stage.
pub struct ReduceRunner;

impl TaskRunner for ReduceRunner {
    fn kind(&self) -> &'static str {
        REDUCE_TASK
    }

    fn plan_and_run_chunks(
        &self,
        task: &Task,
        root: &Array,
        chunks: Range<usize>,
        limit_bytes: u64,
        run: bool,
        cancel: &Cancel,
    ) -> Result<(Plan<Stages>, Option<Vec<u8>>)> {
        let t: ReduceTask = decode(&task.payload, "array reduction task")?;
        let lowered = task_lowering(root, t.stage, limit_bytes, t.shared)?;
        let leaves = if chunks.start == 0 { 1 } else { chunks.len() };
        let the_plan = task_plan(&lowered, t.stage, leaves, limit_bytes)?;
        let stage = &lowered.stages[t.stage];
        let sp = &the_plan.schedule.stages[t.stage];
        let Work::Reduce { ir, axes, reduced, .. } = &stage.work else { unreachable!("checked") };
        let ops: Vec<_> = reductions(stage).into_iter().map(|r| r.0).collect();
        let n_chunks = n_tiles(reduced, &sp.chunk);
        if n_chunks != t.n_chunks || chunks.is_empty() || chunks.end > n_chunks {
            return Err(Error::Remote {
                reason: format!(
                    "chunks {chunks:?} of a stage of {} chunks, for an expression whose stage has {n_chunks}",
                    t.n_chunks
                ),
            });
        }
        if !run {
            return Ok((the_plan, None));
        }
        let cells: Vec<OnceLock<Arc<Stored>>> = (0..lowered.slots.len()).map(|_| OnceLock::new()).collect();
        for (i, bytes) in t.slots {
            let s = lowered.slots.get(i).filter(|s| s.bytes() == bytes.len() as u64).ok_or_else(|| Error::Remote {
                reason: format!("an intermediate result of the wrong size for slot {i}"),
            })?;
            let _ = cells[i].set(Arc::new(Stored::owned(bytes, s.dtype, s.shape.clone())));
        }
        let slots = Slots { cells, scratch: None, fp: FpCounts::default(), raise_on: Vec::new() };
        let zarr = ChunkCache::new(sp.zarr_cache);
        let ctx = Ctx { slots: &slots.cells, fp: &slots.fp, zarr: &zarr };
        let units = ReduceUnits::new(ir, axes, &ops, reduced, &stage.shape, &sp.tile, &sp.chunk);
        let n_o = n_tiles(&stage.shape, &sp.tile);
        let tiles = Mutex::new(vec![Vec::new(); n_o]);
        let fold = chunks.start == 0;
        let groups = chunk_groups(reduced, &sp.chunk, chunks.clone(), sp.group);
        run_grid(
            n_o,
            groups.len(),
            rayon::current_num_threads(),
            cancel,
            Vec::new,
            |buf, o, g| Ok(Leaves { fold, parts: InOrder(units.unit(&ctx, buf, o, groups[g].clone())?) }),
            |o, mut leaves| {
                if fold {
                    leaves.parts.collapse();
                }
                tiles.lock().unwrap_or_else(PoisonError::into_inner)[o] = leaves.parts.0;
                Ok(())
            },
        )?;
        let tiles = tiles.into_inner().unwrap_or_else(PoisonError::into_inner);
        let out = ChunkStats { chunks, tile: sp.tile.clone(), fp: slots.fp.get(), tiles };
        Ok((the_plan, Some(encode(&out))))
    }
}

/// Plans the task encoded in `task` (by [`super::run_on`]'s sending side)
/// over the accumulation chunks `chunks` of the expression `root` within
/// `limit_bytes` on the current rayon pool; with `run`, also runs it.
/// Returns the plan and, when run, the chunks' encoded statistics.
///
/// # Errors
/// [`Error::Remote`] for bytes that are not a task this version runs over
/// chunks, or a task for another expression; [`Error::DoesNotFit`] when
/// the task does not fit `limit_bytes`; when run, read errors and
/// [`Error::Cancelled`].
pub fn run_task(
    task: &[u8],
    root: &Array,
    chunks: Range<usize>,
    limit_bytes: u64,
    run: bool,
    cancel: &Cancel,
) -> Result<(Plan<Stages>, Option<Vec<u8>>)> {
    let task = Task::decode(task)?;
    crate::estimator::runner_of(&task)?.plan_and_run_chunks(&task, root, chunks, limit_bytes, run, cancel)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::array::{run, run_on, Distribution, Op, Options, Reduction};
    use crate::exec::Context;

    /// Runs each range's task here through the bytes a cluster would ship,
    /// on the expression as a worker rebuilds it, counting the ranges.
    #[derive(Debug)]
    struct Loopback {
        root: Array,
        ranges: AtomicUsize,
    }

    impl Remote for Loopback {
        fn run(&self, task: &Task, ranges: &[Range<usize>]) -> Result<Vec<Vec<u8>>> {
            let bytes = task.encode();
            self.ranges.fetch_add(ranges.len(), Ordering::Relaxed);
            ranges
                .iter()
                .map(|r| Ok(run_task(&bytes, &self.root, r.clone(), 64 << 20, true, &Cancel::new())?.1.expect("run")))
                .collect()
        }
    }

    fn computed(root: &Array, cluster: Option<&OnCluster<'_>>) -> (Vec<usize>, Dtype, Vec<u8>) {
        let opts = Options { threads: Some(3), ..Options::with_limit(64 << 20) };
        let mut quiet = ();
        let mut ctx = Context::new(&mut quiet);
        let (c, _) = match cluster {
            Some(c) => run_on(root, &Output::Memory, &opts, c, &mut ctx).unwrap(),
            None => run(root, &Output::Memory, &opts, &mut ctx).unwrap(),
        };
        let c = c.expect("a memory result");
        (c.shape, c.dtype, c.bytes)
    }

    /// Reductions (whole and over axis 0, `var`, and the sum of a
    /// standardised array: a stage of two reductions, then one) run as
    /// 1, 2 and 7 ranges of their accumulation chunks have the bits of one
    /// local run.
    #[test]
    fn reductions_over_chunk_ranges_are_bitwise_the_local_run() {
        // 14 accumulation chunks of 16384 elements (1-D), of 13107 rows (5 columns).
        let flat = Array::random(Distribution::Normal, &[13 * 16384 + 500], 7, 1e3, 2.0, Dtype::F64).unwrap();
        let wide = Array::random(Distribution::Uniform, &[13 * 13107 + 50, 5], 9, -1.0, 1.0, Dtype::F32).unwrap();
        let wide = Array::ufunc(Op::Multiply, &[wide.clone(), wide]).unwrap();
        let mut roots = Vec::new();
        for (x, axes) in [(&flat, vec![0]), (&wide, vec![0]), (&wide, vec![0, 1])] {
            for op in [Reduction::Sum, Reduction::Mean, Reduction::Max, Reduction::ArgMin] {
                if op == Reduction::ArgMin && axes.len() > 1 {
                    continue;
                }
                roots.push(x.reduce(op, &axes, false, None).unwrap());
            }
            roots.push(x.var(&axes, false, 0.0, None, true).unwrap());
            let mean = x.reduce(Reduction::Mean, &axes, true, None).unwrap();
            let std = x.var(&axes, true, 0.0, None, true).unwrap();
            let dev = Array::ufunc(Op::Subtract, &[x.clone(), mean]).unwrap();
            let z = Array::ufunc(Op::TrueDivide, &[dev, std]).unwrap();
            roots.push(z.reduce(Reduction::Sum, &axes, false, None).unwrap());
        }
        for root in &roots {
            let want = computed(root, None);
            for tasks in [1, 2, 7] {
                let remote = Loopback { root: root.clone(), ranges: AtomicUsize::new(0) };
                let cluster = OnCluster { remote: &remote, tasks, task_limit: 64 << 20 };
                assert_eq!(computed(root, Some(&cluster)), want, "{tasks} tasks");
                assert!(remote.ranges.load(Ordering::Relaxed) >= tasks, "{tasks} tasks");
            }
        }
    }

    /// Jobs that cannot run as tasks are refused before any work, saying why.
    #[test]
    fn contractions_and_elementwise_jobs_are_refused() {
        let x = Array::random(Distribution::Normal, &[100, 3], 1, 0.0, 1.0, Dtype::F64).unwrap();
        let remote = Loopback { root: x.clone(), ranges: AtomicUsize::new(0) };
        let cluster = OnCluster { remote: &remote, tasks: 2, task_limit: 64 << 20 };
        let opts = Options::with_limit(64 << 20);
        let gram = Array::einsum("ij,ik->jk", &[x.clone(), x.clone()]).unwrap();
        let plus = Array::ufunc(Op::Add, &[x.clone(), x]).unwrap();
        for (root, why) in [(gram, "contraction"), (plus, "no reduction")] {
            let e = run_on(&root, &Output::Memory, &opts, &cluster, &mut Context::new(&mut ())).unwrap_err();
            assert!(matches!(&e, Error::Expression { message, .. } if message.contains(why)), "{e}");
            assert!(check_on_cluster(&root, &Output::Memory, &opts).is_err());
        }
        assert_eq!(remote.ranges.load(Ordering::Relaxed), 0);
    }
}
