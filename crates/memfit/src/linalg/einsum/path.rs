//! Contraction order, after opt_einsum's `optimal` (exhaustive) and `greedy`
//! strategies, with the peak bytes of live intermediates as the first cost
//! and opt_einsum's `flop_count` as the second.

use std::collections::BTreeMap;

use super::{elements, Path, Subscripts};

/// At most this many operands are searched exhaustively.
const EXHAUSTIVE_MAX: usize = 6;

/// How one pairwise step splits the labels of its operands `x` and `y`.
pub(super) struct PairLayout {
    /// In both and kept (GEMM batch), in `x`'s order.
    pub batch: Vec<u8>,
    /// Only in `x` and kept (GEMM rows), in `x`'s order.
    pub free_x: Vec<u8>,
    /// Only in `y` and kept (GEMM columns), in `y`'s order.
    pub free_y: Vec<u8>,
    /// In both and not kept (summed by the GEMM), in `x`'s order.
    pub contracted: Vec<u8>,
}

impl PairLayout {
    /// Splits the (distinct) labels of `x` and `y`; `keep` says whether a
    /// label is needed after the step (by the output or another operand).
    /// Labels of one operand that are not kept are summed before the GEMM.
    pub fn new(x: &[u8], y: &[u8], keep: impl Fn(u8) -> bool) -> Self {
        let both = |l: &u8| y.contains(l);
        Self {
            batch: x.iter().copied().filter(|l| both(l) && keep(*l)).collect(),
            free_x: x.iter().copied().filter(|l| !both(l) && keep(*l)).collect(),
            free_y: y.iter().copied().filter(|l| !x.contains(l) && keep(*l)).collect(),
            contracted: x.iter().copied().filter(|l| both(l) && !keep(*l)).collect(),
        }
    }

    /// The result's labels: batch, then `x`'s free labels, then `y`'s.
    pub fn result(&self) -> Vec<u8> {
        [&self.batch[..], &self.free_x, &self.free_y].concat()
    }
}

/// The distinct labels of `labels`, in first-appearance order.
pub(super) fn distinct(labels: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(labels.len());
    for &l in labels {
        if !v.contains(&l) {
            v.push(l);
        }
    }
    v
}

/// Whether `label` is needed outside the two operands `x`, `y` of a step.
pub(super) fn kept(label: u8, terms: &[Vec<u8>], x: usize, y: usize, output: &[u8]) -> bool {
    output.contains(&label) || terms.iter().enumerate().any(|(t, l)| t != x && t != y && l.contains(&label))
}

/// One operand of the search: its labels, elements, and whether it is an
/// intermediate (held by the contraction) rather than an input.
#[derive(Clone)]
struct Operand {
    labels: Vec<u8>,
    elements: u64,
    intermediate: bool,
}

/// The cost so far of a partial path.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
struct Cost {
    peak_elements: u64,
    flops: f64,
}

/// The result of contracting `list[x]` and `list[y]`, and the step's flops.
fn step(list: &[Operand], x: usize, y: usize, output: &[u8], sizes: &BTreeMap<u8, usize>) -> (Operand, f64) {
    let labels: Vec<Vec<u8>> = list.iter().map(|o| o.labels.clone()).collect();
    let lay = PairLayout::new(&labels[x], &labels[y], |l| kept(l, &labels, x, y, output));
    let result = lay.result();
    let all = distinct(&[&labels[x][..], &labels[y]].concat());
    let inner = all.len() > result.len();
    let flops = elements(&all, sizes) as f64 * if inner { 2.0 } else { 1.0 };
    let elements = elements(&result, sizes);
    (Operand { labels: result, elements, intermediate: true }, flops)
}

/// Applies step `(x, y)` to `list`: returns the new list and the
/// intermediates' elements held during the step (`last`: its result is the
/// output and not counted).
fn apply(list: &[Operand], x: usize, y: usize, result: Operand, last: bool) -> (Vec<Operand>, u64) {
    let held: u64 = list.iter().filter(|o| o.intermediate).map(|o| o.elements).sum();
    let during = held.saturating_add(if last { 0 } else { result.elements });
    let mut next: Vec<Operand> =
        list.iter().enumerate().filter(|&(i, _)| i != x && i != y).map(|(_, o)| o.clone()).collect();
    next.push(result);
    (next, during)
}

