//! The expression graph: [`Array`] nodes and the constructors that check
//! shapes and resolve dtypes as NumPy does. Building a graph reads no data.
//!
//! The graph is a DAG with structural sharing (hash-consing): a node equal
//! to a live one (same operation, parameters, operands, shape and dtype) is
//! that node, so equal subexpressions built separately are computed once.
//! Nothing here recurses over the graph: dropping a chain of any length,
//! and listing a graph's nodes ([`Array::post_order`]), are loops.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use super::store::Stored;
use super::types::{kind, result_type, Kind, Operand, Scalar};
use super::values::Op;
use super::view::ViewOp;
use crate::dtype::Dtype;
use crate::error::{Error, ExpressionFault, Result};
use crate::linalg::einsum::Subscripts;

/// A reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[allow(missing_docs)]
pub enum Reduction {
    Sum,
    Prod,
    Min,
    Max,
    Mean,
    Any,
    All,
    ArgMin,
    ArgMax,
    /// The sum of squared deviations from the mean (`var` times the count),
    /// in one pass (chunk moments merged by Chan, Golub and LeVeque's update).
    SquaredDeviations,
}

impl Reduction {
    /// NumPy's name.
    pub fn name(self) -> &'static str {
        match self {
            Reduction::Sum => "sum",
            Reduction::Prod => "prod",
            Reduction::Min => "min",
            Reduction::Max => "max",
            Reduction::Mean => "mean",
            Reduction::Any => "any",
            Reduction::All => "all",
            Reduction::ArgMin => "argmin",
            Reduction::ArgMax => "argmax",
            Reduction::SquaredDeviations => "squared_deviations",
        }
    }
}

/// The distribution of [`Array::random`] values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// Normal with mean `a` and standard deviation `b`.
    Normal,
    /// Uniform on `[a, b)`.
    Uniform,
}

/// What a node computes.
#[derive(Debug)]
pub enum NodeKind {
    /// A stored array.
    Stored(Arc<Stored>),
    /// Every element the same value.
    Full(Scalar),
    /// `start + step · i` (1-d).
    Arange {
        /// First value.
        start: Scalar,
        /// Increment.
        step: Scalar,
    },
    /// Keyed random values: element `i` (C order) depends only on the seed,
    /// `i` and the distribution.
    Random {
        /// The distribution.
        dist: Distribution,
        /// The seed.
        seed: u64,
        /// Mean or lower bound.
        a: f64,
        /// Standard deviation or upper bound.
        b: f64,
    },
    /// An elementwise operation; operands have the node's shape, and the
    /// operation's loop dtype (`where`'s condition is boolean).
    Map {
        /// The operation.
        op: Op,
        /// The dtype it computes in.
        loop_dtype: Dtype,
        /// Operands.
        args: Vec<Array>,
    },
    /// An index map of one operand.
    View {
        /// The map.
        op: ViewOp,
        /// Operand.
        arg: Array,
    },
    /// Operands joined along an axis (same dtype, equal other axes).
    Concat {
        /// The axis.
        axis: usize,
        /// Operands.
        parts: Vec<Array>,
    },
    /// A reduction over axes (removed; `keepdims` is a view above).
    Reduce {
        /// The reduction.
        op: Reduction,
        /// Reduced axes of the operand (sorted).
        axes: Vec<usize>,
        /// Operand.
        arg: Array,
    },
    /// A running sum or product along an axis (NumPy's `cumsum` /
    /// `cumprod`), accumulated in order in the result's dtype.
    Scan {
        /// [`Reduction::Sum`] or [`Reduction::Prod`].
        op: Reduction,
        /// The axis.
        axis: usize,
        /// Operand, in the result's dtype.
        arg: Array,
    },
    /// A contraction, computed in float64.
    Einsum {
        /// Parsed subscripts (no repeated labels within an operand).
        sub: Subscripts,
        /// Operands, float64, with each label's full size.
        args: Vec<Array>,
    },
}

/// A node of the graph.
#[derive(Debug)]
pub struct Node {
    /// What it computes.
    pub kind: NodeKind,
    /// Its shape.
    pub shape: Vec<usize>,
    /// Its dtype.
    pub dtype: Dtype,
    /// Whether it is a Python scalar (weak in type promotion).
    pub weak: bool,
    /// A process-unique id (to compute shared nodes once).
    pub id: usize,
    /// The structural key it is interned under.
    key: String,
}

/// A lazy n-dimensional array: a node of an expression graph. Cloning is
/// cheap (shared).
#[derive(Debug, Clone)]
pub struct Array(pub(crate) Arc<Node>);

static NEXT_ID: AtomicUsize = AtomicUsize::new(0);

/// Live nodes by structural key (entries of dropped nodes are removed).
fn interned() -> &'static Mutex<HashMap<String, Weak<Node>>> {
    static TABLE: OnceLock<Mutex<HashMap<String, Weak<Node>>>> = OnceLock::new();
    TABLE.get_or_init(Default::default)
}

