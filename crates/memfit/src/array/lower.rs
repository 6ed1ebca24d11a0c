//! Lowering: the expression graph becomes stages, each one blocked pass.
//!
//! Views are pushed down through elementwise operations to the stored
//! arrays, where they compose into one [`ViewMap`] per leaf; chains of
//! elementwise operations fuse into one [`Ir`] tree evaluated tile by tile.
//! A reduction or a contraction ends a stage: when its result feeds more
//! work it is *materialised* (kept in memory, or in a scratch `.npy` file
//! when large) and read back as a leaf. Rewrites happen here: constant
//! operands fold, and a reduction over an axis the operand depends on only
//! through a tile (`i mod m`), a repeat (`i div r`) or a broadcast (not at
//! all) reduces one period / one of each repeat / one element and
//! multiplies by the count (`sum`), raises to it (`prod`) or drops it
//! (`min`, `max`, `any`, `all`, `mean`).

use std::collections::HashMap;
use std::sync::Arc;

use super::node::{Array, Distribution, NodeKind, Reduction};
use super::store::Stored;
use super::types::Scalar;
use super::values::{apply, fresh_exceptions, Col, Op};
use super::view::{Dependence, ViewMap, ViewOp};
use crate::dtype::Dtype;
use crate::linalg::einsum::{Path, Subscripts};

/// Where a leaf's values come from.
#[derive(Debug, Clone)]
pub enum Src {
    /// A stored array.
    Stored(Arc<Stored>),
    /// An intermediate result (slot index), stored when its stage has run.
    Slot(usize),
    /// `start + step · i`.
    Arange {
        /// First value.
        start: Scalar,
        /// Increment.
        step: Scalar,
    },
    /// Keyed random values.
    Random {
        /// Distribution.
        dist: Distribution,
        /// Seed.
        seed: u64,
        /// Mean or low.
        a: f64,
        /// Deviation or high.
        b: f64,
    },
}

/// A fused elementwise expression over one stage's iteration space: a DAG
/// of nodes in evaluation order (operands before the nodes that use them),
/// so a subexpression used several times is one node, evaluated once per
/// tile. Its results are the last node, or for a stage of several
/// reductions one node per reduction ([`Ir::roots`]). Nothing over it
/// recurses.
#[derive(Debug, Clone)]
pub struct Ir {
    /// The nodes in evaluation order.
    pub nodes: Vec<IrNode>,
    /// How many nodes use each node as an operand (a result counts one).
    uses: Vec<u32>,
    /// The result nodes (one per result; a node may be several results).
    roots: Vec<usize>,
}

/// A node of an [`Ir`].
#[derive(Debug, Clone)]
pub struct IrNode {
    /// What it computes.
    pub kind: IrKind,
    /// Its dtype.
    pub dtype: Dtype,
}

/// The parts of an [`Ir`].
#[derive(Debug, Clone)]
pub enum IrKind {
    /// Values of a source at the offsets a map gives.
    Leaf {
        /// The source.
        src: Src,
        /// Coordinates to offsets.
        map: ViewMap,
    },
    /// One value everywhere.
    Const(Scalar),
    /// An elementwise operation of earlier nodes.
    Map {
        /// The operation.
        op: Op,
        /// Its loop dtype.
        loop_dtype: Dtype,
        /// Operands (indices of earlier nodes).
        args: Vec<usize>,
    },
    /// Expressions joined along `axis`: `(start, length, part)`, each part
    /// evaluated over its own box.
    Concat {
        /// The axis.
        axis: usize,
        /// The parts in order.
        parts: Vec<(usize, usize, Ir)>,
    },
}

/// Longest chain of fused operations in one stage: a longer one is split,
/// its lower part materialised (see [`Lowering::map_node`]).
pub const MAX_FUSED_DEPTH: usize = 2048;

/// Longest description of one node in a plan (characters).
const DESCRIBE_CHARS: usize = 160;

impl Ir {
    /// The expression of nodes whose last one is the result; nodes the
    /// result does not use are dropped.
    fn from_nodes(mut nodes: Vec<IrNode>, root: usize) -> Ir {
        nodes.truncate(root + 1);
        Ir::with_roots(nodes, vec![root])
    }

    /// The expression of `nodes` with results `roots`; nodes no result
    /// uses are dropped.
    fn with_roots(nodes: Vec<IrNode>, roots: Vec<usize>) -> Ir {
        let mut live = vec![false; nodes.len()];
        roots.iter().for_each(|&r| live[r] = true);
        for i in (0..nodes.len()).rev() {
            if live[i] {
                if let IrKind::Map { args, .. } = &nodes[i].kind {
                    args.iter().for_each(|&a| live[a] = true);
                }
            }
        }
        let mut at = vec![usize::MAX; nodes.len()];
        let mut kept = Vec::new();
        for (i, mut n) in nodes.into_iter().enumerate() {
            if live[i] {
                if let IrKind::Map { args, .. } = &mut n.kind {
                    args.iter_mut().for_each(|a| *a = at[*a]);
                }
                at[i] = kept.len();
                kept.push(n);
            }
        }
        let mut uses = vec![0u32; kept.len()];
        for n in &kept {
            if let IrKind::Map { args, .. } = &n.kind {
                args.iter().for_each(|&a| uses[a] += 1);
            }
        }
        let roots: Vec<usize> = roots.iter().map(|&r| at[r]).collect();
        // A node that is several results is held once, until the end.
        let mut distinct = roots.clone();
        distinct.sort_unstable();
        distinct.dedup();
        distinct.iter().for_each(|&r| uses[r] += 1);
        Ir { nodes: kept, uses, roots }
    }

