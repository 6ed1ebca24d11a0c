"""Type stubs for the extension ``memfit._memfit`` (crates/memfit-py).

Inputs named ``x``, ``sample_weight`` and ``w`` are a ``.npy`` path (``str``),
a reader of rows (an object with ``shape``, ``dtype``, ``held_bytes`` and
``read_rows(start, stop)``, see ``memfit._dask.Rows``), a reader of sparse
rows (an object with ``shape``, ``dtype`` (float32 or float64), ``max_row_nnz``,
``held_bytes`` and ``read_csr(start, stop)`` returning int64 offsets from 0,
int64 columns and float64 values, see ``memfit._dask.SparseRows``), a
``scipy.sparse`` CSR matrix in canonical form, a piece of a larger
array (an object with ``array`` and ``first_row``: rows are named as in the
whole, see ``memfit._dask.Piece``) or a 2-D NumPy array of a dtype in ``ROW_DTYPES``
with non-negative strides (weights as ``(n_samples, 1)``); arrays are
borrowed, never copied. Output arrays are allocated by the caller and filled
in place. Every function releases the GIL, stops on Ctrl-C with
``KeyboardInterrupt``, and raises ``ValueError`` (bad data or parameters),
``MemoryError`` (the job cannot fit ``memory_limit``, in bytes) or ``OSError``
(a file that cannot be read).
"""

from typing import Any, Callable, Iterable, Iterator, Literal, Optional, Union

import numpy as np
import numpy.typing as npt

_Input = Union[str, npt.NDArray[Any]]
_F64 = npt.NDArray[np.float64]
_I32 = npt.NDArray[np.int32]
_I64 = npt.NDArray[np.int64]
#: Called on the calling thread with each progress event, a tuple:
#: ("phase", name, t), ("iteration", run, iteration, max_iter, inertia,
#: center_shift, tol, t) or ("em_iteration", run, iteration, max_iter,
#: lower_bound, change, t); run counts from 0, iteration from 1, t is
#: seconds since the work started, tol is absolute.
_Progress = Callable[[tuple], Any]

#: Rows per accumulation chunk of the engine (Dask chunks start on multiples).
CHUNK_ROWS: int
#: NumPy names of the dtypes of memfit.array (and of the .npy files read).
ARRAY_DTYPES: list[str]
#: NumPy names of the dtypes of the 2-D arrays the estimators read in place.
ROW_DTYPES: list[str]
#: Runs a pass's tasks elsewhere: called with the encoded task and the row
#: ranges [(start, stop), ...] (cut at ``row_bounds``), returns each range's
#: encoded statistics (bytes from ``run_task``) in order.
# run(task, ranges, *, row_state=(id, fresh) for tasks with per-row state,
#     cancelled=Cancelled() within a run) -> each range's result, in order.
_Remote = Callable[..., Iterable[bytes]]

__version__: str

#: An engine warning: (kind, category, message); kind names it
#: ("not_converged", "fewer_clusters", "ill_conditioned",
#: "init_centers_with_n_init", "warm_start_with_n_init", "inexact_integers",
#: "kmeans_init"), category is "convergence" (scikit-learn's
#: ConvergenceWarning) or "user" (UserWarning).
_Warning = tuple[str, str, str]

def kmeans_fit(
    x: _Input,
    *,
    n_clusters: int,
    memory_limit: int,
    sample_weight: Optional[_Input] = None,
    init: str = "k-means++",
    init_centers: Optional[_F64] = None,
    n_init: Optional[int] = None,
    max_iter: int = 300,
    tol: float = 1e-4,
    random_state: int = 0,
    n_jobs: Optional[int] = None,
    float32: bool = False,
    labels: Optional[_I32] = None,
    progress: Optional[_Progress] = None,
    remote: Optional[_Remote] = None,
    row_bounds: list[int] = [],
    dry_run: bool = False,
    algorithm: str = "auto",
    scratch_dir: Optional[str] = None,
    metric: str = "euclidean",
    device: Optional[DeviceBackend] = None,
    exact: bool = False,
) -> dict[str, Any]:
    """K-means; returns cluster_centers (n_clusters, n_features), inertia,
    n_iter, converged, n_nonempty_clusters, skip_share (per iteration),
    warnings (list of _Warning), plan
    (the plan as data: a dict of the engine's plan fields) and plan_text (the
    plan, printable). With dry_run, only plans (returns plan and plan_text)
    and reads nothing. With exact (euclidean, not float32), float32 passes
    where float32 holds every value of x's dtype exactly (uint8, int16,
    float16), with float64 centres: the float64 fit's results."""

