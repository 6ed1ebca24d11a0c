"""memfit: k-means, Gaussian mixtures and blocked kernels on arrays larger
than memory, within a memory limit you set.

- :class:`KMeans`, :class:`GaussianMixture`: scikit-learn estimators that
  also take ``memory_limit`` and ``n_jobs`` and accept a ``.npy`` path.
- :func:`row_quadratic_form`, :func:`weighted_scatter`, :func:`assign`:
  blocked kernels without ``n × d`` or ``n × k`` temporaries.
- :func:`parse_size`: ``"2GiB"`` → bytes.
- :mod:`memfit.array`: lazy NumPy-style arrays evaluated in blocks within
  the limit, results streamed to ``.npy`` or Zarr.

The work runs in the Rust engine (``memfit._memfit``) with the GIL released.
"""

from ._kernels import assign, row_quadratic_form, weighted_scatter
from ._kmeans import KMeans
from ._memfit import __version__, parse_size
from ._mixture import GaussianMixture
from . import array  # noqa: E402  (memfit.array)

__all__ = [
    "GaussianMixture",
    "KMeans",
    "__version__",
    "assign",
    "parse_size",
    "row_quadratic_form",
    "weighted_scatter",
]
