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
``import memfit`` imports only the engine: the kernels and
:mod:`memfit.array` (and NumPy with them) are imported on first use, the
estimators (and scikit-learn with them) on first use of ``memfit.KMeans``,
``memfit.MiniBatchKMeans`` or ``memfit.GaussianMixture``. So the ``memfit``
command that pip installs runs the engine's tool without them.
"""

import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING

from ._memfit import __version__, parse_size

if _TYPE_CHECKING:
    from . import array
    from ._kernels import assign, row_quadratic_form, weighted_scatter
    from ._kmeans import KMeans
    from ._minibatch import MiniBatchKMeans
    from ._mixture import GaussianMixture

#: The module of each attribute imported on first use (PEP 562); ``array``
#: is the module itself.
_LAZY = {
    "KMeans": "._kmeans",
    "MiniBatchKMeans": "._minibatch",
    "GaussianMixture": "._mixture",
    "assign": "._kernels",
    "row_quadratic_form": "._kernels",
    "weighted_scatter": "._kernels",
    "array": ".array",
}

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
    """The kernels, :mod:`memfit.array` and the estimators (with NumPy or
    scikit-learn), imported the first time they are asked for."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    imported = _importlib.import_module(module, __name__)
    value = imported if name == "array" else getattr(imported, name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__) | set(_LAZY))