def assign(
    x: _Input,
    *,
    centers: _F64,
    memory_limit: int,
    labels: _I32,
    sample_weight: Optional[_Input] = None,
    distances: Optional[_F64] = None,
    n_jobs: Optional[int] = None,
    float32: bool = False,
    metric: str = "euclidean",
    device: Optional[DeviceBackend] = None,
) -> float:
    """Nearest centre (labels, squared distances, (n_samples,)); returns the
    inertia, weighted by sample_weight when given. Warnings are issued."""

def kmeans_validate(
    x: _Input,
    *,
    memory_limit: int,
    sample_weight: Optional[_Input] = None,
    n_jobs: Optional[int] = None,
    float32: bool = False,
    metric: str = "euclidean",
) -> float:
    """kmeans_fit's validation pass alone: raises what kmeans_fit raises for
    the same data; returns the mean column variance (tol's scale)."""

def gather_rows(
    x: _Input,
    *,
    rows: npt.NDArray[np.int64],
    memory_limit: int,
    float32: bool = False,
    metric: str = "euclidean",
    out: Optional[Union[_F64, npt.NDArray[np.float32]]] = None,
    n_jobs: Optional[int] = None,
    exact: bool = False,
) -> Union[_F64, npt.NDArray[np.float32], tuple[npt.NDArray[Any], npt.NDArray[Any], npt.NDArray[np.int64]]]:
    """Rows of x (any order, repeats allowed) as a new (len(rows), n_features)
    array (or written into out, then returned), float32 when float32 else
    float64, read with positioned reads; scaled to unit norm for
    metric="cosine". With exact, dense unscaled rows are float32 also where
    float32 holds every value of x's dtype exactly (uint8, int16, float16).
    For a sparse (CSR) x, the rows' (data, indices, indptr) arrays instead."""

def minibatch_step(
    batch: Union[_F64, npt.NDArray[np.float32], Any],
    *,
    centers: _F64,
    counts: _F64,
    n_since_last_reassign: int,
    seen: int,
    reassignment_ratio: float,
    memory_limit: int,
    sample_weight: Optional[_F64] = None,
    n_jobs: Optional[int] = None,
    metric: str = "euclidean",
    work: Optional["MiniBatchWork"] = None,
    float64_centers: bool = False,
) -> tuple[float, float, list[int], list[int], int]:
    """One mini-batch k-means step, moving centers and counts in place; returns
    (inertia, centers_squared_diff, to_reassign, pool, n_since_last_reassign):
    to_reassign every centre whose count is below reassignment_ratio times the
    largest when the step checked reassignment (the caller picks those it moves
    and raises their counts), pool the batch rows they may move to.
    metric="cosine": unit batch rows, moved centres scaled to unit norm.
    work: the fit's step buffers, kept for its next steps.
    float64_centers: centres stay float64 after a float32 batch's step (one
    from gather_rows(exact=True)); else rounded to the batch's dtype."""

def minibatch_start_centers(centers: _F64, *, float32: bool = False, metric: str = "euclidean") -> None:
    """Initial centres made in place what the steps hold: unit norm for
    metric="cosine", then rounded to float32 when float32."""

def minibatch_plan(
    n_clusters: int,
    n_features: int,
    batch_size: int,
    *,
    memory_limit: int,
    held: list[tuple[str, int]],
    n_jobs: Optional[int] = None,
    float32: bool = False,
    sparse_x: Optional[Any] = None,
    gathered: bool = False,
) -> str:
    """The plan (text) of mini-batch steps beside the (name, bytes) buffers
    held for the whole fit (of the rows of the CSR matrix sparse_x when
    given; with gathered, of a dense batch drawn by gather_rows);
    MemoryError when it does not fit memory_limit."""

class MiniBatchWork:
    """A mini-batch fit's step buffers, made by its first step and reused."""

    def __init__(self) -> None: ...

class Cancelled:
    """Given to a Dask runner as cancelled=: true once the run is interrupted."""

    def __call__(self) -> bool: ...

