"""The functions of :mod:`memfit.array`: leaves, elementwise functions,
index maps, reductions and contractions, with NumPy's names, signatures and
error messages. Each returns a lazy :class:`~memfit.array.Array`; nothing is
computed."""

from __future__ import annotations

import builtins
import functools
import inspect
import numbers
import operator
import os
import textwrap
import warnings
from typing import Any, Optional, Sequence

import numpy as np

from ._core import (
    DTYPES,
    Array,
    dtype_name,
    from_ndarray,
    index_int,
    node,
    normalize_axes,
    normalize_axis,
    normalize_shape,
    op,
    operand,
    optional_dtype_name,
    refuse_dask,
    reject,
    write_out,
    scalar,
    strong_operand,
    _zarr_path,
)
from ._core import prod as _prod

_NoValue = getattr(np, "_NoValue", None)
#: Subscript letters for the contractions written as einsums (matmul, tensordot).
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _given(value: Any) -> bool:
    """Whether an optional NumPy argument was given (not None / _NoValue)."""
    return value is not None and value is not _NoValue


def _flag(value: Any, default: bool = False) -> bool:
    return default if value is None or value is _NoValue else bool(value)


def _reject_where(where: Any) -> None:
    if where is None or where is _NoValue or where is True:
        return
    reject("where", where)


def _with_out(casting: str, reduction: bool = False):
    """NumPy's ``out=`` for a function whose parameter ``out`` is refused
    otherwise: given a NumPy array (or a 1-tuple of one), the lazy result
    is computed into it and it is returned (see ``write_out``); any other
    ``out`` goes to the function, which refuses it. A reduction with a
    ``dtype`` parameter left at None runs in a float or complex ``out``'s
    dtype where its input casts there safely (else in its own, cast into
    ``out`` at the end), as NumPy's reductions do."""

    def wrap(f):
        params = list(inspect.signature(f).parameters.values())
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        at = next(i for i, p in enumerate(params) if p.name == "out")
        if builtins.any(p.kind not in positional for p in params[: at + 1]):
            at = None  # keyword-only (after *args)
        dtype_at = next((i for i, p in enumerate(params) if p.name == "dtype"), None) if reduction else None

        @functools.wraps(f)
        def g(*args: Any, **kwargs: Any) -> Any:
            out = kwargs.get("out") if at is None or len(args) <= at else args[at]
            target = out[0] if isinstance(out, tuple) and len(out) == 1 else out
            if not isinstance(target, np.ndarray):
                return f(*args, **kwargs)
            if at is not None and len(args) > at:
                args = args[:at] + (None,) + args[at + 1:]
            else:
                kwargs["out"] = None
            if dtype_at is not None and target.dtype.kind in "fc" and _safe_into(args, kwargs, target.dtype):
                if len(args) > dtype_at:
                    if args[dtype_at] is None:
                        args = args[:dtype_at] + (target.dtype,) + args[dtype_at + 1:]
                elif kwargs.get("dtype") is None:
                    kwargs["dtype"] = target.dtype
            return write_out(f(*args, **kwargs), out, casting, f.__name__, reduction)

        return g

    return wrap


def _safe_into(args: tuple, kwargs: dict, into: np.dtype) -> bool:
    """Whether a reduction's input (its first argument) casts safely to
    ``into``: NumPy then runs it in ``out``'s dtype; otherwise in the
    input's, cast into ``out`` at the end."""
    a = args[0] if args else kwargs.get("a")
    src = getattr(a, "dtype", None)
    src = np.asarray(a).dtype if src is None else np.dtype(src)
    return bool(np.can_cast(src, into, "safe"))


def _reject_out(out: Any) -> None:
    if out is not None and out is not _NoValue:
        reject("out", out)


# ---------------------------------------------------------------------------
# Leaves


def asarray(a: Any, dtype: Any = None) -> Array:
    """A lazy array of ``a``, without a copy of NumPy arrays.

    Parameters
    ----------
    a : array-like, memfit.array.Array, zarr.Array or scalar
        A memfit array is returned as it is. A ``numpy.memmap`` of a whole
        ``.npy`` file (``np.load(path, mmap_mode="r")``) is read from its file
        as :func:`from_npy` reads it. Another NumPy array of one
        of the 12 supported dtypes in native byte order is referenced in
        place, whatever its strides (the engine reads it when evaluating: do
        not modify it before then); other byte orders are converted to native
        (one copy). A zarr array stored in a local directory is read lazily
        (as :func:`from_zarr`). Lists, tuples and scalars go through
        ``numpy.asarray`` first.
    dtype : dtype-like, optional
        Cast to this dtype (lazily, NumPy's unsafe casting).

    Returns
    -------
    Array

    Raises
    ------
    TypeError
        An unsupported dtype (complex, object, strings, datetimes,
        longdouble), naming it.

    Examples
    --------
    >>> import numpy as np
    >>> import memfit.array as ma
    >>> ma.asarray(np.zeros((3, 4), dtype=np.float32))
    memfit.array<shape=(3, 4), dtype=float32>
    """
    if isinstance(a, Array):
        x = a
    elif isinstance(a, np.ndarray):
        # A memmap of a whole .npy file is read with positioned reads into
        # planned blocks, as from_npy reads it: mapped pages would count as
        # resident memory outside the limit.
        from .._validation import npy_behind

        path = npy_behind(a, ndim=None)
        x = from_ndarray(a) if path is None else from_npy(path)
    else:
        refuse_dask(a)
        zpath = _zarr_path(a)
        if zpath is not None:
            x = node("expr_from_zarr", zpath)
        else:
            arr = np.asarray(a)
            if arr.dtype == object:
                raise TypeError(
                    f"memfit.array does not support object arrays (got {type(a).__name__} that NumPy converts "
                    "to dtype object); pass numbers of one dtype"
                )
            x = from_ndarray(arr)
    return x if dtype is None else x.astype(dtype)


def from_npy(path: Any) -> Array:
    """A lazy array of a ``.npy`` file, read with positioned reads when it
    is evaluated (never loaded whole).

    Parameters
    ----------
    path : str or os.PathLike
        A ``.npy`` file of one of the 12 supported dtypes (either byte order,
        C or Fortran order).

    Returns
    -------
    Array

    Raises
    ------
    OSError
        The file cannot be opened.
    ValueError
        Not a ``.npy`` file, or of an unsupported dtype.
    """
    return node("expr_from_npy", path)


def from_zarr(path_or_array: Any) -> Array:
    """A lazy array of a Zarr (v2 or v3) array directory, read chunk by
    chunk when it is evaluated.

    Readable arrays are uncompressed or zstd-compressed (zarr-python's
    default codecs for v3 and v2), sharded or not, with optional crc32c
    checksums or v2's shuffle filter. Arrays compressed with blosc (v2's
    default in zarr-python 2), gzip, zlib, lz4, bz2 or lzma, with a delta
    filter, the ``transpose`` codec or v2's ``order="F"`` are refused:
    rewrite them with zarr-python (``zarr.create_array(..., compressors=
    zarr.codecs.ZstdCodec())``).

    Parameters
    ----------
    path_or_array : str, os.PathLike or zarr.Array
        The array's directory, or a zarr-python array stored in a local
        directory (its path is used; the data are read by the engine).

    Returns
    -------
    Array

    Raises
    ------
    TypeError
        A zarr array not stored in a local directory (e.g. in memory).
    OSError, ValueError
        Not a readable Zarr array, or of an unsupported dtype.
    """
    if isinstance(path_or_array, (str, bytes, os.PathLike)):
        path = os.fsdecode(os.fspath(path_or_array))
    else:
        path = _zarr_path(path_or_array)
        if path is None:
            raise TypeError(
                f"from_zarr takes a path or a zarr.Array, got {type(path_or_array).__name__}"
            )
    return node("expr_from_zarr", path)


def _fill_value(value: Any, name: str) -> Any:
    """``value`` as the Python scalar of dtype ``name``: NumPy's unsafe cast,
    but a Python integer outside an integer dtype (or outside int64 for
    bool) raises NumPy's OverflowError."""
    if isinstance(value, Array) or (isinstance(value, np.ndarray) and value.ndim):
        raise TypeError("fill_value must be a scalar")
    if isinstance(value, int) and not isinstance(value, bool):
        if name == "bool" and not -(2**63) <= value < 2**63:
            # NumPy converts the int to a C long for a bool array.
            raise OverflowError("Python int too large to convert to C long")
        return np.array(value, dtype=name).item()
    v = np.asarray(value)
    if v.dtype.kind == "c":
        raise TypeError(f"memfit.array does not support complex values (got {value!r})")
    return np.asarray(v.astype(name)).item()


def full(shape: Any, fill_value: Any, dtype: Any = None) -> Array:
    """A lazy array of ``shape`` filled with ``fill_value`` (no memory until
    evaluated, and then only blocks).

    Parameters
    ----------
    shape : int or sequence of int
    fill_value : bool, int, float or array-like
        An array is broadcast to ``shape`` (NumPy's rule), without a copy.
    dtype : dtype-like, optional
        Default: NumPy's dtype of ``fill_value`` (bool, int64 or float64).

    Returns
    -------
    Array
    """
    dims = normalize_shape(shape)
    if np.ndim(fill_value) != 0:
        value = np.asarray(fill_value, dtype=dtype)
        while value.ndim > len(dims) and value.shape[0] == 1:
            value = value[0]  # NumPy's copy drops leading unit axes
        try:
            fits = np.broadcast_shapes(value.shape, tuple(dims)) == tuple(dims)
        except ValueError:
            fits = False
        if not fits:
            shown = (str(s).replace(" ", "") for s in (value.shape, tuple(dims)))
            raise ValueError("could not broadcast input array from shape {} into shape {}".format(*shown))
        return broadcast_to(operand(value), tuple(dims))
    if dtype is None:
        if isinstance(fill_value, (np.generic, np.ndarray)):
            dtype = fill_value.dtype
        else:
            dtype = np.asarray(fill_value).dtype
    name = dtype_name(dtype)
    return op("full", [], shape=list(dims), value=_fill_value(fill_value, name), dtype=name)


def zeros(shape: Any, dtype: Any = float) -> Array:
    """A lazy array of zeros (see :func:`full`); no memory until evaluated.

    Parameters
    ----------
    shape : int or sequence of int
    dtype : dtype-like, default=float64

    Returns
    -------
    Array
    """
    return full(shape, 0, np.float64 if dtype is None else dtype)


def ones(shape: Any, dtype: Any = float) -> Array:
    """A lazy array of ones (see :func:`full`); no memory until evaluated.

    Parameters
    ----------
    shape : int or sequence of int
    dtype : dtype-like, default=float64

    Returns
    -------
    Array
    """
    return full(shape, 1, np.float64 if dtype is None else dtype)


