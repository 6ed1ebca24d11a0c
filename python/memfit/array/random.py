"""Lazy random arrays whose values do not depend on the blocking.

The value of element ``i`` (its flat C-order index) depends only on the
seed, ``i`` and the shape, so an array is the same whatever ``memory_limit``
and ``n_jobs`` evaluate it, and a slice of it equals the same slice of the
whole. The generator is memfit's own (counter-based): the values differ
from ``numpy.random``'s for the same seed.
"""

from __future__ import annotations

import numbers
from typing import Any, Optional

import numpy as np

from ._core import Array, dtype_name, normalize_shape, op

__all__ = ["normal", "uniform"]


def _seed(seed: Any) -> int:
    if seed is None:
        return int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> np.uint64(1))
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (numbers.Integral, np.integer)):
        raise TypeError(f"seed must be an int or None, got {seed!r}")
    seed = int(seed)
    if not 0 <= seed < 1 << 63:
        raise ValueError(f"seed must be in [0, 2**63), got {seed}")
    return seed


def _param(value: Any, name: str) -> float:
    if isinstance(value, (Array, np.ndarray)) and getattr(value, "ndim", 0):
        raise TypeError(
            f"{name} must be a scalar; for per-element parameters use {name} arithmetic on a standard draw "
            "(e.g. loc + scale * normal(size=shape))"
        )
    if isinstance(value, complex) or isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a real number, got {value!r}")
    return float(value)


def _random(dist: str, a: float, b: float, size: Any, seed: Any, dtype: Any) -> Array:
    shape = () if size is None else normalize_shape(size, "size")
    name = dtype_name(dtype)
    if np.dtype(name).kind != "f":
        raise TypeError(f"random {dist} values are floats; dtype must be float16, float32 or float64, got {name}")
    return op("random", [], dist=dist, shape=list(shape), seed=_seed(seed), a=a, b=b, dtype=name)


def normal(loc: float = 0.0, scale: float = 1.0, size: Any = None, *, seed: Optional[int] = None, dtype: Any = np.float64) -> Array:
    """Normally distributed values, lazily.

    Parameters
    ----------
    loc : float, default=0.0
        The mean.
    scale : float, default=1.0
        The standard deviation (must be non-negative).
    size : int or tuple of int, optional
        The shape (None: a 0-d array).
    seed : int, optional
        In ``[0, 2**63)``; the same seed and shape give the same values
        whatever the blocking. None draws a seed from the OS.
    dtype : {float64, float32, float16}, default=float64

    Returns
    -------
    Array

    Raises
    ------
    ValueError
        A negative ``scale`` or ``size``, a seed out of range.
    TypeError
        Array parameters, a non-float dtype.
    """
    loc, scale = _param(loc, "loc"), _param(scale, "scale")
    if scale < 0:
        raise ValueError("scale < 0")
    return _random("normal", loc, scale, size, seed, dtype)


def uniform(low: float = 0.0, high: float = 1.0, size: Any = None, *, seed: Optional[int] = None, dtype: Any = np.float64) -> Array:
    """Uniformly distributed values in ``[low, high)``, lazily.

    Parameters
    ----------
    low, high : float, default=0.0, 1.0
        The bounds, ``low <= high``, checked as ``numpy.random.Generator.
        uniform`` checks them. The interval is that of ``low`` and ``high``
        rounded to ``dtype``: a draw that rounds to ``high`` (often in
        float16, over narrow ranges in float32 or float64) is replaced by
        the dtype's next value below ``high``, so ``high`` itself is never
        returned, unless ``low`` and ``high`` round to the same value
        (which every value then is, as NumPy's ``uniform(a, a)``).
    size : int or tuple of int, optional
        The shape (None: a 0-d array).
    seed : int, optional
        In ``[0, 2**63)``; the same seed and shape give the same values
        whatever the blocking. None draws a seed from the OS.
    dtype : {float64, float32, float16}, default=float64

    Returns
    -------
    Array

    Raises
    ------
    OverflowError
        ``high - low`` not finite ("high - low range exceeds valid bounds",
        as NumPy's Generator).
    ValueError
        ``high < low`` ("high - low < 0", as NumPy's Generator), a negative
        ``size``, a seed out of range.
    TypeError
        Array parameters, a non-float dtype.
    """
    low, high = _param(low, "low"), _param(high, "high")
    span = high - low  # Python floats: inf or NaN, never an exception
    if not np.isfinite(span):
        raise OverflowError("high - low range exceeds valid bounds")
    if span < 0:
        raise ValueError("high - low < 0")
    x = _random("uniform", low, high, size, seed, dtype)
    # The engine draws low + (high - low) * u in float64 (u in (0, 1], 1.0
    # with probability 2**-53) and rounds to the dtype, which can give high
    # (often in float16, over narrow ranges in float32): the dtype's next
    # value below high replaces it.
    dt = x.dtype
    lo, hi = np.float64(low).astype(dt), np.float64(high).astype(dt)
    if lo < hi:
        from ._functions import where

        x = where(x == hi, np.nextafter(hi, lo), x)
    return x
