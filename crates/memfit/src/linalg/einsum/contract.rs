//! Dense contraction along a [`Path`]: per step, labels private to one
//! operand are summed (in ascending index order), diagonals are read through
//! strides, both operands are packed straight into the GEMM panels as
//! (batch, free, contracted) and (batch, contracted, free), and one GEMM
//! per batch ([`gemm`](super::gemm)) gives the step's result.

use std::collections::BTreeMap;
use std::mem::size_of;
use std::ops::Range;

use super::gemm::{dots, gemm, outer, tile, RowPanels};
use super::path::{distinct, kept, PairLayout};
use super::{elements, label_sizes, Dense, Path, Subscripts};

/// One pairwise step as executed: operand `a` gives the GEMM rows, `b` the columns.
struct Step {
    a: usize,
    b: usize,
    lay: PairLayout,
    /// The labels `a` (`b`) keeps when it has labels to sum first.
    reduce_a: Option<Vec<u8>>,
    reduce_b: Option<Vec<u8>>,
    /// The result is the output, in output order.
    direct: bool,
}

/// The steps of `path` with their label layouts: intermediate results are
/// (batch, free of `a`, free of `b`); the last step orders each group as
/// the output does and swaps its operands when that makes the result the
/// output itself.
fn schedule(sub: &Subscripts, path: &Path) -> Vec<Step> {
    let n = sub.inputs.len();
    assert!(
        path.steps.len() + 1 == n.max(1),
        "einsum: the path has {} steps for {n} operands (a path of other subscripts)",
        path.steps.len()
    );
    let out_pos = |l: &u8| sub.output.iter().position(|o| o == l);
    let mut terms: Vec<Vec<u8>> = sub.inputs.iter().map(|l| distinct(l)).collect();
    let mut steps = Vec::with_capacity(path.steps.len());
    for (s, &(x, y)) in path.steps.iter().enumerate() {
        assert!(x < y && y < terms.len(), "einsum: invalid path step ({x}, {y}) for {} operands", terms.len());
        let mut lay = PairLayout::new(&terms[x], &terms[y], |l| kept(l, &terms, x, y, &sub.output));
        let (mut a, mut b) = (x, y);
        let last = s + 1 == path.steps.len();
        if last {
            for group in [&mut lay.batch, &mut lay.free_x, &mut lay.free_y] {
                group.sort_by_key(out_pos);
            }
            if [&lay.batch[..], &lay.free_y, &lay.free_x].concat() == sub.output {
                std::mem::swap(&mut lay.free_x, &mut lay.free_y);
                std::mem::swap(&mut a, &mut b);
            }
        }
        let reduce = |t: usize, free: &[u8]| {
            let keep: Vec<u8> = terms[t]
                .iter()
                .copied()
                .filter(|l| lay.batch.contains(l) || lay.contracted.contains(l) || free.contains(l))
                .collect();
            (keep.len() < terms[t].len()).then_some(keep)
        };
        let (reduce_a, reduce_b) = (reduce(a, &lay.free_x), reduce(b, &lay.free_y));
        let result = lay.result();
        let direct = last && result == sub.output;
        terms.remove(y);
        terms.remove(x);
        terms.push(result);
        steps.push(Step { a, b, lay, reduce_a, reduce_b, direct });
    }
    steps
}

/// A strided view of an operand: distinct labels, element strides (0 for
/// an extent-1 axis broadcast, summed over a repeated label's axes).
struct View<'a> {
    data: &'a [f64],
    labels: Vec<u8>,
    strides: Vec<usize>,
}

impl View<'_> {
    fn stride(&self, label: u8) -> usize {
        self.strides[self.labels.iter().position(|&l| l == label).expect("einsum: label of the view")]
    }
}

/// An operand of the current list: an input or a step's result (C order, its labels).
enum Term {
    Input(usize),
    Owned(Vec<u8>, Vec<f64>),
}