def empty(shape: Any, dtype: Any = float) -> Array:
    """As :func:`zeros`: a lazy array has no uninitialised memory, it is
    zeros.

    Parameters
    ----------
    shape : int or sequence of int
    dtype : dtype-like, default=float64

    Returns
    -------
    Array
    """
    return full(shape, 0, np.float64 if dtype is None else dtype)


def full_like(a: Any, fill_value: Any, dtype: Any = None, order: str = "K", subok: bool = True, shape: Any = None, **kwargs: Any) -> Array:
    """A lazy array like ``a`` (its shape and dtype unless given) filled with
    ``fill_value``.

    Parameters
    ----------
    a : array-like or Array
    fill_value : bool, int or float
    dtype : dtype-like, optional
    order, subok
        Accepted for NumPy compatibility (lazy arrays have no layout).
    shape : int or sequence of int, optional

    Returns
    -------
    Array
    """
    x = a if isinstance(a, Array) else operand(a)
    return full(x.shape if shape is None else shape, fill_value, x.dtype if dtype is None else dtype)


def zeros_like(a: Any, dtype: Any = None, order: str = "K", subok: bool = True, shape: Any = None, **kwargs: Any) -> Array:
    """Zeros like ``a`` (see :func:`full_like`).

    Parameters
    ----------
    a : array-like or Array
    dtype : dtype-like, optional
    shape : int or sequence of int, optional

    Returns
    -------
    Array
    """
    return full_like(a, 0, dtype, shape=shape)


def ones_like(a: Any, dtype: Any = None, order: str = "K", subok: bool = True, shape: Any = None, **kwargs: Any) -> Array:
    """Ones like ``a`` (see :func:`full_like`).

    Parameters
    ----------
    a : array-like or Array
    dtype : dtype-like, optional
    shape : int or sequence of int, optional

    Returns
    -------
    Array
    """
    return full_like(a, 1, dtype, shape=shape)


def empty_like(a: Any, dtype: Any = None, order: str = "K", subok: bool = True, shape: Any = None, **kwargs: Any) -> Array:
    """Zeros like ``a`` (see :func:`empty`).

    Parameters
    ----------
    a : array-like or Array
    dtype : dtype-like, optional
    shape : int or sequence of int, optional

    Returns
    -------
    Array
    """
    return full_like(a, 0, dtype, shape=shape)


def _arange_scalar(v: Any) -> Any:
    """An argument of :func:`arange` as a Python or NumPy scalar (0-d arrays
    are taken as their scalar, as NumPy's arithmetic on them gives)."""
    if isinstance(v, Array):
        if v.ndim:
            raise TypeError("arange takes scalars")
        v = v.compute()
    if isinstance(v, np.ndarray):
        if v.ndim:
            raise TypeError("arange takes scalars")
        v = v[()]
    kind = np.asarray(v).dtype.kind
    if isinstance(v, complex) or not (kind in "biuf" or (kind == "O" and isinstance(v, int))):
        raise TypeError(f"arange takes real numbers, got {v!r}")
    return v


def _arange_length(start: Any, stop: Any, step: Any) -> tuple:
    """NumPy's length of ``arange(start, stop, step)`` (``_calc_length``):
    ``ceil((stop - start) / step)`` with the arguments' own arithmetic
    (Python's, or NumPy's scalars' under NEP 50), an OverflowError on the
    way becoming "Maximum allowed size exceeded". Returns the length and,
    for a length of 1 or more, ``start + step`` (else None)."""
    try:
        delta = stop - start
        nonzero = bool(delta != 0)
        val = delta / step
        value = float(val)
        if val == 0 and nonzero:  # underflow, or a step of infinity
            n = 0 if np.signbit(value) else 1
        else:
            ivalue = np.ceil(value)
            if np.isnan(ivalue):
                raise ValueError("arange: cannot compute length")
            if not -(2.0**63) <= ivalue <= 2.0**63:
                raise OverflowError("arange: overflow while computing length")
            # (npy_intp) of 2**63 is -2**63 on x86-64: NumPy's length 0.
            n = builtins.max(0, int(ivalue)) if ivalue < 2.0**63 else 0
        return n, (start + step if n > 0 else None)
    except OverflowError:
        raise ValueError("Maximum allowed size exceeded") from None


def _arange_item(v: Any, dt: np.dtype) -> np.generic:
    """``v`` stored into dtype ``dt`` as NumPy's arange stores its first two
    values (the dtype's ``setitem``): a float through ``float(v)``; an
    integer through ``int(v)`` (truncating a float), NumPy's OverflowError
    beyond the dtype."""
    if isinstance(v, np.generic) and v.dtype == dt:
        return v
    if dt.kind == "f":
        return np.float64(float(v)).astype(dt)
    return np.array(int(v), dtype=dt)[()]


def arange(start: Any = None, stop: Any = None, step: Any = None, dtype: Any = None, **kwargs: Any) -> Array:
    """Evenly spaced values in ``[start, stop)``, lazily, as ``numpy.arange``.

    ``arange(stop)``, ``arange(start, stop)`` or ``arange(start, stop,
    step)``. As NumPy: the length is ``ceil((stop - start) / step)`` (0 when
    negative) computed with the arguments' own arithmetic (a float16 scalar
    argument makes it float16 arithmetic, NEP 50); the dtype is int64
    promoted with each argument's dtype unless ``dtype`` is given (float64
    when an argument is a float, whatever its precision); the first two
    values are ``start`` and ``start + step`` stored into the dtype (an
    OverflowError beyond an integer dtype), and the others ``a[0] + i *
    (a[1] - a[0])`` in the dtype's arithmetic (float32 for float16), so
    ``arange(70000, 70003, dtype=np.float16)`` is ``[inf, inf, nan]``.

    Parameters
    ----------
    start, stop, step : int or float
    dtype : dtype-like, optional

    Returns
    -------
    Array
        1-d.

    Raises
    ------
    ZeroDivisionError
        ``step`` is a Python 0 (as NumPy).
    ValueError
        A length that is NaN ("arange: cannot compute length") or beyond
        the machine's ("Maximum allowed size exceeded").
    OverflowError
        ``start`` or ``start + step`` beyond an integer ``dtype``.
    TypeError
        Non-real arguments.
    """
    given = [v for v in (start, stop, step) if v is not None]
    if start is None and stop is None:
        raise TypeError("arange() requires stop to be specified.")
    if stop is None:
        start, stop = 0, start
    elif start is None:
        start = 0
    if step is None:
        step = 1
    start, stop, step = (_arange_scalar(v) for v in (start, stop, step))
    if dtype is None:
        # NumPy: intp promoted with the dtype of each argument given.
        dt = np.result_type(np.intp, *(np.asarray(_arange_scalar(v)).dtype for v in given))
    else:
        dt = np.dtype(dtype)
    if dt == np.bool_:
        # NumPy's rule: at most two values, start and start + step.
        return operand(np.arange(start, stop, step, dtype=bool))
    n, second = _arange_length(start, stop, step)
    name = dtype_name(dt)
    dt = np.dtype(name)
    if n == 0:
        return op("arange", [], start=0, step=1, n=0, dtype=name)
    if n * dt.itemsize > 2**63 - 1:  # NumPy allocates before storing a value
        raise ValueError("array is too big; `arr.size * arr.dtype.itemsize` is larger than the maximum possible size.")
    a0 = _arange_item(start, dt)
    a1 = _arange_item(second, dt) if n >= 2 else a0
    head = np.array([a0, a1][:n], dtype=dt)
    if dt.kind != "f":
        # The engine wraps start + i * step modulo 2**64, then to the dtype,
        # as NumPy's a[0] + i * (a[1] - a[0]) in the dtype.
        d = (int(a1) - int(a0) + 2**63) % 2**64 - 2**63
        return op("arange", [], start=int(a0), step=d, n=n, dtype=name)
    # The engine fills a[i] = a[0] + i * d in float32 (float16, float32) or
    # float64, then rounds to the dtype, as NumPy fills a[2:].
    wide = np.float32 if dt.itemsize <= 4 else np.float64
    with np.errstate(all="ignore"):
        first = wide(a0)
        d = wide(a1) - first if n >= 2 else wide(0)
        engine = np.array([first + wide(i) * d for i in range(builtins.min(n, 2))]).astype(dt)
        tail = (first + wide(2) * d).astype(dt)
    if engine.tobytes() == head.tobytes():
        return op("arange", [], start=float(first), step=float(d), n=n, dtype=name)
    # NumPy's first two values where the engine's a[0] + 0 * d differs (inf
    # for a[0] and a[1] beyond float16, d = inf - inf NaN), then its fill.
    if n <= 2:
        return operand(head)
    if np.isnan(d):
        # NaN from a[2] on, with the sign NumPy's loop gives it.
        rest = full(n - 2, np.nan, dtype=name)
        rest = negative(rest) if np.signbit(tail) else rest
    else:
        rest = op("arange", [], start=float(first), step=float(d), n=n, dtype=name)[2:]
    return concatenate([head, rest])


# ---------------------------------------------------------------------------
# Elementwise

_BINARY = (
    ("add", "x1 + x2"),
    ("subtract", "x1 - x2"),
    ("multiply", "x1 * x2"),
    ("true_divide", "x1 / x2"),
    ("floor_divide", "x1 // x2"),
    ("remainder", "x1 % x2"),
    ("power", "x1 ** x2"),
    ("minimum", "the elementwise minimum (NaN propagates)"),
    ("maximum", "the elementwise maximum (NaN propagates)"),
    ("equal", "x1 == x2"),
    ("not_equal", "x1 != x2"),
    ("less", "x1 < x2"),
    ("less_equal", "x1 <= x2"),
    ("greater", "x1 > x2"),
    ("greater_equal", "x1 >= x2"),
    ("logical_and", "x1 and x2, elementwise, as bool"),
    ("logical_or", "x1 or x2, elementwise, as bool"),
    ("logical_xor", "x1 xor x2, elementwise, as bool"),
    ("bitwise_and", "x1 & x2"),
    ("bitwise_or", "x1 | x2"),
    ("bitwise_xor", "x1 ^ x2"),
    ("left_shift", "x1 << x2"),
    ("right_shift", "x1 >> x2"),
)

_UNARY = (
    ("negative", "-x"),
    ("positive", "+x"),
    ("absolute", "|x|"),
    ("sqrt", "the square root"),
    ("exp", "e ** x"),
    ("log", "the natural logarithm"),
    ("log2", "the base-2 logarithm"),
    ("log10", "the base-10 logarithm"),
    ("sin", "the sine (radians)"),
    ("cos", "the cosine (radians)"),
    ("tan", "the tangent (radians)"),
    ("square", "x * x"),
    ("reciprocal", "1 / x"),
    ("logical_not", "not x, as bool"),
    ("isnan", "whether x is NaN"),
    ("isfinite", "whether x is finite"),
    ("isinf", "whether x is infinite"),
    ("sign", "-1, 0 or 1 (NaN for NaN)"),
    ("floor", "the largest integer <= x"),
    ("ceil", "the smallest integer >= x"),
    ("trunc", "x rounded towards zero"),
    ("rint", "x rounded to the nearest integer (halves to even)"),
    ("invert", "~x (bitwise not; logical not for bool)"),
)