    /// The result nodes, one per result.
    pub fn roots(&self) -> &[usize] {
        &self.roots
    }

    /// `self` and `other` as one expression whose results are both's
    /// (`self`'s first): nodes equal in both (the same leaf read the same
    /// way, a constant, the same operation of equal nodes) are one node,
    /// evaluated once per tile.
    pub fn joined(&self, other: &Ir) -> Ir {
        fn map_key(n: &IrNode) -> Option<(Op, &'static str, &'static str, Vec<usize>)> {
            match &n.kind {
                IrKind::Map { op, loop_dtype, args } => Some((*op, loop_dtype.name(), n.dtype.name(), args.clone())),
                _ => None,
            }
        }
        let mut nodes = self.nodes.clone();
        let mut maps: HashMap<_, usize> =
            nodes.iter().enumerate().filter_map(|(i, n)| Some((map_key(n)?, i))).collect();
        let mut at = Vec::with_capacity(other.nodes.len());
        for n in &other.nodes {
            let mut n = n.clone();
            if let IrKind::Map { args, .. } = &mut n.kind {
                args.iter_mut().for_each(|a| *a = at[*a]);
            }
            let found = match &n.kind {
                IrKind::Map { .. } => maps.get(&map_key(&n).expect("a map")).copied(),
                IrKind::Leaf { src, map } => nodes.iter().position(|m| {
                    m.dtype == n.dtype
                        && matches!(&m.kind, IrKind::Leaf { src: s, map: p } if same_src(s, src) && p == map)
                }),
                IrKind::Const(v) => {
                    nodes.iter().position(|m| m.dtype == n.dtype && matches!(&m.kind, IrKind::Const(c) if c == v))
                }
                IrKind::Concat { .. } => None,
            };
            at.push(found.unwrap_or_else(|| {
                if let Some(k) = map_key(&n) {
                    maps.insert(k, nodes.len());
                }
                nodes.push(n);
                nodes.len() - 1
            }));
        }
        let roots = self.roots.iter().copied().chain(other.roots.iter().map(|&r| at[r])).collect();
        Ir::with_roots(nodes, roots)
    }

    /// One leaf.
    pub fn leaf(src: Src, map: ViewMap, dtype: Dtype) -> Ir {
        Ir::from_nodes(vec![IrNode { kind: IrKind::Leaf { src, map }, dtype }], 0)
    }

    /// The (first) result's dtype.
    pub fn dtype(&self) -> Dtype {
        self.nodes[self.roots[0]].dtype
    }

    /// How many nodes use node `i` (the result counts one).
    pub fn uses(&self, i: usize) -> u32 {
        self.uses[i]
    }

    /// How the expression depends on axis `k`.
    pub fn dependence(&self, k: usize) -> Dependence {
        self.nodes.iter().fold(Dependence::None, |d, n| {
            d.and(match &n.kind {
                IrKind::Leaf { map, .. } => map.dependence(k),
                IrKind::Const(_) | IrKind::Map { .. } => Dependence::None,
                IrKind::Concat { axis, .. } if *axis == k => Dependence::Full,
                IrKind::Concat { parts, .. } => parts.iter().fold(Dependence::None, |d, p| d.and(p.2.dependence(k))),
            })
        })
    }

    fn restrict(&mut self, k: usize, dep: Dependence) {
        for n in &mut self.nodes {
            match &mut n.kind {
                IrKind::Leaf { map, .. } => map.restrict(k, dep),
                IrKind::Concat { parts, .. } => parts.iter_mut().for_each(|p| p.2.restrict(k, dep)),
                IrKind::Const(_) | IrKind::Map { .. } => {}
            }
        }
    }

    /// Every leaf's source and map (a shared leaf once), for the planner.
    pub fn leaf_maps(&self) -> Vec<(&Src, &ViewMap)> {
        let mut out = Vec::new();
        for n in &self.nodes {
            match &n.kind {
                IrKind::Leaf { src, map } => out.push((src, map)),
                IrKind::Concat { parts, .. } => parts.iter().for_each(|p| out.extend(p.2.leaf_maps())),
                IrKind::Const(_) | IrKind::Map { .. } => {}
            }
        }
        out
    }

    /// Every leaf's source, for the planner.
    pub fn leaves(&self) -> Vec<&Src> {
        self.leaf_maps().into_iter().map(|(s, _)| s).collect()
    }

