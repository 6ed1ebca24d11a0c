//! Index maps: transposes, broadcasts, slices, tiles, repeats and
//! reshapes as maps from an array's coordinates to the element offsets of
//! the stored array below them, never as copies.
//!
//! A [`ViewMap`] is *separable*: the offset of element `(i_0, …, i_{n-1})`
//! is `base + Σ_k c_k(i_k)`, where each `c_k` is a sum of terms
//! `coef · chain(i_k)` and a chain is a short list of integer steps (affine,
//! modulo for tiles, division for repeats). Composing views keeps this form,
//! so any stack of views over a stored array costs one table of
//! `Σ_k extent_k` integers per tile, whatever the stack.
//!
//! A reshape that cannot stay separable (`(6, 4) → (4, 6)` of a transposed
//! array; `repeat(x, 7, axis=0).reshape(7, n, …)` when 7 does not divide
//! `n`) makes a [`Joint`] part: `coef · chain(x)` of the flat index `x` of
//! the axes it merged, which is itself a separable sum (terms tagged with
//! the joint). A tile's offsets then cost one chain per element instead of
//! per axis, and nothing is materialised; only a reshape of a joint's own
//! terms that does not separate returns `None` (the planner materialises
//! the array below it).

use std::sync::Arc;

use crate::error::{Error, ExpressionFault, Result};

/// One step of a coordinate chain.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Step {
    /// `x · mul + add` (a slice with a step; `mul` may be negative).
    Affine {
        /// Multiplier.
        mul: i64,
        /// Offset.
        add: i64,
    },
    /// `x mod m` (a tile of period `m`).
    Mod(u64),
    /// `x div r` (each element repeated `r` times).
    Div(u64),
    /// `indices[x]` (integer-array indexing).
    Take(Arc<[i64]>),
}

impl Step {
    #[inline]
    fn eval(&self, x: i64) -> i64 {
        match self {
            Step::Affine { mul, add } => x * mul + add,
            // Periods and repeats of 0 belong to empty axes, whose
            // coordinates are never read: any value will do.
            Step::Mod(m) => x.checked_rem_euclid(*m as i64).unwrap_or(0),
            Step::Div(r) => x.checked_div_euclid(*r as i64).unwrap_or(0),
            // So do coordinates outside the indices: a slice of an empty
            // axis is evaluated at its start (`x[[]][::-1]`, `x[[1, 0]][2:]`).
            Step::Take(indices) => usize::try_from(x).ok().and_then(|i| indices.get(i)).copied().unwrap_or(0),
        }
    }
}

/// `coef · chain(i)`: one axis's contribution to an element offset, or to
/// the flat index of a [`Joint`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// Elements per unit of the chain's result (a stride).
    pub coef: i64,
    /// Steps applied to the coordinate, first to last.
    pub chain: Vec<Step>,
    /// The joint (index into [`ViewMap::joints`]) whose flat index this
    /// term adds to, or `None` for the offset itself.
    pub joint: Option<usize>,
}

/// A part of the offset that does not separate: `Σ coef · chain(base + x)`
/// over its parts, `x` the sum of the terms tagged with it (over their
/// axes: the flat index of the axes a reshape merged).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joint {
    /// Constant part of the flat index.
    pub base: i64,
    /// `(coef, chain)`: elements per unit of the chain's result, and the
    /// steps applied to the flat index.
    pub parts: Vec<(i64, Vec<Step>)>,
}

impl Joint {
    /// The joint's part of the offset for flat index `x` (its terms' sum).
    #[inline]
    pub fn eval(&self, x: i64) -> i64 {
        self.parts.iter().map(|(coef, chain)| coef * chain.iter().fold(self.base + x, |x, s| s.eval(x))).sum()
    }
}

impl Term {
    #[inline]
    fn eval(&self, i: i64) -> i64 {
        self.coef * self.chain.iter().fold(i, |x, s| s.eval(x))
    }
}

/// How an expression depends on one axis (for the reduction rewrites).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dependence {
    /// Not at all (a broadcast axis).
    None,
    /// Only through `i mod m` (a tiled axis of period `m`).
    Periodic(u64),
    /// Only through `i div r` (every value repeated `r` times).
    Repeated(u64),
    /// Otherwise.
    Full,
}

impl Dependence {
    /// The dependence of an expression with two parts that depend as
    /// `self` and `other`.
    pub fn and(self, other: Dependence) -> Dependence {
        match (self, other) {
            (Dependence::None, d) | (d, Dependence::None) => d,
            (a, b) if a == b => a,
            _ => Dependence::Full,
        }
    }
}

