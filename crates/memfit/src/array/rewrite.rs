//! Rewrites of products into contractions, applied where nodes are built,
//! so that the plain-NumPy forms of a contraction run as one fused
//! contraction (no product written to scratch):
//!
//! - `sum(A * B * …, axes)` in float64 where a factor is itself a
//!   contraction (`np.sum(X.dot(Q) * X, axis=1)`, the E-step's row quadratic
//!   form) becomes one `einsum` of all the factors (`ij,jk,ik->i`);
//! - an `einsum` operand that is a float64 product (`(X.T * w) @ X`, the
//!   M-step's weighted scatter) becomes one operand per factor
//!   (`ji,j,jk->ik`).
//!
//! Factors are seen through transposes (their labels permuted) and
//! broadcasts (the broadcast axes dropped), and a contraction factor's
//! operands are inlined, so each stored array is read as it lies.

use super::node::{Array, NodeKind, Reduction};
use super::values::Op;
use super::view::ViewOp;
use crate::dtype::Dtype;
use crate::linalg::einsum::Subscripts;

/// Labels the rewrites give to axes.
const LETTERS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// Most operands of a rewritten contraction (beyond, nothing is rewritten:
/// the path search grows with the operands).
const MAX_FACTORS: usize = 8;

/// The operands of a contraction being assembled.
#[derive(Default)]
struct Factors {
    inputs: Vec<Vec<u8>>,
    args: Vec<Array>,
    /// Labels taken.
    used: Vec<u8>,
    /// Whether a contraction was inlined.
    inlined: bool,
}

impl Factors {
    /// A label not taken yet.
    fn fresh(&mut self) -> Option<u8> {
        let l = LETTERS.iter().copied().find(|l| !self.used.contains(l))?;
        self.used.push(l);
        Some(l)
    }

    /// Adds `a` (float64, one label per axis) as one operand.
    fn leaf(&mut self, a: &Array, labels: Vec<u8>) -> Option<()> {
        if a.dtype() != Dtype::F64 || self.args.len() == MAX_FACTORS {
            return None;
        }
        self.args.push(a.clone());
        self.inputs.push(labels);
        Some(())
    }

    /// Adds the factors of `a` seen with `labels` (one per axis): a float64
    /// product's operands, a contraction's operands (when `inline`), a
    /// transpose's or a broadcast's operand with its labels mapped;
    /// anything else as one operand. `None` when the labels run out or
    /// there are too many factors.
    fn add(&mut self, a: &Array, labels: &[u8], inline: bool) -> Option<()> {
        match &a.node().kind {
            NodeKind::Map { op: Op::Multiply, loop_dtype: Dtype::F64, args } if a.dtype() == Dtype::F64 => {
                args.iter().try_for_each(|x| self.add(x, labels, inline))
            }
            NodeKind::View { op: ViewOp::Transpose(perm), arg } => {
                let mut inner = vec![0u8; labels.len()];
                for (k, &p) in perm.iter().enumerate() {
                    inner[p] = labels[k];
                }
                self.add(arg, &inner, inline)
            }
            NodeKind::View { op: ViewOp::BroadcastTo(shape), arg } => {
                let (s, lead) = (arg.shape(), shape.len() - arg.shape().len());
                let squeezed: Vec<usize> = (0..s.len()).filter(|&j| s[j] != shape[lead + j]).collect();
                let inner: Vec<u8> = (0..s.len()).filter(|j| !squeezed.contains(j)).map(|j| labels[lead + j]).collect();
                if squeezed.is_empty() {
                    self.add(arg, &inner, inline)
                } else {
                    self.leaf(&arg.view(ViewOp::Squeeze(squeezed)).ok()?, inner)
                }
            }
            NodeKind::Einsum { sub, args } if inline => {
                // Its output labels are ours; the labels it sums get fresh ones.
                let mut map: Vec<(u8, u8)> = sub.output.iter().copied().zip(labels.iter().copied()).collect();
                for l in sub.inputs.iter().flatten() {
                    if !map.iter().any(|(from, _)| from == l) {
                        map.push((*l, self.fresh()?));
                    }
                }
                self.inlined = true;
                for (x, ls) in args.iter().zip(&sub.inputs) {
                    let mapped: Vec<u8> =
                        ls.iter().map(|l| map.iter().find(|(from, _)| from == l).expect("mapped").1).collect();
                    self.add(x, &mapped, inline)?;
                }
                Some(())
            }
            _ => self.leaf(a, labels.to_vec()),
        }
    }
}

