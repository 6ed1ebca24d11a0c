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
use super::values::{apply, Col, Op};
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

/// A fused elementwise expression over one stage's iteration space.
#[derive(Debug, Clone)]
pub struct Ir {
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
    /// An elementwise operation.
    Map {
        /// The operation.
        op: Op,
        /// Its loop dtype.
        loop_dtype: Dtype,
        /// Operands.
        args: Vec<Ir>,
    },
    /// Operands joined along `axis`: `(start, length, part)`.
    Concat {
        /// The axis.
        axis: usize,
        /// The parts in order.
        parts: Vec<(usize, usize, Ir)>,
    },
}

impl Ir {
    /// How the expression depends on axis `k`.
    pub fn dependence(&self, k: usize) -> Dependence {
        match &self.kind {
            IrKind::Leaf { map, .. } => map.dependence(k),
            IrKind::Const(_) => Dependence::None,
            IrKind::Map { args, .. } => args.iter().fold(Dependence::None, |d, a| d.and(a.dependence(k))),
            IrKind::Concat { axis, parts } => {
                if *axis == k {
                    Dependence::Full
                } else {
                    parts.iter().fold(Dependence::None, |d, p| d.and(p.2.dependence(k)))
                }
            }
        }
    }

    fn restrict(&mut self, k: usize, dep: Dependence) {
        match &mut self.kind {
            IrKind::Leaf { map, .. } => map.restrict(k, dep),
            IrKind::Const(_) => {}
            IrKind::Map { args, .. } => args.iter_mut().for_each(|a| a.restrict(k, dep)),
            IrKind::Concat { parts, .. } => parts.iter_mut().for_each(|p| p.2.restrict(k, dep)),
        }
    }

    /// Every leaf, for the planner.
    pub fn leaves(&self) -> Vec<&Src> {
        match &self.kind {
            IrKind::Leaf { src, .. } => vec![src],
            IrKind::Const(_) => Vec::new(),
            IrKind::Map { args, .. } => args.iter().flat_map(Ir::leaves).collect(),
            IrKind::Concat { parts, .. } => parts.iter().flat_map(|p| p.2.leaves()).collect(),
        }
    }

    /// Nodes of the tree (each holds one column during evaluation).
    pub fn n_nodes(&self) -> usize {
        1 + match &self.kind {
            IrKind::Map { args, .. } => args.iter().map(Ir::n_nodes).sum(),
            IrKind::Concat { parts, .. } => parts.iter().map(|p| p.2.n_nodes()).sum(),
            _ => 0,
        }
    }