/// A separable map from coordinates of `shape` to element offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewMap {
    /// Offset of element `(0, …, 0)` plus the constant parts of the terms.
    pub base: i64,
    /// The shape seen through the map.
    pub shape: Vec<usize>,
    /// The terms of each axis (empty for broadcast axes).
    pub axes: Vec<Vec<Term>>,
    /// Parts that do not separate (empty for most views).
    pub joints: Vec<Joint>,
}

/// An index-map operation on an array (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ViewOp {
    /// Axes reordered: result axis `k` is input axis `perm[k]`.
    Transpose(Vec<usize>),
    /// C-order reshape to the shape.
    Reshape(Vec<usize>),
    /// NumPy broadcast to the shape.
    BroadcastTo(Vec<usize>),
    /// New length-1 axes at these (sorted) positions of the result.
    ExpandDims(Vec<usize>),
    /// Length-1 axes removed (sorted positions).
    Squeeze(Vec<usize>),
    /// Each axis repeated as a whole `reps[k]` times (one rep per axis).
    Tile(Vec<usize>),
    /// Each element of `axis` repeated `repeats` times.
    Repeat {
        /// Copies of each element.
        repeats: usize,
        /// The axis.
        axis: usize,
    },
    /// Per axis `(start, step, len)`: elements `start + step · i`, `i < len`.
    Slice(Vec<(i64, i64, usize)>),
    /// The diagonal of axes `a < b` (equal lengths) as axis `a`; `b` removed.
    Diagonal(usize, usize),
    /// Elements `indices` (each in range) of `axis`, in that order
    /// (NumPy's `take`, integer-array indexing of one axis).
    Take {
        /// The axis.
        axis: usize,
        /// Positions along it.
        indices: Arc<[i64]>,
    },
}

fn bad(message: String) -> Error {
    Error::Expression { kind: ExpressionFault::Value, message }
}

impl ViewOp {
    /// The shape of the result for an input of shape `s`.
    ///
    /// # Errors
    /// [`Error::Expression`] when the operation does not apply to `s`
    /// (NumPy's messages).
    pub fn out_shape(&self, s: &[usize]) -> Result<Vec<usize>> {
        let text = crate::error::shape_text;
        Ok(match self {
            ViewOp::Transpose(perm) => {
                let mut seen = vec![false; s.len()];
                if perm.len() != s.len() || perm.iter().any(|&p| p >= s.len() || std::mem::replace(&mut seen[p], true))
                {
                    return Err(bad("axes don't match array".into()));
                }
                perm.iter().map(|&p| s[p]).collect()
            }
            ViewOp::Reshape(t) => {
                let (a, b) = (s.iter().product::<usize>(), t.iter().product::<usize>());
                if a != b {
                    return Err(bad(format!(
                        "cannot reshape array of size {a} into shape {}",
                        text(t).replace(", ", ",")
                    )));
                }
                t.clone()
            }
            ViewOp::BroadcastTo(t) => {
                if t.len() < s.len() {
                    return Err(bad("input operand has more dimensions than allowed by the axis remapping".into()));
                }
                if !s.iter().rev().zip(t.iter().rev()).all(|(&a, &b)| a == b || a == 1) {
                    return Err(bad(format!(
                        "operands could not be broadcast together with remapped shapes [original->remapped]: {}  and requested shape {}",
                        text(s).replace(", ", ","),
                        text(t).replace(", ", ",")
                    )));
                }
                t.clone()
            }
            ViewOp::ExpandDims(pos) => {
                let n = s.len() + pos.len();
                if pos.iter().any(|&p| p >= n) || pos.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(bad("expand_dims: bad axis positions".into()));
                }
                let mut it = s.iter();
                (0..n).map(|k| if pos.contains(&k) { 1 } else { *it.next().expect("n = len + pos") }).collect()
            }
            ViewOp::Squeeze(axes) => {
                if axes.iter().any(|&a| a >= s.len() || s[a] != 1) {
                    return Err(bad("cannot select an axis to squeeze out which has size not equal to one".into()));
                }
                (0..s.len()).filter(|k| !axes.contains(k)).map(|k| s[k]).collect()
            }
            ViewOp::Tile(reps) => {
                if reps.len() != s.len() {
                    return Err(bad("tile: one repetition per axis".into()));
                }
                s.iter()
                    .zip(reps)
                    .map(|(&a, &r)| a.checked_mul(r).ok_or_else(super::node::too_big))
                    .collect::<Result<_>>()?
            }
            ViewOp::Repeat { repeats, axis } => {
                if *axis >= s.len() {
                    return Err(bad("repeat: axis out of range".into()));
                }
                let mut t = s.to_vec();
                t[*axis] = t[*axis].checked_mul(*repeats).ok_or_else(super::node::too_big)?;
                t
            }
            ViewOp::Slice(items) => {
                if items.len() != s.len() {
                    return Err(bad("slice: one item per axis".into()));
                }
                for (&(start, step, len), &n) in items.iter().zip(s) {
                    let last = start + step * (len as i64 - 1);
                    if len > 0 && (step == 0 || start < 0 || start >= n as i64 || last < 0 || last >= n as i64) {
                        return Err(bad(format!("slice ({start}, {step}, {len}) out of range for an axis of {n}")));
                    }
                }
                items.iter().map(|it| it.2).collect()
            }
            ViewOp::Diagonal(a, b) => {
                if a >= b || *b >= s.len() || s[*a] != s[*b] {
                    return Err(bad("diagonal: two distinct axes of equal length".into()));
                }
                (0..s.len()).filter(|k| k != b).map(|k| s[k]).collect()
            }
            ViewOp::Take { axis, indices } => {
                let n = *s.get(*axis).ok_or_else(|| bad(format!("take: axis {axis} out of range")))?;
                if let Some(&i) = indices.iter().find(|&&i| i < 0 || i as usize >= n) {
                    return Err(Error::Expression {
                        kind: ExpressionFault::Index,
                        message: format!("index {i} is out of bounds for axis {axis} with size {n}"),
                    });
                }
                let mut t = s.to_vec();
                t[*axis] = indices.len();
                t
            }
        })
    }
}

