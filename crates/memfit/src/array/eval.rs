//! Evaluation of a fused expression ([`Ir`]) over one tile: a box
//! `lo..hi` of the stage's iteration space, values in C order.

use std::sync::{Arc, OnceLock};

use super::lower::{Ir, IrKind, Src};
use super::node::Distribution;
use super::store::Stored;
use super::types::{kind, round_float, Kind, Scalar};
use super::values::{apply, fresh_exceptions, settle, Col, FpCounts};
use super::view::ViewMap;
use crate::dtype::Dtype;
use crate::error::Result;
use crate::exec::row_unit;
use crate::io::ChunkCache;

/// What evaluation needs besides the expression: the filled intermediate
/// slots, the counts of values that became NaN or infinite from finite
/// operands, and the stage's cache of decoded Zarr chunks.
pub struct Ctx<'a> {
    /// Intermediate results, filled stage by stage.
    pub slots: &'a [OnceLock<Arc<Stored>>],
    /// Non-finite values produced from finite operands, by exception.
    pub fp: &'a FpCounts,
    /// Decoded chunks of the Zarr inputs, shared by the stage's threads
    /// (planned: [`super::plan::StagePlan::zarr_cache`]).
    pub zarr: &'a ChunkCache,
}

/// Element offsets of the box `lo..hi` through `map`, in C order.
pub fn offsets(map: &ViewMap, lo: &[usize], hi: &[usize]) -> Vec<i64> {
    let table = |joint: Option<usize>| {
        let n: usize = lo.iter().zip(hi).map(|(a, b)| b - a).product();
        let mut out = Vec::with_capacity(n);
        out.push(0);
        for k in 0..lo.len() {
            let c = map.contributions(k, lo[k], hi[k], joint);
            if c.iter().all(|&x| x == 0) && c.len() == 1 {
                continue;
            }
            let prev = std::mem::take(&mut out);
            out.reserve(prev.len() * c.len());
            for p in prev {
                out.extend(c.iter().map(|&x| p + x));
            }
        }
        out
    };
    let mut out = table(None);
    for o in &mut out {
        *o += map.base;
    }
    // Parts that do not separate: one chain per element.
    for (j, joint) in map.joints.iter().enumerate() {
        for (o, x) in out.iter_mut().zip(table(Some(j))) {
            *o += joint.eval(x);
        }
    }
    out
}

/// The first offset of the box `lo..hi` when its elements are one
/// contiguous ascending run through `map` (a C-order block of a C-order
/// array), else `None`.
fn contiguous_start(map: &ViewMap, lo: &[usize], hi: &[usize]) -> Option<i64> {
    if !map.joints.is_empty() {
        return None;
    }
    let nd = lo.len();
    let mut expect = 1i64; // the stride the next axis out must have
    let mut outer_only = false; // an axis inside was partial: outer axes must be length 1
    let mut start = map.base;
    for k in (0..nd).rev() {
        let ext = hi[k] - lo[k];
        let coef = match map.axes[k].as_slice() {
            [] => 0,
            [t] if t.chain.is_empty() && t.joint.is_none() => t.coef,
            _ => return None,
        };
        start += coef * lo[k] as i64;
        if ext == 1 {
            continue;
        }
        if outer_only || coef != expect {
            return None;
        }
        expect *= ext as i64;
        outer_only = ext != map.shape[k];
    }
    Some(start)
}

/// Shortest run worth one read.
const MIN_RUN: usize = 32;

/// An axis of the box along which the file's elements are contiguous
/// (one unit-stride term), with at least [`MIN_RUN`] elements.
fn run_axis(map: &ViewMap, lo: &[usize], hi: &[usize]) -> Option<usize> {
    (0..lo.len()).rev().find(|&k| {
        hi[k] - lo[k] >= MIN_RUN
            && matches!(map.axes[k].as_slice(), [t] if t.coef == 1 && t.chain.is_empty() && t.joint.is_none())
    })
}

