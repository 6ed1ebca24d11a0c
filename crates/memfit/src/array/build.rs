//! One generic constructor for front-ends: an operation named as NumPy names
//! it, its operands and its parameters as JSON (see [`Array::build`]).

use std::sync::Arc;

use serde_json::Value;

use super::node::{Array, Distribution, NodeKind, Reduction};
use super::types::Scalar;
use super::values::Op;
use super::view::ViewOp;
use crate::dtype::Dtype;
use crate::error::{Error, ExpressionFault, Result};

fn bad(message: String) -> Error {
    Error::Expression { kind: ExpressionFault::Value, message }
}

fn field<'v>(p: &'v Value, name: &str) -> Result<&'v Value> {
    p.get(name).ok_or_else(|| bad(format!("missing parameter '{name}'")))
}

fn usize_of(v: &Value, name: &str) -> Result<usize> {
    v.as_u64().map(|x| x as usize).ok_or_else(|| bad(format!("'{name}' must be a non-negative integer, got {v}")))
}

fn i64_of(v: &Value, name: &str) -> Result<i64> {
    v.as_i64().ok_or_else(|| bad(format!("'{name}' must be an integer, got {v}")))
}

fn usizes(p: &Value, name: &str) -> Result<Vec<usize>> {
    field(p, name)?
        .as_array()
        .ok_or_else(|| bad(format!("'{name}' must be a list")))?
        .iter()
        .map(|v| usize_of(v, name))
        .collect()
}

fn dtype_of(v: &Value) -> Result<Dtype> {
    let name = v.as_str().ok_or_else(|| bad(format!("dtype must be a name, got {v}")))?;
    Dtype::from_name(name).ok_or_else(|| Error::Expression {
        kind: ExpressionFault::Type,
        message: format!("memfit.array does not support dtype {name}"),
    })
}

fn opt_dtype(p: &Value) -> Result<Option<Dtype>> {
    match p.get("dtype") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => dtype_of(v).map(Some),
    }
}

fn scalar_of(v: &Value) -> Result<Scalar> {
    Ok(match v {
        Value::Bool(b) => Scalar::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Scalar::Int(i)
            } else if let Some(u) = n.as_u64() {
                Scalar::UInt(u)
            } else {
                Scalar::Float(n.as_f64().unwrap_or(f64::NAN))
            }
        }
        // JSON has no NaN or infinity: front-ends send them as strings.
        Value::String(s) => Scalar::Float(match s.as_str() {
            "nan" => f64::NAN,
            "inf" => f64::INFINITY,
            "-inf" => f64::NEG_INFINITY,
            _ => return Err(bad(format!("not a number: {s}"))),
        }),
        _ => return Err(bad(format!("not a scalar: {v}"))),
    })
}

fn arity(op: &str, inputs: &[Array], n: usize) -> Result<()> {
    if inputs.len() == n {
        Ok(())
    } else {
        Err(bad(format!("{op} takes {n} operand(s), got {}", inputs.len())))
    }
}

impl Array {
    /// Builds the operation NumPy calls `op` over `inputs` with parameters
    /// `params` (a JSON object). Operations and parameters:
    ///
    /// - leaves: `scalar` {value, weak, dtype?}, `full` {shape, value, dtype},
    ///   `arange` {start, step, n, dtype}, `random` {dist: normal|uniform,
    ///   shape, seed, a, b, dtype};
    /// - every [`Op`] by its NumPy name (`add`, `sqrt`, ...), `where`,
    ///   `astype` {dtype};
    /// - views: `transpose` {axes}, `reshape` {shape}, `broadcast_to`
    ///   {shape}, `expand_dims` {axes}, `squeeze` {axes}, `tile` {reps},
    ///   `repeat` {repeats, axis}, `slice` {items: [[start, stop, step]]};
    /// - `concatenate` {axis};
    /// - reductions `sum prod min max mean any all argmin argmax`
    ///   {axes, keepdims, dtype?}, `var`/`std` {axes, keepdims, ddof, dtype?};
    /// - `einsum` {subscripts}.
    ///
    /// # Errors
    /// [`Error::Expression`] for an unknown operation or bad parameters, or
    /// a result of more than `isize::MAX` bytes (NumPy's limit; element
    /// counts would wrap), and the errors of the typed constructors.
    pub fn build(op: &str, inputs: &[Array], params: &Value) -> Result<Array> {
        Array::build_node(op, inputs, params).and_then(Array::within_isize)
    }