    /// A one-line description (`multiply(leaf, leaf)`).
    pub fn describe(&self) -> String {
        match &self.kind {
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
                format!("{}({})", op.name(), args.iter().map(Ir::describe).collect::<Vec<_>>().join(", "))
            }
            IrKind::Concat { parts, .. } => {
                format!("concatenate({})", parts.iter().map(|p| p.2.describe()).collect::<Vec<_>>().join(", "))
            }
        }
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
    /// order, so reads stay contiguous).
    Reduce {
        /// The expression over the operand's axes.
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

/// Where a stage's result goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// An intermediate slot (in memory or a scratch file).
    Slot(usize),
    /// The job's output.
    Out,
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

/// An intermediate result.
#[derive(Debug, Clone)]
pub struct Slot {
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its dtype.
    pub dtype: Dtype,
    /// Whether it goes to a scratch file rather than memory.
    pub on_disk: bool,
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
}

/// Lowers `root`; intermediates larger than `memory_slot_bytes` go to disk.
pub fn lower(root: &Array, memory_slot_bytes: u64) -> Lowered {
    let mut l = Lowering { stages: Vec::new(), slots: Vec::new(), memo: HashMap::new(), memory_slot_bytes };
    let work = l.work_of(root);
    l.stages.push(Stage { shape: root.shape().to_vec(), dtype: root.dtype(), work, target: Target::Out });
    Lowered { stages: l.stages, slots: l.slots }
}

struct Lowering {
    stages: Vec<Stage>,
    slots: Vec<Slot>,
    memo: HashMap<usize, usize>,
    memory_slot_bytes: u64,
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
                        loop {
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
                Work::Reduce { ir, axes: axes.clone(), op: *op, reduced, multiplier, input_dtype: arg.dtype() }
            }
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
        match self.try_lower(a, pending) {
            Some(ir) => ir,
            None => {
                let src = self.materialize(a);
                self.materialized_leaf(a, src, pending)
            }
        }
    }

    fn leaf(&self, src: Src, mut map: ViewMap, pending: &[ViewOp], dtype: Dtype) -> Option<Ir> {
        for op in pending {
            map = map.apply(op)?;
        }
        Some(Ir { kind: IrKind::Leaf { src, map }, dtype })
    }

    /// The leaf of `a`'s materialised values `src` seen through `pending`;
    /// where a view does not separate even on C-order values, the views
    /// before it are materialised too.
    fn materialized_leaf(&mut self, a: &Array, src: Src, pending: &[ViewOp]) -> Ir {
        let mut map = ViewMap::c_order(a.shape());
        for (k, op) in pending.iter().enumerate() {
            match map.apply(op) {
                Some(m) => map = m,
                None => {
                    // Every view separates on C-order values, so k > 0.
                    assert!(k > 0, "a view that does not separate on C-order values");
                    let mut b = a.clone();
                    for p in &pending[..k] {
                        b = b.view(p.clone()).expect("views valid when built");
                    }
                    let src = self.materialize(&b);
                    return self.materialized_leaf(&b, src, &pending[k..]);
                }
            }
        }
        Ir { kind: IrKind::Leaf { src, map }, dtype: a.dtype() }
    }

    fn try_lower(&mut self, a: &Array, pending: &[ViewOp]) -> Option<Ir> {
        let n = a.node();
        match &n.kind {
            NodeKind::Stored(s) => {
                let map = ViewMap::strided(&s.shape, &s.strides, s.base);
                self.leaf(Src::Stored(s.clone()), map, pending, n.dtype)
            }
            NodeKind::Full(v) => Some(Ir { kind: IrKind::Const(*v), dtype: n.dtype }),
            NodeKind::Arange { start, step } => {
                let src = Src::Arange { start: *start, step: *step };
                self.leaf(src, ViewMap::c_order(&n.shape), pending, n.dtype)
            }
            NodeKind::Random { dist, seed, a: lo, b: hi } => {
                let src = Src::Random { dist: *dist, seed: *seed, a: *lo, b: *hi };
                self.leaf(src, ViewMap::c_order(&n.shape), pending, n.dtype)
            }
            NodeKind::Map { op, loop_dtype, args } => {
                let args: Vec<Ir> = args.iter().map(|x| self.try_lower(x, pending)).collect::<Option<_>>()?;
                if args.iter().all(|x| matches!(x.kind, IrKind::Const(_))) && *op != Op::Where {
                    if let Some(v) = fold(*op, *loop_dtype, n.dtype, &args) {
                        return Some(Ir { kind: IrKind::Const(v), dtype: n.dtype });
                    }
                }
                Some(Ir { kind: IrKind::Map { op: *op, loop_dtype: *loop_dtype, args }, dtype: n.dtype })
            }
            NodeKind::View { op, arg } => {
                let mut inner = vec![op.clone()];
                inner.extend_from_slice(pending);
                match self.try_lower(arg, &inner) {
                    Some(ir) => Some(ir),
                    None => {
                        let src = self.materialize(arg);
                        Some(self.materialized_leaf(arg, src, &inner))
                    }
                }
            }
            NodeKind::Concat { axis, parts } if pending.is_empty() => {
                let mut start = 0;
                let mut out = Vec::with_capacity(parts.len());
                for p in parts {
                    let len = p.shape()[*axis];
                    out.push((start, len, self.lower_view(p, &[])));
                    start += len;
                }
                Some(Ir { kind: IrKind::Concat { axis: *axis, parts: out }, dtype: n.dtype })
            }
            _ => {
                let src = self.materialize(a);
                Some(self.materialized_leaf(a, src, pending))
            }
        }
    }

    /// A stage computing `a` into a slot (once per node).
    fn materialize(&mut self, a: &Array) -> Src {
        if let Some(&slot) = self.memo.get(&a.node().id) {
            return Src::Slot(slot);
        }
        let work = self.work_of(a);
        let slot = Slot { shape: a.shape().to_vec(), dtype: a.dtype(), on_disk: false };
        let on_disk = slot.bytes() > self.memory_slot_bytes;
        self.slots.push(Slot { on_disk, ..slot });
        let id = self.slots.len() - 1;
        self.stages.push(Stage { shape: a.shape().to_vec(), dtype: a.dtype(), work, target: Target::Slot(id) });
        self.memo.insert(a.node().id, id);
        Src::Slot(id)
    }
}

/// Folds an operation of constant operands to a constant.
fn fold(op: Op, loop_dtype: Dtype, out: Dtype, args: &[Ir]) -> Option<Scalar> {
    let cols: Vec<Col> = args
        .iter()
        .map(|a| match a.kind {
            IrKind::Const(v) => Col::splat(v, a.dtype, 1),
            _ => unreachable!("constants only"),
        })
        .collect();
    let _ = loop_dtype;
    match apply(op, loop_dtype, out, &cols).ok()? {
        Col::B(v) => Some(Scalar::Bool(v[0])),
        Col::I(v) => Some(Scalar::Int(v[0])),
        Col::U(v) => Some(Scalar::UInt(v[0])),
        Col::F(v) => Some(Scalar::Float(v[0])),
    }
}
