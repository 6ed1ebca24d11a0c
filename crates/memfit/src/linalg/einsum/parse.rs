//! Subscript parsing, after NumPy's `numpy.einsum` (`einsum.c.src`:
//! `parse_operand_subscripts`, `parse_output_subscripts`) and the size
//! checks of `numpy.einsum_path`.

use std::collections::BTreeMap;

use super::{label_name, EinsumError, RemappedShape, Subscripts};

/// First fresh label for dimensions under `...`.
const ELLIPSIS_BASE: u8 = 0x80;

/// One term: explicit labels in order, with the position of `...` among them.
struct Term {
    labels: Vec<u8>,
    ellipsis_at: Option<usize>,
}

/// Parses one comma-separated term (`operand` is `None` for the output).
fn parse_term(text: &str, operand: Option<usize>) -> Result<Term, EinsumError> {
    let bytes: Vec<u8> = text.bytes().filter(|&b| b != b' ').collect();
    let mut term = Term { labels: Vec::new(), ellipsis_at: None };
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_alphabetic() {
            term.labels.push(b);
            i += 1;
        } else if b == b'.' {
            if bytes.get(i..i + 3) != Some(b"...") || term.ellipsis_at.is_some() {
                return Err(EinsumError::InvalidEllipsis { operand });
            }
            term.ellipsis_at = Some(term.labels.len());
            i += 3;
        } else {
            let character = text.chars().find(|c| !c.is_ascii_alphabetic() && *c != '.' && *c != ' ');
            return Err(EinsumError::InvalidCharacter { character: character.unwrap_or(char::from(b)) });
        }
    }
    Ok(term)
}

/// Parses NumPy `einsum` subscripts for operands of the given shapes (one
/// `Vec` of extents per operand, in operand order).
///
/// Supports an explicit output (`"ij,jk->ik"`) and the implicit one (the
/// labels appearing exactly once, alphabetically, after the broadcast
/// dimensions), `...` (at most one per term; its dimensions broadcast
/// against each other, right-aligned, and come first in an implicit
/// output), repeated labels within one operand (its diagonal; the axes must
/// have equal extents), and extent-1 broadcasting of a label across
/// operands as `numpy.einsum_path` allows it. Spaces are ignored.
///
/// # Errors
/// [`EinsumError`]: no operands; a `-` before the `->`; a different number
/// of terms than operands; a character other than letters, `.`, `,`, `->`
/// and spaces; a stray `.` or
/// a second `...` in a term; labels not matching an operand's dimensions; more
/// than 128 dimensions under `...`; an output label repeated or absent from
/// the inputs; broadcast dimensions without `...` in an explicit output; a
/// diagonal over unequal extents; extents of a label that differ and are
/// not 1 (naming the label and both extents).
pub fn parse(subscripts: &str, shapes: &[Vec<usize>]) -> Result<Subscripts, EinsumError> {
    if shapes.is_empty() {
        return Err(EinsumError::NoOperands);
    }
    let (lhs, rhs) = match subscripts.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (subscripts, None),
    };
    if lhs.contains('-') {
        return Err(EinsumError::StrayArrow);
    }
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != shapes.len() {
        return Err(EinsumError::OperandCount { subscripts: terms.len(), operands: shapes.len() });
    }
    let parsed = terms.iter().enumerate().map(|(i, t)| parse_term(t, Some(i))).collect::<Result<Vec<_>, _>>()?;
    let output = rhs.map(|r| parse_term(r, None)).transpose()?;

    // Broadcast dimensions of each operand.
    let mut n_broadcast = 0;
    let mut ellipsis_dims = Vec::with_capacity(shapes.len());
    for (operand, (term, shape)) in parsed.iter().zip(shapes).enumerate() {
        let (labels, ndim) = (term.labels.len(), shape.len());
        let ok = if term.ellipsis_at.is_some() { labels <= ndim } else { labels == ndim };
        if !ok {
            return Err(EinsumError::DimensionCount { operand, labels, ndim, ellipsis: term.ellipsis_at.is_some() });
        }
        ellipsis_dims.push(ndim - labels);
        n_broadcast = n_broadcast.max(ndim - labels);
    }
    if n_broadcast > 128 {
        return Err(EinsumError::TooManyEllipsisDims { count: n_broadcast });
    }
    let broadcast_labels: Vec<u8> = (0..n_broadcast).map(|d| ELLIPSIS_BASE + d as u8).collect();
    let inputs: Vec<Vec<u8>> = parsed
        .iter()
        .zip(&ellipsis_dims)
        .map(|(term, &e)| match term.ellipsis_at {
            Some(at) => {
                let mut v = term.labels[..at].to_vec();
                v.extend_from_slice(&broadcast_labels[n_broadcast - e..]);
                v.extend_from_slice(&term.labels[at..]);
                v
            }
            None => term.labels.clone(),
        })
        .collect();

    let output = match output {
        Some(term) => {
            let mut seen = [false; 256];
            for &l in &term.labels {
                if seen[l as usize] {
                    return Err(EinsumError::OutputRepeated { label: char::from(l) });
                }
                seen[l as usize] = true;
                if !inputs.iter().any(|v| v.contains(&l)) {
                    return Err(EinsumError::OutputNotInInputs { label: char::from(l) });
                }
            }
            match term.ellipsis_at {
                Some(at) => {
                    let mut v = term.labels[..at].to_vec();
                    v.extend_from_slice(&broadcast_labels);
                    v.extend_from_slice(&term.labels[at..]);
                    v
                }
                None if n_broadcast > 0 => return Err(EinsumError::OutputMissingEllipsis { ndim: n_broadcast }),
                None => term.labels,
            }
        }
        None => {
            let mut counts = [0usize; 256];
            for term in &parsed {
                for &l in &term.labels {
                    counts[l as usize] += 1;
                }
            }
            let mut v = broadcast_labels.clone();
            v.extend((0u8..128).filter(|&l| counts[l as usize] == 1));
            v
        }
    };
    let sub = Subscripts { inputs, output };
    check_sizes(&sub, shapes)?;
    Ok(sub)
}