_ELEMENTWISE_DOC = """{what}, elementwise and lazy, as ``numpy.{name}``.

Parameters
----------
{params}
    Arrays are broadcast by NumPy's rules; Python scalars are weakly typed
    and NumPy scalars and arrays strongly typed (NumPy 2, NEP 50).
out : None
    Not supported (TypeError when given): the result is a new lazy array.

Returns
-------
Array
    The broadcast shape, NumPy's result dtype.
{raises}"""

_ELEMENTWISE_RAISES = """
Raises
------
ValueError
    Shapes that do not broadcast (the message names both).
TypeError
    A dtype combination NumPy refuses, or ``out``.
"""


def _make_binary(name: str, what: str):
    def f(x1: Any, x2: Any, out: Any = None, **kwargs: Any) -> Array:
        _reject_out(out)
        _ufunc_kwargs(name, kwargs)
        return op(name, [operand(x1), operand(x2)])

    f.__name__ = f.__qualname__ = name
    f.__doc__ = _ELEMENTWISE_DOC.format(what=f"``{what}``" if " " in what and what[0] == "x" else what.capitalize(), name=name, params="x1, x2 : array-like or Array", raises=_ELEMENTWISE_RAISES)
    return _with_out("same_kind")(f)


def _make_unary(name: str, what: str):
    def f(x: Any, out: Any = None, **kwargs: Any) -> Array:
        _reject_out(out)
        _ufunc_kwargs(name, kwargs)
        return op(name, [operand(x)])

    f.__name__ = f.__qualname__ = name
    f.__doc__ = _ELEMENTWISE_DOC.format(what=f"``{what}``" if what[0] in "-+|~" or what.startswith("e **") or what.startswith("x *") or what.startswith("1 /") else what[0].upper() + what[1:], name=name, params="x : array-like or Array", raises=_ELEMENTWISE_RAISES)
    return _with_out("same_kind")(f)


def _ufunc_kwargs(name: str, kwargs: dict) -> None:
    """Refuses ufunc keyword arguments other than their defaults."""
    for key, value in kwargs.items():
        if key == "where" and value is True:
            continue
        if key in ("casting",) and value == "same_kind":
            continue
        if key in ("order",) and value == "K":
            continue
        if key in ("subok",) and value is True:
            continue
        if key in ("dtype", "signature") and value is None:
            continue
        reject(key, value)


for _name, _what in _BINARY:
    globals()[_name] = _make_binary(_name, _what)
for _name, _what in _UNARY:
    globals()[_name] = _make_unary(_name, _what)
del _name, _what

divide = globals()["true_divide"]
mod = globals()["remainder"]
bitwise_left_shift = globals()["left_shift"]
bitwise_right_shift = globals()["right_shift"]


def divmod(x1: Any, x2: Any, out: Any = None, **kwargs: Any) -> tuple:  # noqa: A001
    """``(x1 // x2, x1 % x2)``, elementwise and lazy, as ``numpy.divmod``.

    Parameters
    ----------
    x1, x2 : array-like or Array
        Arrays are broadcast by NumPy's rules; Python scalars are weakly typed
        and NumPy scalars and arrays strongly typed (NumPy 2, NEP 50).
    out : None
        Not supported (TypeError when given): the results are new lazy arrays.

    Returns
    -------
    quotient, remainder : Array
        :func:`floor_divide` and :func:`remainder` of the same operands: the
        broadcast shape, NumPy's result dtype.
    """
    _reject_out(out)
    _ufunc_kwargs("divmod", kwargs)
    a, b = operand(x1), operand(x2)
    return op("floor_divide", [a, b]), op("remainder", [a, b])


divmod.__doc__ = (divmod.__doc__ or "") + textwrap.indent(_ELEMENTWISE_RAISES, "    ")
abs = absolute = globals()["absolute"]  # noqa: A001
bitwise_not = bitwise_invert = globals()["invert"]
pow = globals()["power"]  # noqa: A001


def where(condition: Any, x: Any = None, y: Any = None) -> Array:
    """Elements of ``x`` where ``condition`` is true, else of ``y``, lazily.

    Parameters
    ----------
    condition : array-like or Array
        Nonzero is true.
    x, y : array-like, Array or scalar
        Broadcast with ``condition``; NumPy's result dtype of x and y.

    Returns
    -------
    Array

    With ``condition`` alone, :func:`nonzero` (computed: its shape depends on
    the data).

    Raises
    ------
    ValueError
        Shapes that do not broadcast; only one of ``x`` and ``y``; a 0-d
        ``condition`` alone (NumPy's message).
    """
    if x is None and y is None:
        return nonzero(condition)
    if x is None or y is None:
        raise ValueError("either both or neither of x and y should be given")
    return op("where", [operand(condition), operand(x), operand(y)])



#: NumPy 2's message for nonzero of a 0-d array; a bool one adds the hint.
_NONZERO_0D = "Calling nonzero on 0d arrays is not allowed. Use np.atleast_1d(scalar).nonzero() instead."
_NONZERO_0D_BOOL = " If the context of this error is of the form `arr[nonzero(cond)]`, just use `arr[cond]`."


def nonzero(a: Any) -> tuple:
    """``numpy.nonzero``: the indices of the nonzero elements, one NumPy array
    per axis (``a`` array-like or Array). The array is computed first
    (within the default memory limit), since the result's length depends on
    its values; the indices can index a memfit array lazily
    (``x[nonzero(m)[0]]``).

    Returns
    -------
    tuple of numpy.ndarray (intp)

    Raises
    ------
    ValueError
        A 0-d array (NumPy 2's message: use ``np.atleast_1d`` first).
    """
    x = operand(a)
    if x.ndim == 0:
        raise ValueError(_NONZERO_0D + (_NONZERO_0D_BOOL if x.dtype == np.bool_ else ""))
    return np.nonzero(x.compute())


def flatnonzero(a: Any) -> np.ndarray:
    """``numpy.flatnonzero``: indices of the nonzero elements of the flattened
    array, computed (see :func:`nonzero`).

    Parameters
    ----------
    a : array-like or Array

    Returns
    -------
    numpy.ndarray (intp)
    """
    return np.flatnonzero(operand(a).compute())


def argwhere(a: Any) -> np.ndarray:
    """``numpy.argwhere``: the indices of the nonzero elements as rows of a
    NumPy array, computed (see :func:`nonzero`).

    Parameters
    ----------
    a : array-like or Array

    Returns
    -------
    numpy.ndarray (intp), shape (count, a.ndim)
    """
    return np.argwhere(operand(a).compute())


def count_nonzero(a: Any, axis: Any = None, *, keepdims: Any = False) -> Array:
    """``numpy.count_nonzero``, lazily: the number of nonzero elements over
    ``axis`` (all by default).

    Parameters
    ----------
    a : array-like or Array
    axis : int, tuple of int or None, default=None
    keepdims : bool, default=False

    Returns
    -------
    Array
        int64.
    """
    return sum(operand(a) != 0, axis=axis, keepdims=keepdims, dtype=np.int64)

@_with_out("same_kind")
def clip(
    a: Any, a_min: Any = _NoValue, a_max: Any = _NoValue, out: Any = None, *, min: Any = _NoValue, max: Any = _NoValue,
    **kwargs: Any,
) -> Array:
    """``a`` limited to ``[a_min, a_max]``, lazily: ``minimum(maximum(a,
    a_min), a_max)`` (NaN propagates).

    Parameters
    ----------
    a : array-like or Array
    a_min, a_max : scalar, array-like, Array or None
        Bounds, broadcast with ``a``; None: no bound on that side. Both or
        neither, as NumPy's (TypeError naming the missing one); ``min`` and
        ``max`` are NumPy 2.1's aliases, given without them (ValueError).

    Returns
    -------
    Array
    """
    _reject_out(out)
    _ufunc_kwargs("clip", kwargs)
    # NumPy's rules for the bounds and their aliases.
    if a_min is _NoValue and a_max is _NoValue:
        a_min, a_max = (None if v is _NoValue else v for v in (min, max))
    elif a_min is _NoValue or a_max is _NoValue:
        missing = "a_min" if a_min is _NoValue else "a_max"
        raise TypeError(f"clip() missing 1 required positional argument: '{missing}'")
    elif min is not _NoValue or max is not _NoValue:
        raise ValueError("Passing `min` or `max` keyword argument when `a_min` and `a_max` are provided is forbidden.")
    # NumPy clips an array: a Python scalar ``a`` is one (strong, as np.asarray makes it).
    x = operand(np.asarray(a) if isinstance(a, (bool, int, float)) else a)
    dtype = x.dtype

    def beyond(bound: Any, low: bool) -> bool:
        # A Python integer outside an integer dtype's range is no bound
        # (NumPy 2 clips by the true values; beside bools it is an int64).
        if not (isinstance(bound, int) and not isinstance(bound, bool)) or dtype.kind not in "iu":
            return False
        info = np.iinfo(dtype)
        return bound <= info.min if low else bound >= info.max

    low = a_min is not None and a_min is not _NoValue and not beyond(a_min, True)
    high = a_max is not None and a_max is not _NoValue and not beyond(a_max, False)
    lo, hi = operand(a_min) if low else None, operand(a_max) if high else None
    if low and high:
        # NumPy's clip ufunc works in the three operands' dtype at once.
        dt = _clip_dtype(x, a_min, a_max)
        # Python scalars stay weak (NumPy's range checks), arrays take dt.
        x, lo, hi = (
            v if v.dtype == dt or type(given) in (bool, int, float) else v.astype(dt)
            for v, given in ((x, None), (lo, a_min), (hi, a_max))
        )
    if not (low and high and dt.kind == "f" and lo.size == 1 and hi.size == 1):
        # maximum, then minimum: NaN propagates, a_max wins when a_min >
        # a_max (NumPy's clip with one bound, and its loop over arrays of
        # bounds, where a tie of signed zeros gives the bound's).
        y = op("maximum", [x, lo]) if low else x
        return op("minimum", [y, hi]) if high else y
    # NumPy's loop for scalar bounds: NaN where any operand is NaN, else ``t
    # = a_min if x < a_min else x``, then ``a_max if t > a_max else t`` (a
    # value equal to a bound keeps its own signed zero).
    y = where(op("less", [x, lo]), lo, x)
    y = where(op("greater", [y, hi]), hi, y)
    for bound, given in ((lo, a_min), (hi, a_max)):
        # A Python int is never NaN (and may be beyond int64, as NumPy allows).
        if type(given) not in (bool, int):
            y = where(op("isnan", [bound]), bound, y)
    return y


