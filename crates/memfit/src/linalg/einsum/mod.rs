//! NumPy-style `einsum` on dense in-memory `f64` blocks: subscript parsing
//! ([`parse`], following NumPy's `numpy.einsum`), a pairwise contraction order
//! chosen by peak intermediate bytes ([`contraction_path`], after
//! opt_einsum's `optimal` and `greedy` strategies), and the contraction itself
//! ([`contract`]), one GEMM per batch.
//!
//! The blocked engine calls [`contract`] once per output tile and
//! contracted-index chunk. Every output element's value depends only on the
//! operand elements it is made of, never on how the output's free indices
//! were sliced into tiles: each element is one fixed-order chain of fused
//! multiply-adds over the contracted indices (ascending), and sums over
//! labels private to one operand run in ascending index order. faer's GEMM
//! does not give this (it switches between matrix-vector, small-matrix and
//! blocked kernels, and their summation orders, by the shape), so the GEMM
//! here is a packed register-tiled kernel of this module with one
//! accumulator per output element. Compute the [`Path`] once from the full
//! sizes and pass the same path for every tile: a different path is a
//! different summation order.

mod contract;
mod gemm;
mod parse;
mod path;
#[cfg(test)]
mod tests;

use std::fmt;

pub use contract::{contract, scratch_bytes};
pub use parse::{label_sizes, parse};
pub use path::contraction_path;

/// Parsed subscripts: one label list per operand (one label per axis, in axis
/// order; a label repeated within one operand takes that operand's
/// diagonal) and the output labels (one per output axis, in order).
///
/// Labels are ASCII letters; each axis covered by `...` gets a fresh label
/// `0x80 + d`, where `d` counts the broadcast dimensions from the left of
/// the widest ellipsis, so operands with fewer ellipsis dimensions line up on
/// the right as in NumPy broadcasting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscripts {
    /// The labels of each operand's axes.
    pub inputs: Vec<Vec<u8>>,
    /// The labels of the output's axes.
    pub output: Vec<u8>,
}

/// A pairwise contraction order in opt_einsum's convention.
#[derive(Debug, Clone, PartialEq)]
pub struct Path {
    /// Each step contracts the operands at positions `(i, j)`, `i < j`, of
    /// the current list (the inputs at first); both are removed and the
    /// result appended at the end. One operand: no steps.
    pub steps: Vec<(usize, usize)>,
    /// The most bytes (8 per element) held at once by intermediates: during
    /// each step, the earlier steps' results still in the list plus the
    /// step's own result, except the last step's (that is the output).
    /// Pre-reduced copies and GEMM packing are not counted here (see
    /// [`scratch_bytes`]).
    pub peak_bytes: u64,
    /// Floating-point operations of the pairwise steps, counted as
    /// opt_einsum's `flop_count`: the product of the sizes of all labels of
    /// the pair, times 2 when the step sums over a label.
    pub flops: f64,
    /// The labels and element count of each step's result, in step order;
    /// the last is the output.
    pub intermediates: Vec<(Vec<u8>, u64)>,
}

/// A dense `f64` array in C (row-major) order: `data.len()` is the product of
/// `shape` (1 for a scalar, `shape == []`).
#[derive(Debug, Clone, PartialEq)]
pub struct Dense {
    /// Extent of each axis.
    pub shape: Vec<usize>,
    /// The elements, last axis fastest.
    pub data: Vec<f64>,
}

/// An invalid `einsum` call, with the data to word it. [`fmt::Display`]
/// gives NumPy's message (`numpy.einsum`'s, not `einsum_path`'s), word for
/// word; `operand` counts from 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EinsumError {
    /// No operands were given.
    NoOperands,
    /// The subscripts name a different number of operands than were given.
    OperandCount {
        /// Operands named by the subscripts (comma-separated terms).
        subscripts: usize,
        /// Operands given.
        operands: usize,
    },
    /// A character that is neither an ASCII letter, `.`, `,`, `->` nor a space.
    InvalidCharacter {
        /// The offending character.
        character: char,
    },
    /// A `.` not part of a `...`, or more than one `...` in one term;
    /// `operand` is `None` for the output.
    InvalidEllipsis {
        /// The term, `None` for the output.
        operand: Option<usize>,
    },
    /// An operand's subscripts do not match its number of dimensions.
    DimensionCount {
        /// The operand.
        operand: usize,
        /// Explicit labels (not counting `...`).
        labels: usize,
        /// The operand's number of dimensions.
        ndim: usize,
        /// Whether its term has a `...` (then only too many labels is an error).
        ellipsis: bool,
    },
    /// More than 128 dimensions under `...`.
    TooManyEllipsisDims {
        /// The number of dimensions under the ellipsis.
        count: usize,
    },
    /// An output label that no input has.
    OutputNotInInputs {
        /// The label.
        label: char,
    },
    /// An output label given more than once.
    OutputRepeated {
        /// The label.
        label: char,
    },
    /// The inputs have dimensions under `...` but the explicit output has no `...`.
    OutputMissingEllipsis {
        /// The number of broadcast dimensions.
        ndim: usize,
    },
    /// A label repeated within one operand over axes of different extents.
    DiagonalMismatch {
        /// The label.
        label: char,
        /// The operand.
        operand: usize,
        /// Extent of the label's first axis in the operand.
        first: usize,
        /// Extent of the mismatching axis.
        other: usize,
    },
    /// A label (or a broadcast dimension under `...`) whose extent differs
    /// between operands, neither being 1.
    SizeMismatch {
        /// The label as written, or `...` with the broadcast dimension.
        label: String,
        /// The operand where the mismatch was found.
        operand: usize,
        /// Its extent there.
        size: usize,
        /// The extent in the earlier operands.
        previous: usize,
        /// Every operand's shape and its axes in NumPy's iteration order
        /// (what NumPy's message shows).
        operands: Vec<RemappedShape>,
    },
    /// A `-` in the inputs' subscripts that does not start the `->`.
    StrayArrow,
}