/// The structural key of a node: its operation and parameters, its
/// operands' ids (operands are interned first, so equal operands have equal
/// ids), shape, dtype and weakness.
fn key_of(kind: &NodeKind, shape: &[usize], dtype: Dtype, weak: bool) -> String {
    let ids = |v: &[Array]| v.iter().map(|a| a.0.id.to_string()).collect::<Vec<_>>().join(",");
    let body = match kind {
        NodeKind::Stored(s) => {
            // A file is the one opened (its header, its metadata): the same
            // path opened again may hold another array by then.
            let place = match &s.storage {
                super::store::Storage::Borrowed { ptr, len, .. } => format!("mem:{ptr:p}:{len}"),
                super::store::Storage::Npy(_) => format!("npy:{:p}", Arc::as_ptr(s)),
                super::store::Storage::Zarr(_) => format!("zarr:{:p}", Arc::as_ptr(s)),
                super::store::Storage::Owned(_) => format!("owned:{:p}", Arc::as_ptr(s)),
            };
            format!("stored:{place}:{:?}:{:?}:{}", s.endian, s.strides, s.base)
        }
        NodeKind::Full(v) => format!("full:{v:?}"),
        NodeKind::Arange { start, step } => format!("arange:{start:?}:{step:?}"),
        NodeKind::Random { dist, seed, a, b } => format!("random:{dist:?}:{seed}:{a:?}:{b:?}"),
        NodeKind::Map { op, loop_dtype, args } => format!("map:{op:?}:{loop_dtype:?}:{}", ids(args)),
        // An index array by its length and a 128-bit hash of its values (its
        // values written out made the key 2-3 times the index's own bytes).
        NodeKind::View { op: ViewOp::Take { axis, indices }, arg } => {
            let hash = |salt: u64| {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                (salt, &indices[..]).hash(&mut h);
                h.finish()
            };
            format!("view:take:{axis}:{}:{:016x}{:016x}:{}", indices.len(), hash(0), hash(1), arg.0.id)
        }
        NodeKind::View { op, arg } => format!("view:{op:?}:{}", arg.0.id),
        NodeKind::Concat { axis, parts } => format!("concat:{axis}:{}", ids(parts)),
        NodeKind::Reduce { op, axes, arg } => format!("reduce:{op:?}:{axes:?}:{}", arg.0.id),
        NodeKind::Scan { op, axis, arg } => format!("scan:{op:?}:{axis}:{}", arg.0.id),
        NodeKind::Einsum { sub, args } => format!("einsum:{sub:?}:{}", ids(args)),
    };
    format!("{body}|{shape:?}|{dtype:?}|{weak}")
}

/// Whether two nodes of one key take the same indices (a key holds an
/// index array's hash, not its values): always, but for a hash collision.
fn same_indices(a: &NodeKind, b: &NodeKind) -> bool {
    match (a, b) {
        (
            NodeKind::View { op: ViewOp::Take { indices: x, .. }, .. },
            NodeKind::View { op: ViewOp::Take { indices: y, .. }, .. },
        ) => x == y,
        _ => true,
    }
}

/// A node's operands, taken out of it (to drop a graph without recursion).
fn take_operands(kind: &mut NodeKind) -> Vec<Array> {
    /// Stands in for a single operand taken out of a dropped node.
    fn placeholder() -> Array {
        static NONE: OnceLock<Array> = OnceLock::new();
        NONE.get_or_init(|| Array::scalar(Scalar::Bool(false), Some(Dtype::Bool), false)).clone()
    }
    match kind {
        NodeKind::Map { args, .. } | NodeKind::Einsum { args, .. } | NodeKind::Concat { parts: args, .. } => {
            std::mem::take(args)
        }
        NodeKind::View { arg, .. } | NodeKind::Reduce { arg, .. } | NodeKind::Scan { arg, .. } => {
            vec![std::mem::replace(arg, placeholder())]
        }
        _ => Vec::new(),
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        {
            let mut table = interned().lock().unwrap_or_else(PoisonError::into_inner);
            if table.get(&self.key).is_some_and(|w| w.strong_count() == 0) {
                table.remove(&self.key);
            }
        }
        // Operands this node held the last reference to are dropped here,
        // in a loop, so a chain of any length never recurses.
        let mut stack = take_operands(&mut self.kind);
        while let Some(a) = stack.pop() {
            if let Some(mut node) = Arc::into_inner(a.0) {
                stack.extend(take_operands(&mut node.kind));
            }
        }
    }
}

/// NumPy's error for an axis longer than a machine word counts (lazy
/// arrays may be larger than memory, and are refused when computed).
pub(crate) fn too_big() -> Error {
    value_error("array is too big; `arr.size * arr.dtype.itemsize` is larger than the maximum possible size.".into())
}

fn value_error(message: String) -> Error {
    Error::Expression { kind: ExpressionFault::Value, message }
}