/// Reads the box as runs along axis `k` into `buf` (the box's bytes, nearby
/// runs in one request: [`Stored::read_runs`]), then the values in the
/// box's C order.
fn read_runs(
    s: &Stored,
    map: &ViewMap,
    lo: &[usize],
    hi: &[usize],
    k: usize,
    dtype: Dtype,
    buf: &mut Vec<u8>,
) -> Result<Col> {
    let ext: Vec<usize> = lo.iter().zip(hi).map(|(a, b)| b - a).collect();
    let run = ext[k];
    let (mut rlo, mut rhi) = (lo.to_vec(), hi.to_vec());
    rhi[k] = rlo[k] + 1;
    let starts = offsets(map, &rlo, &rhi);
    rlo[k] = 0;
    let n = starts.len() * run;
    s.read_runs(&starts, run, buf)?;
    let mut out = Col::with_capacity(dtype, n);
    if k == lo.len() - 1 {
        out.decode_all(buf, s.dtype);
    } else {
        // Box element (…, i_k, …) sits at run r (the other coordinates in C
        // order), position i_k.
        let mut strides = vec![0i64; ext.len()];
        let mut w = run as i64;
        for j in (0..ext.len()).rev() {
            if j == k {
                strides[j] = 1;
            } else {
                strides[j] = w;
                w *= ext[j] as i64;
            }
        }
        let at = offsets(&ViewMap::strided(&ext, &strides, 0), &vec![0; ext.len()], &ext);
        out.decode_from(buf, s.dtype, at.into_iter().map(|p| p as usize));
    }
    Ok(out)
}

/// Evaluates `ir` over the box `lo..hi`; `buf` is the read buffer. Nodes
/// are evaluated in order, each once; a node's values are dropped after
/// their last use (moved into it, not copied).
///
/// # Errors
/// I/O errors of file reads; integer powers with negative exponents.
pub fn eval(ir: &Ir, lo: &[usize], hi: &[usize], ctx: &Ctx<'_>, buf: &mut Vec<u8>) -> Result<Col> {
    Ok(eval_all(ir, lo, hi, ctx, buf)?.0.swap_remove(0))
}

/// Evaluates every result of `ir` ([`Ir::roots`]) over the box, as
/// [`eval`] does (shared nodes once): the values of each distinct result
/// node, and for each result the index of its values among them.
///
/// # Errors
/// As [`eval`].
pub fn eval_all(
    ir: &Ir,
    lo: &[usize],
    hi: &[usize],
    ctx: &Ctx<'_>,
    buf: &mut Vec<u8>,
) -> Result<(Vec<Col>, Vec<usize>)> {
    let n: usize = lo.iter().zip(hi).map(|(a, b)| b - a).product();
    let mut values: Vec<Option<Col>> = Vec::with_capacity(ir.nodes.len());
    let mut left: Vec<u32> = (0..ir.nodes.len()).map(|i| ir.uses(i)).collect();
    for node in &ir.nodes {
        let col = match &node.kind {
            IrKind::Const(v) => Col::splat(*v, node.dtype, n),
            IrKind::Leaf { src, map } => read_leaf(src, map, node.dtype, lo, hi, n, ctx, buf)?,
            IrKind::Map { op, loop_dtype, args } => {
                let cols: Vec<Col> = args
                    .iter()
                    .map(|&a| {
                        left[a] -= 1;
                        if left[a] == 0 {
                            values[a].take().expect("values held until their last use")
                        } else {
                            values[a].clone().expect("values held until their last use")
                        }
                    })
                    .collect();
                let out = apply(*op, *loop_dtype, node.dtype, &cols)?;
                ctx.fp.add_all(fresh_exceptions(*op, *loop_dtype, node.dtype, &cols, &out));
                out
            }
            IrKind::Concat { axis, parts } => concat(*axis, parts, node.dtype, lo, hi, n, ctx, buf)?,
        };
        values.push(Some(col));
    }
    let (mut cols, mut at, mut seen) = (Vec::new(), Vec::new(), Vec::<usize>::new());
    for &r in ir.roots() {
        at.push(match seen.iter().position(|&s| s == r) {
            Some(k) => k,
            None => {
                seen.push(r);
                cols.push(values[r].take().expect("results held until the end"));
                cols.len() - 1
            }
        });
    }
    Ok((cols, at))
}