impl ViewOp {
    /// The view of a concatenation as a concatenation of views: for `self`
    /// applied to parts of lengths `lens` joined along `axis` (the whole of
    /// shape `shape`), the result's join axis and its parts, each an input
    /// part (by index) seen through a view. `None` when the view mixes the
    /// join axis with others (a reshape across it, a diagonal through it,
    /// a strided slice of it, a broadcast of it).
    pub fn through_concat(
        &self,
        axis: usize,
        lens: &[usize],
        shape: &[usize],
    ) -> Option<(usize, Vec<(usize, ViewOp)>)> {
        let with_len = |v: &[usize], k: usize, n: usize| {
            let mut v = v.to_vec();
            v[k] = n;
            v
        };
        let each = |op: &dyn Fn(usize) -> ViewOp| (0..lens.len()).map(|i| (i, op(lens[i]))).collect::<Vec<_>>();
        Some(match self {
            ViewOp::Transpose(perm) => (perm.iter().position(|&p| p == axis)?, each(&|_| self.clone())),
            ViewOp::ExpandDims(pos) => {
                let out = (0..shape.len() + pos.len()).filter(|k| !pos.contains(k)).nth(axis)?;
                (out, each(&|_| self.clone()))
            }
            ViewOp::Squeeze(axes) if !axes.contains(&axis) => {
                (axis - axes.iter().filter(|&&a| a < axis).count(), each(&|_| self.clone()))
            }
            ViewOp::BroadcastTo(t) => {
                let out = axis + t.len() - shape.len();
                if t[out] != shape[axis] {
                    return None;
                }
                (out, each(&|n| ViewOp::BroadcastTo(with_len(t, out, n))))
            }
            ViewOp::Tile(reps) => {
                let one = with_len(reps, axis, 1);
                let parts = (0..reps[axis]).flat_map(|_| each(&|_| ViewOp::Tile(one.clone()))).collect();
                (axis, parts)
            }
            ViewOp::Repeat { .. } => (axis, each(&|_| self.clone())),
            ViewOp::Slice(items) => {
                let (start, step, len) = items[axis];
                if step != 1 && len > 1 {
                    return None;
                }
                let (lo, hi) = (start as usize, start as usize + len);
                let mut parts = Vec::new();
                let mut at = 0;
                for (i, &n) in lens.iter().enumerate() {
                    let (s, e) = (lo.max(at), hi.min(at + n));
                    if s < e {
                        parts.push((i, ViewOp::Slice(with_items(items, axis, ((s - at) as i64, 1, e - s)))));
                    }
                    at += n;
                }
                if parts.is_empty() {
                    return None;
                }
                (axis, parts)
            }
            ViewOp::Reshape(t) => {
                let before: usize = shape[..axis].iter().product();
                let after: usize = shape[axis + 1..].iter().product();
                let out = (0..t.len()).find(|&j| {
                    t[..j].iter().product::<usize>() == before
                        && t[j] == shape[axis]
                        && t[j + 1..].iter().product::<usize>() == after
                })?;
                (out, each(&|n| ViewOp::Reshape(with_len(t, out, n))))
            }
            ViewOp::Diagonal(a, b) if *a != axis && *b != axis => {
                (axis - usize::from(*b < axis), each(&|_| self.clone()))
            }
            ViewOp::Take { axis: a, .. } if *a != axis => (axis, each(&|_| self.clone())),
            _ => return None,
        })
    }
}