/// NumPy's broadcast of `shapes`.
///
/// # Errors
/// [`Error::Broadcast`] naming every shape.
pub fn broadcast_shapes(shapes: &[&[usize]]) -> Result<Vec<usize>> {
    let nd = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; nd];
    for s in shapes {
        for (k, &n) in s.iter().enumerate() {
            let o = &mut out[nd - s.len() + k];
            if *o == 1 {
                *o = n;
            } else if n != 1 && n != *o {
                return Err(Error::Broadcast { shapes: shapes.iter().map(|s| s.to_vec()).collect() });
            }
        }
    }
    Ok(out)
}

impl Array {
    pub(crate) fn new(kind: NodeKind, shape: Vec<usize>, dtype: Dtype) -> Array {
        Array::interned(kind, shape, dtype, false)
    }

    /// The live node equal to this one, or a new node.
    fn interned(kind: NodeKind, shape: Vec<usize>, dtype: Dtype, weak: bool) -> Array {
        let key = key_of(&kind, &shape, dtype, weak);
        let mut table = interned().lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(node) = table.get(&key).and_then(Weak::upgrade).filter(|n| same_indices(&n.kind, &kind)) {
            drop(table);
            return Array(node);
        }
        let node =
            Arc::new(Node { kind, shape, dtype, weak, id: NEXT_ID.fetch_add(1, Ordering::Relaxed), key: key.clone() });
        table.insert(key, Arc::downgrade(&node));
        Array(node)
    }

    /// A process-unique id of the node (equal for equal nodes).
    pub(crate) fn id(&self) -> usize {
        self.0.id
    }

    /// The node's operands.
    pub(crate) fn operands(&self) -> &[Array] {
        match &self.0.kind {
            NodeKind::Map { args, .. } | NodeKind::Einsum { args, .. } | NodeKind::Concat { parts: args, .. } => args,
            NodeKind::View { arg, .. } | NodeKind::Reduce { arg, .. } | NodeKind::Scan { arg, .. } => {
                std::slice::from_ref(arg)
            }
            _ => &[],
        }
    }

    /// Every node of the graphs under `roots` once, operands before the
    /// nodes that use them, without recursion.
    pub(crate) fn post_order(roots: &[Array]) -> Vec<Array> {
        let mut seen = std::collections::HashSet::new();
        let mut out = Vec::new();
        let mut stack: Vec<(Array, usize)> = roots.iter().rev().map(|r| (r.clone(), 0)).collect();
        while let Some((a, i)) = stack.pop() {
            if i == 0 && !seen.insert(a.id()) {
                continue;
            }
            match a.operands().get(i).cloned() {
                Some(next) => {
                    stack.push((a, i + 1));
                    if !seen.contains(&next.id()) {
                        stack.push((next, 0));
                    }
                }
                None => out.push(a),
            }
        }
        out
    }

    /// The memory spans and files the stored arrays under this expression
    /// are read from, each once (intermediates the expression owns are not
    /// listed): writing to any of them before the expression is evaluated
    /// changes its result.
    pub fn places(&self) -> Vec<super::store::Place> {
        let mut out = Vec::new();
        for a in Array::post_order(std::slice::from_ref(self)) {
            if let NodeKind::Stored(s) = &a.0.kind {
                if let Some(p) = s.place().filter(|p| !out.contains(p)) {
                    out.push(p);
                }
            }
        }
        out
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.0.shape
    }

    /// The dtype.
    pub fn dtype(&self) -> Dtype {
        self.0.dtype
    }

    /// Number of elements.
    pub fn size(&self) -> usize {
        self.0.shape.iter().product()
    }

    /// The node.
    pub(crate) fn node(&self) -> &Node {
        &self.0
    }

    /// A stored array as a leaf.
    pub fn stored(s: Stored) -> Array {
        let (shape, dtype) = (s.shape.clone(), s.dtype);
        Array::new(NodeKind::Stored(Arc::new(s)), shape, dtype)
    }

    /// A `.npy` file as a leaf (read lazily).
    ///
    /// # Errors
    /// As [`crate::io::NpyFile::open`].
    pub fn from_npy(path: impl AsRef<std::path::Path>) -> Result<Array> {
        Ok(Array::stored(Stored::npy(path.as_ref())?))
    }

    /// A Zarr array as a leaf (read lazily).
    ///
    /// # Errors
    /// As [`crate::io::ZarrInput::open`].
    pub fn from_zarr(path: impl AsRef<std::path::Path>) -> Result<Array> {
        Ok(Array::stored(Stored::zarr(path.as_ref())?))
    }

    /// An owned `f64` array in C order.
    ///
    /// # Errors
    /// [`Error::Expression`] when `values` does not hold the shape's elements.
    pub fn from_f64(values: Vec<f64>, shape: &[usize]) -> Result<Array> {
        if values.len() != shape.iter().product::<usize>() {
            return Err(value_error(format!(
                "cannot reshape array of size {} into shape {}",
                values.len(),
                crate::error::shape_text(shape)
            )));
        }
        let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        Ok(Array::stored(Stored::owned(bytes, Dtype::F64, shape.to_vec())))
    }

