"""memfit: k-means, Gaussian mixtures and blocked kernels on arrays larger
than memory, within a memory limit you set.

- :class:`KMeans`, :class:`MiniBatchKMeans`, :class:`GaussianMixture`:
  scikit-learn estimators that also take ``memory_limit`` and ``n_jobs`` and
  accept a ``.npy`` path.
- :func:`row_quadratic_form`, :func:`weighted_scatter`, :func:`assign`:
  blocked kernels without ``n × d`` or ``n × k`` temporaries.
- :func:`parse_size`: ``"2GiB"`` → bytes.
- :mod:`memfit.array`: lazy NumPy-style arrays evaluated in blocks within
  the limit, results streamed to ``.npy`` or Zarr.

The work runs in the Rust engine (``memfit._memfit``) with the GIL released.
``import memfit`` imports neither scikit-learn nor Dask: the estimators (and
scikit-learn with them) are imported on first use of ``memfit.KMeans``,
``memfit.MiniBatchKMeans`` or ``memfit.GaussianMixture``.
"""

import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING

from ._kernels import assign, row_quadratic_form, weighted_scatter
from ._memfit import __version__, parse_size
from . import array  # noqa: E402  (memfit.array)

if _TYPE_CHECKING:
    from ._kmeans import KMeans
    from ._minibatch import MiniBatchKMeans
    from ._mixture import GaussianMixture

#: The module of each attribute imported on first use (PEP 562).
_LAZY = {"KMeans": "._kmeans", "MiniBatchKMeans": "._minibatch", "GaussianMixture": "._mixture"}

__all__ = [
    "GaussianMixture",
    "KMeans",
    "MiniBatchKMeans",
    "__version__",
    "assign",
    "parse_size",
    "row_quadratic_form",
    "weighted_scatter",
]


def __getattr__(name):
    """The estimators, imported with scikit-learn the first time they are
    asked for."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(_importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