fn with_items(items: &[(i64, i64, usize)], k: usize, item: (i64, i64, usize)) -> Vec<(i64, i64, usize)> {
    let mut v = items.to_vec();
    v[k] = item;
    v
}

impl ViewMap {
    /// The map of a stored array: element `(i_k)` at `base + Σ i_k · strides[k]`
    /// (strides in elements, possibly negative).
    pub fn strided(shape: &[usize], strides: &[i64], base: i64) -> Self {
        let axes = shape
            .iter()
            .zip(strides)
            .map(
                |(&n, &s)| {
                    if n == 1 || s == 0 {
                        Vec::new()
                    } else {
                        vec![Term { coef: s, chain: Vec::new(), joint: None }]
                    }
                },
            )
            .collect();
        ViewMap { base, shape: shape.to_vec(), axes, joints: Vec::new() }
    }

    /// The map of a C-contiguous array of `shape` starting at offset 0.
    pub fn c_order(shape: &[usize]) -> Self {
        let mut strides = vec![0i64; shape.len()];
        let mut s = 1i64;
        for k in (0..shape.len()).rev() {
            strides[k] = s;
            s *= shape[k] as i64;
        }
        ViewMap::strided(shape, &strides, 0)
    }

    /// Axis `k`'s contribution for coordinates `lo..hi` to the offset
    /// (`joint` `None`) or to the flat index of joint `joint`.
    pub fn contributions(&self, k: usize, lo: usize, hi: usize, joint: Option<usize>) -> Vec<i64> {
        (lo..hi).map(|i| self.axes[k].iter().filter(|t| t.joint == joint).map(|t| t.eval(i as i64)).sum()).collect()
    }

    /// How the offsets depend on axis `k`.
    pub fn dependence(&self, k: usize) -> Dependence {
        let mut dep = Dependence::None;
        if self.axes[k].iter().any(|t| t.joint.is_some()) {
            return Dependence::Full;
        }
        for t in &self.axes[k] {
            dep = dep.and(match t.chain.first() {
                Some(Step::Mod(m)) => Dependence::Periodic(*m),
                Some(Step::Div(r)) => Dependence::Repeated(*r),
                _ => Dependence::Full,
            });
        }
        dep
    }

    /// Restricts axis `k` for a reduction rewrite: a periodic axis to its
    /// first period, a repeated axis to one of each repeat, an independent
    /// axis to length 1 (`dep` as returned by [`ViewMap::dependence`]).
    pub fn restrict(&mut self, k: usize, dep: Dependence) {
        match dep {
            Dependence::None => self.shape[k] = 1,
            Dependence::Periodic(m) => self.shape[k] = m as usize,
            Dependence::Repeated(r) => self.shape[k] /= r as usize,
            Dependence::Full => return,
        }
        for t in &mut self.axes[k] {
            t.chain.remove(0);
        }
    }

    /// Terms whose chain is one affine step become plain strides (`c ·
    /// (m x + a)` is `(c m) x` plus `c a` in the base), so that layouts
    /// stay recognisably contiguous through slices and reshapes.
    fn normalize(&mut self) {
        for k in 0..self.axes.len() {
            for t in &mut self.axes[k] {
                if let [Step::Affine { mul, add }] = t.chain[..] {
                    let constant = t.coef * add;
                    (t.coef, t.chain) = (t.coef * mul, Vec::new());
                    match t.joint {
                        None => self.base += constant,
                        Some(j) => self.joints[j].base += constant,
                    }
                }
            }
        }
    }

    fn fold(&mut self, k: usize, at: i64) {
        for t in std::mem::take(&mut self.axes[k]) {
            match t.joint {
                None => self.base += t.eval(at),
                Some(j) => self.joints[j].base += t.eval(at),
            }
        }
    }

    /// Puts `step` before axis `k`'s chains; two affine steps compose into
    /// one, so a long stack of slices keeps short chains.
    fn prepend(&mut self, k: usize, step: Step) {
        for t in &mut self.axes[k] {
            match (&step, t.chain.first_mut()) {
                (Step::Affine { mul: m1, add: a1 }, Some(Step::Affine { mul: m2, add: a2 })) => {
                    // x -> m2 (m1 x + a1) + a2
                    (*m2, *a2) = (*m2 * m1, *m2 * a1 + *a2);
                }
                _ => t.chain.insert(0, step.clone()),
            }
        }
    }