    /// Most columns held at once while a tile is evaluated: the values of
    /// nodes still to be used, operands copied for a node whose values are
    /// used again later, and the node's own result.
    pub fn peak_columns(&self) -> usize {
        let mut left = self.uses.clone();
        let (mut held, mut peak) = (0usize, 0usize);
        for n in &self.nodes {
            let (copies, freed, inner) = match &n.kind {
                IrKind::Map { args, .. } => {
                    let mut copies = 0;
                    let mut freed = 0;
                    for &a in args {
                        left[a] -= 1;
                        if left[a] == 0 {
                            freed += 1;
                        } else {
                            copies += 1;
                        }
                    }
                    (copies, freed, 0)
                }
                // The parts' values, one at a time, and the pieces so far.
                IrKind::Concat { parts, .. } => (0, 0, 1 + parts.iter().map(|p| p.2.peak_columns()).max().unwrap_or(0)),
                _ => (0, 0, 0),
            };
            peak = peak.max(held + copies + inner + 1);
            held = held + 1 - freed;
        }
        peak
    }

    /// A one-line description (`multiply(read(x.npy), full(2.0))`) of the
    /// (first) result; see [`Ir::describe_each`].
    pub fn describe(&self) -> String {
        self.describe_each().swap_remove(0)
    }

    /// A one-line description of each result; a node's description is cut
    /// at a fixed length, so a deep or shared expression describes in
    /// linear space.
    pub fn describe_each(&self) -> Vec<String> {
        let mut text: Vec<String> = Vec::with_capacity(self.nodes.len());
        for n in &self.nodes {
            let mut t = match &n.kind {
                IrKind::Leaf { src, .. } => match src {
                    Src::Stored(s) => match s.path() {
                        Some(p) => format!(
                            "read({})",
                            p.file_name().map_or(p.display().to_string(), |f| f.to_string_lossy().into())
                        ),
                        None => "memory".into(),
                    },
                    Src::Slot(i) => format!("intermediate#{i}"),
                    Src::Arange { .. } => "arange".into(),
                    Src::Random { .. } => "random".into(),
                },
                IrKind::Const(v) => format!("full({})", v.to_f64()),
                IrKind::Map { op, args, .. } => {
                    format!("{}({})", op.name(), args.iter().map(|&a| text[a].as_str()).collect::<Vec<_>>().join(", "))
                }
                IrKind::Concat { parts, .. } => {
                    format!("concatenate({})", parts.iter().map(|p| p.2.describe()).collect::<Vec<_>>().join(", "))
                }
            };
            if t.chars().count() > DESCRIBE_CHARS {
                t = t.chars().take(DESCRIBE_CHARS - 1).collect::<String>() + "…";
            }
            text.push(t);
        }
        self.roots.iter().map(|&r| text[r].clone()).collect()
    }
}

/// Whether two leaves read the same values.
fn same_src(a: &Src, b: &Src) -> bool {
    match (a, b) {
        (Src::Stored(x), Src::Stored(y)) => Arc::ptr_eq(x, y),
        (Src::Slot(x), Src::Slot(y)) => x == y,
        (Src::Arange { start: a0, step: a1 }, Src::Arange { start: b0, step: b1 }) => a0 == b0 && a1 == b1,
        (Src::Random { dist: d, seed: s, a: x, b: y }, Src::Random { dist: e, seed: t, a: u, b: v }) => {
            d == e && s == t && x.to_bits() == u.to_bits() && y.to_bits() == v.to_bits()
        }
        _ => false,
    }
}

/// The work of one stage.
#[derive(Debug, Clone)]
pub enum Work {
    /// Evaluate an expression over the stage's shape.
    Map {
        /// The expression.
        ir: Ir,
    },
    /// Reduce some axes of the expression (evaluated in its own axis
    /// order, so reads stay contiguous); with [`Work::Reduce::also`], several
    /// reductions of one iteration space in one pass (one read, shared
    /// elementwise work).
    Reduce {
        /// The expression over the operand's axes: its first result is
        /// reduced by `op`, the others by `also`'s.
        ir: Ir,
        /// The reduced axes (sorted).
        axes: Vec<usize>,
        /// The reduction.
        op: Reduction,
        /// Shape of the reduced axes after the rewrites.
        reduced: Vec<usize>,
        /// What the rewrites removed: the result is multiplied by it
        /// (`sum`) or raised to it (`prod`).
        multiplier: u128,
        /// The reduction's dtype before rounding to the stage's dtype.
        input_dtype: Dtype,
        /// Further reductions over the same axes, one per further result
        /// of `ir`, each to its own slot.
        also: Vec<Also>,
    },
    /// A running sum or product of the expression along `axis`
    /// ([`Array::cumulative`]): tiles of the other axes run in parallel,
    /// each along `axis` chunk after chunk, in order.
    Scan {
        /// The expression (in the result's dtype).
        ir: Ir,
        /// The axis.
        axis: usize,
        /// [`Reduction::Sum`] or [`Reduction::Prod`].
        op: Reduction,
    },
    /// A contraction over the output's labels.
    Einsum {
        /// Subscripts.
        sub: Subscripts,
        /// The operands' expressions (float64).
        irs: Vec<Ir>,
        /// The contraction order (chosen on the full sizes).
        path: Path,
        /// Size of every label.
        sizes: std::collections::BTreeMap<u8, usize>,
    },
}