    /// A scalar (0-d); `weak` for a Python scalar (NEP 50), whose dtype is
    /// then its kind's default.
    pub fn scalar(value: Scalar, dtype: Option<Dtype>, weak: bool) -> Array {
        let dtype = dtype.unwrap_or_else(|| value.default_dtype());
        let value = super::types::cast_scalar(value, dtype);
        Array::interned(NodeKind::Full(value), Vec::new(), dtype, weak)
    }

    /// `numpy.full(shape, value, dtype)`.
    pub fn full(shape: &[usize], value: Scalar, dtype: Dtype) -> Array {
        Array::new(NodeKind::Full(super::types::cast_scalar(value, dtype)), shape.to_vec(), dtype)
    }

    /// `numpy.arange` of `n` values `start + step · i` in `dtype`.
    pub fn arange(start: Scalar, step: Scalar, n: usize, dtype: Dtype) -> Array {
        Array::new(NodeKind::Arange { start, step }, vec![n], dtype)
    }

    /// Random values of `shape`: element `i` (C order) depends only on
    /// `seed`, `i` and the distribution (SplitMix64 keys, Box–Muller for the
    /// normal), so any blocking gives the same values; `dtype` must be a
    /// float dtype.
    ///
    /// # Errors
    /// [`Error::Expression`] for a non-float dtype or bad parameters.
    pub fn random(dist: Distribution, shape: &[usize], seed: u64, a: f64, b: f64, dtype: Dtype) -> Result<Array> {
        if !dtype.is_float() {
            return Err(Error::Expression {
                kind: ExpressionFault::Type,
                message: format!("random values need a float dtype, not {}", dtype.name()),
            });
        }
        if !(a.is_finite() && b.is_finite()) || (dist == Distribution::Normal && b < 0.0) {
            return Err(value_error(format!("invalid distribution parameters ({a}, {b})")));
        }
        Ok(Array::new(NodeKind::Random { dist, seed, a, b }, shape.to_vec(), dtype))
    }

    /// `self` broadcast to `shape` and cast to `dtype` (no node when already so).
    fn conform(&self, shape: &[usize], dtype: Dtype) -> Result<Array> {
        let mut a = self.clone();
        if a.dtype() != dtype {
            a = Array::new(
                NodeKind::Map { op: Op::Cast, loop_dtype: a.dtype(), args: vec![a.clone()] },
                a.shape().to_vec(),
                dtype,
            );
        }
        if a.shape() != shape {
            a = a.view(ViewOp::BroadcastTo(shape.to_vec()))?;
        }
        Ok(a)
    }

    /// `astype(dtype)` (NumPy's unsafe casting).
    pub fn astype(&self, dtype: Dtype) -> Array {
        if self.dtype() == dtype {
            return self.clone();
        }
        Array::new(
            NodeKind::Map { op: Op::Cast, loop_dtype: self.dtype(), args: vec![self.clone()] },
            self.shape().to_vec(),
            dtype,
        )
    }

    /// A ufunc of one or two operands (`where` has its own constructor).
    ///
    /// # Errors
    /// [`Error::Broadcast`], or [`Error::Expression`] when NumPy has no
    /// loop for the operand types.
    pub fn ufunc(op: Op, args: &[Array]) -> Result<Array> {
        if args.len() != op.arity() || op == Op::Where || op == Op::Cast {
            return Err(value_error(format!("{} takes {} operands", op.name(), op.arity())));
        }
        if let Some(exact) = exact_integer_comparison(op, args)? {
            return Ok(exact);
        }
        let ops: Vec<Operand> = args.iter().map(|a| Operand { dtype: a.dtype(), weak: a.0.weak }).collect();
        let common = result_type(&ops);
        let (loop_dtype, out) = op.resolve(common)?;
        // A Python integer outside the integer loop it meets is an overflow
        // (NumPy 2), not where the loop is float (true division of integers);
        // comparisons compare true values ([`exact_integer_comparison`]).
        for a in args {
            let Some(value) = python_int(a) else { continue };
            let Some((lo, hi)) = int_range(loop_dtype) else { continue };
            if value < lo || value > hi {
                return Err(Error::Expression {
                    kind: ExpressionFault::Overflow,
                    message: format!("Python integer {value} out of bounds for {}", common.name()),
                });
            }
        }
        let shapes: Vec<&[usize]> = args.iter().map(Array::shape).collect();
        let shape = broadcast_shapes(&shapes)?;
        let args = args.iter().map(|a| a.conform(&shape, loop_dtype)).collect::<Result<Vec<_>>>()?;
        Ok(Array::new(NodeKind::Map { op, loop_dtype, args }, shape, out))
    }