    /// The elements of this array at `indices` along `axis` (NumPy's
    /// `take`; negative indices count from the end); the indices are held
    /// once, 8 bytes each.
    ///
    /// # Errors
    /// [`Error::Expression`]: an axis out of range, or NumPy's IndexError
    /// for an index out of range.
    pub fn take(&self, axis: usize, indices: &[i64]) -> Result<Array> {
        let bad = |message: String| Error::Expression { kind: ExpressionFault::Value, message };
        let n = *self.shape().get(axis).ok_or_else(|| bad(format!("take: axis {axis} out of range")))? as i64;
        if let Some(&i) = indices.iter().find(|&&i| i < -n || i >= n) {
            return Err(Error::Expression {
                kind: ExpressionFault::Index,
                message: format!("index {i} is out of bounds for axis {axis} with size {n}"),
            });
        }
        // One allocation of 8 bytes per index (a `Vec` turned into an `Arc`
        // is copied once more).
        let indices: Arc<[i64]> = indices.iter().map(|&i| if i < 0 { i + n } else { i }).collect();
        self.view(ViewOp::Take { axis, indices }).and_then(Array::within_isize)
    }

    /// The positions a `take` node selects along its axis (after negative
    /// ones are counted from the end); `None` for any other node.
    pub fn take_indices(&self) -> Option<&[i64]> {
        match &self.node().kind {
            NodeKind::View { op: ViewOp::Take { indices, .. }, .. } => Some(indices),
            _ => None,
        }
    }

    /// `a`, unless its bytes exceed `isize::MAX` (NumPy's limit; element
    /// counts would wrap).
    fn within_isize(a: Array) -> Result<Array> {
        // NumPy's limit: an array's bytes must be counted by an isize.
        let bytes = a.shape().iter().try_fold(a.dtype().itemsize(), |n, &d| n.checked_mul(d));
        if bytes.is_none_or(|b| b > isize::MAX as usize) {
            return Err(Error::Expression {
                kind: ExpressionFault::Value,
                message: "array is too big; `arr.size * arr.dtype.itemsize` is larger than the maximum possible size."
                    .into(),
            });
        }
        Ok(a)
    }