def _clip_dtype(x: Array, a_min: Any, a_max: Any) -> np.dtype:
    """The dtype of ``clip(x, a_min, a_max)``: NumPy's result type of the
    three at once, Python scalars weak (NEP 50)."""
    def arg(v: Any) -> Any:
        if type(v) in (bool, int, float):
            return v
        return v.dtype if isinstance(v, Array) else np.asarray(v).dtype

    return np.result_type(x.dtype, arg(a_min), arg(a_max))


# ---------------------------------------------------------------------------
# Index maps


def reshape(a: Any, shape: Any = None, order: str = "C", *, newshape: Any = None, copy: Any = None) -> Array:
    """``a`` with a new shape, in C order, lazily.

    Parameters
    ----------
    a : array-like or Array
    shape : int or sequence of int
        One length may be -1: inferred from the size.
    order : {"C"}
        Only C order is supported.

    Returns
    -------
    Array
        A view where blocks stay contiguous (the engine re-blocks otherwise).

    Raises
    ------
    ValueError
        A size that differs (``cannot reshape array of size 6 into shape
        (4,)``, as NumPy), more than one -1.
    TypeError
        ``order`` other than "C".
    """
    x = operand(a)
    if shape is None:
        shape = newshape
    if shape is None:
        raise TypeError("reshape() missing required argument 'shape'")
    if order not in ("C", None):
        raise TypeError(f"memfit.array supports reshape in C order only (got order={order!r})")
    if copy is False:
        pass  # lazy: never a copy
    if isinstance(shape, (numbers.Integral, np.integer)):
        shape = (shape,)
    dims = [index_int(d, "shape") for d in shape]
    unknown = [i for i, d in enumerate(dims) if d < 0]
    size = x.size
    if len(unknown) > 1:
        raise ValueError("can only specify one unknown dimension")
    if unknown:
        known = _prod(d for d in dims if d >= 0)
        if known == 0 or size % known:
            shown = ",".join("newaxis" if d < 0 else str(d) for d in dims)
            raise ValueError(f"cannot reshape array of size {size} into shape ({shown})")
        dims[unknown[0]] = size // known
    if _prod(dims) != size:
        # NumPy's spelling of the shape: (5,5), (5,).
        raise ValueError(f"cannot reshape array of size {size} into shape {str(tuple(dims)).replace(' ', '')}")
    if tuple(dims) == x.shape:
        return x
    return op("reshape", [x], shape=dims)


def ravel(a: Any, order: str = "C") -> Array:
    """``a`` flattened to 1-d in C order, lazily (see :func:`reshape`).

    Parameters
    ----------
    a : array-like or Array
    order : {"C"}

    Returns
    -------
    Array
    """
    return reshape(a, -1, order=order)


def transpose(a: Any, axes: Any = None) -> Array:
    """``a`` with its axes permuted (reversed by default), a lazy view.

    Parameters
    ----------
    a : array-like or Array
    axes : sequence of int, optional
        A permutation of the axes (negative counts from the end).

    Returns
    -------
    Array

    Raises
    ------
    ValueError
        Not a permutation ("axes don't match array", "repeated axis in
        transpose").
    numpy.exceptions.AxisError
        An axis out of range.
    """
    x = operand(a)
    nd = x.ndim
    if axes is None:
        perm = list(range(nd))[::-1]
    else:
        if isinstance(axes, (numbers.Integral, np.integer)):
            axes = (axes,)
        axes = list(axes)
        if len(axes) != nd:
            raise ValueError("axes don't match array")
        perm = [normalize_axis(ax, nd) for ax in axes]
        if len(set(perm)) != nd:
            raise ValueError("repeated axis in transpose")
    if perm == list(range(nd)):
        return x
    return op("transpose", [x], axes=perm)


def permute_dims(a: Any, axes: Any = None) -> Array:
    """The array API's name of :func:`transpose`.

    Parameters
    ----------
    a : array-like or Array
    axes : sequence of int, optional

    Returns
    -------
    Array
    """
    return transpose(a, axes)


def swapaxes(a: Any, axis1: int, axis2: int) -> Array:
    """``a`` with two axes interchanged, a lazy view.

    Parameters
    ----------
    a : array-like or Array
    axis1, axis2 : int

    Returns
    -------
    Array

    Raises
    ------
    numpy.exceptions.AxisError
        An axis out of range.
    """
    x = operand(a)
    i = normalize_axis(axis1, x.ndim, "axis1")
    j = normalize_axis(axis2, x.ndim, "axis2")
    perm = list(range(x.ndim))
    perm[i], perm[j] = perm[j], perm[i]
    return transpose(x, perm)


def _power_of_ten(n: int) -> float:
    """10**n in float64 as NumPy's ``round`` computes it (exact up to 1e22,
    then multiplied by ten, rounding, at each step)."""
    if n < 9:
        return (1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8)[n]
    value = 1e9
    for _ in range(n - 9):
        value *= 10.0
        if value == np.inf:
            break
    return value


@_with_out("same_kind")
def round(a: Any, decimals: Any = 0, out: Any = None) -> Array:
    """``a`` rounded to ``decimals`` decimals, lazily, as ``numpy.round``
    (NumPy's algorithm, hence its bits: multiplied by 10**decimals in the
    array's float dtype, rounded half to even by :func:`rint`, divided back;
    divided then multiplied for negative ``decimals``; integers go through
    float64 and back, and are returned as they are for ``decimals >= 0``).

    Parameters
    ----------
    a : array-like or Array
    decimals : int, default=0
    out : numpy.ndarray, optional
        Computed into it.

    Returns
    -------
    Array
        ``a``'s dtype.

    Raises
    ------
    TypeError
        Boolean input (NumPy's error).
    """
    _reject_out(out)
    x = operand(a)
    d = index_int(decimals, "decimals")
    if x.dtype == np.bool_:
        # NumPy's own error (the float result cannot be cast back to bool),
        # where it raises it (not for empty or one-element arrays).
        np.round(np.zeros(2, np.bool_), d)
        raise TypeError("memfit.array.round does not support boolean arrays")
    integer = x.dtype.kind in "iu"
    if integer and d >= 0:
        return x
    f = _power_of_ten(abs(d))
    y = x.astype(np.float64) if integer else x
    y = rint(multiply(y, f) if d >= 0 else true_divide(y, f))
    y = true_divide(y, f) if d >= 0 else multiply(y, f)
    return y.astype(x.dtype) if integer else y


around = round


def real(val: Any) -> Array:
    """The real part, as ``numpy.real``.

    Parameters
    ----------
    val : array-like or Array

    Returns
    -------
    Array
        ``val`` itself (memfit arrays are real).
    """
    return operand(val)


def imag(val: Any) -> Array:
    """The imaginary part, as ``numpy.imag``. Returns zeros of the shape
    and dtype of ``val`` (array-like or Array): memfit arrays are real."""
    return zeros_like(operand(val))


def flip(m: Any, axis: Any = None) -> Array:
    """``m`` with the order of its elements reversed along ``axis`` (None:
    every axis), a lazy view, as ``numpy.flip``.

    Parameters
    ----------
    m : array-like or Array
    axis : None, int or tuple of int, default=None

    Returns
    -------
    Array
        A view with ``m``'s shape and dtype.

    Raises
    ------
    numpy.exceptions.AxisError
        An axis out of range.
    """
    x = operand(m)
    axes = set(normalize_axes(axis, x.ndim))
    if not axes:
        return x
    return x[tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(x.ndim))]


def fliplr(m: Any) -> Array:
    """``m`` reversed along axis 1, a lazy view, as ``numpy.fliplr``.

    Parameters
    ----------
    m : array-like or Array
        At least 2-d.

    Raises
    ------
    ValueError
        ``m`` of fewer than 2 dimensions (NumPy's message).
    """
    x = operand(m)
    if x.ndim < 2:
        raise ValueError("Input must be >= 2-d.")
    return flip(x, 1)


def flipud(m: Any) -> Array:
    """``m`` (array-like or Array, at least 1-d) reversed along axis 0, a
    lazy view, as ``numpy.flipud``: see :func:`flip`. Returns an Array;
    raises NumPy's ValueError for ``m`` of 0 dimensions."""
    x = operand(m)
    if x.ndim < 1:
        raise ValueError("Input must be >= 1-d.")
    return flip(x, 0)


def roll(a: Any, shift: Any, axis: Any = None) -> Array:
    """``a`` with its elements shifted cyclically by ``shift`` along
    ``axis``, lazily, as ``numpy.roll`` (two slices concatenated per axis;
    None: the flattened array, reshaped back).

    Parameters
    ----------
    a : array-like or Array
    shift : int or tuple of int
        Positions to shift by (negative: towards the start); broadcast with
        ``axis`` when both are tuples, summed for a repeated axis.
    axis : None, int or tuple of int, default=None

    Returns
    -------
    Array
        ``a``'s shape and dtype.

    Raises
    ------
    numpy.exceptions.AxisError
        An axis out of range.
    ValueError
        ``shift`` and ``axis`` tuples of lengths that do not broadcast.
    """
    x = operand(a)
    if axis is None:
        return roll(ravel(x), shift, 0).reshape(x.shape)
    shifts = np.broadcast(np.asarray(shift), np.asarray(axis))
    if shifts.ndim > 1:
        raise ValueError("'shift' and 'axis' should be scalars or 1D sequences")
    total = {}
    for s, ax in shifts:
        ax = normalize_axis(int(ax), x.ndim)
        total[ax] = total.get(ax, 0) + int(s)  # NumPy's int(): 1.5 shifts by 1
    for ax, s in sorted(total.items()):
        n = x.shape[ax]
        s = s % n if n else 0
        if s:
            head = tuple(slice(None) if i != ax else slice(n - s, None) for i in range(x.ndim))
            tail = tuple(slice(None) if i != ax else slice(None, n - s) for i in range(x.ndim))
            x = concatenate([x[head], x[tail]], axis=ax)
    return x