fn input_view<'a>(labels: &[u8], op: &'a Dense, sizes: &BTreeMap<u8, usize>) -> View<'a> {
    let mut c_stride = vec![1usize; op.shape.len()];
    for d in (0..op.shape.len().saturating_sub(1)).rev() {
        c_stride[d] = c_stride[d + 1] * op.shape[d + 1];
    }
    let mut view = View { data: &op.data, labels: Vec::new(), strides: Vec::new() };
    for (d, &l) in labels.iter().enumerate() {
        let s = if op.shape[d] == 1 && sizes[&l] != 1 { 0 } else { c_stride[d] };
        match view.labels.iter().position(|&v| v == l) {
            Some(i) => view.strides[i] += s,
            None => {
                view.labels.push(l);
                view.strides.push(s);
            }
        }
    }
    view
}

fn term_view<'a>(t: &'a Term, sub: &Subscripts, operands: &'a [Dense], sizes: &BTreeMap<u8, usize>) -> View<'a> {
    match t {
        Term::Input(i) => input_view(&sub.inputs[*i], &operands[*i], sizes),
        Term::Owned(labels, data) => owned_view(labels, data, sizes),
    }
}

fn owned_view<'a>(labels: &[u8], data: &'a [f64], sizes: &BTreeMap<u8, usize>) -> View<'a> {
    let mut strides = vec![1usize; labels.len()];
    for d in (0..labels.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * sizes[&labels[d + 1]];
    }
    View { data, labels: labels.to_vec(), strides }
}

/// Calls `f` with the offset of every index of `dims` (strides `strides`), in C order.
fn for_each_offset(dims: &[usize], strides: &[usize], mut f: impl FnMut(usize)) {
    if dims.contains(&0) {
        return;
    }
    let Some((&inner, outer)) = dims.split_last() else {
        f(0);
        return;
    };
    let inner_stride = strides[outer.len()];
    let mut idx = vec![0usize; outer.len()];
    let mut off = 0usize;
    loop {
        for i in 0..inner {
            f(off + i * inner_stride);
        }
        let mut d = outer.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            off += strides[d];
            if idx[d] < outer[d] {
                break;
            }
            off -= strides[d] * outer[d];
            idx[d] = 0;
        }
    }
}

/// `out[o] = Σ_s view[o, s]` in C order over `out_labels`, the labels of
/// `view` not in `out_labels` summed in ascending index order (a copy when
/// none); an empty sum is `+0.0`.
fn reduce(view: &View<'_>, out_labels: &[u8], sizes: &BTreeMap<u8, usize>) -> Vec<f64> {
    let dims = |ls: &[u8]| ls.iter().map(|l| sizes[l]).collect::<Vec<_>>();
    let strides = |ls: &[u8]| ls.iter().map(|&l| view.stride(l)).collect::<Vec<_>>();
    let summed: Vec<u8> = view.labels.iter().copied().filter(|l| !out_labels.contains(l)).collect();
    let (sum_dims, sum_strides) = (dims(&summed), strides(&summed));
    let empty = sum_dims.contains(&0);
    let mut out = Vec::with_capacity(elements(out_labels, sizes) as usize);
    for_each_offset(&dims(out_labels), &strides(out_labels), |o| {
        // -0.0 + x == x for every x, so the sum starts exactly at its first term.
        let mut acc = -0.0;
        for_each_offset(&sum_dims, &sum_strides, |s| acc += view.data[o + s]);
        out.push(if empty { 0.0 } else { acc });
    });
    out
}

