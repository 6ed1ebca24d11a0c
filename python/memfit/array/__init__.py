"""memfit.array: lazy NumPy-style arrays evaluated in blocks under a hard
memory limit, with results streamed to ``.npy`` or Zarr when they do not fit.

>>> import numpy as np
>>> import memfit.array as ma
>>> a = ma.asarray(np.ones((200, 76, 76)))        # no copy
>>> s = ma.arange(200.0)
>>> y = np.sum(np.tile(a, (500, 1, 1, 1)) * s[:, None, None], axis=0)
>>> y                                               # nothing computed yet
memfit.array<shape=(200, 76, 76), dtype=float64>
>>> float(y[3, 0, 0])                               # 500 * 3
1500.0

Operations build an expression graph in the Rust engine; nothing runs
until :meth:`Array.compute`, :meth:`Array.to_npy`, :meth:`Array.to_zarr`,
``np.asarray(x)`` or ``float(x)``. The engine then picks block shapes from
``memory_limit`` (bytes; ``"2GiB"``; default half of the available memory),
fuses chains of elementwise operations into one pass per block, runs blocks
on ``n_jobs`` threads, and rewrites reductions over tiled, repeated or
broadcast axes so they cost only the input. Results are bitwise identical
for any ``n_jobs`` and any ``memory_limit``. :meth:`Array.explain` shows the
plan: pipelines, block shape, every buffer with its bytes, scratch on disk.

NumPy's names, dtypes (bool, int8-int64, uint8-uint64, float16-float64),
promotion rules (NumPy 2, NEP 50: Python scalars are weak), broadcasting and
error messages apply. Values that become inf or NaN from finite inputs
(e.g. float16 overflow, division by zero) are counted by kind and reported
as NumPy's error state (``np.errstate``) asks: a RuntimeWarning by default.

Leaves
    :func:`asarray` (no copy), :func:`from_npy`, :func:`from_zarr`,
    :func:`arange`, :func:`zeros`, :func:`ones`, :func:`full`, :func:`empty`,
    ``*_like``, :func:`memfit.array.random.normal` and
    :func:`~memfit.array.random.uniform`.
Elementwise
    Operators ``+ - * / // % ** & | ^ << >> ~``, comparisons, unary
    ``-``/``+``, ``abs``; :func:`add` ... :func:`bitwise_xor`,
    :func:`left_shift`, :func:`right_shift`, :func:`minimum`,
    :func:`maximum`, :func:`sqrt`, :func:`exp`, :func:`log`, :func:`sin`,
    :func:`cos` and the other functions in ``__all__``; :func:`where`,
    :func:`clip`, :func:`round`/:func:`around` (NumPy's bits), :meth:`Array.astype`.
Index maps (views, never copies)
    Basic indexing (integers, slices with steps, ``None``, ``...``),
    :func:`reshape`, :func:`transpose`/``.T``, :func:`swapaxes`,
    :func:`moveaxis`, :func:`expand_dims`, :func:`squeeze`,
    :func:`broadcast_to`, :func:`broadcast_arrays`, :func:`tile`,
    :func:`repeat`, :func:`stack`, :func:`concatenate`, :func:`flip`,
    :func:`fliplr`, :func:`flipud`, :func:`roll`, :func:`take`
    (``mode`` too), ``.mT``; :func:`diff` (``prepend``/``append``);
    :func:`real`/:func:`imag` (memfit arrays are real).
Reductions
    :func:`sum`, :func:`prod`, :func:`mean`, :func:`var`, :func:`std`,
    :func:`min`, :func:`max`, :func:`argmin`, :func:`argmax`, :func:`any`,
    :func:`all`, over any axes with ``keepdims``; float inputs accumulate in
    float64. NaN-ignoring ones: :func:`nansum`, :func:`nanprod`,
    :func:`nanmean`, :func:`nanvar`, :func:`nanstd`, :func:`nanmin`,
    :func:`nanmax`, :func:`nancumsum`, :func:`nancumprod`, :func:`nanargmin`,
    :func:`nanargmax` (a slice of NaNs only raises NumPy's ValueError, found
    by a pass when called). Running sums and products: :func:`cumsum`, :func:`cumprod`
    (NumPy's values bit for bit).
Contractions
    :func:`matmul`/``@``, :func:`tensordot`, :func:`einsum`, :func:`dot`.
Several results in one job
    :func:`compute` (``ma.compute(x.mean(0), x.std(0))``) and :func:`store`
    (to ``.npy``/Zarr files), Dask's names: shared subexpressions are
    computed once, reductions of one array in one pass; :func:`explain`
    shows their joint plan.
Results whose size depends on the values (NumPy arrays, one streamed pass)
    :func:`bincount`, :func:`histogram`, :func:`histogram_bin_edges`,
    :func:`unique`; :func:`nonzero`, :func:`flatnonzero`, :func:`argwhere`.

Expressions are graphs, not trees: a subexpression used several times (or
built twice the same way) is one node, evaluated once per block, and
graphs of any depth (a Python ``sum()`` of thousands of arrays, an
iteration repeated many times) build, evaluate and pickle without
recursion.

NumPy dispatch: ``np.sum(x, axis=0)``, ``np.tile(x, reps)``, ``np.sqrt(x)``,
``np.einsum(...)`` and the other functions above called on a memfit array
(mixed with ndarrays and scalars) return lazy memfit arrays; ``np.add.reduce``
and the like map to the reductions. Any other NumPy function, ufunc method
(``accumulate``, ``outer``, ``at``) or ``out=`` raises TypeError naming it.
"""

from . import random
from ._compute import compute, explain, store
from ._core import DTYPES, Array, Plan
from ._functions import *  # noqa: F401,F403
from ._functions import __all__ as _function_names
from ._nanfunctions import *  # noqa: F401,F403
from ._nanfunctions import __all__ as _nan_names
from ._streamed import bincount, histogram, histogram_bin_edges, unique

newaxis = None

__all__ = [
    "Array", "DTYPES", "Plan", "compute", "explain", "newaxis", "random", "store", *_function_names,
    *_nan_names, "bincount", "histogram", "histogram_bin_edges", "unique",
]