    /// The map seen through `op`, or `None` when the result is not
    /// separable (only reshapes).
    ///
    /// # Panics
    /// If `op` does not apply to this shape (check with
    /// [`ViewOp::out_shape`] first).
    pub fn apply(&self, op: &ViewOp) -> Option<ViewMap> {
        let mut m = self.clone();
        let out = op.out_shape(&self.shape).expect("a valid view operation");
        match op {
            ViewOp::Transpose(perm) => {
                m.axes = perm.iter().map(|&p| self.axes[p].clone()).collect();
            }
            ViewOp::BroadcastTo(t) => {
                let lead = t.len() - self.shape.len();
                for k in 0..self.shape.len() {
                    if self.shape[k] == 1 && t[lead + k] != 1 {
                        m.fold(k, 0);
                    }
                }
                let mut axes = vec![Vec::new(); lead];
                axes.append(&mut m.axes);
                m.axes = axes;
            }
            ViewOp::ExpandDims(pos) => {
                let mut old = std::mem::take(&mut m.axes).into_iter();
                m.axes = (0..out.len())
                    .map(|k| if pos.contains(&k) { Vec::new() } else { old.next().expect("len") })
                    .collect();
            }
            ViewOp::Squeeze(axes) => {
                for &k in axes {
                    m.fold(k, 0);
                }
                m.axes = m.axes.into_iter().enumerate().filter(|(k, _)| !axes.contains(k)).map(|(_, a)| a).collect();
            }
            ViewOp::Tile(reps) => {
                for (k, &r) in reps.iter().enumerate() {
                    if r != 1 {
                        if self.shape[k] == 1 {
                            m.fold(k, 0);
                        } else {
                            m.prepend(k, Step::Mod(self.shape[k] as u64));
                        }
                    }
                }
            }
            ViewOp::Repeat { repeats, axis } => {
                if *repeats != 1 {
                    m.prepend(*axis, Step::Div(*repeats as u64));
                }
            }
            ViewOp::Slice(items) => {
                for (k, &(start, step, len)) in items.iter().enumerate() {
                    if len <= 1 {
                        m.fold(k, start);
                    } else if (start, step) != (0, 1) {
                        m.prepend(k, Step::Affine { mul: step, add: start });
                    }
                }
            }
            ViewOp::Diagonal(a, b) => {
                let moved = std::mem::take(&mut m.axes[*b]);
                m.axes[*a].extend(moved);
                m.axes.remove(*b);
            }
            ViewOp::Take { axis, indices } => {
                if self.shape[*axis] == 1 {
                    m.fold(*axis, 0);
                } else {
                    m.prepend(*axis, Step::Take(indices.clone()));
                }
            }
            ViewOp::Reshape(t) => return self.reshape(t),
        }
        m.shape = out;
        m.normalize();
        Some(m)
    }