/// A further reduction of a [`Work::Reduce`] stage.
#[derive(Debug, Clone)]
pub struct Also {
    /// The reduction.
    pub op: Reduction,
    /// Its dtype before rounding to `dtype`.
    pub input_dtype: Dtype,
    /// Its result's dtype.
    pub dtype: Dtype,
    /// Where its result goes.
    pub target: Target,
}

/// Most reductions one stage computes together ([`share_passes`]): more
/// would shrink its tiles for little gain.
pub const MAX_SHARED_REDUCTIONS: usize = 16;

/// Where a stage's result goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// An intermediate slot (in memory or a scratch file).
    Slot(usize),
    /// The job's output.
    Out,
}

/// Where the job's result goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Returned in memory.
    Memory,
    /// A `.npy` file.
    Npy {
        /// Destination.
        path: std::path::PathBuf,
        /// Replace an existing file.
        overwrite: bool,
    },
    /// Read block by block by a consumer (an estimator), never whole.
    Rows,
    /// A Zarr v3 array.
    Zarr {
        /// Destination directory.
        path: std::path::PathBuf,
        /// Chunk shape (`None`: chosen from the limit).
        chunks: Option<Vec<usize>>,
        /// How chunks are grouped into shards (files).
        shards: Shards,
        /// Replace an existing array.
        overwrite: bool,
    },
}

/// How a Zarr output's chunks are grouped into shards: Zarr v3's
/// `sharding_indexed` codec, one file per shard holding its chunks (each
/// compressed on its own, in parallel) and their index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shards {
    /// Shards when chunks are small (under [`super::plan::SMALL_CHUNK_BYTES`]
    /// uncompressed): whole chunks grouped from the innermost axis outwards
    /// into shards of at most [`super::plan::MAX_SHARD_BYTES`] within the memory left
    /// by held buffers; else one file per chunk.
    Auto,
    /// One file per chunk.
    Off,
    /// Shards of this shape (elements per axis, a positive multiple of the
    /// chunk length on each axis; with chunks chosen by the engine, each
    /// axis's default chunk length is lowered to a divisor of the shard's).
    Shape(Vec<usize>),
}

/// A stage: one blocked pass.
#[derive(Debug, Clone)]
pub struct Stage {
    /// Shape of the result.
    pub shape: Vec<usize>,
    /// Dtype of the result.
    pub dtype: Dtype,
    /// What it computes.
    pub work: Work,
    /// Where the result goes.
    pub target: Target,
}

impl Stage {
    /// The expressions it evaluates.
    pub fn irs(&self) -> Vec<&Ir> {
        match &self.work {
            Work::Map { ir } | Work::Reduce { ir, .. } | Work::Scan { ir, .. } => vec![ir],
            Work::Einsum { irs, .. } => irs.iter().collect(),
        }
    }

    /// Where each of its results goes, with its dtype: its own, then its
    /// further reductions' ([`Work::Reduce::also`]).
    pub fn targets(&self) -> Vec<(Target, Dtype)> {
        let mut out = vec![(self.target, self.dtype)];
        if let Work::Reduce { also, .. } = &self.work {
            out.extend(also.iter().map(|a| (a.target, a.dtype)));
        }
        out
    }
}

/// An intermediate result.
#[derive(Debug, Clone)]
pub struct Slot {
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its dtype.
    pub dtype: Dtype,
    /// Whether it goes to a file (a scratch file, or a result's) rather
    /// than memory.
    pub on_disk: bool,
    /// The job's result it is, if it is one (see [`lower_all`]).
    pub result: Option<Output>,
}

impl Slot {
    /// Bytes of the result.
    pub fn bytes(&self) -> u64 {
        (super::tiling::volume(&self.shape) as u64).saturating_mul(self.dtype.itemsize() as u64)
    }
}

/// A lowered job: stages in execution order (the last one writes the output).
#[derive(Debug, Clone)]
pub struct Lowered {
    /// The stages.
    pub stages: Vec<Stage>,
    /// The intermediate slots.
    pub slots: Vec<Slot>,
    /// Whether reduction stages were joined ([`share_passes`]).
    pub shared: bool,
}

/// Lowers `root`; intermediates larger than `memory_slot_bytes` go to disk.
/// Reductions and contractions below the root are lowered first, operands
/// before users, so lowering never recurses through them.
pub fn lower(root: &Array, memory_slot_bytes: u64) -> Lowered {
    let mut l = Lowering { stages: Vec::new(), slots: Vec::new(), memo: HashMap::new(), memory_slot_bytes };
    for a in Array::post_order(std::slice::from_ref(root)) {
        if a.id() != root.id() && ends_stage(&a) {
            l.materialize(&a);
        }
    }
    let work = l.work_of(root);
    l.stages.push(Stage { shape: root.shape().to_vec(), dtype: root.dtype(), work, target: Target::Out });
    Lowered { stages: l.stages, slots: l.slots, shared: false }
}

