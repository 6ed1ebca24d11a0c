//! Settings the Python front reads from the engine: byte sizes, the default
//! memory limit and threads, scratch folders and `.npy` headers.

use pyo3::prelude::*;

use crate::errors::to_py;

/// Parses a byte size (`"2GiB"`, `"512MiB"`, `"2GB"`, `"1000"`) into bytes.
#[pyfunction]
pub fn parse_size(text: &str) -> PyResult<u64> {
    memfit::plan::parse_size(text).map_err(to_py)
}

/// Checks that `path` can hold scratch files (an existing, writable
/// folder), before any work.
#[pyfunction]
pub fn check_scratch_dir(path: std::path::PathBuf) -> PyResult<()> {
    memfit::io::ScratchFile::check_dir(&path).map_err(to_py)
}

/// The default memory limit in bytes: half of the available memory.
#[pyfunction]
pub fn default_memory_limit() -> u64 {
    memfit::plan::default_limit_bytes()
}

/// Worker threads when `n_jobs` is None: the CPUs this process may use
/// (affinity mask, cgroup CPU quota), at most `OMP_NUM_THREADS`.
#[pyfunction]
pub fn default_threads() -> usize {
    memfit::plan::default_threads()
}

/// CPUs this process may run on (affinity mask, cgroup CPU quota).
#[pyfunction]
pub fn available_cpus() -> usize {
    memfit::plan::available_cpus()
}

/// The `.npy` file at `path`: its shape, dtype name (NumPy's, with the
/// file's byte order), whether it is in Fortran order, and the byte offset
/// of its data.
#[pyfunction]
pub fn npy_info(path: std::path::PathBuf) -> PyResult<(Vec<usize>, String, bool, u64)> {
    let f = memfit::io::NpyFile::open(path).map_err(to_py)?;
    let h = f.header();
    let order = if h.dtype.itemsize() == 1 || h.endian == memfit::io::Endian::Little { "<" } else { ">" };
    Ok((
        h.shape.clone(),
        format!("{order}{}", h.dtype.descr().trim_start_matches(['<', '>', '|'])),
        h.fortran_order,
        h.data_offset,
    ))
}

/// The engine's constants as module attributes, so that the Python package
/// holds no copy of them: `CHUNK_ROWS` (rows per accumulation chunk; Dask
/// chunks start on multiples of it), `ARRAY_DTYPES` (NumPy names of the
/// dtypes of `memfit.array`), `ROW_DTYPES` (those of the 2-D arrays the
/// estimators and kernels read in place; their `.npy` files may hold any
/// of `ARRAY_DTYPES`).
pub fn add_constants(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let names = |dtypes: &[memfit::dtype::Dtype]| dtypes.iter().map(|d| d.name()).collect::<Vec<_>>();
    m.add("CHUNK_ROWS", memfit::plan::CHUNK_ROWS)?;
    m.add("ARRAY_DTYPES", names(&memfit::dtype::Dtype::ALL))?;
    m.add("ROW_DTYPES", names(crate::inputs::IN_PLACE))?;
    Ok(())
}
