//! Settings the Python front reads from the engine: byte sizes, the default
//! memory limit and threads, scratch folders and `.npy` headers.

use pyo3::prelude::*;

use crate::errors::to_py;

/// Parses a byte size (`"2GiB"`, `"512MiB"`, `"2GB"`, `"1000"`) into bytes;
/// its errors name the parameter `name` (`"memory_limit"` or
/// `"device_memory_limit"`).
#[pyfunction]
#[pyo3(signature = (text, name="memory_limit"))]
pub fn parse_size(text: &str, name: &str) -> PyResult<u64> {
    let name = match name {
        "device_memory_limit" => "device_memory_limit",
        "memory_limit" => "memory_limit",
        other => return Err(pyo3::exceptions::PyValueError::new_err(format!("unknown size parameter {other:?}"))),
    };
    memfit::plan::parse_size_as(name, text).map_err(to_py)
}

/// Checks that `path` can hold scratch files (an existing, writable
/// folder), before any work.
#[pyfunction]
pub fn check_scratch_dir(path: std::path::PathBuf) -> PyResult<()> {
    memfit::io::ScratchFile::check_dir(&path).map_err(to_py)
}

/// Where a job's arithmetic runs, as [`check_device`] planned it: handed
/// to the fit and predict functions (`device=`), which run their
/// assignments or log-densities there.
#[pyclass(frozen, module = "memfit._memfit")]
pub struct DeviceBackend {
    device: memfit::device::Device,
    backend: memfit::exec::Backend,
    plan: String,
}

#[pymethods]
impl DeviceBackend {
    /// The job's device plan, as text (the buffers it holds on the device
    /// and its tile of rows).
    #[getter]
    fn plan(&self) -> &str {
        &self.plan
    }

    fn __repr__(&self) -> String {
        format!("DeviceBackend({})", self.device)
    }
}

/// `opts` with its arithmetic on `device` (as [`check_device`] planned
/// it; the CPU when `None`). A job whose passes run on a Dask cluster
/// (`on_cluster`) is refused on a device: its workers hold no device plan.
pub fn on_device(
    opts: memfit::exec::RunOptions,
    device: Option<&Bound<'_, DeviceBackend>>,
    on_cluster: bool,
    what: &str,
) -> PyResult<memfit::exec::RunOptions> {
    let Some(d) = device.map(|d| d.get()) else { return Ok(opts) };
    if on_cluster {
        return Err(to_py(memfit::device::execution_unavailable(d.device, what)));
    }
    Ok(memfit::exec::RunOptions { backend: d.backend, ..opts })
}

/// Checks where a job is to run (`device`: `"cpu"`, `"cuda"` or
/// `"cuda:N"`) before any work. The CPU returns `None`; a CUDA device is
/// opened and the job (`"kmeans"` with `n_components` clusters, or
/// `"gmm"` with `n_components` components of `covariance_type`) planned
/// within `device_memory_limit` bytes (default 90 % of the device's
/// memory), and its [`DeviceBackend`] returned. A build without the `cuda`
/// feature, a machine without a driver or a GPU, and a job that cannot fit
/// the device are errors.
#[pyfunction]
#[pyo3(signature = (device, device_memory_limit, job, n_samples, n_features, float32, weighted, n_components, covariance_type=None))]
#[allow(clippy::too_many_arguments)]
pub fn check_device(
    device: &str,
    device_memory_limit: Option<u64>,
    job: &str,
    n_samples: usize,
    n_features: usize,
    float32: bool,
    weighted: bool,
    n_components: usize,
    covariance_type: Option<&str>,
) -> PyResult<Option<DeviceBackend>> {
    use memfit::device::{plan, Device};
    let device: Device = device.parse().map_err(to_py)?;
    if device.is_cpu() {
        if device_memory_limit.is_some() {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "device_memory_limit needs device='cuda' (the job runs on the CPU)",
            ));
        }
        return Ok(None);
    }
    let shape = (n_samples, n_features, if float32 { 4 } else { 8 }, weighted);
    let job_shape = plan::DeviceJob::open(device, device_memory_limit, shape).map_err(to_py)?;
    let planned = match (job, covariance_type) {
        ("gmm", Some(t)) => {
            let t = memfit::mixture::CovarianceType::parse(t).map_err(to_py)?;
            let (params, stats) = plan::gmm_values_per_component(t, n_features);
            plan::plan_gmm_device(n_components, params, stats, &job_shape).map_err(to_py)?
        }
        _ => plan::plan_kmeans_device(n_components, &job_shape).map_err(to_py)?,
    };
    let backend = memfit::device::backend(device, &planned.schedule).map_err(to_py)?;
    Ok(Some(DeviceBackend { device, backend, plan: planned.to_string() }))
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

/// The most worker threads a job takes (4 per CPU, at least 64).
#[pyfunction]
pub fn most_threads() -> usize {
    memfit::plan::most_threads()
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