/// Lowers several results together, each shared intermediate computed
/// once: result `k` goes to a slot whose `result` is `outputs[k]` (in
/// memory for [`Output::Memory`], else the file), filled by the stage that
/// computes it (an elementwise one for a Zarr output, written a chunk at a
/// time). There is no [`Target::Out`] stage.
/// Returns the lowered job and the slot of each result.
pub fn lower_all(roots: &[Array], outputs: &[Output], memory_slot_bytes: u64) -> (Lowered, Vec<usize>) {
    let mut l = Lowering { stages: Vec::new(), slots: Vec::new(), memo: HashMap::new(), memory_slot_bytes };
    let mut results: HashMap<usize, Vec<usize>> = HashMap::new();
    for (k, r) in roots.iter().enumerate() {
        results.entry(r.id()).or_default().push(k);
    }
    let mut at = vec![0; roots.len()];
    for a in Array::post_order(roots) {
        match results.get(&a.id()) {
            Some(ks) => {
                for &k in ks {
                    at[k] = l.result(&a, &outputs[k]);
                }
            }
            None if ends_stage(&a) => {
                l.materialize(&a);
            }
            None => {}
        }
    }
    (Lowered { stages: l.stages, slots: l.slots, shared: false }, at)
}

/// Joins reduction stages into passes: a reduction stage whose inputs are
/// ready earlier joins the first earlier reduction stage over the same
/// iteration space (operand shape, reduced axes and, after the rewrites,
/// reduced shape) whose inputs are ready too, so that `mean` and `var` of
/// one array, or the statistics of a standardised array, read it once.
/// Only stages that fill slots join (the job's output stage stays last);
/// at most [`MAX_SHARED_REDUCTIONS`] per stage. Each result keeps its own
/// fold order, so its bits do not change.
pub fn share_passes(lowered: &mut Lowered) {
    let mut out: Vec<Stage> = Vec::with_capacity(lowered.stages.len());
    // Slot -> the stage (in `out`) that fills it.
    let mut made_by: HashMap<usize, usize> = HashMap::new();
    for stage in std::mem::take(&mut lowered.stages) {
        let joined = match (&stage.work, stage.target) {
            (Work::Reduce { ir, .. }, Target::Slot(_)) => {
                let ready = ir
                    .leaves()
                    .iter()
                    .filter_map(|s| match s {
                        Src::Slot(i) => made_by.get(i).map(|&k| k + 1),
                        _ => None,
                    })
                    .max()
                    .unwrap_or(0);
                (ready..out.len()).find(|&k| joinable(&out[k], &stage))
            }
            _ => None,
        };
        match joined {
            Some(k) => {
                let (Work::Reduce { ir: into, also: more, .. }, Work::Reduce { ir, op, input_dtype, also, .. }) =
                    (&mut out[k].work, stage.work)
                else {
                    unreachable!("joinable stages are reductions")
                };
                *into = into.joined(&ir);
                lowered.shared = true;
                more.push(Also { op, input_dtype, dtype: stage.dtype, target: stage.target });
                more.extend(also);
                if let Target::Slot(i) = stage.target {
                    made_by.insert(i, k);
                }
            }
            None => {
                if let Target::Slot(i) = stage.target {
                    made_by.insert(i, out.len());
                }
                out.push(stage);
            }
        }
    }
    lowered.stages = out;
}

/// Whether reduction stage `b` can join `a` (see [`share_passes`]).
fn joinable(a: &Stage, b: &Stage) -> bool {
    match (&a.work, &b.work) {
        (
            Work::Reduce { axes, reduced, multiplier, also, .. },
            Work::Reduce { axes: axes_b, reduced: reduced_b, multiplier: multiplier_b, also: also_b, .. },
        ) => {
            matches!(a.target, Target::Slot(_))
                && a.shape == b.shape
                && axes == axes_b
                && reduced == reduced_b
                && multiplier == multiplier_b
                && also.len() + also_b.len() + 2 <= MAX_SHARED_REDUCTIONS
        }
        _ => false,
    }
}

/// Whether `a` is computed by a stage of its own (a reduction or a
/// contraction) wherever it is used.
fn ends_stage(a: &Array) -> bool {
    matches!(a.node().kind, NodeKind::Reduce { .. } | NodeKind::Einsum { .. } | NodeKind::Scan { .. })
}

struct Lowering {
    stages: Vec<Stage>,
    slots: Vec<Slot>,
    /// Materialised nodes: node id → slot.
    memo: HashMap<usize, usize>,
    memory_slot_bytes: u64,
}

/// One [`Ir`] being built: its nodes, the chain depth of each, and the node
/// each (graph node, pending views) pair became (`None`: the views do not
/// separate on its leaves).
struct Builder {
    /// The node the expression computes.
    root: usize,
    nodes: Vec<IrNode>,
    depth: Vec<usize>,
    done: HashMap<(usize, usize), Option<usize>>,
    /// Lists of pending views as shared cells `(first view, rest)`, by
    /// index; 0 is the empty list. A view of a view of ... `n` deep is `n`
    /// cells, not `n` lists.
    pending: Vec<(Option<ViewOp>, usize)>,
    pending_at: HashMap<(ViewOp, usize), usize>,
}

impl Builder {
    fn new(root: usize) -> Builder {
        Builder {
            root,
            nodes: Vec::new(),
            depth: Vec::new(),
            done: HashMap::new(),
            pending: vec![(None, 0)],
            pending_at: HashMap::new(),
        }
    }