    fn reshape(&self, t: &[usize]) -> Option<ViewMap> {
        if t.contains(&0) {
            // No elements: any map reads them.
            return Some(ViewMap { base: self.base, ..ViewMap::c_order(t) });
        }
        let mut m = self.clone();
        // Drop length-1 axes on both sides; they carry no coordinates.
        for k in 0..m.shape.len() {
            if m.shape[k] == 1 {
                m.fold(k, 0);
            }
        }
        let src: Vec<usize> = (0..m.shape.len()).filter(|&k| m.shape[k] != 1).collect();
        let dst: Vec<usize> = (0..t.len()).filter(|&k| t[k] != 1).collect();
        let mut axes: Vec<Vec<Term>> = vec![Vec::new(); t.len()];
        let (mut i, mut j) = (0, 0);
        while i < src.len() || j < dst.len() {
            // One group: source and destination axes with equal products.
            let (i0, j0) = (i, j);
            if i == src.len() || j == dst.len() {
                return None;
            }
            let (mut ps, mut pt) = (m.shape[src[i]], t[dst[j]]);
            (i, j) = (i + 1, j + 1);
            while ps != pt {
                if ps < pt {
                    ps *= m.shape[*src.get(i)?];
                    i += 1;
                } else {
                    pt *= t[*dst.get(j)?];
                    j += 1;
                }
            }
            let dims: Vec<usize> = dst[j0..j].iter().map(|&d| t[d]).collect();
            // A group laid out contiguously (C order, one linear term per
            // axis) is one linear axis: its offset is flat index × stride.
            let group = &src[i0..i];
            let last = group[group.len() - 1];
            let contiguous =
                group.iter().all(|&s| matches!(m.axes[s].as_slice(), [t] if t.chain.is_empty() && t.joint.is_none()))
                    && group.iter().enumerate().all(|(n, &s)| {
                        let later: usize = group[n + 1..].iter().map(|&q| m.shape[q]).product();
                        m.axes[s][0].coef == m.axes[last][0].coef * later as i64
                    });
            if contiguous {
                let coef = m.axes[last][0].coef;
                let (parts, _) = split_chain(&[], &dims, 0, dims.len())?;
                for (d, c) in parts {
                    axes[dst[j0 + d]].push(Term { coef, chain: c, joint: None });
                }
                continue;
            }
            let mut inner = ps;
            // The group's joint, made for its first term that does not separate.
            let mut joint_of_group: Option<usize> = None;
            for (n, &s) in src[i0..i].iter().enumerate() {
                let len = m.shape[s];
                inner /= len;
                for term in &m.axes[s] {
                    let mut chain = Vec::new();
                    if inner > 1 {
                        chain.push(Step::Div(inner as u64));
                    }
                    if n > 0 {
                        chain.push(Step::Mod(len as u64));
                    }
                    chain.extend_from_slice(&term.chain);
                    match (split_chain(&chain, &dims, 0, dims.len()), term.joint) {
                        (Some((parts, constant)), joint) => {
                            match joint {
                                None => m.base += term.coef * constant,
                                Some(j) => m.joints[j].base += term.coef * constant,
                            }
                            for (d, c) in parts {
                                axes[dst[j0 + d]].push(Term { coef: term.coef, chain: c, joint });
                            }
                        }
                        // Not separable: the term's part of the offset
                        // becomes a joint of the group's flat index.
                        (None, None) => {
                            let j = *joint_of_group.get_or_insert_with(|| {
                                for (d, _) in dims.iter().enumerate().filter(|(_, &n)| n > 1) {
                                    let w = dims[d + 1..].iter().product::<usize>() as i64;
                                    axes[dst[j0 + d]].push(Term {
                                        coef: w,
                                        chain: Vec::new(),
                                        joint: Some(m.joints.len()),
                                    });
                                }
                                m.joints.push(Joint { base: 0, parts: Vec::new() });
                                m.joints.len() - 1
                            });
                            m.joints[j].parts.push((term.coef, chain));
                        }
                        (None, Some(_)) => return None,
                    }
                }
            }
        }
        let mut out = ViewMap { base: m.base, shape: t.to_vec(), axes, joints: m.joints };
        out.normalize();
        Some(out)
    }
}

/// Splits `chain(x)`, `x` the mixed-radix number of digits `dims[lo..hi]`
/// (`x = Σ i_j · Π dims[j+1..hi]`), into per-digit chains plus a constant,
/// or `None` when it does not separate.
/// Per-digit chains and a constant (see [`split_chain`]).
type Split = (Vec<(usize, Vec<Step>)>, i64);