class MiniBatchEarlyStop:
    """scikit-learn's early stopping of a mini-batch fit, as the engine's."""

    ewa_inertia: Optional[float]

    def __init__(self) -> None: ...
    def update(
        self,
        step: int,
        batch_inertia: float,
        *,
        batch_size: int,
        n_samples: int,
        centers_squared_diff: float,
        tol: float,
        max_no_improvement: Optional[int] = None,
    ) -> Optional[str]:
        """Takes step `step` (zero-based); returns why the fit stops or None."""

def transform(
    x: _Input,
    *,
    centers: _F64,
    memory_limit: int,
    out: Union[_F64, npt.NDArray[np.float32]],
    n_jobs: Optional[int] = None,
    float32: bool = False,
    metric: str = "euclidean",
) -> None:
    """Euclidean distances to every centre into out, (n_samples, n_clusters)."""

def gmm_fit(
    x: _Input,
    *,
    n_components: int,
    memory_limit: int,
    sample_weight: Optional[_Input] = None,
    covariance_type: str = "full",
    tol: float = 1e-3,
    reg_covar: float = 1e-6,
    max_iter: int = 100,
    n_init: int = 1,
    init_params: str = "kmeans",
    weights_init: Optional[_F64] = None,
    means_init: Optional[_F64] = None,
    precisions_init: Optional[_F64] = None,
    warm_weights: Optional[_F64] = None,
    warm_means: Optional[_F64] = None,
    warm_precisions_cholesky: Optional[_F64] = None,
    warm_lower_bound: Optional[float] = None,
    random_state: int = 0,
    n_jobs: Optional[int] = None,
    float32: bool = False,
    labels: Optional[_I64] = None,
    progress: Optional[_Progress] = None,
    remote: Optional[_Remote] = None,
    row_bounds: list[int] = [],
    dry_run: bool = False,
    scratch_dir: Optional[str] = None,
    model_dir: Optional[str] = None,
    warm_model_dir: Optional[str] = None,
    device: Optional[DeviceBackend] = None,
) -> dict[str, Any]:
    """Gaussian mixture by EM (max_iter=0 returns the initialisation), or the
    continuation of a fitted model (warm_* or the model folder
    warm_model_dir); returns weights, means, covariances,
    precisions_cholesky (scikit-learn's shapes), lower_bound, lower_bounds,
    n_iter, converged, score, bic, aic, n_parameters, warnings (list of
    _Warning), plan and plan_text (as kmeans_fit). A fit whose components run in groups (parameters over
    the limit; scratch files in scratch_dir) writes its parameters to the
    model folder model_dir and returns "model_dir" instead of covariances and
    precisions_cholesky. With dry_run, only plans (returns plan and
    plan_text)."""

def gmm_predict(
    x: _Input,
    *,
    covariance_type: str,
    weights: _F64,
    means: _F64,
    precisions_cholesky: _F64,
    memory_limit: int,
    n_jobs: Optional[int] = None,
    float32: bool = False,
    labels: Optional[_I64] = None,
    proba: Optional[_F64] = None,
    log_likelihood: Optional[_F64] = None,
    remote: Optional[_Remote] = None,
    row_bounds: list[int] = [],
    model_dir: Optional[str] = None,
    device: Optional[DeviceBackend] = None,
) -> dict[str, Any]:
    """One E-step pass filling the outputs given; returns score (the mean
    log-likelihood), bic, aic and n_parameters on x. With model_dir, the
    model is that folder's (factors read a group at a time when they exceed
    the limit)."""

def row_quadratic_form(
    x: _Input, *, q: _F64, memory_limit: int, out: _F64, n_jobs: Optional[int] = None, float32: bool = False
) -> None:
    """out[i] = x_i^T q x_i."""

def weighted_scatter(
    x: _Input,
    *,
    memory_limit: int,
    w: Optional[_Input] = None,
    n_jobs: Optional[int] = None,
    remote: Optional[_Remote] = None,
    row_bounds: list[int] = [],
) -> _F64:
    """S = sum_i w_i x_i x_i^T, (n_features, n_features)."""

def n_parameters(*, covariance_type: str, n_components: int, n_features: int) -> int:
    """Free parameters of a mixture (covariances, means, n_components - 1 weights)."""