def diff(a: Any, n: Any = 1, axis: Any = -1, prepend: Any = np._NoValue, append: Any = np._NoValue) -> Array:
    """The ``n``-th discrete difference along ``axis``, lazily, as
    ``numpy.diff``: ``x[1:] - x[:-1]`` (``!=`` for booleans) ``n`` times,
    after ``prepend`` and ``append`` are concatenated (scalars broadcast to
    one slice).

    Parameters
    ----------
    a : array-like or Array
    n : int, default=1
        Non-negative; 0 returns ``a``.
    axis : int, default=-1
    prepend, append : array-like or Array, optional

    Returns
    -------
    Array
        ``n`` fewer elements along ``axis``.

    Raises
    ------
    ValueError
        A negative ``n``, or ``a`` of 0 dimensions (NumPy's messages).
    numpy.exceptions.AxisError
        An axis out of range.
    """
    n = operator.index(n)  # NumPy's TypeError for 1.0
    if n == 0:
        return operand(a)
    if n < 0:
        raise ValueError("order must be non-negative but got " + repr(n))
    x = operand(a)
    if x.ndim == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    ax = normalize_axis(axis, x.ndim)
    parts = []
    for extra in (prepend, append):
        if extra is np._NoValue:
            parts.append(None)
            continue
        e = operand(extra)
        if e.ndim == 0:
            e = broadcast_to(e, x.shape[:ax] + (1,) + x.shape[ax + 1:])
        parts.append(e)
    if parts[0] is not None or parts[1] is not None:
        x = concatenate([p for p in (parts[0], x, parts[1]) if p is not None], axis=ax)
    later = tuple(slice(None) if i != ax else slice(1, None) for i in range(x.ndim))
    earlier = tuple(slice(None) if i != ax else slice(None, -1) for i in range(x.ndim))
    for _ in range(n):
        x = not_equal(x[later], x[earlier]) if x.dtype == np.bool_ else subtract(x[later], x[earlier])
    return x


def take(a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> Array:
    """Elements of ``a`` at ``indices`` along ``axis`` (None: of the
    flattened array), lazily, as ``numpy.take``: the result's shape is
    ``a.shape[:axis] + indices.shape + a.shape[axis + 1:]``; the indices
    are held as int64 (see integer-array indexing).

    Parameters
    ----------
    a : array-like or Array
    indices : int or array-like of int
    axis : None or int, default=None
    out : None
        Not supported (TypeError).
    mode : {"raise", "wrap", "clip"}, default="raise"
        Indices out of range: an IndexError, wrapped around, or clipped to
        the axis.

    Returns
    -------
    Array

    Raises
    ------
    IndexError
        An index out of range with ``mode="raise"`` (NumPy's message).
    numpy.exceptions.AxisError
        An axis out of range.
    ValueError
        Another ``mode``; indices into an empty axis with ``"wrap"`` or
        ``"clip"``.
    """
    _reject_out(out)
    x = operand(a)
    if axis is None:
        x, ax = ravel(x), 0
    else:
        ax = normalize_axis(axis, x.ndim)
    if isinstance(indices, (Array, np.ndarray)):
        # NumPy casts an index array "same_kind" (booleans and unsigned
        # integers are taken, floats refused), other sequences to intp.
        ix = indices.compute() if isinstance(indices, Array) else indices
        if not np.can_cast(ix.dtype, np.intp, "same_kind"):
            raise TypeError(
                f"Cannot cast array data from {ix.dtype!r} to {np.dtype(np.intp)!r} according to the rule 'same_kind'"
            )
        ix = ix.astype(np.intp)
    else:
        ix = np.asarray(indices, dtype=np.intp)
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError(f"clipmode must be one of 'clip', 'raise', or 'wrap' (got {mode!r})")
    size = x.shape[ax]
    if size == 0 and ix.size:
        raise IndexError("cannot do a non-empty take from an empty axes.")
    if mode != "raise" and ix.size:
        ix = ix % size if mode == "wrap" else np.clip(ix, 0, size - 1)
    key = (slice(None),) * ax + (ix if ix.ndim else int(ix),)
    return x[key]


def moveaxis(a: Any, source: Any, destination: Any) -> Array:
    """``a`` with axes moved to new positions (the others keep their order),
    a lazy view.

    Parameters
    ----------
    a : array-like or Array
    source, destination : int or sequence of int

    Returns
    -------
    Array

    Raises
    ------
    ValueError
        ``source`` and ``destination`` of different lengths, repeated axes.
    numpy.exceptions.AxisError
        An axis out of range.
    """
    x = operand(a)
    nd = x.ndim

    def norm(axes: Any, arg: str) -> list:
        if isinstance(axes, (numbers.Integral, np.integer)):
            axes = [axes]
        out = [normalize_axis(ax, nd, arg) for ax in axes]
        if len(set(out)) != len(out):
            raise ValueError(f"repeated axis in `{arg}` argument")
        return out

    src = norm(source, "source")
    dst = norm(destination, "destination")
    if len(src) != len(dst):
        raise ValueError("`source` and `destination` arguments must have the same number of elements")
    order = [n for n in range(nd) if n not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(x, order)


def expand_dims(a: Any, axis: Any) -> Array:
    """``a`` with new axes of length 1 at positions ``axis`` of the result,
    a lazy view.

    Parameters
    ----------
    a : array-like or Array
    axis : int or sequence of int
        Positions in the result (negative counts from its end).

    Returns
    -------
    Array

    Raises
    ------
    ValueError
        A repeated axis.
    numpy.exceptions.AxisError
        An axis out of range of the result.
    """
    x = operand(a)
    if isinstance(axis, (tuple, list)):
        ax = list(axis)
    else:
        ax = [axis]
    out_nd = x.ndim + len(ax)
    axes = [normalize_axis(i, out_nd) for i in ax]
    if len(set(axes)) != len(axes):
        raise ValueError("repeated axis")
    if not axes:
        return x
    return op("expand_dims", [x], axes=sorted(axes))


def squeeze(a: Any, axis: Any = None) -> Array:
    """``a`` without axes of length 1, a lazy view.

    Parameters
    ----------
    a : array-like or Array
    axis : int or sequence of int, optional
        The axes to remove (each of length 1); default: every axis of length 1.
        A 0-d ``a`` takes an integer axis of 0 or -1, as NumPy.

    Returns
    -------
    Array

    Raises
    ------
    ValueError
        A selected axis whose length is not 1 (NumPy's message).
    numpy.exceptions.AxisError
        An axis out of range.
    """
    x = operand(a)
    shape = x.shape
    if x.ndim == 0 and isinstance(axis, (int, np.integer)) and not isinstance(axis, (bool, np.bool_)) and axis in (0, -1):
        # NumPy takes an integer axis of 0 or -1 for a 0-d array (a tuple
        # is checked against 0 dimensions).
        return x
    if axis is None:
        axes = [i for i, n in enumerate(shape) if n == 1]
    else:
        axes = normalize_axes(axis, x.ndim)
        if builtins.any(shape[i] != 1 for i in axes):
            raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
    if not axes:
        return x
    return op("squeeze", [x], axes=axes)


def broadcast_to(array: Any, shape: Any, subok: bool = False) -> Array:
    """``array`` broadcast to ``shape``, a lazy view (never a copy).

    Parameters
    ----------
    array : array-like or Array
    shape : int or sequence of int

    Returns
    -------
    Array

    Raises
    ------
    ValueError
        Shapes that do not broadcast (the message names both).
    """
    x = operand(array)
    dims = normalize_shape(shape, negative="all elements of broadcast shape must be non-negative")
    if dims == x.shape:
        return x
    return op("broadcast_to", [x], shape=list(dims))


def broadcast_shapes(*shapes: Any) -> tuple:
    """NumPy's ``broadcast_shapes``: the shape the given shapes broadcast to.

    Parameters
    ----------
    *shapes : int or tuple of int

    Returns
    -------
    tuple of int

    Raises
    ------
    ValueError
        Shapes that do not broadcast.
    """
    return np.broadcast_shapes(*shapes)


def broadcast_arrays(*args: Any, subok: bool = False) -> tuple:
    """The arguments broadcast against each other, lazy views.

    Parameters
    ----------
    *args : array-like or Array

    Returns
    -------
    tuple of Array

    Raises
    ------
    ValueError
        Shapes that do not broadcast (NumPy's message, naming the arguments
        and their shapes).
    """
    xs = [operand(a) for a in args]
    shape = np.broadcast_shapes(*(x.shape for x in xs))
    return tuple(broadcast_to(x, shape) for x in xs)


def tile(A: Any, reps: Any) -> Array:
    """``A`` repeated ``reps`` times along each axis, as ``numpy.tile``: an
    index map, never a copy (a reduction over a tiled axis costs only the
    input).

    Parameters
    ----------
    A : array-like or Array
    reps : int or sequence of int
        Repetitions per axis; when longer than ``A.ndim``, ``A`` gains leading
        axes of length 1; when shorter, ``reps`` gains leading ones.

    Returns
    -------
    Array
        Of ``A.ndim`` or ``len(reps)`` dimensions, whichever is larger.

    Raises
    ------
    ValueError
        Negative repetitions.
    """
    x = operand(A)
    reps = list(normalize_shape(reps, "reps"))
    nd = builtins.max(x.ndim, len(reps))
    if x.ndim < nd:
        x = op("expand_dims", [x], axes=list(range(nd - x.ndim)))
    reps = [1] * (nd - len(reps)) + reps
    if builtins.all(r == 1 for r in reps):
        return x
    return op("tile", [x], reps=reps)


def repeat(a: Any, repeats: Any, axis: Any = None) -> Array:
    """Each element of ``a`` repeated ``repeats`` times along ``axis``, as
    ``numpy.repeat``: an index map, never a copy.

    Parameters
    ----------
    a : array-like or Array
    repeats : int
        The same count for every element (per-element counts are not
        supported).
    axis : int, optional
        Default: ``a`` is flattened first (a 0-d ``a`` is, whatever the
        axis, as NumPy: 0 and -1 are then its axis).

    Returns
    -------
    Array

    Raises
    ------
    TypeError
        ``repeats`` an array of counts.
    ValueError
        Negative ``repeats``.
    numpy.exceptions.AxisError
        ``axis`` out of range.
    """
    x = operand(a)
    if isinstance(repeats, (Array, np.ndarray, list, tuple)):
        arr = repeats if isinstance(repeats, Array) else np.asarray(repeats)
        if arr.size == 1 and not isinstance(arr, Array):
            repeats = arr.reshape(()).item()
        else:
            raise TypeError(
                "memfit.array.repeat supports one repeat count for all elements, not an array of counts; "
                "compute the array first for per-element counts"
            )
    r = index_int(repeats, "repeats")
    if r < 0:
        raise ValueError("negative dimensions are not allowed")
    if axis is None or x.ndim == 0:
        # NumPy ravels a 0-d array for any axis (then 0 or -1 is its axis).
        x = reshape(x, -1)
    ax = 0 if axis is None else normalize_axis(axis, x.ndim)
    if r == 1:
        return x
    return op("repeat", [x], repeats=r, axis=ax)


_CASTINGS = ("no", "equiv", "safe", "same_kind", "unsafe")


def _check_casting(casting: Any) -> str:
    """NumPy's errors for a ``casting`` argument that is not one of its rules."""
    if not isinstance(casting, str):
        raise TypeError(f"casting must be str, not {type(casting).__name__}")
    if casting not in _CASTINGS:
        raise ValueError(f"casting must be one of 'no', 'equiv', 'safe', 'same_kind', 'unsafe' (got {casting!r})")
    return casting


def concatenate(arrays: Any, axis: Any = 0, out: Any = None, *, dtype: Any = None, casting: str = "same_kind") -> Array:
    """The arrays joined along an existing axis, lazily.

    Parameters
    ----------
    arrays : sequence of array-like or Array
        Same shape except along ``axis``; NumPy's result dtype.
    axis : int or None, default=0
        None: the arrays are flattened first.
    dtype : dtype-like, optional
        The result dtype (each input cast, checked with ``casting``).
    casting : {"no", "equiv", "safe", "same_kind", "unsafe"}, default="same_kind"
        The rule each input's cast to the result dtype (given, or NumPy's
        of all the inputs) must follow.

    Returns
    -------
    Array

    Raises
    ------
    TypeError
        A cast that ``casting`` does not allow (NumPy's message).
    ValueError
        No arrays, 0-d arrays, different numbers of dimensions or lengths,
        an unknown ``casting`` (NumPy's messages).
    numpy.exceptions.AxisError
        ``axis`` out of range.
    """
    _reject_out(out)
    _check_casting(casting)
    xs = [operand(a) for a in arrays]
    if not xs:
        raise ValueError("need at least one array to concatenate")
    if axis is None:
        xs = [reshape(x, -1) for x in xs]
        axis = 0
    if xs[0].ndim == 0:
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    nd = xs[0].ndim
    ax = normalize_axis(axis, nd)
    for i, x in enumerate(xs[1:], 1):
        if x.ndim != nd:
            raise ValueError(
                "all the input arrays must have same number of dimensions, but the array at index 0 has "
                f"{nd} dimension(s) and the array at index {i} has {x.ndim} dimension(s)"
            )
        for d in range(nd):
            if d != ax and x.shape[d] != xs[0].shape[d]:
                raise ValueError(
                    "all the input array dimensions except for the concatenation axis must match exactly, but "
                    f"along dimension {d}, the array at index 0 has size {xs[0].shape[d]} and the array at "
                    f"index {i} has size {x.shape[d]}"
                )
    # NumPy's dtype of all the inputs at once (pairs in turn may differ:
    # int8, uint8, float16 is float16, where (int8, uint8) is int16), or
    # the dtype given; each input's cast to it checked with ``casting``.
    common = np.result_type(*(x.dtype for x in xs)) if dtype is None else np.dtype(dtype_name(dtype))
    for x in xs:
        if not np.can_cast(x.dtype, common, casting):
            raise TypeError(f"Cannot cast array data from {x.dtype!r} to {common!r} according to the rule {casting!r}")
    xs = [x if x.dtype == common else x.astype(common) for x in xs]
    if len(xs) == 1:
        return xs[0]
    return op("concatenate", xs, axis=ax)


concat = concatenate


def stack(arrays: Any, axis: int = 0, out: Any = None, *, dtype: Any = None, casting: str = "same_kind") -> Array:
    """The arrays joined along a new axis, lazily (``expand_dims`` of each,
    then :func:`concatenate`).

    Parameters
    ----------
    arrays : sequence of array-like or Array
        All of the same shape.
    axis : int, default=0
        The position of the new axis in the result.
    dtype : dtype-like, optional
    casting : {"no", "equiv", "safe", "same_kind", "unsafe"}, default="same_kind"
        As :func:`concatenate`'s (checked even when ``dtype`` is None).

    Returns
    -------
    Array
        One more dimension than the inputs.

    Raises
    ------
    ValueError
        No arrays, or arrays of different shapes.
    numpy.exceptions.AxisError
        ``axis`` out of range.
    """
    _reject_out(out)
    xs = [operand(a) for a in arrays]
    if not xs:
        raise ValueError("need at least one array to stack")
    if builtins.any(x.shape != xs[0].shape for x in xs[1:]):
        raise ValueError("all input arrays must have the same shape")
    ax = normalize_axis(axis, xs[0].ndim + 1)
    return concatenate([expand_dims(x, ax) for x in xs], axis=ax, dtype=dtype, casting=casting)


# ---------------------------------------------------------------------------
# Reductions

_REDUCTION_DOC = """{what} over ``axis``, lazily, as ``numpy.{name}``.

Parameters
----------
a : array-like or Array
axis : None, int or tuple of int, optional
    Axes to reduce (negative counts from the end); None: all.
{extra}keepdims : bool, default=False
    Keep the reduced axes with length 1.
out, initial, where
    Not supported: TypeError when given.

Returns
-------
Array
    {result}

Raises
------
numpy.exceptions.AxisError
    An axis out of range.
ValueError
    A repeated axis.

Notes
-----
Float inputs accumulate in float64; the result is bitwise identical for any
``n_jobs`` and ``memory_limit``. A reduction over an axis created by tile,
repeat or broadcasting is rewritten (no pass over the repeated data).
"""


#: Reductions that are NumPy ufuncs' ``reduce``: on a 0-d array they take
#: ``axis=0`` or ``-1`` (an integer, not a tuple), as NumPy's do.
_UFUNC_REDUCTIONS = ("sum", "prod", "min", "max", "any", "all")


def _scalar_axis(x: Array, axis: Any) -> bool:
    """Whether ``axis`` is the integer 0 or -1 NumPy's ufunc reductions (and
    argmin/argmax) accept on a 0-d array."""
    return (
        x.ndim == 0
        and isinstance(axis, (numbers.Integral, np.integer))
        and not isinstance(axis, (bool, np.bool_))
        and int(axis) in (0, -1)
    )


def _reduce(name: str, a: Any, axis: Any, keepdims: Any, **params: Any) -> Array:
    x = operand(a)
    if name in _UFUNC_REDUCTIONS and _scalar_axis(x, axis):
        axis = None
    axes = normalize_axes(axis, x.ndim)
    return op(name, [x], axes=axes, keepdims=_flag(keepdims), **params)


@_with_out("unsafe", reduction=True)
def sum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: Any = False, initial: Any = None, where: Any = None) -> Array:  # noqa: A001
    _reject_out(out)
    if _given(initial):
        reject("initial", initial)
    _reject_where(where)
    return _reduce("sum", a, axis, keepdims, dtype=optional_dtype_name(dtype))


@_with_out("unsafe", reduction=True)
def prod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: Any = False, initial: Any = None, where: Any = None) -> Array:
    _reject_out(out)
    if _given(initial):
        reject("initial", initial)
    _reject_where(where)
    return _reduce("prod", a, axis, keepdims, dtype=optional_dtype_name(dtype))