thread_local! {
    /// Buffers of this thread's finished contraction steps, for the next
    /// ones: the blocked engine contracts tile after tile of the same
    /// shapes, and fresh pages cost more than packing them.
    static SPARE: std::cell::RefCell<Vec<Vec<f64>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Spare buffers kept per thread, at most (a step's two packed operands
/// and an intermediate).
const SPARES: usize = 3;

/// A buffer of `len` values for the caller to overwrite whole (a spare
/// one's old values stay), in a spare buffer when one is large enough.
fn buffer(len: usize) -> Vec<f64> {
    let spare = SPARE.with(|s| {
        let mut s = s.borrow_mut();
        let i = s.iter().position(|v| v.capacity() >= len)?;
        Some(s.swap_remove(i))
    });
    match spare {
        Some(mut v) => {
            v.truncate(len);
            v.resize(len, 0.0);
            v
        }
        None => vec![0.0; len],
    }
}

/// Keeps `v` for [`buffer`] (up to [`SPARES`] buffers, the largest).
fn recycle(v: Vec<f64>) {
    SPARE.with(|s| {
        let mut s = s.borrow_mut();
        s.push(v);
        if s.len() > SPARES {
            let smallest = (0..s.len()).min_by_key(|&i| s[i].capacity()).expect("not empty");
            s.swap_remove(smallest);
        }
    });
}

/// Offsets of every index of `labels` in `view`, in C order.
fn offsets(view: &View<'_>, labels: &[u8], sizes: &BTreeMap<u8, usize>) -> Vec<usize> {
    let dims: Vec<usize> = labels.iter().map(|l| sizes[l]).collect();
    let strides: Vec<usize> = labels.iter().map(|&l| view.stride(l)).collect();
    let mut v = Vec::with_capacity(elements(labels, sizes) as usize);
    for_each_offset(&dims, &strides, |o| v.push(o));
    v
}

/// The element offsets of `view` in (`batch`, `panel`, `depth`) label
/// groups, from which [`Panels::fill`] copies any panel of any slice of
/// depth: the packing of [`gemm`]'s operands, done panel by panel where the
/// kernel uses them (in cache) rather than for the whole operand first.
struct Panels<'a> {
    data: &'a [f64],
    batch: Vec<usize>,
    panel: Vec<usize>,
    depth: Vec<usize>,
    /// The depth offsets' common step, when they have one (then read as a
    /// strided slice).
    step: Option<usize>,
}

impl<'a> Panels<'a> {
    fn new(view: &View<'a>, batch: &[u8], panel: &[u8], depth: &[u8], sizes: &BTreeMap<u8, usize>) -> Self {
        let depth = offsets(view, depth, sizes);
        let step = match depth[..] {
            [first, second, ..] => second.checked_sub(first),
            _ => Some(1),
        }
        .filter(|&s| depth.iter().enumerate().all(|(g, &o)| o == depth[0] + g * s));
        Panels { data: view.data, batch: offsets(view, batch, sizes), panel: offsets(view, panel, sizes), depth, step }
    }

    /// Everything, as `batch` × (panels of `width`) × depth groups: the
    /// layout [`gemm`] reads for `B` (zero past the panel labels' extent).
    fn all(&self, width: usize) -> Vec<f64> {
        let (k, panels) = (self.depth.len(), self.panel.len().div_ceil(width));
        let mut out = buffer(self.batch.len() * panels * width * k);
        if k > 0 {
            for (i, block) in out.chunks_exact_mut(width * k).enumerate() {
                self.fill(i / panels, i % panels, 0..k, width, block);
            }
        }
        out
    }
}

impl RowPanels for Panels<'_> {
    fn fill(&self, t: usize, panel: usize, depth: Range<usize>, width: usize, out: &mut [f64]) {
        let rows = self.panel.get(panel * width..).unwrap_or_default();
        let rows = &rows[..rows.len().min(width)];
        let out = &mut out[..width * depth.len()];
        if rows.len() < width {
            out.fill(0.0);
        }
        let (ob, len) = (self.batch[t], depth.len());
        let contiguous_rows = rows.iter().enumerate().all(|(r, &op)| op == rows[0] + r);
        if contiguous_rows && self.step != Some(1) && !rows.is_empty() {
            // Rows side by side in memory (`B`'s columns): a run per depth.
            for (group, &od) in out.chunks_exact_mut(width).zip(&self.depth[depth]) {
                group[..rows.len()].copy_from_slice(&self.data[ob + rows[0] + od..][..rows.len()]);
            }
            return;
        }
        for (r, &op) in rows.iter().enumerate() {
            let base = ob + op;
            match self.step {
                Some(1) => {
                    let start = base + self.depth.first().map_or(0, |&d| d + depth.start);
                    for (group, &x) in out.chunks_exact_mut(width).zip(&self.data[start..][..len]) {
                        group[r] = x;
                    }
                }
                Some(step) => {
                    let start = base + self.depth.first().map_or(0, |&d| d + depth.start * step);
                    for (g, group) in out.chunks_exact_mut(width).enumerate() {
                        group[r] = self.data[start + g * step];
                    }
                }
                None => {
                    for (group, &od) in out.chunks_exact_mut(width).zip(&self.depth[depth.clone()]) {
                        group[r] = self.data[base + od];
                    }
                }
            }
        }
    }
}