/// The values of a leaf over the box.
#[allow(clippy::too_many_arguments)]
fn read_leaf(
    src: &Src,
    map: &ViewMap,
    dtype: Dtype,
    lo: &[usize],
    hi: &[usize],
    n: usize,
    ctx: &Ctx<'_>,
    buf: &mut Vec<u8>,
) -> Result<Col> {
    let stored = match src {
        Src::Stored(s) => Some(&**s),
        Src::Slot(i) => Some(&**ctx.slots[*i].get().expect("slot filled before use")),
        _ => None,
    };
    match (stored, contiguous_start(map, lo, hi)) {
        (Some(s), Some(start)) => {
            let mut out = Col::with_capacity(dtype, n);
            s.read_range(start, n, &mut out, buf, ctx.zarr)?;
            Ok(out)
        }
        (Some(s), None) if s.reads_runs() => match run_axis(map, lo, hi) {
            Some(k) => read_runs(s, map, lo, hi, k, dtype, buf),
            None => leaf(src, dtype, &offsets(map, lo, hi), ctx, buf),
        },
        _ => leaf(src, dtype, &offsets(map, lo, hi), ctx, buf),
    }
}

/// The values of parts joined along `axis` over the box.
#[allow(clippy::too_many_arguments)]
fn concat(
    axis: usize,
    parts: &[(usize, usize, Ir)],
    dtype: Dtype,
    lo: &[usize],
    hi: &[usize],
    n: usize,
    ctx: &Ctx<'_>,
    buf: &mut Vec<u8>,
) -> Result<Col> {
    let a = axis;
    let outer: usize = lo[..a].iter().zip(&hi[..a]).map(|(x, y)| y - x).product();
    let inner: usize = lo[a + 1..].iter().zip(&hi[a + 1..]).map(|(x, y)| y - x).product();
    let mut pieces = Vec::new();
    for (start, len, part) in parts {
        let (s, e) = (lo[a].max(*start), hi[a].min(start + len));
        if s >= e {
            continue;
        }
        let (mut plo, mut phi) = (lo.to_vec(), hi.to_vec());
        (plo[a], phi[a]) = (s - start, e - start);
        pieces.push((e - s, eval(part, &plo, &phi, ctx, buf)?));
    }
    let mut out = Col::with_capacity(dtype, n);
    for o in 0..outer {
        for (w, col) in &pieces {
            let run = w * inner;
            out.extend_from(col, o * run..(o + 1) * run);
        }
    }
    Ok(out)
}

fn leaf(src: &Src, dtype: Dtype, off: &[i64], ctx: &Ctx<'_>, buf: &mut Vec<u8>) -> Result<Col> {
    let mut out = Col::with_capacity(dtype, off.len());
    match src {
        Src::Stored(s) => s.gather(off, &mut out, buf, ctx.zarr)?,
        Src::Slot(i) => ctx.slots[*i].get().expect("slot filled before use").gather(off, &mut out, buf, ctx.zarr)?,
        Src::Arange { start, step } => {
            out = match kind(dtype) {
                // NumPy's fill: start + i · step in the dtype's arithmetic
                // (float32 for float16 and float32).
                Kind::Float if matches!(dtype, Dtype::F32 | Dtype::F16) => {
                    let (a, d) = (start.to_f64() as f32, step.to_f64() as f32);
                    Col::F(off.iter().map(|&i| round_float(f64::from(a + i as f32 * d), dtype)).collect())
                }
                Kind::Float => {
                    let (a, d) = (start.to_f64(), step.to_f64());
                    Col::F(off.iter().map(|&i| round_float(a + i as f64 * d, dtype)).collect())
                }
                _ => {
                    let as_i = |v: Scalar| match v {
                        Scalar::Int(i) => i,
                        Scalar::UInt(u) => u as i64,
                        other => other.to_f64() as i64,
                    };
                    let (a, d) = (as_i(*start), as_i(*step));
                    let v: Vec<i64> = off.iter().map(|&i| a.wrapping_add(i.wrapping_mul(d))).collect();
                    settle(
                        if dtype.is_unsigned_int() {
                            Col::U(v.into_iter().map(|x| x as u64).collect())
                        } else {
                            Col::I(v)
                        },
                        dtype,
                    )
                }
            }
        }
        Src::Random { dist, seed, a, b } => {
            let value = |i: i64| -> f64 {
                let i = i as usize;
                match dist {
                    Distribution::Uniform => a + (b - a) * row_unit(*seed, i),
                    Distribution::Normal => {
                        let (u1, u2) = (row_unit(*seed, 2 * i), row_unit(*seed, 2 * i + 1));
                        a + b * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
                    }
                }
            };
            out = Col::F(off.iter().map(|&i| round_float(value(i), dtype)).collect());
        }
    }
    Ok(out)
}