    /// `numpy.where(cond, x, y)`.
    ///
    /// # Errors
    /// [`Error::Broadcast`].
    pub fn where_(cond: &Array, x: &Array, y: &Array) -> Result<Array> {
        let dtype =
            result_type(&[Operand { dtype: x.dtype(), weak: x.0.weak }, Operand { dtype: y.dtype(), weak: y.0.weak }]);
        let shape = broadcast_shapes(&[cond.shape(), x.shape(), y.shape()])?;
        let args = vec![cond.conform(&shape, Dtype::Bool)?, x.conform(&shape, dtype)?, y.conform(&shape, dtype)?];
        Ok(Array::new(NodeKind::Map { op: Op::Where, loop_dtype: dtype, args }, shape, dtype))
    }

    /// An index map of `self`.
    ///
    /// # Errors
    /// [`Error::Expression`] when the map does not apply to the shape.
    pub fn view(&self, op: ViewOp) -> Result<Array> {
        let shape = op.out_shape(self.shape())?;
        Ok(Array::new(NodeKind::View { op, arg: self.clone() }, shape, self.dtype()))
    }

    /// `numpy.concatenate(parts, axis)` (dtypes promoted as NumPy does).
    ///
    /// # Errors
    /// [`Error::Expression`] for no parts, a bad axis or mismatched shapes.
    pub fn concatenate(parts: &[Array], axis: usize) -> Result<Array> {
        let first = parts.first().ok_or_else(|| value_error("need at least one array to concatenate".into()))?;
        let nd = first.shape().len();
        if nd == 0 {
            return Err(value_error("zero-dimensional arrays cannot be concatenated".into()));
        }
        if axis >= nd {
            return Err(value_error(format!("axis {axis} is out of bounds for array of dimension {nd}")));
        }
        let dtype = result_type(&parts.iter().map(|p| Operand { dtype: p.dtype(), weak: false }).collect::<Vec<_>>());
        let mut shape = first.shape().to_vec();
        shape[axis] = 0;
        for (i, p) in parts.iter().enumerate() {
            let s = p.shape();
            if s.len() != nd {
                return Err(value_error(format!(
                    "all the input array dimensions except for the concatenation axis must match exactly, but along dimension 0, the array at index 0 has {} dimension(s) and the array at index {i} has {} dimension(s)",
                    nd,
                    s.len()
                )));
            }
            for k in (0..nd).filter(|&k| k != axis) {
                if s[k] != first.shape()[k] {
                    return Err(value_error(format!(
                        "all the input array dimensions except for the concatenation axis must match exactly, but along dimension {k}, the array at index 0 has size {} and the array at index {i} has size {}",
                        first.shape()[k],
                        s[k]
                    )));
                }
            }
            shape[axis] = shape[axis].checked_add(s[axis]).ok_or_else(too_big)?;
        }
        let parts = parts.iter().map(|p| Ok(p.astype(dtype))).collect::<Result<Vec<_>>>()?;
        if parts.len() == 1 {
            return Ok(parts[0].clone());
        }
        Ok(Array::new(NodeKind::Concat { axis, parts }, shape, dtype))
    }

    /// A reduction over `axes` (sorted, distinct, in range) of `self`, with
    /// `keepdims`; `dtype` is NumPy's `dtype=` argument (the operand is
    /// cast to it first).
    ///
    /// # Errors
    /// [`Error::Expression`] for an empty reduction without identity
    /// (`min`, `max`, `argmin`, `argmax`) or bad axes.
    pub fn reduce(&self, op: Reduction, axes: &[usize], keepdims: bool, dtype: Option<Dtype>) -> Result<Array> {
        let nd = self.shape().len();
        if axes.iter().any(|&a| a >= nd) || axes.windows(2).any(|w| w[0] >= w[1]) {
            return Err(value_error(format!("invalid axes {axes:?} for an array of dimension {nd}")));
        }
        let count: usize = axes.iter().map(|&a| self.shape()[a]).product();
        if count == 0 && matches!(op, Reduction::ArgMin | Reduction::ArgMax) {
            return Err(value_error(format!("attempt to get {} of an empty sequence", op.name())));
        }
        if count == 0 && matches!(op, Reduction::Min | Reduction::Max) {
            return Err(value_error(format!(
                "zero-size array to reduction operation {} which has no identity",
                match op {
                    Reduction::Min => "minimum",
                    Reduction::Max => "maximum",
                    _ => op.name(),
                }
            )));
        }
        if matches!(op, Reduction::ArgMin | Reduction::ArgMax) && axes.len() > 1 && axes.len() != nd {
            return Err(value_error(format!("{} takes one axis or all of them", op.name())));
        }
        let arg = match dtype {
            Some(d) => self.astype(d),
            None => self.clone(),
        };
        let a = arg.dtype();
        let out = match op {
            Reduction::Sum | Reduction::Prod | Reduction::Mean if dtype.is_some() => a,
            Reduction::Sum | Reduction::Prod => match kind(a) {
                Kind::Float => a,
                _ if a.is_unsigned_int() => Dtype::U64,
                _ => Dtype::I64,
            },
            Reduction::Mean => {
                if kind(a) == Kind::Float {
                    a
                } else {
                    Dtype::F64
                }
            }
            Reduction::Min | Reduction::Max => a,
            Reduction::Any | Reduction::All => Dtype::Bool,
            Reduction::ArgMin | Reduction::ArgMax => Dtype::I64,
            Reduction::SquaredDeviations => Dtype::F64,
        };
        let shape: Vec<usize> = (0..nd).filter(|k| !axes.contains(k)).map(|k| self.shape()[k]).collect();
        let reduced =
            super::rewrite::fused_sum(Array::new(NodeKind::Reduce { op, axes: axes.to_vec(), arg }, shape, out));
        if keepdims && !axes.is_empty() {
            reduced.view(ViewOp::ExpandDims(axes.to_vec()))
        } else {
            Ok(reduced)
        }
    }