def cli_main(argv: list[str]) -> int:
    """Runs the memfit command-line tool on argv (program name first); returns its exit status."""

def parse_size(text: str, name: str = "memory_limit") -> int:
    """A byte size such as "2GiB", "512MiB", "2GB" or "1000", in bytes; its
    errors name the parameter ``name`` ("memory_limit" or
    "device_memory_limit")."""

def default_memory_limit() -> int:
    """Half of the available memory, in bytes."""

def check_scratch_dir(path: str) -> None:
    """Raise OSError unless path is an existing folder where files can be created."""

def check_device(
    device: str,
    device_memory_limit: int | None,
    job: str,
    n_samples: int,
    n_features: int,
    float32: bool,
    weighted: bool,
    n_components: int,
    covariance_type: str | None = None,
) -> DeviceBackend | None:
    """None for device "cpu"; for "cuda" / "cuda:N" open the device (RuntimeError saying why it cannot be
    used), plan the job ("kmeans" or "gmm") within device_memory_limit (MemoryError when it cannot fit) and
    return the backend that kmeans_fit, assign, gmm_fit and gmm_predict take as device=."""

class DeviceBackend:
    """Where a job's assignments or log-densities run, as check_device planned it."""

    @property
    def plan(self) -> str:
        """The job's device plan, as text."""

def default_threads() -> int:
    """Worker threads when n_jobs is None: the CPUs this process may use, at most OMP_NUM_THREADS."""

def available_cpus() -> int:
    """CPUs this process may run on (affinity mask, cgroup CPU quota)."""

def most_threads() -> int:
    """The most worker threads a job takes (4 per CPU, at least 64)."""

def npy_info(path: str) -> tuple[list[int], str, bool, int]:
    """Shape, dtype name (with byte order), Fortran order and data offset (bytes) of a .npy file."""

def inexact_integer_limit(dtype: str, compute: str) -> int | None:
    """The largest magnitude up to which every integer of ``dtype`` converts to ``compute`` exactly, when some
    value of ``dtype`` does not (2**53 for 64-bit integers in float64); None when all do."""

def inexact_integer_warning(row: int, column: int, value: int, dtype: str, compute: str) -> tuple[str, str, str]:
    """(kind, category, message) of the warning for an integer ``value`` of ``dtype`` at (row, column) that
    ``compute`` ("float32" or "float64") cannot hold exactly, as dense inputs warn."""

def run_task(
    task: bytes,
    x: _Input,
    *,
    first_row: int,
    memory_limit: int,
    sample_weight: Optional[_Input] = None,
    n_jobs: Optional[int] = None,
    execute: bool = True,
    row_state: Optional[_F64] = None,
) -> tuple[dict[str, Any], Optional[bytes], Optional[_F64]]:
    """Plans (and with execute, runs) an encoded pass task over x, the rows
    first_row .. first_row + len(x) of the data; returns the plan as data,
    the encoded statistics (None when not executed) and, for a task with
    per-row state, the rows' state it leaves (pass it as row_state to the
    next task of that state over the same rows; None: start afresh)."""

def run_array_task(
    task: bytes,
    expr: Expr,
    chunks: tuple[int, int],
    *,
    memory_limit: int,
    n_jobs: Optional[int] = None,
    execute: bool = True,
) -> tuple[dict[str, Any], Optional[bytes]]:
    """Plans (and with execute, runs) an encoded array-reduction task over the
    accumulation chunks start .. stop of expr; returns the plan as data and
    the chunks' encoded statistics (None when not executed)."""

# ---------------------------------------------------------------------------
# memfit.array: the lazy expression graph (see /work/array_spec.md and
# python/memfit/array). Python normalises every argument (axes sorted and
# non-negative, shapes without -1, slices by slice.indices) before calling.

class RowBlocks(Iterator[npt.NDArray[Any]]):
    """Iterator over Expr.row_blocks; overflow counts are issued as
    RuntimeWarning at the end."""

    def __iter__(self) -> RowBlocks: ...
    def __next__(self) -> npt.NDArray[Any]: ...