/// Contracts `operands` (dense C-order arrays, one per `sub.inputs`, each
/// extent equal to its label's or 1 to broadcast) along `path` (from
/// [`contraction_path`](super::contraction_path) for these subscripts) and
/// returns the output, of shape the extents of `sub.output`.
///
/// Per step, labels of one operand needed neither later nor by the other
/// are summed first, diagonals are read through strides, and the pair is
/// packed as (batch, free, contracted) × (batch, contracted, free) for one
/// GEMM per batch (labels in both operands and kept). With one operand it
/// sums, takes diagonals and transposes (trace, sum, transpose). Runs on the
/// calling thread (the caller parallelises across tiles).
///
/// Each output element is one fixed-order chain of fused multiply-adds
/// (ascending contracted indices, from +0.0) per step, and sums in
/// ascending index order, so its bits do not depend on how the output's
/// free indices were sliced, as long as the same `path` is used for every
/// slice (compute it once from the full sizes).
///
/// # Panics
/// On caller bugs: operands not matching `sub` (count, dimensions, data
/// length, extents neither equal nor 1), or a `path` of other subscripts.
pub fn contract(sub: &Subscripts, operands: &[Dense], path: &Path) -> Dense {
    assert_eq!(operands.len(), sub.inputs.len(), "einsum: one operand per subscript term");
    let shapes: Vec<Vec<usize>> = operands.iter().map(|o| o.shape.clone()).collect();
    let sizes = label_sizes(sub, &shapes);
    for (labels, op) in sub.inputs.iter().zip(operands) {
        assert_eq!(op.data.len(), op.shape.iter().product::<usize>(), "einsum: data length != shape product");
        for (l, &d) in labels.iter().zip(&op.shape) {
            assert!(d == sizes[l] || d == 1, "einsum: extent {d} of a label of extent {}", sizes[l]);
        }
    }
    let out_shape: Vec<usize> = sub.output.iter().map(|l| sizes[l]).collect();
    let mut terms: Vec<Term> = (0..operands.len()).map(Term::Input).collect();
    for step in schedule(sub, path) {
        let lay = &step.lay;
        let [nb, m, n, k] =
            [&lay.batch[..], &lay.free_x, &lay.free_y, &lay.contracted].map(|ls| elements(ls, &sizes) as usize);
        // Labels needed neither later nor by the other operand, summed first.
        let reduced = |t: usize, keep: &Option<Vec<u8>>| {
            keep.as_ref().map(|keep| reduce(&term_view(&terms[t], sub, operands, &sizes), keep, &sizes))
        };
        let (ra, rb) = (reduced(step.a, &step.reduce_a), reduced(step.b, &step.reduce_b));
        let (va, vb) = [(step.a, &step.reduce_a, &ra), (step.b, &step.reduce_b, &rb)]
            .map(|(t, keep, r)| match (keep, r) {
                (Some(keep), Some(r)) => owned_view(keep, r, &sizes),
                _ => term_view(&terms[t], sub, operands, &sizes),
            })
            .into();
        let pa = Panels::new(&va, &lay.batch, &lay.free_x, &lay.contracted, &sizes);
        let pb = Panels::new(&vb, &lay.batch, &lay.free_y, &lay.contracted, &sizes);
        let mut c = buffer(nb * m * n);
        if k == 1 {
            // Depth 1 (nothing summed): outer products of unpadded rows.
            let (a, b) = (pa.all(1), pb.all(1));
            outer(nb, m, n, &a, &b, &mut c);
            recycle(a);
            recycle(b);
        } else if m == 1 && n == 1 {
            // Batched dot products: unpadded rows, from the spare buffers.
            let (a, b) = (pa.all(1), pb.all(1));
            dots(nb, k, &a, &b, &mut c);
            recycle(a);
            recycle(b);
        } else {
            let b = pb.all(tile(m as u64, n as u64).1);
            gemm(nb, m, n, k, &pa, &b, &mut c);
            recycle(b);
        }
        drop((pa, pb, va, vb));
        for r in [ra, rb].into_iter().flatten() {
            recycle(r);
        }
        if step.direct {
            return Dense { shape: out_shape, data: c };
        }
        let (x, y) = (step.a.min(step.b), step.a.max(step.b));
        for t in [terms.remove(y), terms.remove(x)] {
            if let Term::Owned(_, data) = t {
                recycle(data);
            }
        }
        terms.push(Term::Owned(lay.result(), c));
    }
    let view = match &terms[0] {
        Term::Input(i) => input_view(&sub.inputs[*i], &operands[*i], &sizes),
        Term::Owned(labels, data) => owned_view(labels, data, &sizes),
    };
    Dense { data: reduce(&view, &sub.output, &sizes), shape: out_shape }
}