    /// The list `op` then the views of list `rest`.
    fn cons(&mut self, op: ViewOp, rest: usize) -> usize {
        if let Some(&p) = self.pending_at.get(&(op.clone(), rest)) {
            return p;
        }
        self.pending.push((Some(op.clone()), rest));
        self.pending_at.insert((op, rest), self.pending.len() - 1);
        self.pending.len() - 1
    }

    /// The list of `views` (applied first to last).
    fn pending_id(&mut self, views: &[ViewOp]) -> usize {
        views.iter().rev().fold(0, |rest, op| self.cons(op.clone(), rest))
    }

    /// The views of list `p`, first to last.
    fn views(&self, mut p: usize) -> Vec<ViewOp> {
        let mut out = Vec::new();
        while let (Some(op), rest) = &self.pending[p] {
            out.push(op.clone());
            p = *rest;
        }
        out
    }

    /// List `p` without its first `k` views.
    fn skip(&self, mut p: usize, k: usize) -> usize {
        for _ in 0..k {
            p = self.pending[p].1;
        }
        p
    }

    fn push(&mut self, kind: IrKind, dtype: Dtype, depth: usize) -> usize {
        self.nodes.push(IrNode { kind, dtype });
        self.depth.push(depth);
        self.nodes.len() - 1
    }

    /// A leaf of `src` through `map` and the pending views `p`, or `None`
    /// when a view does not separate.
    fn leaf(&mut self, src: Src, mut map: ViewMap, p: usize, dtype: Dtype) -> Option<usize> {
        let mut p = p;
        while let (Some(op), rest) = &self.pending[p] {
            map = map.apply(op)?;
            p = *rest;
        }
        Some(self.push(IrKind::Leaf { src, map }, dtype, 0))
    }
}

/// A step of the lowering loop.
enum Step {
    /// Lower a node seen through pending views.
    Enter(Array, usize),
    /// The `i`-th operand of an elementwise node is next.
    Operand(Array, usize, usize),
    /// A view's operand is lowered (through the views `q`).
    View(Array, usize, usize),
}

impl Lowering {
    fn work_of(&mut self, a: &Array) -> Work {
        match &a.node().kind {
            NodeKind::Reduce { op, axes, arg } => {
                let mut ir = self.lower_view(arg, &[]);
                let mut reduced: Vec<usize> = axes.iter().map(|&k| arg.shape()[k]).collect();
                let mut multiplier = 1u128;
                if !matches!(op, Reduction::ArgMin | Reduction::ArgMax) {
                    for (r, len) in reduced.iter_mut().enumerate() {
                        let k = axes[r];
                        // An empty axis has nothing to rewrite.
                        while *len > 0 {
                            let dep = ir.dependence(k);
                            let new_len = match dep {
                                Dependence::None if *len > 1 => 1,
                                Dependence::Periodic(m) if (*len as u64).is_multiple_of(m) && (m as usize) < *len => {
                                    m as usize
                                }
                                Dependence::Repeated(q) if (*len as u64).is_multiple_of(q) && q > 1 => {
                                    *len / q as usize
                                }
                                _ => break,
                            };
                            multiplier = multiplier.saturating_mul((*len / new_len) as u128);
                            ir.restrict(k, dep);
                            *len = new_len;
                        }
                    }
                }
                Work::Reduce {
                    ir,
                    axes: axes.clone(),
                    op: *op,
                    reduced,
                    multiplier,
                    input_dtype: arg.dtype(),
                    also: Vec::new(),
                }
            }
            NodeKind::Scan { op, axis, arg } => Work::Scan { ir: self.lower_view(arg, &[]), axis: *axis, op: *op },
            NodeKind::Einsum { sub, args } => {
                let irs = args.iter().map(|x| self.lower_view(x, &[])).collect();
                let shapes: Vec<Vec<usize>> = args.iter().map(|x| x.shape().to_vec()).collect();
                let sizes = crate::linalg::einsum::label_sizes(sub, &shapes);
                let path = crate::linalg::einsum::contraction_path(sub, &sizes);
                Work::Einsum { sub: sub.clone(), irs, path, sizes }
            }
            _ => Work::Map { ir: self.lower_view(a, &[]) },
        }
    }

    /// Lowers `a` seen through `pending` (applied first to last); never
    /// fails: views that do not separate materialise what is below them.
    fn lower_view(&mut self, a: &Array, pending: &[ViewOp]) -> Ir {
        let mut b = Builder::new(a.id());
        let p = b.pending_id(pending);
        let root = match self.try_lower(&mut b, a, p) {
            Some(i) => i,
            None => {
                let src = self.materialize(a);
                self.materialized_leaf(&mut b, a, src, p)
            }
        };
        Ir::from_nodes(b.nodes, root)
    }