    /// NumPy's `cumsum` (`op` [`Reduction::Sum`]) or `cumprod`
    /// ([`Reduction::Prod`]) along `axis`: each element the sum (product) of
    /// the elements before it and itself, accumulated in order in the
    /// result's dtype (NumPy's: `dtype`, else booleans and integers narrower
    /// than 64 bits widen to int64 / uint64), so the values are NumPy's.
    ///
    /// # Errors
    /// [`Error::Expression`] for another `op` or an axis out of range.
    pub fn cumulative(&self, op: Reduction, axis: usize, dtype: Option<Dtype>) -> Result<Array> {
        let nd = self.shape().len();
        if axis >= nd || !matches!(op, Reduction::Sum | Reduction::Prod) {
            return Err(value_error(format!("invalid cumulative {} over axis {axis} of {nd}", op.name())));
        }
        let out = dtype.unwrap_or(match kind(self.dtype()) {
            Kind::Float => self.dtype(),
            _ if self.dtype().is_unsigned_int() => Dtype::U64,
            _ => Dtype::I64,
        });
        let arg = self.astype(out);
        Ok(Array::new(NodeKind::Scan { op, axis, arg }, self.shape().to_vec(), out))
    }

    /// Variance (`std = false`) or standard deviation over `axes` with `ddof`:
    /// the sum of squared deviations from the mean in one pass
    /// ([`Reduction::SquaredDeviations`]: each chunk's two-pass moments in
    /// memory, chunks merged by Chan, Golub and LeVeque's update with the
    /// mean carried to twice the precision), divided by `count - ddof`.
    ///
    /// # Errors
    /// As [`Array::reduce`].
    pub fn var(&self, axes: &[usize], keepdims: bool, ddof: f64, dtype: Option<Dtype>, std: bool) -> Result<Array> {
        let out = dtype.unwrap_or(if self.dtype().is_float() { self.dtype() } else { Dtype::F64 });
        let x = self.astype(Dtype::F64);
        let sum = x.reduce(Reduction::SquaredDeviations, axes, keepdims, None)?;
        let count: usize = axes.iter().map(|&a| self.shape()[a]).product();
        // NumPy's maximum(count - ddof, 0): a NaN ddof gives NaN.
        let d = count as f64 - ddof;
        let denom = Array::scalar(Scalar::Float(if d.is_nan() { d } else { d.max(0.0) }), None, true);
        let mut v = Array::ufunc(Op::TrueDivide, &[sum, denom])?;
        if std {
            v = Array::ufunc(Op::Sqrt, &[v])?;
        }
        Ok(v.astype(out))
    }

    /// `numpy.einsum(subscripts, *args)` in the operands' result type:
    /// float results are contracted in float64 (GEMM tiles) and cast;
    /// integer and boolean results exactly, as NumPy's (products and sums
    /// wrapping in the result type; booleans: any of the products), as a
    /// reduction of the broadcast products.
    ///
    /// # Errors
    /// [`Error::Expression`] for bad subscripts or mismatched sizes.
    pub fn einsum(subscripts: &str, args: &[Array]) -> Result<Array> {
        let shapes: Vec<Vec<usize>> = args.iter().map(|a| a.shape().to_vec()).collect();
        let sub = crate::linalg::einsum::parse(subscripts, &shapes).map_err(|e| value_error(e.to_string()))?;
        let sizes = crate::linalg::einsum::label_sizes(&sub, &shapes);
        let dtype = result_type(&args.iter().map(|a| Operand { dtype: a.dtype(), weak: a.0.weak }).collect::<Vec<_>>());
        // float64 loses integers above 2^53 and does not wrap.
        let exact = kind(dtype) != Kind::Float;
        let mut inputs = Vec::with_capacity(args.len());
        let mut labels = Vec::with_capacity(args.len());
        for (a, l) in args.iter().zip(&sub.inputs) {
            // Diagonals of repeated labels, then broadcasts of length-1 axes.
            let (mut a, mut l) = (a.astype(if exact { dtype } else { Dtype::F64 }), l.clone());
            while let Some((i, j)) = repeated(&l) {
                a = a.view(ViewOp::Diagonal(i, j))?;
                l.remove(j);
            }
            let full: Vec<usize> = l.iter().map(|c| sizes[c]).collect();
            if a.shape() != full.as_slice() {
                a = a.view(ViewOp::BroadcastTo(full))?;
            }
            inputs.push(a);
            labels.push(l);
        }
        let shape: Vec<usize> = sub.output.iter().map(|c| sizes[c]).collect();
        if exact {
            return exact_einsum(&sub.output, &labels, inputs, &sizes, dtype);
        }
        let sub = Subscripts { inputs: labels, output: sub.output };
        let (sub, inputs) = super::rewrite::split_products(sub, inputs);
        let f64_out = Array::new(NodeKind::Einsum { sub, args: inputs }, shape, Dtype::F64);
        Ok(f64_out.astype(dtype))
    }
}