/// Bytes [`contract`] allocates beyond its operands and its output, at
/// most, for operands of label extents `sizes` (those of the tile it will be
/// called on) along `path`: the live intermediates, each step's pre-summed
/// operand copies, packed GEMM panels (padded to the register tile of this
/// CPU) and index tables (`usize` per index of a label group), and the
/// result of a last step that must still be transposed into the output.
/// Small per-call bookkeeping (label lists, `O(ndim)` index vectors) is not
/// counted. The spare buffers a thread keeps between calls (at most three,
/// each one of a call's packed operands or intermediates) are within it.
///
/// # Panics
/// If a label of `sub` is missing from `sizes`, or `path` is of other
/// subscripts (caller bugs).
pub fn scratch_bytes(sub: &Subscripts, sizes: &BTreeMap<u8, usize>, path: &Path) -> u64 {
    const F: u64 = size_of::<f64>() as u64;
    let idx = size_of::<usize>() as u64;
    let el = |ls: &[u8]| elements(ls, sizes);
    let mut owned: Vec<Option<u64>> = vec![None; sub.inputs.len()];
    let (mut live, mut peak) = (0u64, 0u64);
    for step in schedule(sub, path) {
        let lay = &step.lay;
        let [nb, m, n, k] = [&lay.batch[..], &lay.free_x, &lay.free_y, &lay.contracted].map(el);
        let (mr, nr) = if k == 1 { (1, 1) } else { tile(m, n) };
        let pack_a = nb * m.div_ceil(mr as u64) * mr as u64 * k * F;
        let pack_b = nb * n.div_ceil(nr as u64) * nr as u64 * k * F;
        let red = |r: &Option<Vec<u8>>| r.as_deref().map_or(0, |ls| el(ls) * F);
        let (table_a, table_b) = ((nb + m + k) * idx, (nb + k + n) * idx);
        let c = if step.direct { 0 } else { nb * m * n * F };
        peak = peak
            .max(live + red(&step.reduce_a) + table_a + pack_a)
            .max(live + pack_a + red(&step.reduce_b) + table_b + pack_b)
            .max(live + pack_a + pack_b + c);
        let (x, y) = (step.a.min(step.b), step.a.max(step.b));
        live -= owned.remove(y).unwrap_or(0) + owned.remove(x).unwrap_or(0);
        live += c;
        owned.push(Some(c));
    }
    peak.max(live)
}
