"""NumPy's NaN-ignoring reductions and scans (``numpy.nansum`` ...), lazily.

Each is NumPy's own definition (``numpy/lib/_nanfunctions_impl.py``)
written with :func:`~memfit.array.where`, :func:`~memfit.array.isnan` and
the reductions, so the engine fuses it into the same passes as any other
expression: NaNs are replaced by the operation's identity (0 for sums,
1 for products, +inf/-inf for min/max) and counted where the mean needs
the count. Integer and boolean inputs have no NaN: the plain reduction.

Where NumPy warns on an all-NaN slice, the result here is the same NaN,
reported as an invalid value (``0 / 0`` for ``nanmean``, ``nanvar`` and
``nanstd``, ``inf - inf`` for ``nanmin``/``nanmax``; NumPy's words: "Mean of
empty slice", "Degrees of freedom <= 0", "All-NaN slice encountered"), as
the graph's own words would need the values before it runs.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from . import _functions as F
from ._core import Array

__all__ = [
    "nansum",
    "nanprod",
    "nanmean",
    "nanvar",
    "nanstd",
    "nanmin",
    "nanmax",
    "nancumsum",
    "nancumprod",
    "nanargmin",
    "nanargmax",
]


def _replace_nan(a: Any, value: float) -> tuple[Array, Any]:
    """``a`` with NaNs replaced by ``value`` and the NaN mask (None for
    dtypes without NaN), as NumPy's ``_replace_nan``."""
    x = F.asarray(a)
    if x.dtype.kind != "f":
        return x, None
    mask = F.isnan(x)
    return F.where(mask, value, x), mask


def _check_dtype(dtype: Any) -> None:
    if dtype is not None and not np.issubdtype(np.dtype(dtype), np.inexact):
        raise TypeError("If a is inexact, then dtype must be inexact")


def _inexact_out(f: Any) -> Any:
    """NumPy's refusal of an ``out`` that is not inexact for an inexact
    ``a`` (``nanmean``, ``nanvar``, ``nanstd``: ``out`` is their fourth
    parameter), before its ``out=`` casts the float results into it."""

    @functools.wraps(f)
    def g(a: Any, *args: Any, **kwargs: Any) -> Any:
        out = args[2] if len(args) > 2 else kwargs.get("out")
        out = out[0] if isinstance(out, tuple) and len(out) == 1 else out
        inexact = np.issubdtype(getattr(a, "dtype", None) or np.asarray(a).dtype, np.inexact)
        if inexact and isinstance(out, np.ndarray) and not np.issubdtype(out.dtype, np.inexact):
            raise TypeError("If a is inexact, then out must be inexact")
        return f(a, *args, **kwargs)

    return g


def _divide(total: Array, count: Array) -> Array:
    """``total / count`` in ``total``'s dtype, as NumPy's in-place
    ``_divide_by_count``."""
    return F.astype(total / count, total.dtype)


def nansum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: Any = False, initial: Any = None, where: Any = None) -> Array:
    arr, _ = _replace_nan(a, 0)
    return F.sum(arr, axis=axis, dtype=dtype, out=out, keepdims=keepdims, initial=initial, where=where)


def nanprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: Any = False, initial: Any = None, where: Any = None) -> Array:
    arr, _ = _replace_nan(a, 1)
    return F.prod(arr, axis=axis, dtype=dtype, out=out, keepdims=keepdims, initial=initial, where=where)


def nancumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Array:
    arr, _ = _replace_nan(a, 0)
    return F.cumsum(arr, axis=axis, dtype=dtype, out=out)


def nancumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Array:
    arr, _ = _replace_nan(a, 1)
    return F.cumprod(arr, axis=axis, dtype=dtype, out=out)


@_inexact_out
@F._with_out("unsafe", reduction=True)
def nanmean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: Any = False, *, where: Any = None) -> Array:
    arr, mask = _replace_nan(a, 0)
    if mask is None:
        return F.mean(arr, axis=axis, dtype=dtype, out=out, keepdims=keepdims, where=where)
    _check_dtype(dtype)
    F._reject_out(out)
    F._reject_where(where)
    count = F.sum(~mask, axis=axis, dtype=np.intp, keepdims=keepdims)
    total = F.sum(arr, axis=axis, dtype=dtype, keepdims=keepdims)
    return _divide(total, count)


