//! Lazy n-dimensional array expressions evaluated in tiles within a memory
//! limit, with NumPy's names, dtypes and broadcasting rules.
//!
//! Build an expression from leaves ([`Array::from_npy`], [`Array::from_zarr`],
//! in-memory arrays, [`Array::arange`], [`Array::full`], [`Array::random`])
//! with elementwise ufuncs ([`Array::ufunc`], [`Array::where_`],
//! [`Array::astype`]), index maps ([`Array::view`] with a [`ViewOp`]:
//! transposes, reshapes, broadcasts, tiles, repeats, slices; never copies),
//! [`Array::concatenate`], reductions ([`Array::reduce`], [`Array::var`]) and
//! contractions ([`Array::einsum`]). Nothing is read until [`run`]: the job is
//! lowered into stages (fused elementwise chains, reductions, contractions),
//! each stage's tiles are sized from the memory limit ([`explain`] shows the
//! plan), tiles run in parallel, and the result is returned in memory or
//! streamed to a `.npy` file or a Zarr array.
//!
//! Guarantees:
//! - Peak memory stays within the limit plus a fixed allowance (see
//!   [`crate::plan`]); a job that cannot fit is refused before it starts,
//!   naming the smallest limit that works.
//! - Results are bitwise identical for any thread count and memory limit:
//!   elementwise results do not depend on tiles; reductions add element by
//!   element within fixed chunks of the reduced axes and fold the chunks in
//!   order; contractions add fixed chunks of the contracted labels in order.
//! - Reductions of float inputs accumulate in float64 (a float32 sum is
//!   rounded to float32 once, at the end); integer sums wrap as NumPy's do.
//! - A reduction over an axis that comes from `tile`, `repeat` or a
//!   broadcast reads one period, one of each repeat or one element
//!   (`sum(tile(a, (n, 1)), axis=0)` costs O(a), not O(n · a)).
//! - Values that turn NaN or infinite from finite operands are counted and
//!   reported as [`crate::Warning::FloatingPoint`] (by IEEE 754 exception).
//!
//! Outputs are written under a temporary name and renamed when complete;
//! an error or cancellation leaves no partial file.
//!
//! ```no_run
//! use memfit::array::{run, Array, Op, Options, Output, Reduction, ViewOp};
//! use memfit::exec::Context;
//! // sum over N of tile(data, (N, 1, 1, 1)) * scales[:, None, None]
//! let data = Array::from_npy("data.npy")?; // (2000, 76, 76)
//! let scales = Array::from_npy("scales.npy")?.view(ViewOp::ExpandDims(vec![1, 2]))?;
//! let tiled = data.view(ViewOp::ExpandDims(vec![0]))?.view(ViewOp::Tile(vec![500, 1, 1, 1]))?;
//! let total = Array::ufunc(Op::Multiply, &[tiled, scales])?.reduce(Reduction::Sum, &[0], false, None)?;
//! let opts = Options::with_limit(256 << 20);
//! let out = Output::Npy { path: "total.npy".into(), overwrite: true };
//! let (_, report) = run(&total, &out, &opts, &mut Context::new(&mut ()))?;
//! println!("{}", report.plan);
//! # Ok::<(), memfit::Error>(())
//! ```

mod build;
mod eval;
mod lower;
mod node;
mod plan;
mod reduce;
mod remote;
mod rewrite;
mod rows;
mod run;
mod scan;
mod store;
mod tiling;
mod types;
mod values;
mod view;
mod write;

pub use lower::{Output, Shards};
pub use node::{broadcast_shapes, Array, Distribution, Reduction};
pub use plan::{StagePlan, Stages, MAX_SHARD_BYTES, MAX_WRITE_SLAB, SMALL_CHUNK_BYTES, WRITE_ALIGN};
pub use remote::{check_on_cluster, run_task, OnCluster, ReduceRunner, REDUCE_TASK};
pub use rows::ExprRows;
pub use run::{default_zarr_chunks, explain, explain_all, run, run_all, run_on, Computed, Options, Report};
pub use store::{Place, Stored};
pub use tiling::{default_chunks, MAX_CHUNK_BYTES, MIN_CHUNK_BYTES};
pub use types::{promote, result_type, Operand, Scalar};
pub use values::Op;
pub use view::ViewOp;