    fn build_node(op: &str, inputs: &[Array], params: &Value) -> Result<Array> {
        let p = params;
        let one = |n| arity(op, inputs, n);
        Ok(match op {
            "scalar" => {
                one(0)?;
                let weak = p.get("weak").and_then(Value::as_bool).unwrap_or(false);
                Array::scalar(scalar_of(field(p, "value")?)?, opt_dtype(p)?, weak)
            }
            "full" => {
                one(0)?;
                Array::full(&usizes(p, "shape")?, scalar_of(field(p, "value")?)?, dtype_of(field(p, "dtype")?)?)
            }
            "arange" => {
                one(0)?;
                let (start, step) = (scalar_of(field(p, "start")?)?, scalar_of(field(p, "step")?)?);
                Array::arange(start, step, usize_of(field(p, "n")?, "n")?, dtype_of(field(p, "dtype")?)?)
            }
            "random" => {
                one(0)?;
                let dist = match field(p, "dist")?.as_str() {
                    Some("normal") => Distribution::Normal,
                    Some("uniform") => Distribution::Uniform,
                    other => return Err(bad(format!("unknown distribution {other:?}"))),
                };
                let f = |n: &str| -> Result<f64> { Ok(scalar_of(field(p, n)?)?.to_f64()) };
                let seed =
                    field(p, "seed")?.as_u64().ok_or_else(|| bad("seed must be a non-negative integer".into()))?;
                Array::random(dist, &usizes(p, "shape")?, seed, f("a")?, f("b")?, dtype_of(field(p, "dtype")?)?)?
            }
            "where" => {
                one(3)?;
                Array::where_(&inputs[0], &inputs[1], &inputs[2])?
            }
            "astype" => {
                one(1)?;
                inputs[0].astype(dtype_of(field(p, "dtype")?)?)
            }
            "take" => {
                one(1)?;
                let axis = usize_of(field(p, "axis")?, "axis")?;
                let items = field(p, "indices")?.as_array().ok_or_else(|| bad("indices must be a list".into()))?;
                let indices = items.iter().map(|it| i64_of(it, "index")).collect::<Result<Vec<_>>>()?;
                inputs[0].take(axis, &indices)?
            }
            "transpose" | "reshape" | "broadcast_to" | "expand_dims" | "squeeze" | "tile" | "repeat" | "slice" => {
                one(1)?;
                let view = match op {
                    "transpose" => ViewOp::Transpose(usizes(p, "axes")?),
                    "reshape" => ViewOp::Reshape(usizes(p, "shape")?),
                    "broadcast_to" => ViewOp::BroadcastTo(usizes(p, "shape")?),
                    "expand_dims" => ViewOp::ExpandDims(usizes(p, "axes")?),
                    "squeeze" => ViewOp::Squeeze(usizes(p, "axes")?),
                    "tile" => ViewOp::Tile(usizes(p, "reps")?),
                    "repeat" => ViewOp::Repeat {
                        repeats: usize_of(field(p, "repeats")?, "repeats")?,
                        axis: usize_of(field(p, "axis")?, "axis")?,
                    },
                    _ => {
                        let items = field(p, "items")?.as_array().ok_or_else(|| bad("items must be a list".into()))?;
                        let mut out = Vec::with_capacity(items.len());
                        for it in items {
                            let t =
                                it.as_array().filter(|t| t.len() == 3).ok_or_else(|| bad(format!("bad slice {it}")))?;
                            let (start, stop, step) =
                                (i64_of(&t[0], "start")?, i64_of(&t[1], "stop")?, i64_of(&t[2], "step")?);
                            if step == 0 {
                                return Err(bad("slice step cannot be zero".into()));
                            }
                            // Python's slice.indices semantics: stop is exclusive.
                            let len = if step > 0 {
                                (stop - start + step - 1).div_euclid(step).max(0)
                            } else {
                                (start - stop - step - 1).div_euclid(-step).max(0)
                            };
                            out.push((start, step, len as usize));
                        }
                        ViewOp::Slice(out)
                    }
                };
                inputs[0].view(view)?
            }
            "concatenate" => Array::concatenate(inputs, usize_of(field(p, "axis")?, "axis")?)?,
            "cumsum" | "cumprod" => {
                one(1)?;
                let op = if op == "cumsum" { Reduction::Sum } else { Reduction::Prod };
                inputs[0].cumulative(op, usize_of(field(p, "axis")?, "axis")?, opt_dtype(p)?)?
            }
            "sum" | "prod" | "min" | "max" | "mean" | "any" | "all" | "argmin" | "argmax" | "var" | "std" => {
                one(1)?;
                let axes = usizes(p, "axes")?;
                let keepdims = p.get("keepdims").and_then(Value::as_bool).unwrap_or(false);
                if op == "var" || op == "std" {
                    let ddof = p.get("ddof").map_or(Ok(Scalar::Float(0.0)), scalar_of)?.to_f64();
                    return inputs[0].var(&axes, keepdims, ddof, opt_dtype(p)?, op == "std");
                }
                let r = match op {
                    "sum" => Reduction::Sum,
                    "prod" => Reduction::Prod,
                    "min" => Reduction::Min,
                    "max" => Reduction::Max,
                    "mean" => Reduction::Mean,
                    "any" => Reduction::Any,
                    "all" => Reduction::All,
                    "argmin" => Reduction::ArgMin,
                    _ => Reduction::ArgMax,
                };
                inputs[0].reduce(r, &axes, keepdims, opt_dtype(p)?)?
            }
            "einsum" => {
                let s = field(p, "subscripts")?.as_str().ok_or_else(|| bad("subscripts must be a string".into()))?;
                Array::einsum(s, inputs)?
            }
            name => match Op::from_name(name) {
                Some(o) if o != Op::Cast && o != Op::Where => Array::ufunc(o, inputs)?,
                _ => {
                    return Err(Error::Expression {
                        kind: ExpressionFault::Type,
                        message: format!("memfit.array does not support the operation '{name}'"),
                    })
                }
            },
        })
    }
}