@_inexact_out
@F._with_out("unsafe", reduction=True)
def nanvar(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0, keepdims: Any = False, *, where: Any = None, mean: Any = None, correction: Any = None) -> Array:
    arr, mask = _replace_nan(a, 0)
    if mask is None:
        return F.var(arr, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, where=where, mean=mean, correction=correction)
    _check_dtype(dtype)
    F._reject_out(out)
    F._reject_where(where)
    if F._given(mean):
        F.reject("mean", mean)
    ddof = F._ddof(ddof, correction)
    count = F.sum(~mask, axis=axis, dtype=np.intp, keepdims=True)
    average = _divide(F.sum(arr, axis=axis, dtype=dtype, keepdims=True), count)
    deviation = F.where(mask, 0, arr - average)
    total = F.sum(deviation * deviation, axis=axis, dtype=dtype, keepdims=keepdims)
    dof = F.sum(~mask, axis=axis, dtype=np.intp, keepdims=keepdims) - ddof
    return F.where(dof <= 0, np.nan, _divide(total, dof))


@_inexact_out
@F._with_out("unsafe", reduction=True)
def nanstd(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0, keepdims: Any = False, *, where: Any = None, mean: Any = None, correction: Any = None) -> Array:
    if F.asarray(a).dtype.kind != "f":
        return F.std(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, where=where, mean=mean, correction=correction)
    var = nanvar(a, axis=axis, dtype=dtype, out=out, ddof=ddof, keepdims=keepdims, where=where, mean=mean, correction=correction)
    return F.sqrt(var)


def _nanextreme(reduction: Any, fill: float, a: Any, axis: Any, out: Any, keepdims: Any, initial: Any, where: Any) -> Array:
    arr, mask = _replace_nan(a, fill)
    try:
        result = reduction(arr, axis=axis, out=out, keepdims=keepdims, initial=initial, where=where)
    except ValueError as e:
        # NumPy's nanmin/nanmax reduce with fmin/fmax, and name them.
        name = "fmin" if reduction is F.min else "fmax"
        if isinstance(e, np.exceptions.AxisError):
            raise
        raise ValueError(str(e).replace("operation minimum ", f"operation {name} ").replace(
            "operation maximum ", f"operation {name} ")) from None
    if mask is None:
        return result
    # An all-NaN slice reduces to the fill (±inf); fill − fill there is an
    # invalid operation, so its NaN is reported as NumPy warns, not silent
    # (and NumPy's positive NaN is put in its place). Every other value is
    # exactly itself minus zero.
    empty = F.all(mask, axis=axis, keepdims=keepdims)
    return F.where(empty, np.nan, result - F.where(empty, result, 0))


@F._with_out("unsafe", reduction=True)
def nanmin(a: Any, axis: Any = None, out: Any = None, keepdims: Any = False, initial: Any = None, where: Any = None) -> Array:
    return _nanextreme(F.min, np.inf, a, axis, out, keepdims, initial, where)


@F._with_out("unsafe", reduction=True)
def nanmax(a: Any, axis: Any = None, out: Any = None, keepdims: Any = False, initial: Any = None, where: Any = None) -> Array:
    return _nanextreme(F.max, -np.inf, a, axis, out, keepdims, initial, where)


def _nanarg(reduction: Any, fill: float, a: Any, axis: Any, out: Any, keepdims: Any) -> Any:
    """NumPy's ``nanargmin``/``nanargmax``: NaNs replaced by ``fill``, then
    the index reduction; a slice of NaNs only raises NumPy's ValueError,
    found by one pass over the mask before the lazy result is returned."""
    arr, mask = _replace_nan(a, fill)
    if mask is not None and mask.size and bool(F.any(F.all(mask, axis=axis)).compute()):
        raise ValueError("All-NaN slice encountered")
    return reduction(arr, axis=axis, out=out, keepdims=keepdims)


