"""NumPy's dispatch protocols for memfit arrays: ``__array_ufunc__``
(NEP 13) and ``__array_function__`` (NEP 18). NumPy code called on a memfit
array returns a lazy memfit array; what memfit.array does not support raises
TypeError naming it."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _functions as F
from . import _nanfunctions as N
from . import _streamed as S
from ._core import Array, refuse_dask, reject, write_out

#: Types a NumPy call may mix with memfit arrays (converted as operands).
_OPERAND_TYPES = (Array, np.ndarray, np.generic, bool, int, float, list, tuple)

_HINT = (
    "memfit.array computes lazily and supports NumPy's elementwise functions, reductions, index maps and "
    "contractions listed in memfit.array's documentation; compute the array first (np.asarray(x) or "
    "x.compute(), within the memory limit) to use other NumPy functions"
)


def _ufunc_table() -> dict:
    table = {}
    for name, _ in F._BINARY + F._UNARY:
        uf = getattr(np, name, None)
        if isinstance(uf, np.ufunc):
            table[uf] = getattr(F, name)
    table[np.matmul] = F.matmul
    table[np.divmod] = F.divmod
    return table


#: numpy ufunc → memfit.array function, for ``ufunc(...)``.
UFUNCS = _ufunc_table()

#: numpy ufunc → memfit.array reduction, for ``ufunc.reduce(...)``.
UFUNC_REDUCTIONS = {
    np.add: F.sum,
    np.multiply: F.prod,
    np.minimum: F.min,
    np.maximum: F.max,
    np.logical_and: F.all,
    np.logical_or: F.any,
}


def _copy(a: Any, order: str = "K", subok: bool = False) -> Array:
    """``numpy.copy``: :meth:`Array.copy` (the NumPy arrays it borrows
    copied, so later writes to them do not show through)."""
    return F.asarray(a).copy()


def _function_table() -> dict:
    names = {
        "sum": F.sum,
        "prod": F.prod,
        "mean": F.mean,
        "var": F.var,
        "std": F.std,
        "min": F.min,
        "max": F.max,
        "amin": F.min,
        "amax": F.max,
        "argmin": F.argmin,
        "argmax": F.argmax,
        "any": F.any,
        "all": F.all,
        "tile": F.tile,
        "repeat": F.repeat,
        "reshape": F.reshape,
        "ravel": F.ravel,
        "transpose": F.transpose,
        "permute_dims": F.permute_dims,
        "swapaxes": F.swapaxes,
        "moveaxis": F.moveaxis,
        "expand_dims": F.expand_dims,
        "squeeze": F.squeeze,
        "broadcast_to": F.broadcast_to,
        "broadcast_arrays": F.broadcast_arrays,
        "stack": F.stack,
        "concatenate": F.concatenate,
        "concat": F.concatenate,
        "where": F.where,
        "nonzero": F.nonzero,
        "flatnonzero": F.flatnonzero,
        "argwhere": F.argwhere,
        "count_nonzero": F.count_nonzero,
        "cumsum": F.cumsum,
        "cumprod": F.cumprod,
        "round": F.round,
        "around": F.round,
        "flip": F.flip,
        "fliplr": F.fliplr,
        "flipud": F.flipud,
        "roll": F.roll,
        "diff": F.diff,
        "take": F.take,
        "real": F.real,
        "imag": F.imag,
        **{name: getattr(N, name) for name in N.__all__},
        "bincount": S.bincount,
        "histogram": S.histogram,
        "histogram_bin_edges": S.histogram_bin_edges,
        "unique": S.unique,
        "clip": F.clip,
        "einsum": F.einsum,
        "tensordot": F.tensordot,
        "dot": F.dot,
        "vdot": F.vdot,
        "inner": F.inner,
        "outer": F.outer,
        "result_type": F.result_type,
        "can_cast": F.can_cast,
        "shape": F.shape,
        "ndim": F.ndim,
        "size": F.size,
        "zeros_like": F.zeros_like,
        "ones_like": F.ones_like,
        "full_like": F.full_like,
        "empty_like": F.empty_like,
        "astype": F.astype,
        "copy": _copy,
    }
    table = {}
    for name, impl in names.items():
        f = getattr(np, name, None)
        if f is not None and not isinstance(f, np.ufunc):
            table[f] = impl
    # matmul is a ufunc (dispatched by __array_ufunc__); keep the function
    # form too for NumPy versions where it is not.
    if not isinstance(np.matmul, np.ufunc):  # pragma: no cover
        table[np.matmul] = F.matmul
    return table


#: numpy function → memfit.array function, for ``__array_function__``.
FUNCTIONS = _function_table()


def _numpy_name(func: Any) -> str:
    module = getattr(func, "__module__", None) or "numpy"
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", repr(func))
    if module.startswith("numpy") and "._" in module:
        module = "numpy"
    return f"{module}.{name}"


def array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple, kwargs: dict) -> Any:
    """``Array.__array_ufunc__``: ``ufunc(...)`` and ``ufunc.reduce(...)``
    of the supported ufuncs, lazily."""
    for x in inputs:
        refuse_dask(x)
    if any(not isinstance(x, _OPERAND_TYPES) for x in inputs):
        return NotImplemented
    out = kwargs.pop("out", None)
    outs = out if isinstance(out, tuple) else (out,)
    if out is not None and any(o is not None for o in outs):
        if not (len(outs) == 1 and isinstance(outs[0], np.ndarray)):
            raise TypeError(
                f"memfit.array supports out= in numpy.{ufunc.__name__} with one NumPy array only: results are "
                "lazy arrays; use the returned array, then x.compute(), x.to_npy() or x.to_zarr()"
            )
        casting = "same_kind" if method == "__call__" else "unsafe"
        if method == "__call__" and "casting" in kwargs:
            casting = kwargs.pop("casting")
            # NumPy's own errors for the rule (a bad rule, inputs or out it
            # forbids), from the ufunc on empty operands of these dtypes.
            probe = [np.empty(0, x.dtype) if isinstance(x, (Array, np.ndarray)) else x for x in inputs]
            ufunc(*probe, out=np.empty(0, outs[0].dtype), casting=casting)
        result = array_ufunc(ufunc, method, inputs, kwargs)
        if result is NotImplemented:
            return result
        return write_out(result, outs[0], casting, ufunc.__name__, reduction=method == "reduce")
    if method == "__call__":
        impl = UFUNCS.get(ufunc)
        if impl is None:
            raise TypeError(f"memfit.array does not support numpy.{ufunc.__name__}; {_HINT}")
        return impl(*inputs, **kwargs)
    if method == "reduce":
        impl = UFUNC_REDUCTIONS.get(ufunc)
        if impl is None:
            raise TypeError(f"memfit.array does not support numpy.{ufunc.__name__}.reduce; {_HINT}")
        (a,) = inputs
        axis = kwargs.pop("axis", 0)
        keepdims = kwargs.pop("keepdims", False)
        dtype = kwargs.pop("dtype", None)
        for key, value in kwargs.items():
            if key == "where" and value is True:
                continue
            if key == "initial" and value is getattr(np, "_NoValue", None):
                continue
            reject(key, value)
        if impl in (F.sum, F.prod):
            return impl(a, axis=axis, dtype=dtype, keepdims=keepdims)
        x = impl(a, axis=axis, keepdims=keepdims)
        return x if dtype is None else x.astype(dtype)
    raise TypeError(
        f"memfit.array does not support numpy.{ufunc.__name__}.{method} (only numpy.{ufunc.__name__}(...) "
        f"and, for add, multiply, minimum, maximum, logical_and and logical_or, .reduce); {_HINT}"
    )


def array_function(func: Any, types: tuple, args: tuple, kwargs: dict) -> Any:
    """``Array.__array_function__``: the NumPy functions in :data:`FUNCTIONS`,
    lazily; TypeError naming any other."""
    impl = FUNCTIONS.get(func)
    if impl is None:
        raise TypeError(f"memfit.array does not support {_numpy_name(func)}; {_HINT}")
    if not all(issubclass(t, (Array, np.ndarray)) for t in types):
        return NotImplemented
    return impl(*args, **kwargs)
