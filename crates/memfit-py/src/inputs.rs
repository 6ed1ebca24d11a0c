//! Python inputs as engine sources: a `str` is a `.npy` path read in row
//! blocks; a NumPy array is borrowed in place (any strides, C or Fortran
//! order, read-only or not), never copied whole.

use memfit::exec::RunOptions;
use memfit::io::{ArrayRef, CsrRef, Index, Source, SparseValues, Values};
use numpy::ndarray::ArrayView2;
use numpy::{Element, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::errors::to_py;

/// Calls macro `$m` with the dtypes [`Held::new`] borrows in place, each as
/// its [`Held`] variant (named as the engine's [`memfit::dtype::Dtype`]) and
/// Rust element type: the one list of them.
macro_rules! in_place {
    ($m:ident) => {
        $m!(F64: f64, F32: f32, F16: half::f16, U8: u8, I16: i16, I32: i32, I64: i64, U32: u32, U64: u64)
    };
}

macro_rules! dtypes {
    ($($variant:ident: $t:ty),*) => {
        &[$(memfit::dtype::Dtype::$variant),*]
    };
}

/// The dtypes of the arrays [`Held::new`] borrows in place (others are
/// converted by the Python layer).
pub const IN_PLACE: &[memfit::dtype::Dtype] = in_place!(dtypes);

/// A borrowed input, kept alive (and marked borrowed) while the engine runs.
pub enum Held<'py> {
    /// A `.npy` file (any bytes: a `str` from `os.fsdecode` is encoded
    /// back with the file system's encoding and `surrogateescape`).
    Path(std::path::PathBuf),
    /// `float64` elements.
    F64(PyReadonlyArray2<'py, f64>),
    /// `float32` elements.
    F32(PyReadonlyArray2<'py, f32>),
    /// `float16` elements.
    F16(PyReadonlyArray2<'py, half::f16>),
    /// `uint8` elements.
    U8(PyReadonlyArray2<'py, u8>),
    /// `int16` elements.
    I16(PyReadonlyArray2<'py, i16>),
    /// `int32` elements.
    I32(PyReadonlyArray2<'py, i32>),
    /// `int64` elements.
    I64(PyReadonlyArray2<'py, i64>),
    /// `uint32` elements.
    U32(PyReadonlyArray2<'py, u32>),
    /// `uint64` elements.
    U64(PyReadonlyArray2<'py, u64>),
    /// A 2-D array expression, its rows computed block by block.
    Expr(memfit::array::Array),
    /// Rows read through a Python reader (a Dask array, chunk by chunk).
    Rows(crate::remote::PyRows),
    /// Sparse rows read through a Python reader (a Dask array of
    /// `scipy.sparse` chunks, chunk by chunk).
    CsrRows(crate::remote::PyCsrRows),
    /// The rows of a larger array from its row `first_row` on (a Dask
    /// chunk): errors name rows as in the whole array.
    Piece(Box<Held<'py>>, usize),
    /// A `scipy.sparse` CSR matrix's arrays, borrowed in place, and its
    /// shape.
    Csr(CsrArrays<'py>, (usize, usize)),
}

/// The three arrays of a CSR matrix: offsets and columns of one integer
/// dtype (int32 or int64), values of float32 or float64.
pub enum CsrArrays<'py> {
    /// int32 offsets and columns, float64 values.
    I32F64(PyReadonlyArray1<'py, i32>, PyReadonlyArray1<'py, i32>, PyReadonlyArray1<'py, f64>),
    /// int32 offsets and columns, float32 values.
    I32F32(PyReadonlyArray1<'py, i32>, PyReadonlyArray1<'py, i32>, PyReadonlyArray1<'py, f32>),
    /// int64 offsets and columns, float64 values.
    I64F64(PyReadonlyArray1<'py, i64>, PyReadonlyArray1<'py, i64>, PyReadonlyArray1<'py, f64>),
    /// int64 offsets and columns, float32 values.
    I64F32(PyReadonlyArray1<'py, i64>, PyReadonlyArray1<'py, i64>, PyReadonlyArray1<'py, f32>),
}

impl<'py> CsrArrays<'py> {
    /// Borrows `obj.indptr`, `obj.indices` and `obj.data` (the Python layer
    /// gives CSR in canonical form with matching index dtypes).
    pub fn new(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        let (p, i, d) = (obj.getattr("indptr")?, obj.getattr("indices")?, obj.getattr("data")?);
        macro_rules! try_kind {
            ($($variant:ident: $ix:ty, $v:ty);*) => {
                $(if let (Ok(p), Ok(i), Ok(d)) =
                    (p.extract::<PyReadonlyArray1<'py, $ix>>(), i.extract::<PyReadonlyArray1<'py, $ix>>(), d.extract::<PyReadonlyArray1<'py, $v>>())
                {
                    return Ok(CsrArrays::$variant(p, i, d));
                })*
            };
        }
        try_kind!(I32F64: i32, f64; I32F32: i32, f32; I64F64: i64, f64; I64F32: i64, f32);
        Err(PyTypeError::new_err(
            "memfit: a sparse matrix needs contiguous int32 or int64 indptr and indices of one dtype and float32 or float64 data",
        ))
    }

    /// The rows `rows` of the matrix of shape `shape`, checked and copied
    /// (see `memfit::io::CsrRef::take_rows`), never checking the others.
    pub fn take_rows(&self, shape: (usize, usize), rows: &[usize]) -> memfit::Result<(Vec<i64>, Vec<i64>, Vec<f64>)> {
        let bad = |_| memfit::Error::param("X", "the sparse matrix's arrays are not contiguous");
        macro_rules! take {
            ($p:expr, $i:expr, $v:expr, $ix:ident, $val:ident) => {
                CsrRef::take_rows(
                    Index::$ix($p.as_slice().map_err(bad)?),
                    Index::$ix($i.as_slice().map_err(bad)?),
                    SparseValues::$val($v.as_slice().map_err(bad)?),
                    shape,
                    rows,
                )
            };
        }
        match self {
            CsrArrays::I32F64(p, i, v) => take!(p, i, v, I32, F64),
            CsrArrays::I32F32(p, i, v) => take!(p, i, v, I32, F32),
            CsrArrays::I64F64(p, i, v) => take!(p, i, v, I64, F64),
            CsrArrays::I64F32(p, i, v) => take!(p, i, v, I64, F32),
        }
    }

    /// The engine's view.
    fn matrix(&self, (n, d): (usize, usize)) -> memfit::Result<CsrRef<'_>> {
        fn slice<'a>(a: &'a PyReadonlyArray1<'_, i32>) -> Result<Index<'a>, numpy::AsSliceError> {
            a.as_slice().map(Index::I32)
        }
        fn slice64<'a>(a: &'a PyReadonlyArray1<'_, i64>) -> Result<Index<'a>, numpy::AsSliceError> {
            a.as_slice().map(Index::I64)
        }
        let bad = |_| memfit::Error::param("X", "the sparse matrix's arrays are not contiguous");
        let (p, i, v) = match self {
            CsrArrays::I32F64(p, i, v) => (slice(p), slice(i), v.as_slice().map(SparseValues::F64)),
            CsrArrays::I32F32(p, i, v) => (slice(p), slice(i), v.as_slice().map(SparseValues::F32)),
            CsrArrays::I64F64(p, i, v) => (slice64(p), slice64(i), v.as_slice().map(SparseValues::F64)),
            CsrArrays::I64F32(p, i, v) => (slice64(p), slice64(i), v.as_slice().map(SparseValues::F32)),
        };
        CsrRef::new(p.map_err(bad)?, i.map_err(bad)?, v.map_err(bad)?, n, d)
    }
}

impl<'py> Held<'py> {
    /// Borrows `obj`: a `str` path or a 2-D array of a supported dtype with
    /// non-negative strides (the Python layer guarantees both).
    ///
    /// # Errors
    /// `TypeError` for anything else.
    pub fn new(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        if obj.is_instance_of::<pyo3::types::PyString>() {
            return Ok(Held::Path(obj.extract()?));
        }
        if let Ok(e) = obj.cast::<crate::array::Expr>() {
            return Ok(Held::Expr(e.get().array().clone()));
        }
        if obj.hasattr("read_csr")? {
            return Ok(Held::CsrRows(crate::remote::PyCsrRows::new(obj)?));
        }
        if obj.hasattr("read_rows")? {
            return Ok(Held::Rows(crate::remote::PyRows::new(obj)?));
        }
        if obj.hasattr("indptr")? {
            let shape: (usize, usize) = obj.getattr("shape")?.extract()?;
            return Ok(Held::Csr(CsrArrays::new(obj)?, shape));
        }
        if obj.hasattr("first_row")? {
            let first_row: usize = obj.getattr("first_row")?.extract()?;
            return Ok(Held::Piece(Box::new(Held::new(&obj.getattr("array")?)?), first_row));
        }
        macro_rules! try_dtype {
            ($($variant:ident: $t:ty),*) => {
                $(if let Ok(a) = obj.extract::<PyReadonlyArray2<'py, $t>>() {
                    return Ok(Held::$variant(a));
                })*
            };
        }
        in_place!(try_dtype);
        let what = match obj.cast::<numpy::PyUntypedArray>() {
            Ok(a) => format!("an array of dtype {} with {} dimensions", a.dtype(), a.ndim()),
            Err(_) => format!("{}", obj.get_type()),
        };
        let names: Vec<&str> = IN_PLACE.iter().map(|d| d.name()).collect();
        Err(PyTypeError::new_err(format!(
            "memfit: expected a 2-D array of {}, or a .npy path; got {what}",
            names.join(", ")
        )))
    }

    /// The engine's view of per-row weights: a path may hold a vector
    /// `(n,)` or `(n, 1)`; an array is `(n, 1)`. `run` is the job's (see
    /// [`Held::source`]).
    ///
    /// # Errors
    /// As [`Held::source`].
    pub fn weights(&self, run: &RunOptions) -> PyResult<Source<'_>> {
        match self {
            Held::Path(p) => Source::open_vector(p).map_err(to_py),
            Held::Piece(inner, first_row) => Ok(inner.weights(run)?.starting_at(*first_row)),
            _ => self.source(run),
        }
    }

    /// The engine's view of the input, for a job run as `run` says: an
    /// expression's intermediates (row means, say) are planned within the
    /// job's limit (`memfit::array::ExprRows::for_job`), kept on disk when
    /// larger, and the bytes they need are the input's held bytes, which
    /// the job's plan counts. Nothing is computed here.
    ///
    /// # Errors
    /// The `.npy` file's errors (see `memfit::io::Source::open_matrix`);
    /// `ValueError` for negative strides; `MemoryError` for intermediates
    /// that cannot be planned within the job's limit.
    pub fn source(&self, run: &RunOptions) -> PyResult<Source<'_>> {
        match self {
            Held::Path(p) => Source::open_matrix(p).map_err(to_py),
            Held::F64(a) => view(a.as_array(), Values::F64),
            Held::F32(a) => view(a.as_array(), Values::F32),
            Held::F16(a) => view(a.as_array(), Values::F16),
            Held::U8(a) => view(a.as_array(), Values::U8),
            Held::I16(a) => view(a.as_array(), Values::I16),
            Held::I32(a) => view(a.as_array(), Values::I32),
            Held::I64(a) => view(a.as_array(), Values::I64),
            Held::U32(a) => view(a.as_array(), Values::U32),
            Held::U64(a) => view(a.as_array(), Values::U64),
            Held::Expr(a) => Ok(Source::rows(Box::new(memfit::array::ExprRows::for_job(a, run).map_err(to_py)?))),
            Held::Rows(r) => Ok(Source::rows(Box::new(r.clone()))),
            Held::CsrRows(r) => Ok(Source::csr_rows(Box::new(r.clone()))),
            Held::Piece(inner, first_row) => Ok(inner.source(run)?.starting_at(*first_row)),
            Held::Csr(arrays, shape) => arrays.matrix(*shape).map(Source::csr).map_err(to_py),
        }
    }
}

/// The whole strided extent of `a` as a slice, wrapped as an engine source.
fn view<'a, T: Element>(a: ArrayView2<'a, T>, wrap: fn(&'a [T]) -> Values<'a>) -> PyResult<Source<'a>> {
    let (n, d) = a.dim();
    // The stride of an axis of length 1 is never used: NumPy calls such a
    // view contiguous whatever its stride says, negative included.
    let stride = |len: usize, s: isize| if len <= 1 { Ok(0) } else { usize::try_from(s) };
    let strides = a.strides();
    let (Ok(rs), Ok(cs)) = (stride(n, strides[0]), stride(d, strides[1])) else {
        return Err(PyValueError::new_err(
            "memfit: arrays with negative strides are not supported; pass numpy.ascontiguousarray(X)",
        ));
    };
    let len = if n == 0 || d == 0 { 0 } else { (n - 1) * rs + (d - 1) * cs + 1 };
    let values: &'a [T] = if len == 0 {
        &[]
    } else {
        // SAFETY: the view's elements all lie in `[ptr, ptr + len)` because
        // both strides are non-negative and `len` reaches its last element;
        // the array is borrowed (and kept alive) for `'a`, and the pointer is
        // aligned since NumPy hands out typed arrays only for aligned data
        // (the Python layer copies unaligned arrays).
        unsafe { std::slice::from_raw_parts(a.as_ptr(), len) }
    };
    ArrayRef::strided(wrap(values), n, d, rs, cs).map(Source::memory).map_err(to_py)
}

/// The largest magnitude up to which every integer of `dtype` (NumPy's
/// name) converts to `compute` exactly, when some value of `dtype` does
/// not (`2**53` for 64-bit integers in float64); `None` when all do.
///
/// # Errors
/// `ValueError` for a dtype name the engine does not read.
#[pyfunction]
pub fn inexact_integer_limit(dtype: &str, compute: &str) -> PyResult<Option<u64>> {
    let named = |n: &str| memfit::io::Dtype::from_name(n);
    let (Some(dtype), Some(compute)) = (named(dtype), named(compute)) else {
        return Err(PyValueError::new_err(format!("unknown dtype {dtype:?} or {compute:?}")));
    };
    Ok(dtype.inexact_beyond(compute))
}

/// The warning a dense input gives for an integer its compute dtype cannot
/// hold exactly, for a value `value` of dtype `dtype` (NumPy's name) at
/// `(row, column)` that the caller found beyond `compute`'s exact range
/// (a sparse matrix's values, converted in Python): `(kind, category,
/// message)`, as the engine's warnings come.
///
/// # Errors
/// `ValueError` for a dtype that is not an integer one, or a `compute`
/// other than `"float32"` or `"float64"`.
#[pyfunction]
pub fn inexact_integer_warning(
    row: usize,
    column: usize,
    value: i128,
    dtype: &str,
    compute: &str,
) -> PyResult<(&'static str, &'static str, String)> {
    let named = |n: &str| memfit::io::Dtype::from_name(n);
    let (Some(dtype), Some(compute)) = (named(dtype), named(compute)) else {
        return Err(PyValueError::new_err(format!("unknown dtype {dtype:?} or {compute:?}")));
    };
    let Some(exact_up_to) = dtype.inexact_beyond(compute) else {
        return Err(PyValueError::new_err(format!("{} converts to {} exactly", dtype.name(), compute.name())));
    };
    let found = memfit::io::InexactInteger { row, column, value, dtype, compute, exact_up_to };
    let w = memfit::warning::Warning::InexactIntegers { path: "<memory>".into(), found };
    Ok(crate::errors::warning(&w))
}