/// `sum` is a float64 sum over a product with a contraction among its
/// factors (`np.sum(X.dot(Q) * X, axis=1)`): one contraction of all the
/// factors (`einsum('ij,jk,ik->i', X, Q, X)`), so the product is never
/// made; otherwise `sum` itself. Results are the sum's to rounding (the
/// contraction sums in its own fixed order).
pub(crate) fn fused_sum(sum: Array) -> Array {
    try_fused_sum(&sum).unwrap_or(sum)
}

fn try_fused_sum(sum: &Array) -> Option<Array> {
    let NodeKind::Reduce { op: Reduction::Sum, axes, arg } = &sum.node().kind else { return None };
    if sum.dtype() != Dtype::F64 || !matches!(arg.node().kind, NodeKind::Map { op: Op::Multiply, .. }) {
        return None;
    }
    let mut f = Factors::default();
    let labels: Vec<u8> = arg.shape().iter().map(|_| f.fresh()).collect::<Option<_>>()?;
    f.add(arg, &labels, true)?;
    if !f.inlined {
        return None;
    }
    let output = labels.iter().enumerate().filter(|(k, _)| !axes.contains(k)).map(|(_, &l)| l).collect();
    let sub = Subscripts { inputs: f.inputs, output };
    Some(Array::new(NodeKind::Einsum { sub, args: f.args }, sum.shape().to_vec(), Dtype::F64))
}

/// The operands of a contraction (`sub`, `args`: float64, every label at
/// its full size) with each float64 product among them split into its
/// factors (`(X.T * w) @ X` as `einsum('ji,j,jk->ik', X, w, X)`); the same
/// when none is a product or the split would take too many operands.
pub(crate) fn split_products(sub: Subscripts, args: Vec<Array>) -> (Subscripts, Vec<Array>) {
    let is_product =
        |a: &Array| matches!(a.node().kind, NodeKind::Map { op: Op::Multiply, loop_dtype: Dtype::F64, .. });
    if !args.iter().any(is_product) {
        return (sub, args);
    }
    let mut f = Factors { used: sub.inputs.iter().flatten().copied().collect(), ..Factors::default() };
    for (a, labels) in args.iter().zip(&sub.inputs) {
        let added = if is_product(a) { f.add(a, labels, false) } else { f.leaf(a, labels.clone()) };
        if added.is_none() {
            return (sub, args);
        }
    }
    (Subscripts { inputs: f.inputs, output: sub.output }, f.args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x(shape: &[usize]) -> Array {
        let n = shape.iter().product::<usize>();
        Array::from_f64((0..n).map(|i| i as f64 * 0.25 - 1.0).collect(), shape).unwrap()
    }

    fn subscripts(a: &Array) -> String {
        let NodeKind::Einsum { sub, .. } = &a.node().kind else { panic!("not a contraction: {:?}", a.node().kind) };
        let s = |l: &[u8]| String::from_utf8_lossy(l).into_owned();
        format!("{}->{}", sub.inputs.iter().map(|l| s(l)).collect::<Vec<_>>().join(","), s(&sub.output))
    }

    #[test]
    fn sum_of_a_product_with_a_contraction_is_one_contraction() {
        let (a, q) = (x(&[7, 3]), x(&[3, 3]));
        let aq = Array::einsum("ij,jk->ik", &[a.clone(), q]).unwrap();
        let prod = Array::ufunc(Op::Multiply, &[aq, a.clone()]).unwrap();
        let s = prod.reduce(Reduction::Sum, &[1], false, None).unwrap();
        assert_eq!(subscripts(&s), "ac,cb,ab->a");
        // Without a contraction among the factors: a plain reduction.
        let plain = Array::ufunc(Op::Multiply, &[a.clone(), a.clone()]).unwrap();
        assert!(matches!(
            plain.reduce(Reduction::Sum, &[1], false, None).unwrap().node().kind,
            NodeKind::Reduce { .. }
        ));
    }

    #[test]
    fn product_operands_split_through_transposes_and_broadcasts() {
        let (a, w) = (x(&[7, 3]), x(&[7]));
        let at = a.view(ViewOp::Transpose(vec![1, 0])).unwrap();
        let weighted = Array::ufunc(Op::Multiply, &[at, w]).unwrap();
        let s = Array::einsum("ij,jk->ik", &[weighted, a]).unwrap();
        assert_eq!(subscripts(&s), "ji,j,jk->ik");
    }
}