def mean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: Any = False, *, where: Any = None) -> Array:
    _reject_where(where)
    return _moment("mean", a, axis, dtype, out, keepdims)


def _moment(name: str, a: Any, axis: Any, dtype: Any, out: Any, keepdims: Any, ddof: Any = 0) -> Array:
    """``mean``, ``var`` or ``std`` (``name``), into ``out`` when it is a NumPy
    array (see ``write_out``). A float accumulation is the engine's
    reduction. An integer or bool one (``dtype``, or ``out``'s dtype) is
    NumPy's ``_methods`` step by step: sums in ``dtype`` (NumPy's default:
    float64 for integers and bools) wrap there, are cast to the result's dtype
    (``out``'s, else ``dtype``) and divided there by the count (cast back:
    truncated), ``var`` subtracting that mean cast to ``dtype``; ``std`` is
    the square root cast to the integer dtype for a 0-d result without
    ``out`` (NumPy's scalar), else NumPy's UFuncTypeError (its ``sqrt`` into
    an integer array)."""
    target = out[0] if isinstance(out, tuple) and len(out) == 1 else out
    if not isinstance(target, np.ndarray):
        _reject_out(out)
    x = operand(a)
    _moment_warnings(name, x, axis, ddof)
    acc = np.dtype(optional_dtype_name(dtype)) if dtype is not None else None
    into = target.dtype if isinstance(target, np.ndarray) else None
    params = {} if name == "mean" else {"ddof": ddof}
    # A float out the input does not cast to safely: NumPy sums in the
    # input's dtype, casts into out and divides there (step by step below).
    narrower = into is not None and acc is None and into.kind == "f" and not np.can_cast(x.dtype, into, "safe")
    if not narrower and not builtins.any(d is not None and d.kind in "biu" for d in (acc, into)):
        # NumPy's sums run in out's dtype when no dtype is given.
        within = optional_dtype_name(dtype) if into is None or dtype is not None else into.name
        result = _reduce(name, x, axis, keepdims, dtype=within, **params)
        return result if into is None else write_out(result, out, "unsafe", name, True)
    if acc is None:
        acc = np.dtype(np.float64) if x.dtype.kind in "biu" else np.dtype(np.float32) if x.dtype == np.float16 and name == "mean" else x.dtype
    ret_dtype = into if into is not None else acc
    axes = tuple(normalize_axes(axis, x.ndim))
    count = np.intp(_prod([x.shape[i] for i in axes]))
    if name == "mean":
        total = sum(x, axis=axes, dtype=acc, keepdims=keepdims)
    else:
        centred = x - (sum(x, axis=axes, dtype=acc, keepdims=True) / count).astype(acc)
        total = sum(centred * centred, axis=axes, dtype=acc, keepdims=keepdims)
        count = np.maximum(count - ddof, 0)
    result = (total.astype(ret_dtype) / count).astype(ret_dtype)
    if name == "std":
        if into is None and result.ndim == 0:
            return sqrt(result).astype(ret_dtype)  # NumPy's scalar, cast back
        if ret_dtype.kind in "biu":
            np.sqrt(np.empty(0, ret_dtype), out=np.empty(0, ret_dtype))  # NumPy's UFuncTypeError
        result = sqrt(result)
    return result if into is None else write_out(result, out, "unsafe", name, True)


def _moment_warnings(name: str, x: Array, axis: Any, ddof: Any) -> None:
    """NumPy's own warnings of ``mean`` over no values ("Mean of empty
    slice") and of ``var``/``std`` with ``ddof`` at least the count
    ("Degrees of freedom <= 0 for slice"), said when the call is made (the
    counts are known then; the division's "invalid value" follows when the
    result is computed)."""
    try:
        axes = normalize_axes(None if _scalar_axis(x, axis) else axis, x.ndim)
    except (TypeError, ValueError):
        return  # the reduction raises NumPy's error
    count = _prod([x.shape[i] for i in axes])
    if name == "mean" and count == 0:
        warnings.warn("Mean of empty slice", RuntimeWarning, stacklevel=4)
    elif name != "mean" and ddof >= count:
        warnings.warn("Degrees of freedom <= 0 for slice", RuntimeWarning, stacklevel=4)