def nanargmin(a: Any, axis: Any = None, out: Any = None, *, keepdims: Any = False) -> Any:
    """The index of the minimum over ``axis`` ignoring NaN, lazily, as
    ``numpy.nanargmin`` (NaNs replaced by +inf, then
    :func:`~memfit.array.argmin`).

    Parameters
    ----------
    a : array-like or Array
    axis : None or int, default=None
        None: the index into the flattened array.
    out : numpy.ndarray, optional
        Computed into it.
    keepdims : bool, default=False

    Returns
    -------
    Array of int64

    Raises
    ------
    ValueError
        A slice of NaNs only (NumPy's message; found by a pass over the
        data when called).
    numpy.exceptions.AxisError
        An axis out of range.
    """
    return _nanarg(F.argmin, np.inf, a, axis, out, keepdims)


def nanargmax(a: Any, axis: Any = None, out: Any = None, *, keepdims: Any = False) -> Any:
    """The index of the maximum over ``axis`` ignoring NaN, lazily, as
    ``numpy.nanargmax`` (NaNs replaced by -inf, then
    :func:`~memfit.array.argmax`).

    Parameters
    ----------
    a, axis, out, keepdims
        As :func:`nanargmin`'s, and so are its result (int64) and its
        ValueError for a slice of NaNs only.
    """
    return _nanarg(F.argmax, -np.inf, a, axis, out, keepdims)


_DOC = """{what}, lazily, as ``numpy.{name}``: NaNs replaced by {fill}{after}.

Parameters
----------
a : array-like or Array
axis : None, int or tuple of int, optional
    Axes to reduce{axis_note}; None: all.
{extra}out : numpy.ndarray, optional
    Computed into it.

Returns
-------
Array
    {result}

Raises
------
numpy.exceptions.AxisError
    An axis out of range.
TypeError
    {raises}
"""

_KEEPDIMS = "keepdims : bool, default=False\n    Keep the reduced axes with length 1.\n"
_DTYPE = "dtype : dtype-like, optional\n    The result dtype (a float dtype for float input).\n"
_DDOF = "ddof : int or float, default=0\n    Divide by ``count - ddof``; NaN where that is not positive.\n"
_SPECS = {
    "nansum": ("The sum over ``axis``", "0", "", _DTYPE + _KEEPDIMS, "As :func:`~memfit.array.sum` (an all-NaN slice sums to 0)."),
    "nanprod": ("The product over ``axis``", "1", "", _DTYPE + _KEEPDIMS, "As :func:`~memfit.array.prod`."),
    "nancumsum": ("The running sum along ``axis``", "0", "", _DTYPE, "``a``'s shape (1-d when ``axis`` is None)."),
    "nancumprod": ("The running product along ``axis``", "1", "", _DTYPE, "``a``'s shape (1-d when ``axis`` is None)."),
    "nanmean": ("The mean over ``axis`` of the values that are not NaN", "0", " and counted", _DTYPE + _KEEPDIMS,
                "As :func:`~memfit.array.mean`; NaN for an all-NaN slice (an invalid-value warning)."),
    "nanvar": ("The variance over ``axis`` of the values that are not NaN", "0", " and counted (two passes: the mean, then the squared deviations)",
               _DTYPE + _DDOF + _KEEPDIMS, "As :func:`~memfit.array.var`; NaN for an all-NaN slice."),
    "nanstd": ("The standard deviation over ``axis`` of the values that are not NaN", "0", " and counted (the square root of :func:`nanvar`)",
               _DTYPE + _DDOF + _KEEPDIMS, "As :func:`~memfit.array.std`; NaN for an all-NaN slice."),
    "nanmin": ("The minimum over ``axis`` ignoring NaN", "+inf", "", _KEEPDIMS, "The input's dtype; NaN for an all-NaN slice (an invalid-value warning)."),
    "nanmax": ("The maximum over ``axis`` ignoring NaN", "-inf", "", _KEEPDIMS, "The input's dtype; NaN for an all-NaN slice (an invalid-value warning)."),
}
for _name, (_what, _fill, _after, _extra, _result) in _SPECS.items():
    globals()[_name].__doc__ = _DOC.format(
        what=_what, name=_name, fill=_fill, after=_after, extra=_extra, result=_result,
        axis_note=" (one int for the running ones)" if "cum" in _name else "",
        raises="``dtype`` not a float dtype for float input; ``out`` not a NumPy array, ``initial``, ``where`` or ``mean`` given.",
    )
del _name, _what, _fill, _after, _extra, _result