/// An integer or boolean einsum as NumPy computes it: each operand (distinct
/// `labels`, extents `sizes`) viewed over every label (output labels first,
/// then the summed ones, absent labels broadcast), their product in
/// `dtype`, summed over the summed labels and cast back to `dtype`
/// (sums of narrow integers wrap to the same values; booleans become any).
fn exact_einsum(
    output: &[u8],
    labels: &[Vec<u8>],
    inputs: Vec<Array>,
    sizes: &BTreeMap<u8, usize>,
    dtype: Dtype,
) -> Result<Array> {
    let mut all: Vec<u8> = output.to_vec();
    for l in labels.iter().flatten() {
        if !all.contains(l) {
            all.push(*l);
        }
    }
    let full: Vec<usize> = all.iter().map(|c| sizes[c]).collect();
    let mut product: Option<Array> = None;
    for (a, l) in inputs.into_iter().zip(labels) {
        // Its axes in the order of `all`, then length-1 axes for the labels it lacks.
        let mut order: Vec<usize> = (0..l.len()).collect();
        order.sort_by_key(|&i| all.iter().position(|c| *c == l[i]));
        let mut a = if order.iter().enumerate().all(|(k, &i)| k == i) { a } else { a.view(ViewOp::Transpose(order))? };
        let missing: Vec<usize> = (0..all.len()).filter(|&p| !l.contains(&all[p])).collect();
        if !missing.is_empty() {
            a = a.view(ViewOp::ExpandDims(missing))?;
        }
        if a.shape() != full.as_slice() {
            a = a.view(ViewOp::BroadcastTo(full.clone()))?;
        }
        product = Some(match product {
            None => a,
            Some(p) => Array::ufunc(Op::Multiply, &[p, a])?.astype(dtype),
        });
    }
    let product = product.ok_or_else(|| value_error("einsum needs at least one operand".into()))?;
    let summed: Vec<usize> = (output.len()..all.len()).collect();
    if summed.is_empty() {
        return Ok(product.astype(dtype));
    }
    Ok(product.reduce(Reduction::Sum, &summed, false, None)?.astype(dtype))
}

/// The values an integer dtype holds, or `None` for other dtypes.
/// The value of a Python integer (a weak integer scalar), else `None`.
fn python_int(a: &Array) -> Option<i128> {
    match (&a.0.kind, a.0.weak) {
        (NodeKind::Full(Scalar::Int(v)), true) => Some(i128::from(*v)),
        (NodeKind::Full(Scalar::UInt(v)), true) => Some(i128::from(*v)),
        _ => None,
    }
}

/// Whether comparison `op` holds between a left and a right operand that
/// compare as `ord`; `None` for an operation that is not a comparison.
fn comparison_holds(op: Op, ord: std::cmp::Ordering) -> Option<bool> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    Some(match op {
        Op::Equal => ord == Equal,
        Op::NotEqual => ord != Equal,
        Op::Less => ord == Less,
        Op::LessEqual => ord != Greater,
        Op::Greater => ord == Greater,
        Op::GreaterEqual => ord != Less,
        _ => return None,
    })
}