/// An operand as NumPy's einsum iterates over it: its shape (repeated
/// labels combined into one axis, the diagonal) and, for each label in the
/// iteration order (the output's labels, then the summed ones in ascending
/// character order), its extent, `None` where the operand lacks the label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemappedShape {
    /// The shape, after combining repeated labels.
    pub original: Vec<usize>,
    /// The extent along each iteration label, or `None` (NumPy's `newaxis`).
    pub remapped: Vec<Option<usize>>,
}

/// `shape` as NumPy prints a tuple of extents (`(2,)`, `(2,3)`); `None` is
/// `newaxis`.
fn shape_text(shape: impl ExactSizeIterator<Item = Option<usize>>) -> String {
    let one = shape.len() == 1;
    let parts: Vec<String> = shape.map(|d| d.map_or_else(|| "newaxis".to_string(), |d| d.to_string())).collect();
    format!("({}{})", parts.join(","), if one { "," } else { "" })
}

impl fmt::Display for EinsumError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoOperands => write!(f, "No input operands"),
            // NumPy's words, which count the subscripts' terms: "more" when
            // the subscripts name more operands than were given.
            Self::OperandCount { subscripts, operands } if subscripts > operands => {
                write!(f, "more operands provided to einstein sum function than specified in the subscripts string")
            }
            Self::OperandCount { .. } => {
                write!(f, "fewer operands provided to einstein sum function than specified in the subscripts string")
            }
            Self::InvalidCharacter { character } => write!(
                f,
                "invalid subscript '{}' in einstein sum subscripts string, subscripts must be letters",
                character.escape_default()
            ),
            Self::InvalidEllipsis { operand: Some(op) } => write!(
                f,
                "einstein sum subscripts string contains a '.' that is not part of an ellipsis ('...') in operand {op}"
            ),
            Self::InvalidEllipsis { operand: None } => write!(
                f,
                "einstein sum subscripts string contains a '.' that is not part of an ellipsis ('...') in the output"
            ),
            Self::DimensionCount { operand, labels, ndim, ellipsis } if *ellipsis || labels > ndim => {
                write!(f, "einstein sum subscripts string contains too many subscripts for operand {operand}")
            }
            Self::DimensionCount { .. } => write!(
                f,
                "operand has more dimensions than subscripts given in einstein sum, but no '...' ellipsis \
                 provided to broadcast the extra dimensions."
            ),
            Self::TooManyEllipsisDims { count } => {
                write!(f, "too many dimensions under '...' in einstein sum ({count}, at most 128)")
            }
            Self::OutputNotInInputs { label } => write!(
                f,
                "einstein sum subscripts string included output subscript '{label}' which never appeared \
                 in an input"
            ),
            Self::OutputRepeated { label } => {
                write!(f, "einstein sum subscripts string includes output subscript '{label}' multiple times")
            }
            Self::OutputMissingEllipsis { .. } => write!(
                f,
                "output has more dimensions than subscripts given in einstein sum, but no '...' ellipsis \
                 provided to broadcast the extra dimensions."
            ),
            Self::DiagonalMismatch { label, first, other, .. } => {
                write!(
                    f,
                    "dimensions in single operand for collapsing index '{label}' don't match ({first} != {other})"
                )
            }
            Self::SizeMismatch { operands, .. } => {
                write!(f, "operands could not be broadcast together with remapped shapes [original->remapped]: ")?;
                for op in operands {
                    // Leading new axes are left out, as NumPy prints them.
                    let start = op.remapped.iter().position(Option::is_some).unwrap_or(op.remapped.len());
                    let original = shape_text(op.original.iter().map(|&d| Some(d)));
                    write!(f, "{original}->{} ", shape_text(op.remapped[start..].iter().copied()))?;
                }
                Ok(())
            }
            Self::StrayArrow => {
                write!(f, "einstein sum subscript string does not contain proper '->' output specified")
            }
        }
    }
}

impl std::error::Error for EinsumError {}

/// Label wording for messages: the letter, or `...[d]` for a broadcast dimension.
fn label_name(label: u8) -> String {
    if label.is_ascii_alphabetic() {
        char::from(label).to_string()
    } else {
        format!("...[{}]", label - 0x80)
    }
}

/// The product of `labels`' sizes, saturating.
fn elements(labels: &[u8], sizes: &std::collections::BTreeMap<u8, usize>) -> u64 {
    labels.iter().fold(1u64, |acc, l| acc.saturating_mul(sizes[l] as u64))
}
