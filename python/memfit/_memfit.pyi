"""Type stubs for the extension ``memfit._memfit`` (crates/memfit-py).

Inputs named ``x``, ``sample_weight`` and ``w`` are a ``.npy`` path (``str``)
or a 2-D NumPy array of float64, float32, float16, uint8, int16, int32 or
int64 with non-negative strides (weights as ``(n_samples, 1)``); arrays are
borrowed, never copied. Output arrays are allocated by the caller and filled
in place. Every function releases the GIL, stops on Ctrl-C with
``KeyboardInterrupt``, and raises ``ValueError`` (bad data or parameters),
``MemoryError`` (the job cannot fit ``memory_limit``, in bytes) or ``OSError``
(a file that cannot be read).
"""

from typing import Any, Callable, Optional, Union

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

__version__: str

def kmeans_fit(
    x: _Input,
    sample_weight: Optional[_Input],
    n_clusters: int,
    init: str,
    init_centers: Optional[_F64],
    n_init: Optional[int],
    max_iter: int,
    tol: float,
    random_state: int,
    memory_limit: int,
    n_jobs: Optional[int],
    float32: bool,
    labels: Optional[_I32],
    progress: Optional[_Progress],
) -> dict[str, Any]:
    """K-means; returns cluster_centers (n_clusters, n_features), inertia,
    n_iter, converged, n_nonempty_clusters, warnings, plan."""

def assign(
    x: _Input,
    centers: _F64,
    memory_limit: int,
    n_jobs: Optional[int],
    float32: bool,
    labels: _I32,
    distances: Optional[_F64],
) -> float:
    """Nearest centre (labels, squared distances, (n_samples,)); returns the inertia."""

def transform(
    x: _Input,
    centers: _F64,
    memory_limit: int,
    n_jobs: Optional[int],
    float32: bool,
    out: Union[_F64, npt.NDArray[np.float32]],
) -> None:
    """Euclidean distances to every centre into out, (n_samples, n_clusters)."""

def gmm_fit(
    x: _Input,
    sample_weight: Optional[_Input],
    n_components: int,
    covariance_type: str,
    tol: float,
    reg_covar: float,
    max_iter: int,
    n_init: int,
    init_params: str,
    weights_init: Optional[_F64],
    means_init: Optional[_F64],
    precisions_init: Optional[_F64],
    precisions_are_cholesky: bool,
    random_state: int,
    memory_limit: int,
    n_jobs: Optional[int],
    float32: bool,
    labels: Optional[_I64],
    progress: Optional[_Progress],
) -> dict[str, Any]:
    """Gaussian mixture by EM (max_iter=0 returns the initialisation); returns weights, means, covariances,
    precisions_cholesky (scikit-learn's shapes), lower_bound, lower_bounds,
    n_iter, converged, score, bic, aic, n_parameters, warnings, plan."""

def gmm_predict(
    x: _Input,
    covariance_type: str,
    weights: _F64,
    means: _F64,
    precisions_cholesky: _F64,
    memory_limit: int,
    n_jobs: Optional[int],
    float32: bool,
    labels: Optional[_I64],
    proba: Optional[_F64],
    log_likelihood: Optional[_F64],
) -> float:
    """One E-step pass filling the outputs given; returns the mean log-likelihood."""

def row_quadratic_form(
    x: _Input, q: _F64, memory_limit: int, n_jobs: Optional[int], float32: bool, out: _F64
) -> None:
    """out[i] = x_i^T q x_i."""

def weighted_scatter(x: _Input, w: Optional[_Input], memory_limit: int, n_jobs: Optional[int]) -> _F64:
    """S = sum_i w_i x_i x_i^T, (n_features, n_features)."""

def parse_size(text: str) -> int:
    """A byte size such as "2GiB", "512MiB", "2GB" or "1000", in bytes."""

def default_memory_limit() -> int:
    """Half of the available memory, in bytes."""

def npy_info(path: str) -> tuple[list[int], str, bool, int]:
    """Shape, dtype name (with byte order), Fortran order and data offset (bytes) of a .npy file."""