def _ddof(ddof: Any, correction: Any) -> Any:
    if _given(correction):
        if ddof not in (0, None, _NoValue):
            raise ValueError("ddof and correction can't be provided simultaneously.")
        ddof = correction
    if ddof is None or ddof is _NoValue:
        ddof = 0
    if isinstance(ddof, (bool, np.bool_)):
        return int(ddof)  # NumPy's True is 1
    if not isinstance(ddof, (numbers.Real, np.integer, np.floating)):
        raise TypeError(f"ddof must be a real number, got {ddof!r}")
    return int(ddof) if isinstance(ddof, (numbers.Integral, np.integer)) else float(ddof)


def var(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0, keepdims: Any = False, *, where: Any = None, mean: Any = None, correction: Any = None) -> Array:
    _reject_where(where)
    if _given(mean):
        reject("mean", mean)
    return _moment("var", a, axis, dtype, out, keepdims, _ddof(ddof, correction))


def std(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: Any = 0, keepdims: Any = False, *, where: Any = None, mean: Any = None, correction: Any = None) -> Array:
    _reject_where(where)
    if _given(mean):
        reject("mean", mean)
    return _moment("std", a, axis, dtype, out, keepdims, _ddof(ddof, correction))


def _cumulative(name: str, a: Any, axis: Any, dtype: Any, out: Any) -> Array:
    x = operand(a)
    target = out[0] if isinstance(out, tuple) and len(out) == 1 else out
    if isinstance(target, np.ndarray):
        # NumPy accumulates in the output's dtype when the input casts to it safely.
        if dtype is None and np.can_cast(x.dtype, target.dtype, "safe"):
            dtype = target.dtype
        result = _cumulative(name, x, axis, dtype, None)
        return write_out(result, out, "unsafe", name, False)
    _reject_out(out)
    if axis is None or _scalar_axis(x, axis) or x.ndim == 0:
        # NumPy checks a 0-d array's axis as that of its 1-d ravel.
        x, axis = ravel(x), normalize_axis(axis, 1) if axis is not None else 0
    return op(name, [x], axis=normalize_axis(axis, x.ndim), dtype=optional_dtype_name(dtype))


def cumsum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Array:
    """``numpy.cumsum``, lazily: the running sum along ``axis`` (the
    flattened array when None), accumulated in order in the result's dtype
    as NumPy's ``add.accumulate`` does (so the values are NumPy's); one
    stage whose tiles of the other axes run in parallel, each along
    ``axis`` in order, within the memory limit.

    Parameters
    ----------
    a : array-like or Array
    axis : int or None, default=None
    dtype : dtype, optional
        Of the accumulation and result; default ``a``'s, but booleans and
        integers narrower than 64 bits widen to int64 (unsigned: uint64).
    out : numpy.ndarray, optional
        Computed into it.

    Returns
    -------
    Array
        ``a``'s shape (1-d of ``a.size`` when ``axis`` is None).

    Raises
    ------
    AxisError
        ``axis`` out of range.
    """
    return _cumulative("cumsum", a, axis, dtype, out)