fn split_chain(chain: &[Step], dims: &[usize], lo: usize, hi: usize) -> Option<Split> {
    let weight = |j: usize| dims[j + 1..hi].iter().product::<usize>() as i64;
    let digits: Vec<usize> = (lo..hi).filter(|&j| dims[j] > 1).collect();
    match digits.as_slice() {
        [] => {
            // x = 0: the chain is a constant.
            let c = chain.iter().fold(0i64, |x, s| s.eval(x));
            return Some((Vec::new(), c));
        }
        [j] => {
            // x = w · i_j: any chain applies to the one digit.
            let w = weight(*j);
            let mut c = if w == 1 { Vec::new() } else { vec![Step::Affine { mul: w, add: 0 }] };
            c.extend_from_slice(chain);
            return Some((vec![(*j, c)], 0));
        }
        _ => {}
    }
    let linear = |mul: i64| -> Vec<(usize, Vec<Step>)> {
        digits
            .iter()
            .map(|&j| {
                let w = weight(j) * mul;
                (j, if w == 1 { Vec::new() } else { vec![Step::Affine { mul: w, add: 0 }] })
            })
            .collect()
    };
    let suffix = |p: u64| (lo..=hi).find(|&s| dims[s..hi].iter().product::<usize>() as u64 == p);
    match chain.split_first() {
        None => Some((linear(1), 0)),
        Some((&Step::Affine { mul, add }, [])) => Some((linear(mul), add)),
        Some((&Step::Affine { mul: 1, add: 0 }, rest)) => split_chain(rest, dims, lo, hi),
        Some((&Step::Mod(m), rest)) => {
            if m >= dims[lo..hi].iter().product::<usize>() as u64 {
                split_chain(rest, dims, lo, hi)
            } else if let Some(s) = suffix(m) {
                split_chain(rest, dims, s, hi)
            } else {
                // The other digits are multiples of m: only the last counts.
                let (&t, head) = digits.split_last()?;
                if !head.iter().all(|&j| weight(j) % m as i64 == 0) {
                    return None;
                }
                let mut c = vec![Step::Affine { mul: weight(t), add: 0 }, Step::Mod(m)];
                c.extend_from_slice(rest);
                Some((vec![(t, c)], 0))
            }
        }
        Some((&Step::Div(r), rest)) => {
            if let Some(s) = suffix(r) {
                return split_chain(rest, dims, lo, s);
            }
            // x div r = Σ_{j<t} i_j (w_j / r) + (i_t w_t) div r when r divides
            // the other digits' weights.
            let (&t, head) = digits.split_last()?;
            if !rest.is_empty() || !head.iter().all(|&j| weight(j) % r as i64 == 0) {
                return None;
            }
            let mut out: Vec<(usize, Vec<Step>)> =
                head.iter().map(|&j| (j, vec![Step::Affine { mul: weight(j) / r as i64, add: 0 }])).collect();
            out.push((t, vec![Step::Affine { mul: weight(t), add: 0 }, Step::Div(r)]));
            Some((out, 0))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Offsets of every element in C order, element by element.
    fn offsets(m: &ViewMap) -> Vec<i64> {
        let n: usize = m.shape.iter().product();
        let mut out = Vec::with_capacity(n);
        for flat in 0..n {
            let mut rem = flat;
            let (mut off, mut xs) = (m.base, vec![0i64; m.joints.len()]);
            for k in (0..m.shape.len()).rev() {
                let i = (rem % m.shape[k]) as i64;
                rem /= m.shape[k];
                for t in &m.axes[k] {
                    match t.joint {
                        None => off += t.eval(i),
                        Some(j) => xs[j] += t.eval(i),
                    }
                }
            }
            out.push(off + m.joints.iter().zip(xs).map(|(jt, x)| jt.eval(x)).sum::<i64>());
        }
        out
    }

    #[test]
    fn tile_then_reshape_stays_separable() {
        // np.tile(arange(3), 4).reshape(4, 3) == [[0, 1, 2]] * 4
        let m = ViewMap::c_order(&[3]).apply(&ViewOp::Tile(vec![4])).unwrap();
        let r = m.apply(&ViewOp::Reshape(vec![4, 3])).unwrap();
        assert_eq!(offsets(&r), [0, 1, 2].repeat(4));
        assert_eq!(r.dependence(0), Dependence::None);
    }

    #[test]
    fn merges_and_splits_of_strided_arrays() {
        let m = ViewMap::c_order(&[2, 3, 4]).apply(&ViewOp::Transpose(vec![1, 0, 2])).unwrap();
        let merged = m.apply(&ViewOp::Reshape(vec![6, 4])).unwrap();
        let want: Vec<i64> =
            (0..3).flat_map(|j| (0..2).flat_map(move |i| (0..4).map(move |k| i * 12 + j * 4 + k))).collect();
        assert_eq!(offsets(&merged), want);
        let split = ViewMap::c_order(&[24]).apply(&ViewOp::Reshape(vec![2, 1, 3, 4])).unwrap();
        assert_eq!(offsets(&split), (0..24).collect::<Vec<_>>());
        let flat = ViewMap::c_order(&[4, 6]).apply(&ViewOp::Reshape(vec![24])).unwrap();
        assert_eq!(offsets(&flat), (0..24).collect::<Vec<_>>());
        let back = flat.apply(&ViewOp::Reshape(vec![2, 12])).unwrap();
        assert_eq!(offsets(&back), (0..24).collect::<Vec<_>>());
        let odd = ViewMap::c_order(&[4, 6]).apply(&ViewOp::Reshape(vec![3, 8])).unwrap();
        assert_eq!(offsets(&odd), (0..24).collect::<Vec<_>>());
        // (6, 4) of a transpose into (4, 6) does not separate: a joint.
        let joint = merged.apply(&ViewOp::Reshape(vec![4, 6])).unwrap();
        assert_eq!(joint.joints.len(), 1);
        assert_eq!(offsets(&joint), want);
        assert_eq!(joint.dependence(0), Dependence::Full);
    }

    /// The views of `ops` applied to explicit offsets (the reference).
    fn by_hand(shape: &[usize], values: Vec<i64>, op: &ViewOp) -> (Vec<usize>, Vec<i64>) {
        let out = op.out_shape(shape).unwrap();
        let n: usize = out.iter().product();
        let strides = |s: &[usize]| (0..s.len()).map(|k| s[k + 1..].iter().product::<usize>()).collect::<Vec<_>>();
        let (si, so) = (strides(shape), strides(&out));
        let v = (0..n)
            .map(|flat| {
                let idx: Vec<usize> = (0..out.len()).map(|k| flat / so[k] % out[k]).collect();
                let src: Vec<usize> = match op {
                    ViewOp::Reshape(_) => return values[flat],
                    ViewOp::Transpose(perm) => {
                        let mut s = vec![0; shape.len()];
                        for (k, &p) in perm.iter().enumerate() {
                            s[p] = idx[k];
                        }
                        s
                    }
                    ViewOp::Repeat { repeats, axis } => {
                        let mut s = idx.clone();
                        s[*axis] /= repeats;
                        s
                    }
                    ViewOp::Slice(items) => {
                        idx.iter().zip(items).map(|(&i, &(a, st, _))| (a + st * i as i64) as usize).collect()
                    }
                    _ => unreachable!("not used here"),
                };
                values[src.iter().zip(&si).map(|(i, s)| i * s).sum::<usize>()]
            })
            .collect();
        (out, v)
    }

    #[test]
    fn reshapes_that_do_not_separate_read_through_joints() {
        use ViewOp::*;
        let cases: Vec<(Vec<usize>, Vec<ViewOp>)> = vec![
            // The seed's repeat -> reshape when 7 does not divide 10.
            (vec![10, 3], vec![Repeat { repeats: 7, axis: 0 }, Reshape(vec![7, 10, 3])]),
            (vec![10, 3], vec![Repeat { repeats: 4, axis: 0 }, Reshape(vec![4, 10, 3]), Transpose(vec![1, 0, 2])]),
            // Views on top of a joint: slices, one index, a split of it.
            (
                vec![6, 4],
                vec![
                    Transpose(vec![1, 0]),
                    Reshape(vec![6, 4]),
                    Slice(vec![(5, -2, 3), (1, 1, 3)]),
                    Slice(vec![(1, 1, 1), (0, 1, 3)]),
                ],
            ),
            (vec![6, 4], vec![Transpose(vec![1, 0]), Reshape(vec![3, 8]), Reshape(vec![3, 2, 4])]),
            (vec![5, 3], vec![Repeat { repeats: 3, axis: 1 }, Reshape(vec![9, 5]), Repeat { repeats: 2, axis: 0 }]),
        ];
        for (shape, ops) in cases {
            let mut m = ViewMap::c_order(&shape);
            let (mut s, mut v) = (shape.clone(), (0..shape.iter().product::<usize>() as i64).collect::<Vec<_>>());
            for op in &ops {
                m = m.apply(op).unwrap_or_else(|| panic!("{op:?} of {ops:?}"));
                (s, v) = by_hand(&s, v, op);
                assert_eq!(m.shape, s);
                assert_eq!(offsets(&m), v, "{ops:?}");
                let lo: Vec<usize> = s.iter().map(|&n| n / 3).collect();
                let hi: Vec<usize> = s.iter().map(|&n| n - n / 4).collect();
                let got = crate::array::eval::offsets(&m, &lo, &hi);
                let strides: Vec<usize> = (0..s.len()).map(|k| s[k + 1..].iter().product()).collect();
                let mut want = Vec::new();
                let ext: Vec<usize> = lo.iter().zip(&hi).map(|(a, b)| b - a).collect();
                for flat in 0..ext.iter().product::<usize>() {
                    let mut rem = flat;
                    let mut at = 0;
                    for k in (0..s.len()).rev() {
                        at += (lo[k] + rem % ext[k]) * strides[k];
                        rem /= ext[k];
                    }
                    want.push(v[at]);
                }
                assert_eq!(got, want, "box {lo:?}..{hi:?} of {ops:?}");
            }
        }
    }

    #[test]
    fn slices_repeats_and_broadcasts() {
        let m = ViewMap::c_order(&[5]).apply(&ViewOp::Slice(vec![(4, -2, 3)])).unwrap();
        assert_eq!(offsets(&m), [4, 2, 0]);
        let r = m.apply(&ViewOp::Repeat { repeats: 2, axis: 0 }).unwrap();
        assert_eq!(offsets(&r), [4, 4, 2, 2, 0, 0]);
        assert_eq!(r.dependence(0), Dependence::Repeated(2));
        let b = ViewMap::c_order(&[1, 2]).apply(&ViewOp::BroadcastTo(vec![3, 2, 2])).unwrap();
        assert_eq!(offsets(&b), [0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1]);
        let d = ViewMap::c_order(&[3, 3]).apply(&ViewOp::Diagonal(0, 1)).unwrap();
        assert_eq!(offsets(&d), [0, 4, 8]);
    }
}