/// Checks diagonals (equal extents) and each label's extents across operands
/// (equal, or 1 broadcasting), as `numpy.einsum_path` does.
fn check_sizes(sub: &Subscripts, shapes: &[Vec<usize>]) -> Result<(), EinsumError> {
    let mut sizes: BTreeMap<u8, usize> = BTreeMap::new();
    for (operand, (labels, shape)) in sub.inputs.iter().zip(shapes).enumerate() {
        let mut own: BTreeMap<u8, usize> = BTreeMap::new();
        for (&l, &dim) in labels.iter().zip(shape) {
            match own.get(&l) {
                Some(&first) if first != dim => {
                    return Err(EinsumError::DiagonalMismatch { label: char::from(l), operand, first, other: dim });
                }
                Some(_) => {}
                None => {
                    own.insert(l, dim);
                }
            }
        }
        for (l, dim) in own {
            match sizes.get(&l).copied() {
                None | Some(1) => {
                    sizes.insert(l, dim);
                }
                Some(prev) if dim != 1 && dim != prev => {
                    return Err(EinsumError::SizeMismatch {
                        label: label_name(l),
                        operand,
                        size: dim,
                        previous: prev,
                        operands: remapped(sub, shapes),
                    });
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}

/// Each operand as NumPy's einsum iterates over it (see [`RemappedShape`]),
/// for its message on extents that do not broadcast.
fn remapped(sub: &Subscripts, shapes: &[Vec<usize>]) -> Vec<RemappedShape> {
    let mut order = sub.output.clone();
    order.extend((0..=u8::MAX).filter(|l| !sub.output.contains(l) && sub.inputs.iter().any(|v| v.contains(l))));
    sub.inputs
        .iter()
        .zip(shapes)
        .map(|(labels, shape)| {
            // Repeated labels are one axis (the diagonal), where they first appear.
            let mut axes: Vec<(u8, usize)> = Vec::with_capacity(labels.len());
            for (&l, &dim) in labels.iter().zip(shape) {
                if !axes.iter().any(|&(a, _)| a == l) {
                    axes.push((l, dim));
                }
            }
            RemappedShape {
                original: axes.iter().map(|&(_, d)| d).collect(),
                remapped: order.iter().map(|&l| axes.iter().find(|&&(a, _)| a == l).map(|&(_, d)| d)).collect(),
            }
        })
        .collect()
}

/// The extent of every label of `sub` (the largest over its axes, the others
/// being 1 or equal), for operands of `shapes` (as given to [`parse`]).
///
/// # Panics
/// If `shapes` does not have one shape per operand with one extent per label
/// (a caller bug: `sub` came from [`parse`] with other shapes).
pub fn label_sizes(sub: &Subscripts, shapes: &[Vec<usize>]) -> BTreeMap<u8, usize> {
    assert_eq!(sub.inputs.len(), shapes.len(), "einsum: one shape per operand");
    let mut sizes = BTreeMap::new();
    for (labels, shape) in sub.inputs.iter().zip(shapes) {
        assert_eq!(labels.len(), shape.len(), "einsum: one extent per label");
        for (&l, &dim) in labels.iter().zip(shape) {
            let e = sizes.entry(l).or_insert(dim);
            if *e == 1 {
                *e = dim;
            }
        }
    }
    sizes
}