def cumprod(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Array:
    """``numpy.cumprod``, lazily: the running product along ``axis``; see
    :func:`cumsum`.

    Parameters
    ----------
    a : array-like or Array
    axis : int or None, default=None
    dtype : dtype, optional
    out : numpy.ndarray, optional

    Returns
    -------
    Array
    """
    return _cumulative("cumprod", a, axis, dtype, out)


@_with_out("unsafe", reduction=True)
def min(a: Any, axis: Any = None, out: Any = None, keepdims: Any = False, initial: Any = None, where: Any = None) -> Array:  # noqa: A001
    _reject_out(out)
    if _given(initial):
        reject("initial", initial)
    _reject_where(where)
    return _reduce("min", a, axis, keepdims)


@_with_out("unsafe", reduction=True)
def max(a: Any, axis: Any = None, out: Any = None, keepdims: Any = False, initial: Any = None, where: Any = None) -> Array:  # noqa: A001
    _reject_out(out)
    if _given(initial):
        reject("initial", initial)
    _reject_where(where)
    return _reduce("max", a, axis, keepdims)


amin = min
amax = max


@_with_out("unsafe", reduction=True)
def any(a: Any, axis: Any = None, out: Any = None, keepdims: Any = False, *, where: Any = None) -> Array:  # noqa: A001
    _reject_out(out)
    _reject_where(where)
    return _reduce("any", a, axis, keepdims)


@_with_out("unsafe", reduction=True)
def all(a: Any, axis: Any = None, out: Any = None, keepdims: Any = False, *, where: Any = None) -> Array:  # noqa: A001
    _reject_out(out)
    _reject_where(where)
    return _reduce("all", a, axis, keepdims)


def _arg(name: str, a: Any, axis: Any, out: Any, keepdims: Any) -> Array:
    _reject_out(out)
    x = operand(a)
    if axis is None or _scalar_axis(x, axis):
        axes = list(range(x.ndim))
    else:
        # NumPy checks a 0-d array's axis as that of its 1-d ravel.
        axes = [normalize_axis(axis, builtins.max(x.ndim, 1))]
    return op(name, [x], axes=axes, keepdims=_flag(keepdims))


@_with_out("unsafe", reduction=True)
def argmin(a: Any, axis: Any = None, out: Any = None, *, keepdims: Any = False) -> Array:
    return _arg("argmin", a, axis, out, keepdims)


@_with_out("unsafe", reduction=True)
def argmax(a: Any, axis: Any = None, out: Any = None, *, keepdims: Any = False) -> Array:
    return _arg("argmax", a, axis, out, keepdims)


_REDUCTIONS = {
    "sum": ("The sum", "dtype : dtype-like, optional\n    The result dtype (default: int64/uint64 for integers and bool, the input's for floats).\n", "NumPy's dtype."),
    "prod": ("The product", "dtype : dtype-like, optional\n    The result dtype (default as for sum).\n", "NumPy's dtype."),
    "mean": ("The mean", "dtype : dtype-like, optional\n    The result dtype (default: float64 for integers, the input's for floats).\n", "NumPy's dtype."),
    "var": ("The variance", "dtype : dtype-like, optional\nddof : int or float, default=0\n    Divide by ``N - ddof``. ``correction`` is the array API's alias.\n", "NumPy's dtype."),
    "std": ("The standard deviation", "dtype : dtype-like, optional\nddof : int or float, default=0\n    Divide by ``N - ddof``. ``correction`` is the array API's alias.\n", "NumPy's dtype."),
    "min": ("The minimum (NaN propagates)", "", "The input's dtype."),
    "max": ("The maximum (NaN propagates)", "", "The input's dtype."),
    "any": ("Whether any element is nonzero", "", "bool."),
    "all": ("Whether every element is nonzero", "", "bool."),
}
for _n, (_what, _extra, _result) in _REDUCTIONS.items():
    globals()[_n].__doc__ = _REDUCTION_DOC.format(what=_what, name=_n, extra=_extra, result=_result)
del _n, _what, _extra, _result

_ARG_DOC = """The index of the {what} value along ``axis`` (the first one on ties; NaN
counts as {what}), lazily, as ``numpy.{name}``.

Parameters
----------
a : array-like or Array
axis : int, optional
    Default: the index into the flattened array.
keepdims : bool, default=False
out : None
    Not supported.

Returns
-------
Array
    int64.

Raises
------
numpy.exceptions.AxisError
    ``axis`` out of range.
"""
argmin.__doc__ = _ARG_DOC.format(what="minimum", name="argmin")
argmax.__doc__ = _ARG_DOC.format(what="maximum", name="argmax")


# ---------------------------------------------------------------------------
# Contractions


@_with_out("safe")
def einsum(*operands: Any, out: Any = None, optimize: Any = False, dtype: Any = None, order: str = "K", casting: str = "safe") -> Array:
    """Einstein summation, lazily, as ``numpy.einsum`` with a subscripts
    string: ``einsum("ij,jk->ik", a, b)``, ``"..."`` for broadcast axes,
    implicit output (``"ij,jk"``) as NumPy.

    The engine picks the contraction order with the smallest peak bytes
    under the memory limit and slices shared free indices instead of
    building large intermediates. Float results are contracted in float64
    by fixed-order GEMM tiles and cast to the result dtype; integer and
    boolean results are exact as NumPy's (products and sums wrap in the
    result dtype), as a reduction of the broadcast products (slower than
    the float path).

    Parameters
    ----------
    subscripts : str
        The first positional argument.
    *operands : array-like or Array
    dtype : dtype-like, optional
        Each operand is cast to this dtype first (checked with ``casting``).
    optimize : bool or str
        Ignored (the engine always optimises the order).
    out : None
        Not supported.

    Returns
    -------
    Array

    Raises
    ------
    ValueError
        Bad subscripts (wrong number of operands or indices, an index with
        two different lengths, output indices that are not in the inputs),
        with ``numpy.einsum``'s message.
    TypeError
        The interleaved ``einsum(a, [0, 1], b, [1, 2])`` form.
    """
    _reject_out(out)
    if not operands:
        raise TypeError("einsum() missing the subscripts argument")
    subscripts, ops = operands[0], operands[1:]
    if not isinstance(subscripts, str):
        raise TypeError(
            "memfit.array.einsum supports the subscripts-string form only (einsum('ij,jk->ik', a, b)), not "
            "the interleaved operand/sublist form"
        )
    # NumPy's einsum takes its operands through asarray: Python scalars are strong.
    xs = [strong_operand(o) for o in ops]
    if dtype is not None:
        name = dtype_name(dtype)
        for x in xs:
            if not np.can_cast(x.dtype, np.dtype(name), casting):
                raise TypeError(
                    f"Cannot cast array data from {x.dtype!r} to {np.dtype(name)!r} according to the rule {casting!r}"
                )
        xs = [x.astype(name) for x in xs]
    # The engine checks the subscripts against the shapes (NumPy's messages).
    return op("einsum", xs, subscripts=subscripts)


def _matmul_error(i: int, dim: int, got: int, want: int) -> ValueError:
    return ValueError(
        f"matmul: Input operand {i} has a mismatch in its core dimension {dim}, with gufunc signature "
        f"(n?,k),(k,m?)->(n?,m?) (size {got} is different from {want})"
    )


@_with_out("same_kind")
def matmul(x1: Any, x2: Any, out: Any = None, **kwargs: Any) -> Array:
    """The matrix product, lazily, as ``numpy.matmul`` (``x1 @ x2``).

    1-d operands are promoted as NumPy does (a vector on the left is a row,
    on the right a column, and the added axis is removed from the result);
    the batch axes (all but the last two) broadcast.

    Parameters
    ----------
    x1, x2 : array-like or Array
        At least 1-d.

    Returns
    -------
    Array

    Raises
    ------
    ValueError
        0-d operands, core dimensions that differ, batch axes that do not
        broadcast (NumPy's messages).
    """
    _reject_out(out)
    _ufunc_kwargs("matmul", kwargs)
    a, b = operand(x1), operand(x2)
    for i, x in enumerate((a, b)):
        if x.ndim == 0:
            raise ValueError(
                f"matmul: Input operand {i} does not have enough dimensions (has 0, gufunc core with signature "
                "(n?,k),(k,m?)->(n?,m?) requires 1)"
            )
    if a.shape[-1] != b.shape[0 if b.ndim == 1 else -2]:
        raise _matmul_error(1, 0, b.shape[0 if b.ndim == 1 else -2], a.shape[-1])
    if a.ndim == 1 and b.ndim == 1:
        return op("einsum", [a, b], subscripts="i,i->")
    batch_a = a.shape[:-2] if a.ndim >= 2 else ()
    batch_b = b.shape[:-2] if b.ndim >= 2 else ()
    batch = np.broadcast_shapes(batch_a, batch_b)
    nb = len(batch)
    if nb + 3 > len(_LETTERS):
        raise ValueError(f"matmul: too many dimensions ({nb + 2})")
    # Batch axes take letters other than the core axes' i, j, k.
    bl = "".join(c for c in _LETTERS if c not in "ijk")[:nb]
    if a.ndim >= 2:
        a = broadcast_to(a, batch + a.shape[-2:])
        sa, out_rows = bl + "ij", "i"
    else:
        sa, out_rows = "j", ""
    if b.ndim >= 2:
        b = broadcast_to(b, batch + b.shape[-2:])
        sb, out_cols = bl + "jk", "k"
    else:
        sb, out_cols = "j", ""
    return op("einsum", [a, b], subscripts=f"{sa},{sb}->{bl}{out_rows}{out_cols}")


def tensordot(a: Any, b: Any, axes: Any = 2) -> Array:
    """The sum of products over the given axes, lazily, as
    ``numpy.tensordot`` (built as an einsum).

    Parameters
    ----------
    a, b : array-like or Array
    axes : int or (sequence of int, sequence of int), default=2
        An int N: the last N axes of ``a`` with the first N of ``b``; a pair:
        the axes of ``a`` and of ``b`` summed over, in matching order.

    Returns
    -------
    Array
        The free axes of ``a``, then those of ``b``.

    Raises
    ------
    ValueError
        Lengths that differ ("shape-mismatch for sum"), axes lists of
        different lengths.
    """
    x, y = strong_operand(a), strong_operand(b)
    if isinstance(axes, (numbers.Integral, np.integer)):
        n = index_int(axes, "axes")
        if n < 0:
            raise ValueError("negative axes count")
        if n > x.ndim or n > y.ndim:
            raise ValueError("shape-mismatch for sum")
        ax_a = list(range(x.ndim - n, x.ndim))
        ax_b = list(range(n))
    else:
        try:
            ax_a, ax_b = axes
        except (TypeError, ValueError):
            raise ValueError("axes must be an int or a pair of sequences of axes") from None
        ax_a = [ax_a] if isinstance(ax_a, (numbers.Integral, np.integer)) else list(ax_a)
        ax_b = [ax_b] if isinstance(ax_b, (numbers.Integral, np.integer)) else list(ax_b)
        if len(ax_a) != len(ax_b):
            raise ValueError("shape-mismatch for sum")
        ax_a = [normalize_axis(i, x.ndim) for i in ax_a]
        ax_b = [normalize_axis(i, y.ndim) for i in ax_b]
    for i, j in zip(ax_a, ax_b):
        if x.shape[i] != y.shape[j]:
            raise ValueError("shape-mismatch for sum")
    if len(set(ax_a)) != len(ax_a) or len(set(ax_b)) != len(ax_b):
        raise ValueError("repeated axis in tensordot axes")
    if x.ndim + y.ndim > len(_LETTERS):
        raise ValueError("tensordot: too many dimensions")
    sa = list(_LETTERS[: x.ndim])
    sb = list(_LETTERS[x.ndim : x.ndim + y.ndim])
    for i, j in zip(ax_a, ax_b):
        sb[j] = sa[i]
    free = [sa[i] for i in range(x.ndim) if i not in ax_a] + [sb[j] for j in range(y.ndim) if j not in ax_b]
    return op("einsum", [x, y], subscripts=f"{''.join(sa)},{''.join(sb)}->{''.join(free)}")


def dot(a: Any, b: Any, out: Any = None) -> Any:
    """The dot product of arrays of at most 2 dimensions, lazily, as
    ``numpy.dot``: inner product of vectors, matrix product otherwise, a
    multiplication when one is 0-d.

    Parameters
    ----------
    a, b : array-like or Array
        At most 2-d.
    out : numpy.ndarray, optional
        Computed into (and returned), as NumPy's: it must have the result's
        dtype and shape and be C-contiguous.

    Returns
    -------
    Array, or ``out``

    Raises
    ------
    ValueError
        Shapes not aligned, or an ``out`` of another dtype, shape or layout
        (NumPy's messages).
    TypeError
        An operand of more than 2 dimensions (use :func:`tensordot` or
        :func:`einsum`); an ``out`` that is not a NumPy array.
    """
    if out is not None:
        if not isinstance(out, np.ndarray):
            raise TypeError("'out' must be an array")
        result = dot(a, b)
        if out.dtype != result.dtype or out.shape != tuple(result.shape) or not out.flags.c_contiguous:
            raise ValueError(
                "output array is not acceptable (must have the right datatype, number of dimensions, and be a C-Array)"
            )
        return write_out(result, out, "no", "dot", reduction=True)
    x, y = strong_operand(a), strong_operand(b)
    if x.ndim > 2 or y.ndim > 2:
        raise TypeError(
            "memfit.array.dot supports arrays of at most 2 dimensions; use tensordot or einsum for more"
        )
    if x.ndim == 0 or y.ndim == 0:
        return op("multiply", [x, y])
    k_b = 0 if y.ndim == 1 else y.ndim - 2
    if x.shape[-1] != y.shape[k_b]:
        sx = "(" + ",".join(map(str, x.shape)) + ("," if x.ndim == 1 else "") + ")"
        sy = "(" + ",".join(map(str, y.shape)) + ("," if y.ndim == 1 else "") + ")"
        raise ValueError(
            f"shapes {sx} and {sy} not aligned: {x.shape[-1]} (dim {x.ndim - 1}) != {y.shape[k_b]} (dim {k_b})"
        )
    return matmul(x, y)


def vdot(a: Any, b: Any) -> Array:
    """The dot product of the flattened arrays (real dtypes), lazily.

    Parameters
    ----------
    a, b : array-like or Array

    Returns
    -------
    Array
    """
    return dot(ravel(a), ravel(b))


def inner(a: Any, b: Any) -> Array:
    """The inner product over the last axes, lazily, as ``numpy.inner``.

    Parameters
    ----------
    a, b : array-like or Array

    Returns
    -------
    Array
    """
    x, y = strong_operand(a), strong_operand(b)
    if x.ndim == 0 or y.ndim == 0:
        return op("multiply", [x, y])
    return tensordot(x, y, axes=([-1], [-1]))


@_with_out("same_kind")
def outer(a: Any, b: Any, out: Any = None) -> Array:
    """The outer product of the flattened arrays, lazily, as
    ``numpy.outer``: a broadcast multiplication, never an n × m temporary
    beyond the blocks.

    Parameters
    ----------
    a, b : array-like or Array

    Returns
    -------
    Array
    """
    _reject_out(out)
    x, y = ravel(a), ravel(b)
    return op("multiply", [expand_dims(x, 1), expand_dims(y, 0)])


# ---------------------------------------------------------------------------
# Dtypes and shapes


def result_type(*arrays_and_dtypes: Any) -> np.dtype:
    """``numpy.result_type``, memfit arrays counting as their dtype.

    Parameters
    ----------
    *arrays_and_dtypes : Array, array-like, scalar or dtype-like

    Returns
    -------
    numpy.dtype
    """
    return np.result_type(*(x.dtype if isinstance(x, Array) else x for x in arrays_and_dtypes))


def can_cast(from_: Any, to: Any, casting: str = "safe") -> bool:
    """``numpy.can_cast``, a memfit array counting as its dtype.

    Parameters
    ----------
    from_ : Array, dtype-like or array-like
    to : dtype-like
    casting : {"no", "equiv", "safe", "same_kind", "unsafe"}, default="safe"

    Returns
    -------
    bool
    """
    return bool(np.can_cast(from_.dtype if isinstance(from_, Array) else from_, to, casting))


def astype(x: Any, dtype: Any, /, *, copy: bool = True, device: Any = None) -> Array:
    """``x`` cast to ``dtype`` lazily (NumPy's unsafe casting); see
    :meth:`Array.astype`.

    Parameters
    ----------
    x : array-like or Array
    dtype : dtype-like

    Returns
    -------
    Array
    """
    return operand(x).astype(dtype)


def shape(a: Any) -> tuple:
    """The shape of ``a``, as ``numpy.shape`` (nothing is computed).

    Parameters
    ----------
    a : Array or array-like

    Returns
    -------
    tuple of int
    """
    return a.shape if isinstance(a, Array) else np.shape(a)


def ndim(a: Any) -> int:
    """The number of dimensions of ``a``, as ``numpy.ndim``.

    Parameters
    ----------
    a : Array or array-like

    Returns
    -------
    int
    """
    return a.ndim if isinstance(a, Array) else np.ndim(a)


def size(a: Any, axis: Any = None) -> int:
    """The number of elements of ``a`` (along ``axis`` when given), as
    ``numpy.size``.

    Parameters
    ----------
    a : Array or array-like
    axis : int, optional

    Returns
    -------
    int
    """
    if not isinstance(a, Array):
        return np.size(a, axis)
    if axis is None:
        return a.size
    return a.shape[normalize_axis(axis, a.ndim)]


_METHODS = ("sum", "prod", "mean", "var", "std", "min", "max", "argmin", "argmax", "any", "all", "clip", "repeat", "cumsum", "cumprod",
            "reshape", "squeeze", "swapaxes", "transpose", "dot", "ravel")
for _m in _METHODS:
    getattr(Array, _m).__doc__ = (
        f"Method form of :func:`memfit.array.{_m}`: ``x.{_m}(...)`` is ``memfit.array.{_m}(x, ...)``.\n\n"
        + (globals()[_m].__doc__ or "")
    )
Array.flatten.__doc__ = Array.ravel.__doc__
del _m

__all__ = [
    n
    for n in list(globals())
    if not n.startswith("_")
    and callable(globals()[n])
    and n not in ("Any", "Optional", "Sequence", "Array", "DTYPES", "dtype_name", "from_ndarray", "index_int",
                  "normalize_axes", "normalize_axis", "normalize_shape", "op", "operand", "optional_dtype_name",
                  "reject", "scalar")
    and getattr(globals()[n], "__module__", "") == __name__
]