    /// The leaf of `a`'s materialised values `src` seen through the pending
    /// views `p`; where a view does not separate even on C-order values, the
    /// views before it are materialised too.
    fn materialized_leaf(&mut self, b: &mut Builder, a: &Array, src: Src, p: usize) -> usize {
        let pending = b.views(p);
        let mut map = ViewMap::c_order(a.shape());
        for (k, op) in pending.iter().enumerate() {
            match map.apply(op) {
                Some(m) => map = m,
                None => {
                    // Every view separates on C-order values, so k > 0.
                    assert!(k > 0, "a view that does not separate on C-order values");
                    let mut c = a.clone();
                    for v in &pending[..k] {
                        c = c.view(v.clone()).expect("views valid when built");
                    }
                    let src = self.materialize(&c);
                    let rest = b.skip(p, k);
                    return self.materialized_leaf(b, &c, src, rest);
                }
            }
        }
        b.push(IrKind::Leaf { src, map }, a.dtype(), 0)
    }

    /// Lowers `root` through the pending views `p0` into `b`, in a loop over
    /// the graph (each (node, views) pair once); `None` when a view does not
    /// separate on the leaves below it (the caller materialises).
    fn try_lower(&mut self, b: &mut Builder, root: &Array, p0: usize) -> Option<usize> {
        let mut steps = vec![Step::Enter(root.clone(), p0)];
        while let Some(step) = steps.pop() {
            match step {
                Step::Enter(a, p) => {
                    if b.done.contains_key(&(a.id(), p)) {
                        continue;
                    }
                    let r = self.enter(b, &a, p, &mut steps);
                    if let Some(r) = r {
                        b.done.insert((a.id(), p), r);
                    }
                }
                Step::Operand(a, p, i) => {
                    let args = a.operands();
                    if i > 0 && b.done[&(args[i - 1].id(), p)].is_none() {
                        b.done.insert((a.id(), p), None);
                    } else if i < args.len() {
                        steps.push(Step::Operand(a.clone(), p, i + 1));
                        steps.push(Step::Enter(args[i].clone(), p));
                    } else {
                        let ids: Vec<usize> = args.iter().map(|x| b.done[&(x.id(), p)].expect("lowered")).collect();
                        let r = self.map_node(b, &a, p, ids);
                        b.done.insert((a.id(), p), Some(r));
                    }
                }
                Step::View(a, p, q) => {
                    let arg = &a.operands()[0];
                    let r = match b.done[&(arg.id(), q)] {
                        Some(r) => r,
                        None => {
                            let src = self.materialize(arg);
                            self.materialized_leaf(b, arg, src, q)
                        }
                    };
                    b.done.insert((a.id(), p), Some(r));
                }
            }
        }
        b.done[&(root.id(), p0)]
    }

    /// The first visit of `a` through views `p`: its node when it has no
    /// operands to lower first (`Some`), else the steps that lower them
    /// (`None`).
    fn enter(&mut self, b: &mut Builder, a: &Array, p: usize, steps: &mut Vec<Step>) -> Option<Option<usize>> {
        let n = a.node();
        if let Some(&slot) = self.memo.get(&a.id()).filter(|_| a.id() != b.root) {
            return Some(Some(self.materialized_leaf(b, a, Src::Slot(slot), p)));
        }
        Some(match &n.kind {
            NodeKind::Stored(s) => {
                let map = ViewMap::strided(&s.shape, &s.strides, s.base);
                b.leaf(Src::Stored(s.clone()), map, p, n.dtype)
            }
            NodeKind::Full(v) => Some(b.push(IrKind::Const(*v), n.dtype, 0)),
            NodeKind::Arange { start, step } => {
                let src = Src::Arange { start: *start, step: *step };
                b.leaf(src, ViewMap::c_order(&n.shape), p, n.dtype)
            }
            NodeKind::Random { dist, seed, a: lo, b: hi } => {
                let src = Src::Random { dist: *dist, seed: *seed, a: *lo, b: *hi };
                b.leaf(src, ViewMap::c_order(&n.shape), p, n.dtype)
            }
            NodeKind::Map { .. } => {
                steps.push(Step::Operand(a.clone(), p, 0));
                return None;
            }
            NodeKind::View { op, arg } => {
                let q = b.cons(op.clone(), p);
                steps.push(Step::View(a.clone(), p, q));
                steps.push(Step::Enter(arg.clone(), q));
                return None;
            }
            NodeKind::Concat { axis, parts } => match concat_through(*axis, parts, &n.shape, &b.views(p)) {
                Some((axis, seen)) => {
                    let mut start = 0;
                    let mut out = Vec::with_capacity(seen.len());
                    for (part, views) in seen {
                        let ir = self.lower_view(&part, &views);
                        let len = ir_len(&part, &views, axis);
                        out.push((start, len, ir));
                        start += len;
                    }
                    Some(b.push(IrKind::Concat { axis, parts: out }, n.dtype, 1))
                }
                None => {
                    let src = self.materialize(a);
                    Some(self.materialized_leaf(b, a, src, p))
                }
            },
            _ => {
                let src = self.materialize(a);
                Some(self.materialized_leaf(b, a, src, p))
            }
        })
    }