class Expr:
    """Opaque, immutable node of the lazy expression graph."""

    shape: tuple[int, ...]
    #: NumPy name: "bool", "int8".."int64", "uint8".."uint64", "float16", "float32", "float64".
    dtype: str
    ndim: int

    def compute(self, memory_limit: int, n_jobs: Optional[int]) -> npt.NDArray[Any]:
        """The result as a new C-ordered array; MemoryError when it does not
        fit memory_limit (the message points to to_npy/to_zarr); overflow
        counts are issued as RuntimeWarning."""

    def to_npy(self, path: str, memory_limit: int, n_jobs: Optional[int], overwrite: bool) -> None:
        """Streams the result into a .npy file (temporary name, renamed at the
        end); FileExistsError when path exists and not overwrite."""

    def places(self) -> list[Union[tuple[Literal["memory"], int, int], tuple[Literal["file"], str]]]:
        """What the expression reads from outside itself: ("memory", start,
        stop) per borrowed span of addresses, ("file", path) per .npy file or
        Zarr directory; memory it owns is not listed."""

    def take_indices(self) -> Optional[npt.NDArray[np.int64]]:
        """The positions a take node selects (negative ones counted from the
        end), as a new int64 array; None for any other node."""

    def row_blocks(self, memory_limit: int, n_jobs: Optional[int] = None) -> RowBlocks:
        """The rows of a 2-D expression as consecutive row blocks (NumPy
        arrays in its dtype), each as large as memory_limit allows beside the
        expression's intermediates (computed before the first block)."""

    def to_zarr(
        self, path: str, chunks: Optional[tuple[int, ...]], memory_limit: int, n_jobs: Optional[int], overwrite: bool
    ) -> None:
        """Streams the result into a Zarr v3 array directory."""

    def run_on_cluster(
        self,
        run_tasks: _Remote,
        tasks: int,
        task_limit: int,
        memory_limit: int,
        n_jobs: Optional[int] = None,
        path: Optional[str] = None,
        overwrite: bool = False,
    ) -> Optional[npt.NDArray[Any]]:
        """Evaluates the array with its reductions run as tasks over ranges of
        accumulation chunks (run_tasks(task, ranges) returns each range's
        statistics, in order; at most tasks ranges a stage, each within
        task_limit bytes), the rest here within memory_limit; the result, or
        None when written to the .npy at path."""

    def cluster_refusal(self, memory_limit: int, n_jobs: Optional[int] = None) -> Optional[str]:
        """Why the array cannot run with its reductions on a cluster, or None."""

    def default_chunks(self, memory_limit: int, n_jobs: Optional[int] = None) -> list[int]:
        """The chunk shape to_zarr picks when chunks is None (the engine's rule:
        about memory_limit / 32 bytes, 64 KiB to 8 MiB, innermost axes whole);
        MemoryError when not even one such chunk fits the limit."""

    def explain(self, memory_limit: int, n_jobs: Optional[int] = None, output: Optional[str] = None) -> str:
        """The plan, printable; output None plans compute(), a path ending in
        .zarr plans to_zarr, another path to_npy."""

    def plan(self, memory_limit: int, n_jobs: Optional[int] = None, output: Optional[str] = None) -> dict[str, Any]:
        """The plan as data (as explain)."""

def expr_from_ndarray(a: npt.NDArray[Any]) -> Expr:
    """A leaf referencing a (no copy): any of the 12 dtypes, native byte order, any strides."""

def expr_from_npy(path: str) -> Expr:
    """A leaf read lazily from a .npy file with positioned reads."""

def expr_from_zarr(path: str) -> Expr:
    """A leaf read lazily from a Zarr v2 or v3 array directory."""

def expr_op(op: str, inputs: list[Expr], params: dict[str, Any]) -> Expr:
    """A node: operation op (see the spec's list) on inputs with canonical
    params. ValueError for shape errors (broadcast mismatch names both
    shapes), TypeError for unsupported dtype combinations."""

def compute_all(
    exprs: list[Expr], destinations: list[Any], memory_limit: int, n_jobs: Optional[int] = None
) -> list[Optional[np.ndarray]]:
    """Evaluates several expressions in one job (shared intermediates once);
    a destination is None (memory), ("npy", path, None, overwrite) or
    ("zarr", path, chunks, overwrite)."""

def explain_all_exprs(
    exprs: list[Expr], destinations: list[Any], memory_limit: int, n_jobs: Optional[int] = None
) -> tuple[str, dict]:
    """The plan of compute_all, printable and as data."""