/// Chooses the pairwise contraction order of `sub`'s operands (labels of
/// extents `sizes`, from [`label_sizes`](super::label_sizes)) that
/// minimises the peak bytes of live intermediates (8 bytes per element; see
/// [`Path::peak_bytes`]), then the flops, the first such order in
/// lexicographic step order winning ties. Exhaustive (opt_einsum's
/// `optimal`) for at most 6 operands; beyond, greedy as opt_einsum's
/// `greedy`: each step takes the pair whose result has the fewest elements,
/// then the fewest flops. A diagonal or a label private to one operand is
/// applied within the step that consumes the operand.
///
/// # Panics
/// If a label of `sub` is missing from `sizes` (a caller bug).
pub fn contraction_path(sub: &Subscripts, sizes: &BTreeMap<u8, usize>) -> Path {
    let list: Vec<Operand> = sub
        .inputs
        .iter()
        .map(|l| {
            let labels = distinct(l);
            Operand { elements: elements(&labels, sizes), labels, intermediate: false }
        })
        .collect();
    let mut best: Option<(Cost, Vec<(usize, usize)>)> = None;
    if list.len() <= EXHAUSTIVE_MAX {
        let mut steps = Vec::new();
        search(&list, &sub.output, sizes, Cost { peak_elements: 0, flops: 0.0 }, &mut steps, &mut best);
    } else {
        best = Some(greedy(list.clone(), &sub.output, sizes));
    }
    let (_, steps) = best.unwrap_or((Cost { peak_elements: 0, flops: 0.0 }, Vec::new()));
    // Replay for the reported figures.
    let (mut list, mut peak, mut flops, mut intermediates) = (list, 0u64, 0.0, Vec::new());
    for (n, &(x, y)) in steps.iter().enumerate() {
        let (result, f) = step(&list, x, y, &sub.output, sizes);
        let last = n + 1 == steps.len();
        intermediates.push(if last {
            (sub.output.clone(), elements(&sub.output, sizes))
        } else {
            (result.labels.clone(), result.elements)
        });
        let (next, during) = apply(&list, x, y, result, last);
        peak = peak.max(during);
        flops += f;
        list = next;
    }
    Path { steps, peak_bytes: peak.saturating_mul(8), flops, intermediates }
}

/// Depth-first search over all pair orders, keeping the cheapest complete one.
fn search(
    list: &[Operand],
    output: &[u8],
    sizes: &BTreeMap<u8, usize>,
    cost: Cost,
    steps: &mut Vec<(usize, usize)>,
    best: &mut Option<(Cost, Vec<(usize, usize)>)>,
) {
    if list.len() <= 1 {
        if best.as_ref().is_none_or(|(b, _)| cost < *b) {
            *best = Some((cost, steps.clone()));
        }
        return;
    }
    for x in 0..list.len() {
        for y in x + 1..list.len() {
            let (result, f) = step(list, x, y, output, sizes);
            let (next, during) = apply(list, x, y, result, list.len() == 2);
            let c = Cost { peak_elements: cost.peak_elements.max(during), flops: cost.flops + f };
            if best.as_ref().is_some_and(|(b, _)| c >= *b) {
                continue;
            }
            steps.push((x, y));
            search(&next, output, sizes, c, steps, best);
            steps.pop();
        }
    }
}

/// opt_einsum-style greedy order: the pair with the smallest result, then fewest flops.
fn greedy(mut list: Vec<Operand>, output: &[u8], sizes: &BTreeMap<u8, usize>) -> (Cost, Vec<(usize, usize)>) {
    let mut steps = Vec::new();
    let mut cost = Cost { peak_elements: 0, flops: 0.0 };
    while list.len() > 1 {
        let mut choice: Option<((u64, f64), usize, usize)> = None;
        for x in 0..list.len() {
            for y in x + 1..list.len() {
                let (result, f) = step(&list, x, y, output, sizes);
                let key = (result.elements, f);
                if choice.as_ref().is_none_or(|(k, _, _)| key < *k) {
                    choice = Some((key, x, y));
                }
            }
        }
        let Some((_, x, y)) = choice else { break };
        let (result, f) = step(&list, x, y, output, sizes);
        let (next, during) = apply(&list, x, y, result, list.len() == 2);
        cost = Cost { peak_elements: cost.peak_elements.max(during), flops: cost.flops + f };
        steps.push((x, y));
        list = next;
    }
    (cost, steps)
}