    /// The node of the elementwise `a` (operands lowered to `args`):
    /// constant operands fold; a chain longer than [`MAX_FUSED_DEPTH`] is
    /// cut here, `a` materialised and read back.
    fn map_node(&mut self, b: &mut Builder, a: &Array, p: usize, args: Vec<usize>) -> usize {
        let n = a.node();
        let NodeKind::Map { op, loop_dtype, .. } = &n.kind else { unreachable!("an elementwise node") };
        if args.iter().all(|&x| matches!(b.nodes[x].kind, IrKind::Const(_))) && *op != Op::Where {
            let consts: Vec<(Scalar, Dtype)> = args
                .iter()
                .map(|&x| match b.nodes[x].kind {
                    IrKind::Const(v) => (v, b.nodes[x].dtype),
                    _ => unreachable!("constants only"),
                })
                .collect();
            if let Some(v) = fold(*op, *loop_dtype, n.dtype, &consts) {
                return b.push(IrKind::Const(v), n.dtype, 0);
            }
        }
        let depth = 1 + args.iter().map(|&x| b.depth[x]).max().unwrap_or(0);
        if depth > MAX_FUSED_DEPTH && a.id() != b.root {
            let src = self.materialize(a);
            return self.materialized_leaf(b, a, src, p);
        }
        b.push(IrKind::Map { op: *op, loop_dtype: *loop_dtype, args }, n.dtype, depth)
    }

    /// A stage computing `a` into a result slot going to `output`.
    fn result(&mut self, a: &Array, output: &Output) -> usize {
        let leaf = |src| Work::Map { ir: Ir::leaf(src, ViewMap::c_order(a.shape()), a.dtype()) };
        let work = match self.memo.get(&a.id()) {
            Some(&s) => leaf(Src::Slot(s)),
            None if matches!(output, Output::Zarr { .. }) && ends_stage(a) => {
                let src = self.materialize(a);
                leaf(src)
            }
            None => self.work_of(a),
        };
        let on_disk = !matches!(output, Output::Memory);
        self.slots.push(Slot { shape: a.shape().to_vec(), dtype: a.dtype(), on_disk, result: Some(output.clone()) });
        let id = self.slots.len() - 1;
        self.stages.push(Stage { shape: a.shape().to_vec(), dtype: a.dtype(), work, target: Target::Slot(id) });
        self.memo.entry(a.id()).or_insert(id);
        id
    }

    /// A stage computing `a` into a slot (once per node).
    fn materialize(&mut self, a: &Array) -> Src {
        if let Some(&slot) = self.memo.get(&a.id()) {
            return Src::Slot(slot);
        }
        let work = self.work_of(a);
        let slot = Slot { shape: a.shape().to_vec(), dtype: a.dtype(), on_disk: false, result: None };
        let on_disk = slot.bytes() > self.memory_slot_bytes;
        self.slots.push(Slot { on_disk, ..slot });
        let id = self.slots.len() - 1;
        self.stages.push(Stage { shape: a.shape().to_vec(), dtype: a.dtype(), work, target: Target::Slot(id) });
        self.memo.insert(a.id(), id);
        Src::Slot(id)
    }
}

/// Parts of a concatenation, each seen through views.
type PartViews = Vec<(Array, Vec<ViewOp>)>;

/// A concatenation of `parts` along `axis` (of shape `shape`) seen through
/// `views`, as a concatenation of the parts each seen through views: the
/// new axis and the parts in order (see [`ViewOp::through_concat`]), or
/// `None` when a view does not commute with the join.
fn concat_through(axis: usize, parts: &[Array], shape: &[usize], views: &[ViewOp]) -> Option<(usize, PartViews)> {
    let mut axis = axis;
    let mut shape = shape.to_vec();
    let mut seen: PartViews = parts.iter().map(|p| (p.clone(), Vec::new())).collect();
    for op in views {
        let lens: Vec<usize> = seen.iter().map(|(a, v)| ir_len(a, v, axis)).collect();
        let (next, picks) = op.through_concat(axis, &lens, &shape)?;
        seen = picks
            .into_iter()
            .map(|(i, v)| {
                let (a, mut vs) = seen[i].clone();
                vs.push(v);
                (a, vs)
            })
            .collect();
        shape = op.out_shape(&shape).ok()?;
        axis = next;
    }
    Some((axis, seen))
}

/// The length along `axis` of `a` seen through `views`.
fn ir_len(a: &Array, views: &[ViewOp], axis: usize) -> usize {
    let mut shape = a.shape().to_vec();
    for v in views {
        shape = v.out_shape(&shape).expect("views valid when built");
    }
    shape[axis]
}

/// Folds an operation of constant operands to a constant; not when it
/// raises a floating-point exception (a cast of `1e5` to float16, `1e300 *
/// 1e300`, `1 // 0`): evaluated, that is counted.
fn fold(op: Op, loop_dtype: Dtype, out: Dtype, args: &[(Scalar, Dtype)]) -> Option<Scalar> {
    let cols: Vec<Col> = args.iter().map(|&(v, dtype)| Col::splat(v, dtype, 1)).collect();
    let col = apply(op, loop_dtype, out, &cols).ok()?;
    if fresh_exceptions(op, loop_dtype, out, &cols, &col).iter().any(|&c| c > 0) {
        return None;
    }
    match col {
        Col::B(v) => Some(Scalar::Bool(v[0])),
        Col::I(v) => Some(Scalar::Int(v[0])),
        Col::U(v) => Some(Scalar::UInt(v[0])),
        Col::F(v) => Some(Scalar::Float(v[0])),
    }
}