/// The comparisons NumPy 2 makes by the true values where promotion would
/// round them in float64: an integer array against a Python integer beyond
/// its dtype (every element compares alike: a constant), and a signed
/// integer array against a uint64 one (NumPy's `qQ->?` loops: a negative
/// value is below every uint64, the others compare as uint64). `None` for
/// every other operation.
///
/// # Errors
/// [`Error::Broadcast`].
fn exact_integer_comparison(op: Op, args: &[Array]) -> Result<Option<Array>> {
    use std::cmp::Ordering::{Greater, Less};
    let ([x, y], Some(_)) = (args, comparison_holds(op, Less)) else { return Ok(None) };
    let shape = broadcast_shapes(&[x.shape(), y.shape()])?;
    let constant = |ord| Array::full(&shape, Scalar::Bool(comparison_holds(op, ord) == Some(true)), Dtype::Bool);
    for (value, array, array_left) in [(python_int(y), x, true), (python_int(x), y, false)] {
        let (Some(value), Some((lo, hi))) = (value, int_range(array.dtype())) else { continue };
        if !array.0.weak && (value < lo || value > hi) {
            return Ok(Some(constant(if (value > hi) == array_left { Less } else { Greater })));
        }
    }
    let signed = |a: &Array| !a.0.weak && matches!(a.dtype(), Dtype::I8 | Dtype::I16 | Dtype::I32 | Dtype::I64);
    let (s, s_left) = match (x.dtype(), y.dtype()) {
        (_, Dtype::U64) if signed(x) && !y.0.weak => (x, true),
        (Dtype::U64, _) if signed(y) && !x.0.weak => (y, false),
        _ => return Ok(None),
    };
    let negative = Array::ufunc(Op::Less, &[s.clone(), Array::scalar(Scalar::Int(0), None, true)])?;
    let unsigned = s.astype(Dtype::U64);
    let compared =
        if s_left { Array::ufunc(op, &[unsigned, y.clone()])? } else { Array::ufunc(op, &[x.clone(), unsigned])? };
    let below = Array::full(
        &[],
        Scalar::Bool(comparison_holds(op, if s_left { Less } else { Greater }) == Some(true)),
        Dtype::Bool,
    );
    Array::where_(&negative, &below, &compared).map(Some)
}

fn int_range(d: Dtype) -> Option<(i128, i128)> {
    Some(match d {
        Dtype::I8 => (i8::MIN.into(), i8::MAX.into()),
        Dtype::I16 => (i16::MIN.into(), i16::MAX.into()),
        Dtype::I32 => (i32::MIN.into(), i32::MAX.into()),
        Dtype::I64 => (i64::MIN.into(), i64::MAX.into()),
        Dtype::U8 => (0, u8::MAX.into()),
        Dtype::U16 => (0, u16::MAX.into()),
        Dtype::U32 => (0, u32::MAX.into()),
        Dtype::U64 => (0, u64::MAX.into()),
        _ => return None,
    })
}

fn repeated(labels: &[u8]) -> Option<(usize, usize)> {
    for j in 0..labels.len() {
        if let Some(i) = labels[..j].iter().position(|&c| c == labels[j]) {
            return Some((i, j));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Takes of equal indices are one node, of other indices (of the same
    /// length) another, though their keys hold a hash of the indices, not
    /// the indices (a key of the values written out was larger than them).
    #[test]
    fn takes_are_interned_by_their_indices() {
        let x = Array::from_f64((0..30).map(f64::from).collect(), &[10, 3]).unwrap();
        let a = x.take(0, &[3, 1, 4, 1, 5]).unwrap();
        let b = x.take(0, &[3, 1, 4, 1, -5]).unwrap();
        let c = x.take(0, &[3, 1, 4, 1, 6]).unwrap();
        assert_eq!(b.take_indices(), Some(&[3, 1, 4, 1, 5][..]));
        assert_eq!(x.take_indices(), None);
        assert_eq!(a.id(), b.id());
        assert_ne!(a.id(), c.id());
        let key = key_of(&a.0.kind, a.shape(), a.dtype(), false);
        assert!(key.len() < 100, "{key}");
        // Two kinds of one key (a collision) stay two nodes.
        assert!(!same_indices(&a.0.kind, &c.0.kind) && same_indices(&a.0.kind, &b.0.kind));
    }

    /// An expression lists the borrowed memory and the files it reads, each
    /// once, and not the memory it owns.
    #[test]
    fn places_are_the_borrowed_spans_and_files_read() {
        let values: Arc<Vec<f64>> = Arc::new((0..12).map(f64::from).collect());
        let (ptr, len) = (values.as_ptr() as *const u8, values.len() * 8);
        // SAFETY: `values` is kept alive by the owner and never changed.
        let stored = unsafe { Stored::borrowed(ptr, len, values.clone(), Dtype::F64, vec![4, 3], vec![3, 1], 0) };
        let borrowed = Array::stored(stored);
        let owned = Array::from_f64(vec![1.0; 12], &[4, 3]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.npy");
        crate::io::write_npy(&path, Dtype::F64, &[4, 3], &[2.0f64; 12], |v, b| b.extend_from_slice(&v.to_le_bytes()))
            .unwrap();
        let file = Array::from_npy(&path).unwrap();
        let sum = Array::ufunc(Op::Add, &[borrowed.clone(), owned]).unwrap();
        let expr = Array::ufunc(Op::Multiply, &[sum, Array::ufunc(Op::Add, &[file, borrowed]).unwrap()]).unwrap();
        let places = expr.places();
        assert_eq!(places.len(), 2, "{places:?}");
        assert!(places.contains(&super::super::store::Place::Memory { start: ptr as usize, len }));
        assert!(places.contains(&super::super::store::Place::File(path)));
    }
}
