"""The lazy :class:`Array` and the helpers that normalise NumPy-style
arguments (axes, shapes, dtypes, indices) into the canonical parameters of
the engine's operations (``memfit._memfit.expr_op``)."""

from __future__ import annotations

import mmap
import numbers
import operator
import os
from typing import Any, Optional, Sequence

import numpy as np

from .. import _memfit
from .._options import check_memory_limit, check_n_jobs, resolve_client

try:  # NumPy >= 1.25
    AxisError = np.exceptions.AxisError
except AttributeError:  # pragma: no cover - old NumPy
    AxisError = np.AxisError

try:  # NumPy >= 2.0
    byte_bounds = np.lib.array_utils.byte_bounds
except AttributeError:  # pragma: no cover - old NumPy
    byte_bounds = np.byte_bounds

#: The dtypes of memfit arrays, by NumPy name (the engine's list,
#: ``memfit._memfit.ARRAY_DTYPES``).
DTYPES = tuple(_memfit.ARRAY_DTYPES)
_DTYPE_SET = frozenset(DTYPES)

_UNSUPPORTED_HINT = (
    "compute the array first (np.asarray(x) or x.compute(), within the memory limit) "
    "and call NumPy on the result"
)


# ---------------------------------------------------------------------------
# Argument normalisation


def dtype_name(dtype: Any, what: str = "dtype") -> str:
    """The engine's name of ``dtype`` (anything ``numpy.dtype`` accepts).

    Raises
    ------
    TypeError
        A dtype memfit.array does not support (complex, object, strings,
        datetimes, longdouble, structured), naming it.
    """
    if isinstance(dtype, Array):
        dtype = dtype.dtype
    dt = np.dtype(dtype)
    if dt.name not in _DTYPE_SET or dt.fields is not None:
        raise TypeError(
            f"memfit.array does not support {what} {dt} ({dt.name}); supported dtypes: {', '.join(DTYPES)}"
        )
    return dt.name


def optional_dtype_name(dtype: Any) -> Optional[str]:
    """``dtype_name(dtype)``, or None for None."""
    return None if dtype is None else dtype_name(dtype)


def index_int(value: Any, what: str) -> int:
    """``value`` as a Python int (``operator.index``), a TypeError naming
    ``what`` otherwise (bools are refused)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{what} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {type(value).__name__} {value!r}") from None


def normalize_axis(axis: Any, ndim: int, argname: Optional[str] = None) -> int:
    """A single axis in ``range(ndim)``; ``numpy.exceptions.AxisError`` with
    NumPy's message when out of range."""
    if isinstance(axis, (bool, np.bool_)):
        raise TypeError("an integer is required")  # NumPy's words for axis=True
    try:
        ax = operator.index(axis)
    except TypeError:
        raise TypeError(f"'{type(axis).__name__}' object cannot be interpreted as an integer") from None
    if not -ndim <= ax < ndim:
        raise AxisError(ax, ndim, argname)
    return ax % ndim if ndim else ax


def normalize_axes(axis: Any, ndim: int, argname: Optional[str] = None) -> list:
    """``axis`` (None: all axes, an int, or a tuple of ints, as NumPy's
    reductions take them: not a list) as a sorted list of distinct axes in
    ``range(ndim)``.

    Raises
    ------
    numpy.exceptions.AxisError
        An axis out of range (NumPy's message).
    TypeError
        An axis that is not an integer, or a list (NumPy's message).
    ValueError
        A repeated axis ("duplicate value in 'axis'", as NumPy).
    """
    if axis is None:
        return list(range(ndim))
    if isinstance(axis, tuple):
        axes = [normalize_axis(a, ndim, argname) for a in axis]
        if len(set(axes)) != len(axes):
            raise ValueError(f"duplicate value in '{argname or 'axis'}'")
        return sorted(axes)
    return [normalize_axis(axis, ndim, argname)]


def normalize_shape(shape: Any, what: str = "shape", negative: str = "negative dimensions are not allowed") -> tuple:
    """A shape (an int or a sequence of ints) as a tuple of non-negative
    ints; ValueError(``negative``) for a negative one (NumPy's words for
    the function at hand)."""
    if isinstance(shape, Array):
        raise TypeError(f"{what} must be an int or a sequence of ints, got a memfit array")
    if isinstance(shape, (numbers.Integral, np.integer)) and not isinstance(shape, (bool, np.bool_)):
        shape = (shape,)
    try:
        dims = tuple(index_int(s, what) for s in shape)
    except TypeError:
        raise TypeError(f"{what} must be an int or a sequence of ints, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise ValueError(negative)
    return dims


def reject(name: str, value: Any, default: Any = None) -> None:
    """TypeError for an argument memfit.array does not support (``out=``,
    ``where=``, ``initial=`` ...) when it is given a value other than its
    default."""
    if value is default or (default is not None and isinstance(value, type(default)) and value == default):
        return
    hint = (
        "results are lazy arrays: use the returned array, then x.compute(), x.to_npy() or x.to_zarr()"
        if name == "out"
        else "compute the array first (x.compute(), within the memory limit) and call NumPy on the result"
    )
    raise TypeError(f"memfit.array does not support the argument {name}= (got {value!r}); hint: {hint}")


def write_out(result: "Array", out: Any, casting: str, name: str, reduction: bool = False) -> np.ndarray:
    """NumPy's ``out=``: ``result`` computed (within the default memory
    limit) into the NumPy array ``out`` (or a 1-tuple of it), which is
    returned. A ufunc's result broadcasts to ``out``; a reduction's must have
    its shape. ``casting`` is the rule from the result's dtype to
    ``out``'s (``"same_kind"`` for ufuncs, ``"unsafe"`` for reductions).

    A result of ``out``'s shape (or of its last axes, broadcast across the
    others) is written block of rows by block of rows
    (:func:`_stream_into`: no copy of the whole result is held) unless
    ``out`` may overlap what the expression reads, which NumPy's semantics
    (the result as if computed before any write) then require."""
    if isinstance(out, tuple):
        if len(out) != 1:
            raise ValueError(f"The 'out' tuple must have exactly one entry per ufunc output, got {len(out)}")
        out = out[0]
    if not isinstance(out, np.ndarray):
        raise TypeError(f"return arrays must be of ArrayType, got {type(out).__name__}")
    if not out.flags.writeable:
        raise ValueError("output array is read-only")
    shape = tuple(result.shape)
    if reduction and out.shape != shape:
        raise ValueError(
            f"output parameter for reduction operation {name} has the wrong shape {out.shape}; expected {shape}"
        )
    if not reduction and np.broadcast_shapes(shape, out.shape) != out.shape:
        raise ValueError(
            f"non-broadcastable output operand with shape {out.shape} doesn't match the broadcast shape "
            f"{np.broadcast_shapes(shape, out.shape)}"
        )
    if name in ("argmin", "argmax") and not np.can_cast(out.dtype, np.intp, "safe"):
        # NumPy writes indices through an intp buffer.
        raise TypeError(f"Cannot cast array data from {out.dtype!r} to {np.dtype(np.intp)!r} according to the rule 'safe'")
    if not np.can_cast(result.dtype, out.dtype, casting):
        ufunc = getattr(np, name, None)
        if isinstance(ufunc, np.ufunc) and not reduction:
            # NumPy's own error (numpy.exceptions' UFuncTypeError), from the
            # same ufunc on empty operands of the result's dtype.
            empty = [np.empty(0, result.dtype)] * ufunc.nin
            ufunc(*empty, out=np.empty(0, out.dtype), casting=casting)
        raise TypeError(
            f"Cannot cast ufunc '{name}' output from {result.dtype!r} to {out.dtype!r} with casting rule '{casting}'"
        )
    lead = out.ndim - result.ndim
    if out.shape[lead:] == shape and result.ndim > 0 and result.size > 0 and not _may_read(result, out):
        _stream_into(result, out, lead)
    else:
        np.copyto(out, result.compute(), casting="unsafe")
    return out


def _may_read(result: "Array", out: np.ndarray) -> bool:
    """Whether writing to ``out`` could change what ``result`` reads: its
    bytes overlap a NumPy array the expression borrows, or it maps a file
    the expression reads (or a file it cannot name, beside any file read);
    also whenever the evaluation would run on a Dask cluster (whose result
    comes whole)."""
    if resolve_client(None) is not None:
        return True
    lo, hi = byte_bounds(out)
    mapped = _mapped_file(out)
    for place in result._expr.places():
        if place[0] == "memory" and place[1] < hi and lo < place[2]:
            return True
        if place[0] == "file" and mapped is not None and (mapped == "" or _same_or_inside(mapped, place[1])):
            return True
    return False


def _mapped_file(a: np.ndarray) -> Optional[str]:
    """The file ``a``'s memory maps (a ``np.memmap`` or a view of one):
    its name, ``""`` when it cannot be named (an ``mmap.mmap``), None for
    memory that maps no file."""
    base: Any = a
    while base is not None:
        if isinstance(base, np.memmap):
            return os.fsdecode(base.filename) if base.filename is not None else ""
        if isinstance(base, mmap.mmap):
            return ""
        # np.frombuffer(mm) holds a memoryview of the map (helper 140).
        base = base.obj if isinstance(base, memoryview) else getattr(base, "base", None)
    return None


def _shared_map_of(a: np.ndarray) -> Any:
    """The ``mmap.mmap`` of a ``np.memmap`` opened to write its file
    (``"r+"``, ``"w+"``: a shared mapping) behind ``a``, if any; never a
    copy-on-write one (``"c"``), whose written pages are the only copy."""
    base: Any = a
    shared = False
    while base is not None and not isinstance(base, mmap.mmap):
        shared = shared or (isinstance(base, np.memmap) and getattr(base, "mode", None) in ("r+", "w+"))
        base = base.obj if isinstance(base, memoryview) else getattr(base, "base", None)
    return base if shared and hasattr(mmap, "MADV_DONTNEED") else None


def _same_or_inside(path: str, place: str) -> bool:
    """Whether ``path`` is the file ``place`` or lies in its directory (a
    Zarr array's chunks)."""
    try:
        if os.path.samefile(path, place):
            return True
    except OSError:
        return True
    real, root = os.path.realpath(path), os.path.realpath(place)
    return os.path.isdir(root) and os.path.commonpath([real, root]) == root


def _stream_into(result: "Array", out: np.ndarray, lead: int = 0) -> None:
    """Writes ``result`` into ``out`` (of its shape after ``lead`` more
    axes, across which it is broadcast) in consecutive blocks of rows along
    its first axis, each computed within the default memory limit
    (``Expr.row_blocks``)."""
    shape = tuple(result.shape)
    rows = shape[0]
    flat = result.reshape(rows, result.size // rows)
    mapped = _shared_map_of(out)
    start = 0
    for block in flat._expr.row_blocks(check_memory_limit(None), check_n_jobs(None)):
        stop = start + block.shape[0]
        at = (slice(None),) * lead + (slice(start, stop),)
        np.copyto(out[at], block.reshape((stop - start,) + shape[1:]), casting="unsafe")
        start = stop
        if mapped is not None:
            # A mapped out (np.memmap): the block's pages written back and
            # let go, so they do not stay resident (helper 140: the whole
            # result did).
            mapped.flush()
            mapped.madvise(mmap.MADV_DONTNEED)


def prod(dims: Sequence[int]) -> int:
    """The product of ``dims`` (1 for none)."""
    n = 1
    for d in dims:
        n *= d
    return n


# ---------------------------------------------------------------------------
# Wrapping


#: The engine's node constructors: every engine node of a memfit array is
#: made by one of them, through :func:`node`.
_CONSTRUCTORS = ("expr_op", "expr_from_ndarray", "expr_from_npy", "expr_from_zarr")


def node(ctor: str, *args: Any) -> "Array":
    """A new lazy array whose engine node is ``memfit._memfit.<ctor>(*args)``,
    and the one place where engine nodes are made.

    The array records its recipe, ``(ctor, args)``, which
    :meth:`Array.__reduce__` replays to rebuild the node after pickling
    (e.g. on a Dask worker):

    - ``node("expr_op", name, inputs, params)``: ``inputs`` a sequence of
      :class:`Array` (recorded as the Array objects themselves; a shared
      sub-expression is one object, rebuilt once), ``params`` a dict of
      JSON-like values (``take``'s ``indices`` an int64 ndarray, recorded
      as None and read back from the engine node when pickled);
    - ``node("expr_from_ndarray", a)``: the ndarray (pickled with its data);
    - ``node("expr_from_npy", path)``, ``node("expr_from_zarr", path)``: the
      file or directory, recorded as an absolute path (so a worker with
      another working directory reads the same file).
    """
    if ctor == "expr_op":
        name, inputs, params = args
        inputs = tuple(inputs)
        a = Array(_memfit.expr_op(name, [x._expr for x in inputs], params))
        if name == "take":
            # The engine holds the indices (8 bytes each); a copy is made
            # from it when pickled (see _recipe_steps), never kept here.
            params = {**params, "indices": None}
        args = (name, inputs, params)
    elif ctor in ("expr_from_npy", "expr_from_zarr"):
        (path,) = args
        path = os.fsdecode(os.fspath(path))
        a = Array(getattr(_memfit, ctor)(path))
        args = (os.path.abspath(path),)
    elif ctor == "expr_from_ndarray":
        a = Array(_memfit.expr_from_ndarray(*args))
    else:
        raise ValueError(f"unknown engine constructor {ctor!r}; expected one of {', '.join(_CONSTRUCTORS)}")
    a._recipe = (ctor, args)
    return a


def _recipe_steps(root: "Array") -> list:
    """The recipe of ``root``'s whole graph, flat: a list of ``(ctor, args)``
    in topological order (inputs first, ``root`` last), each node once, the
    inputs of an operation given by their indices in the list. Flat so that
    pickling a long chain of operations does not recurse once per node.

    Raises
    ------
    TypeError
        A node made directly from an engine expression (``Array(expr)``).
    """
    index: dict = {}
    steps: list = []
    stack = [(root, False)]
    while stack:
        a, expanded = stack.pop()
        if id(a) in index:
            continue
        if a._recipe is None:
            raise TypeError(
                "cannot pickle this memfit array: it was made directly from an engine expression "
                "(Array(expr)), not by a memfit.array function, so how to rebuild it is unknown"
            )
        ctor, args = a._recipe
        if ctor == "expr_op":
            if not expanded:
                stack.append((a, True))
                stack.extend((x, False) for x in reversed(args[1]) if id(x) not in index)
                continue
            params = args[2]
            if args[0] == "take" and params.get("indices") is None:
                params = {**params, "indices": a._expr.take_indices()}
            args = (args[0], tuple(index[id(x)] for x in args[1]), params)
        index[id(a)] = len(steps)
        steps.append((ctor, args))
    return steps


def _rebuild(steps: list) -> "Array":
    """Unpickling: replays :func:`_recipe_steps`' list through :func:`node`."""
    built: list = []
    for ctor, args in steps:
        if ctor == "expr_op":
            args = (args[0], [built[i] for i in args[1]], args[2])
        built.append(node(ctor, *args))
    return built[-1]


def op(name: str, inputs: Sequence["Array"], **params: Any) -> "Array":
    """A new lazy array: engine operation ``name`` on ``inputs``."""
    end = _python_int_end(name, inputs)
    if any(_wide_int(x, end) is not None for x in _data_inputs(name, inputs)):
        return _with_wide_ints(name, inputs, params, end)
    if name in ("positive", "reciprocal") and inputs[0].dtype == np.bool_:
        if name == "positive":
            np.positive(np.empty(0, np.bool_))  # NumPy's UFuncTypeError: no bool loop
        inputs = [inputs[0].astype(np.int8)]  # NumPy's bool reciprocal is its int8 loop
    result = node("expr_op", name, inputs, params)
    if name == "power" and result.dtype in (np.float32, np.float64) and _constant(inputs[1]) == 0.5:
        # NumPy's float32 and float64 power loops take the square root for one
        # exponent of 0.5 (a scalar or a size-1 array they broadcast):
        # sqrt(-inf) is NaN, sqrt(-0.0) is -0.0, where pow gives inf and 0.0.
        root = op("sqrt", [inputs[0].astype(result.dtype)])
        return root if root.shape == result.shape else op("broadcast_to", [root], shape=list(result.shape))
    return result


def _constant(x: "Array") -> Any:
    """The value of ``x`` when it is one known value (a scalar, or a NumPy
    array of one element), else None."""
    ctor, args = getattr(x, "_recipe", None) or (None, None)
    if ctor == "expr_op" and args[0] == "scalar":
        return args[2].get("value")
    if ctor == "expr_from_ndarray" and args[0].size == 1:
        return args[0].reshape(-1)[0].item()
    return None


#: NumPy's comparison ufuncs, by the orders that make them true.
_COMPARISONS = {
    "equal": ("equal",),
    "not_equal": ("less", "greater"),
    "less": ("less",),
    "less_equal": ("less", "equal"),
    "greater": ("greater",),
    "greater_equal": ("greater", "equal"),
}


def _data_inputs(name: str, inputs: Sequence["Array"]) -> Sequence["Array"]:
    """The inputs whose values make the result (and its dtype): all but
    ``where``'s condition."""
    return inputs[1:] if name == "where" else inputs


def _python_int(x: "Array") -> Optional[int]:
    """The value of ``x`` when it is a Python integer (a weak scalar), else None."""
    recipe = getattr(x, "_recipe", None)
    if not recipe or recipe[0] != "expr_op" or recipe[1][0] != "scalar":
        return None
    params = recipe[1][2]
    v = params.get("value")
    if params.get("weak") and isinstance(v, int) and not isinstance(v, bool):
        return v
    return None


def _python_int_end(name: str, inputs: Sequence["Array"]) -> int:
    """Where the Python integers among ``inputs`` stop fitting NumPy 2's
    dtype for them: ``2**63`` when the other values are bools or Python
    integers (NEP 50 makes a Python integer beside bools, or beside Python
    integers only, the default integer, int64), else ``2**64`` (what the
    engine's scalars hold: beside integer arrays, the array's dtype decides)."""
    data = _data_inputs(name, inputs)
    if len(data) > 1 and all(_python_int(x) is not None or x.dtype.kind == "b" for x in data):
        return 2**63
    return 2**64


def _wide_int(x: "Array", end: int = 2**64) -> Optional[int]:
    """The value of ``x`` when it is a Python integer outside ``[-2**63, end)``
    (see :func:`_python_int_end`), which the engine would not take as NumPy
    does; else None."""
    v = _python_int(x)
    return v if v is not None and not -(2**63) <= v < end else None


def _with_wide_ints(name: str, inputs: Sequence["Array"], params: dict, end: int) -> "Array":
    """Operation ``name`` with Python integers outside ``[-2**63, end)``
    among ``inputs``, as NumPy 2 does it: compared with integer arrays, every
    element compares alike (a constant), and Python integers compare by their
    values; beside a float array, and in a true division, the integer is that
    float; ``where`` among bools and Python integers wraps it into int64
    (NumPy casts there); anything else raises NumPy's OverflowError."""
    others = [x for x in _data_inputs(name, inputs) if _wide_int(x, end) is None]
    kinds = {np.dtype(x.dtype).kind for x in others}
    if "f" in kinds or name == "true_divide":
        return node("expr_op", name, [scalar(float(_wide_int(x, end))) if _wide_int(x, end) is not None else x for x in inputs], params)
    wide = [_wide_int(x, end) for x in _data_inputs(name, inputs)]
    if name == "where" and all(w is None or 0 < w < 2**64 for w in wide):
        return node("expr_op", name, [inputs[0]] + [x if w is None else scalar(w - 2**64) for x, w in zip(inputs[1:], wide)], params)
    if name in _COMPARISONS and len(inputs) == 2 and kinds <= {"i", "u"}:
        left, right = (_python_int(x) for x in inputs)
        if left is None or right is None:  # an integer array beside a wide integer: every element alike
            order = "greater" if (next(w for w in wide if w is not None) > 0) == (left is not None) else "less"
        else:
            order = "less" if left < right else "greater" if left > right else "equal"
        shape = np.broadcast_shapes(*(tuple(x.shape) for x in inputs))
        return node("expr_op", "full", [], {"shape": list(shape), "value": order in _COMPARISONS[name], "dtype": "bool"})
    raise OverflowError("Python int too large to convert to C long")


def from_ndarray(a: np.ndarray) -> "Array":
    """A NumPy array as a leaf, without a copy when the engine reads it in
    place (any of the 12 dtypes, native byte order, any strides). Other byte
    orders are converted to native (one copy)."""
    dt = a.dtype
    if dt.fields is not None or dt.name not in _DTYPE_SET:
        kind = {"c": "complex", "O": "object", "U": "string", "S": "bytes", "M": "datetime", "m": "timedelta", "V": "void"}
        what = kind.get(dt.kind, "")
        raise TypeError(
            f"memfit.array does not support arrays of dtype {dt}{' (' + what + ')' if what else ''}; "
            f"supported dtypes: {', '.join(DTYPES)}"
        )
    if not dt.isnative:
        a = a.astype(dt.newbyteorder("="))
    if type(a) is not np.ndarray and not isinstance(a, np.memmap):
        if isinstance(a, np.ma.MaskedArray):
            raise TypeError("memfit.array does not support masked arrays; pass a.filled(value) or a.data")
        a = a.view(np.ndarray)
    return node("expr_from_ndarray", a)


def scalar(value: Any) -> "Array":
    """A 0-d lazy array of a Python scalar (weak: NEP 50, the other operand's
    dtype wins within its kind) or a NumPy scalar (strong, with its dtype)."""
    if isinstance(value, np.generic):
        name = dtype_name(value.dtype)
        return op("scalar", [], value=value.item(), weak=False, dtype=name)
    if isinstance(value, (bool, int, float)):
        return op("scalar", [], value=value, weak=True)
    if isinstance(value, complex):
        raise TypeError(f"memfit.array does not support complex values (got {value!r})")
    raise TypeError(f"expected a bool, int or float scalar, got {type(value).__name__}")


def operand(x: Any) -> "Array":
    """Any array-like as a lazy array: memfit arrays as they are, ndarrays
    without a copy, Python and NumPy scalars as 0-d scalars, other inputs
    (lists, tuples, objects with ``__array__``) through ``numpy.asarray``."""
    if isinstance(x, Array):
        return x
    if isinstance(x, np.ndarray):
        return from_ndarray(x)
    if isinstance(x, (np.generic, bool, int, float, complex)):
        return scalar(x)
    refuse_dask(x)
    zarr_path = _zarr_path(x)
    if zarr_path is not None:
        return node("expr_from_zarr", zarr_path)
    return from_ndarray(np.asarray(x))


def strong_operand(x: Any) -> "Array":
    """:func:`operand`, but a Python scalar is taken as ``numpy.asarray``
    takes it (int64, float64, bool: a strong dtype), as NumPy's functions
    that are not ufuncs (``dot``, ``inner``, ``tensordot``, ``einsum``)
    take their operands."""
    if isinstance(x, (bool, int, float, complex)):
        return from_ndarray(np.asarray(x))
    return operand(x)


def refuse_dask(x: Any) -> None:
    """TypeError for a Dask collection: reading it as an array would compute
    all of it into memory."""
    if type(x).__module__.split(".")[0] == "dask":
        raise TypeError(
            f"memfit.array does not take a Dask {type(x).__name__}: reading it would compute all of it into memory; "
            "hint: write it to Zarr (x.to_zarr(path)) and open that with memfit.array.from_zarr(path), or pass "
            "x.compute() when it fits"
        )


def maybe_operand(x: Any) -> Optional["Array"]:
    """``operand(x)`` for the types a binary operator accepts, else None (the
    operator then returns NotImplemented); TypeError for a Dask collection."""
    refuse_dask(x)
    if isinstance(x, (Array, np.ndarray, np.generic, bool, int, float, complex, list, tuple)):
        return operand(x)
    return None


def _zarr_path(x: Any) -> Optional[str]:
    """The directory of a zarr.Array stored in a local directory, None when
    ``x`` is not a zarr array. TypeError for a zarr array elsewhere."""
    if type(x).__module__.split(".")[0] != "zarr" or not hasattr(x, "store") or not hasattr(x, "shape"):
        return None
    store = x.store
    root = getattr(store, "root", None)  # zarr-python 3 LocalStore
    if root is None:
        root = getattr(store, "path", None)  # zarr-python 2 DirectoryStore
        if root is not None and not isinstance(root, (str, os.PathLike)):
            root = None
    if root is None or not os.path.isdir(os.fspath(root)):
        raise TypeError(
            f"memfit.array.from_zarr reads zarr arrays stored in a local directory; this one is in a "
            f"{type(store).__name__}: save it to a directory first, or pass its path"
        )
    sub = getattr(x, "path", "") or ""
    return os.path.join(os.fspath(root), sub) if sub else os.fspath(root)


# ---------------------------------------------------------------------------
# The plan


class Plan:
    """The evaluation plan of a lazy array (:meth:`Array.explain`):
    ``str(plan)`` is the printable plan (fused pipelines, block shape, every
    buffer with its bytes, passes, scratch on disk); ``plan.data`` is the
    same as a dict, and ``plan["key"]`` reads it.

    Parameters
    ----------
    text : str
    data : dict

    Attributes
    ----------
    text : str
        The printable plan.
    data : dict
        The plan as data (the engine's ``Expr.plan``).
    """

    __slots__ = ("text", "data")

    def __init__(self, text: str, data: dict):
        self.text = text
        self.data = data

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def keys(self):
        """The keys of :attr:`data`."""
        return self.data.keys()


def _zarr_lengths(value: Any, shape: tuple, what: str, accepted: str, clip: bool) -> tuple:
    """``value``, an int (that length along every axis; clipped to
    ``shape`` with ``clip``) or a tuple, list or 1-D array of ints, as one
    length per axis of ``shape``.

    Raises
    ------
    TypeError
        Anything else, a string included (not a sequence of lengths; a
        bool, a float, a sequence holding one), naming the whole value and
        what ``what`` may be (``accepted``).
    ValueError
        The wrong number of lengths, or a non-positive one.
    """
    def refused() -> TypeError:
        return TypeError(f"{what} must be {accepted}, got {type(value).__name__} {value!r}")

    if isinstance(value, (bool, np.bool_)):
        raise refused()
    if isinstance(value, (numbers.Integral, np.integer)):
        n = operator.index(value)
        lengths = tuple(max(1, min(n, d)) if clip and n > 0 else n for d in shape)
    elif isinstance(value, (tuple, list)) or (isinstance(value, np.ndarray) and value.ndim == 1):
        try:
            lengths = tuple(index_int(c, what) for c in value)
        except TypeError:
            raise refused() from None
    else:
        raise refused()
    if len(lengths) != len(shape):
        raise ValueError(f"{what} {lengths} must have one length per axis of the array of shape {shape}")
    if any(c <= 0 for c in lengths):
        raise ValueError(f"{what[:-1]} lengths must be positive, got {what}={lengths}")
    return lengths


def zarr_chunks(chunks: Any, shape: tuple) -> Optional[tuple]:
    """``chunks`` of a Zarr output of ``shape`` checked and as a tuple (an
    int: that length along every axis, clipped to the shape); None stays
    None (the engine chooses). ValueError for the wrong length or
    non-positive lengths, TypeError (naming the value) for anything but an
    int or a sequence of ints."""
    if chunks is None:
        return None
    return _zarr_lengths(chunks, shape, "chunks", "an int, a tuple of ints or None", clip=True)


def zarr_shards(shards: Any, shape: tuple) -> Optional[tuple]:
    """``shards`` of a Zarr output of ``shape`` checked and as a tuple (an
    int: that length along every axis); None for ``"auto"`` and None.
    Errors as :func:`zarr_chunks`."""
    if shards is None or (isinstance(shards, str) and shards == "auto"):
        return None
    return _zarr_lengths(shards, shape, "shards", '"auto", None, an int or a tuple of ints', clip=False)


# ---------------------------------------------------------------------------
# The array


def _binary(name: str, doc: str):
    def method(self, other):
        o = maybe_operand(other)
        if o is None:
            if name in ("equal", "not_equal") and (other is None or isinstance(other, (str, bytes))):
                # NumPy compares elementwise with an object no element equals:
                # all False for ==, all True for !=.
                return op("full", [], shape=list(self.shape), value=name == "not_equal", dtype="bool")
            return NotImplemented
        return op(name, [self, o])

    def rmethod(self, other):
        o = maybe_operand(other)
        if o is None:
            return NotImplemented
        return op(name, [o, self])

    method.__doc__ = f"``{doc}``: elementwise numpy.{name}, lazy."
    rmethod.__doc__ = f"Reflected ``{doc}``: elementwise numpy.{name}, lazy."
    return method, rmethod


def _in_place(x: "Array", name: str, other: Any, result: "Array") -> "Array":
    """What ``x <op>= other`` binds ``x`` to: ``result`` (``name(x, other)``,
    lazy) cast to ``x``'s dtype, under NumPy's rules for in-place operators:
    the result keeps ``x``'s shape, and its dtype must cast to ``x``'s with
    ``casting='same_kind'`` (else NumPy's own UFuncTypeError, raised by the
    same ufunc on empty operands)."""
    if result.dtype != x.dtype:
        empty = (0, 0) if name == "matmul" else (0,)
        probe = other if isinstance(other, (bool, int, float, np.generic)) else np.empty(empty, operand(other).dtype)
        getattr(np, name)(np.empty(empty, x.dtype), probe, out=np.empty(empty, x.dtype))
    if result.shape != x.shape:
        if name == "matmul" and x.ndim == result.ndim and x.shape[:-1] == result.shape[:-1]:
            raise ValueError(
                f"matmul: Output operand 0 has a mismatch in its core dimension {min(x.ndim, 2) - 1}, with gufunc "
                f"signature (n?,k),(k,m?)->(n?,m?) (size {x.shape[-1]} is different from {result.shape[-1]})"
            )
        def text(shape: tuple) -> str:  # NumPy's spelling in this message: (3,) and (2,3)
            return "(" + ",".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"

        raise ValueError(
            f"non-broadcastable output operand with shape {text(x.shape)} doesn't match the broadcast shape "
            f"{text(result.shape)}"
        )
    return result.astype(x.dtype)


def _iop(name: str, doc: str):
    def method(self, other):
        o = maybe_operand(other)
        if o is None:
            return NotImplemented
        return _in_place(self, name, other, op(name, [self, o]))

    method.__doc__ = (
        f"``{doc}``: binds the name to ``numpy.{name}(x, y)`` cast to x's dtype (a new lazy array: "
        "x itself and arrays built from it are unchanged). As NumPy, TypeError (numpy's UFuncTypeError) "
        "when the result's dtype does not cast to x's with casting='same_kind' (an integer x and a float "
        "result), ValueError when y would broadcast x to another shape."
    )
    return method


def _unary(name: str, doc: str):
    def method(self):
        return op(name, [self])

    method.__doc__ = f"``{doc}``: elementwise numpy.{name}, lazy."
    return method


class Array:
    """A lazy n-dimensional array: a node of the engine's expression graph.

    Operations on it (arithmetic, NumPy functions and ufuncs, slicing,
    reductions, contractions) build new lazy arrays without computing
    anything; NumPy's names, dtypes (NumPy 2 promotion rules, NEP 50),
    broadcasting and error messages apply. Nothing is evaluated until
    :meth:`compute`, :meth:`to_npy`, :meth:`to_zarr`, ``np.asarray(x)`` or a
    conversion to a Python scalar; the engine then evaluates the graph in
    blocks chosen to fit ``memory_limit``, fusing chains of elementwise
    operations into one pass per block, on ``n_jobs`` threads. Results are
    bitwise identical for any ``n_jobs`` and any ``memory_limit``.

    Create arrays with :func:`memfit.array.asarray`, :func:`from_npy`,
    :func:`from_zarr`, :func:`arange`, :func:`zeros`, :func:`ones`,
    :func:`full` or :mod:`memfit.array.random`; the constructor itself takes
    an engine expression (``memfit._memfit.Expr``).

    Parameters
    ----------
    expr : memfit._memfit.Expr
        The engine's expression node.

    Attributes
    ----------
    shape : tuple of int
    dtype : numpy.dtype
        One of bool, int8, int16, int32, int64, uint8, uint16, uint32,
        uint64, float16, float32, float64.
    ndim, size : int
    nbytes : int
        Bytes the computed result occupies (``size * itemsize``).
    itemsize : int
        Bytes per element.
    T : Array
        The transpose (axes reversed).

    Examples
    --------
    >>> import numpy as np
    >>> import memfit.array as ma
    >>> a = ma.asarray(np.arange(6.0).reshape(2, 3))
    >>> b = np.sum(np.tile(a, (4, 1, 1)) * 2, axis=0)
    >>> b
    memfit.array<shape=(2, 3), dtype=float64>
    >>> b.compute()
    array([[ 0.,  8., 16.],
           [24., 32., 40.]])
    """

    __slots__ = ("_expr", "_recipe", "__weakref__")
    __array_priority__ = 20
    __hash__ = None  # type: ignore[assignment]  # == is elementwise

    def __init__(self, expr: Any):
        recipe = None
        if isinstance(expr, Array):
            expr, recipe = expr._expr, expr._recipe
        if not isinstance(expr, _memfit.Expr):
            raise TypeError(
                f"Array() takes an engine expression; use memfit.array.asarray() for a {type(expr).__name__}"
            )
        self._expr = expr
        self._recipe = recipe

    def __reduce__(self):
        """Pickling (``pickle``, ``cloudpickle``, ``copy``; Dask ships arrays
        to worker processes this way): the array is rebuilt by replaying how
        the engine nodes of its graph were made (see :func:`node`):
        operations with their parameters, ndarray leaves with their data,
        ``.npy`` and Zarr leaves by absolute path (the files must be readable
        at that path where the array is unpickled). Nothing is computed;
        each node of the graph is rebuilt once, and an ndarray shared by
        several arrays of one pickle is stored once.

        Raises
        ------
        TypeError
            A node made directly from an engine expression (``Array(expr)``),
            whose origin is unknown.
        """
        return (_rebuild, (_recipe_steps(self),))

    # -- attributes --------------------------------------------------------

    @property
    def shape(self) -> tuple:
        """The shape, a tuple of ints."""
        return tuple(self._expr.shape)

    @property
    def dtype(self) -> np.dtype:
        """The dtype (``numpy.dtype``)."""
        return np.dtype(self._expr.dtype)

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return int(self._expr.ndim)

    @property
    def size(self) -> int:
        """The number of elements."""
        return prod(self.shape)

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the computed result (``size * itemsize``); nothing is
        allocated until it is computed."""
        return self.size * self.itemsize

    @property
    def T(self) -> "Array":
        """The transpose (axes reversed), a lazy view."""
        return self.transpose()

    def take(self, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> "Array":
        """:func:`memfit.array.take` of this array.

        Parameters
        ----------
        indices, axis, out, mode
            As :func:`memfit.array.take`'s.

        Returns
        -------
        Array
        """
        from ._functions import take

        return take(self, indices, axis, out, mode)

    def round(self, decimals: int = 0, out: Any = None) -> "Array":
        """:func:`memfit.array.round` of this array.

        Parameters
        ----------
        decimals, out
            As :func:`memfit.array.round`'s.

        Returns
        -------
        Array
        """
        from ._functions import round as round_

        return round_(self, decimals, out)

    @property
    def mT(self) -> "Array":
        """The transpose of the last two axes (a stack of matrices), a lazy
        view, as NumPy 2's ``ndarray.mT``; ValueError below 2 dimensions."""
        if self.ndim < 2:
            raise ValueError("matrix transpose with ndim < 2 is undefined")
        return self.swapaxes(-1, -2)

    @property
    def real(self) -> "Array":
        """The real part: the array itself (memfit arrays are real)."""
        return self

    @property
    def imag(self) -> "Array":
        """The imaginary part: zeros of the array's shape and dtype (memfit
        arrays are real), as NumPy's for a real array."""
        from ._functions import zeros_like

        return zeros_like(self)

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __repr__(self) -> str:
        return f"memfit.array<shape={self.shape}, dtype={self.dtype.name}>"

    def copy(self, order: str = "K") -> "Array":
        """A copy, as ``numpy.ndarray.copy``: the same lazy array over copies
        of the NumPy arrays it borrows (taken now: later writes to them do
        not show through, as they do not through NumPy's copy); ``.npy`` and
        Zarr inputs stay their files. Nothing is computed.

        Parameters
        ----------
        order : {"K", "C", "F", "A"}, default="K"
            Accepted for NumPy's signature; results are computed in C order.

        Returns
        -------
        Array
        """
        if order not in ("K", "C", "F", "A"):
            raise ValueError(f"order must be one of 'C', 'F', 'A', or 'K' (got {order!r})")
        steps = [
            (ctor, (np.array(args[0], copy=True), *args[1:])) if ctor == "expr_from_ndarray" else (ctor, args)
            for ctor, args in _recipe_steps(self)
        ]
        return _rebuild(steps)

    def __contains__(self, value: Any) -> bool:
        """``value in x``: NumPy's ``(x == value).any()``, computed (within
        the default memory limit)."""
        return bool((self == value).any())

    def __iter__(self):
        """Lazy arrays over axis 0 (``x[0]``, ``x[1]``, ...), like iterating
        over an ndarray; nothing is computed."""
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        for i in range(self.shape[0]):
            yield self[i]

    # -- evaluation --------------------------------------------------------

    def compute(self, memory_limit: Any = None, n_jobs: Any = None, client: Any = None) -> np.ndarray:
        """Evaluates the array into a new NumPy array; on a Dask cluster
        (``client``, by default the active one), its reductions run as
        tasks.

        Parameters
        ----------
        memory_limit : int, str or None, default=None
            Bytes for every buffer of the evaluation, the result included
            (``"2GiB"``; None: half of the available memory). With
            ``client``: also the most one task may use, as in
            :meth:`to_zarr` (``min(memory_limit, worker memory_limit /
            worker nthreads * memfit._dask.SAFETY)``).
        n_jobs : int or None, default=None
            Worker threads (None: the CPUs this process may use, at most
            ``OMP_NUM_THREADS`` and a ``threadpoolctl`` limit; -1: all those
            CPUs, -2: all but one). With ``client``: the threads of the steps
            that run here; each task runs on one thread.
        client : None, "auto" or distributed.Client, default=None
            Where the reductions run, as ``client`` of the estimators'
            ``fit`` and :meth:`to_zarr`
            (:func:`memfit._options.resolve_client`): None (or ``"auto"``)
            is the active ``distributed`` client when there is one, else
            this process; inside a Dask task, and for an array with nothing
            to run as tasks (see below), None is this process. On a cluster,
            each reduction (``sum``, ``mean``, ``min``, ``max``,
            ``argmin``, ``argmax``, ``any``, ``all``, ``prod``, over some
            axes or all; ``var`` and ``std`` are one) is cut along its fixed
            accumulation chunks into consecutive ranges, at most one per
            worker thread; each range is one task that returns its chunks'
            statistics, and they are folded here in chunk order, so the
            result is bitwise identical to the local one for any number of
            workers. Elementwise steps that combine the reductions' results
            (``var``'s division) run here. The array is pickled to the
            workers (see :meth:`__reduce__`): its ``.npy``/Zarr inputs must
            be readable there at the same absolute paths. An explicit
            ``client`` refuses, with ValueError, an array without a
            reduction, with a contraction (``einsum``, ``matmul``), with an
            elementwise step over stored data that is not inside a
            reduction, or whose reduction reads an intermediate result too
            large to send to the tasks. Needs ``pip install "memfit[dask]"``.

        Returns
        -------
        numpy.ndarray
            C-ordered, of this array's shape and dtype; bitwise identical for
            any ``n_jobs`` and ``memory_limit``.

        Raises
        ------
        MemoryError
            The result itself does not fit ``memory_limit`` (the message points
            to :meth:`to_npy` and :meth:`to_zarr`, which stream it to disk), or
            one minimal block of the plan does not (naming the buffer and the
            smallest limit that works). With ``client``, also when one task
            of one accumulation chunk does not fit a task's limit, before any
            task is submitted.
        OSError
            An input file that cannot be read.
        ValueError
            An explicit ``client`` and an array that cannot run there (see
            ``client``).
        TypeError
            ``client`` is not None, "auto" or a ``distributed.Client``.
        Exception
            With ``client``: the first error of a failed task, re-raised here.

        Warns
        -----
        RuntimeWarning
            Values that became inf or NaN from finite inputs, one warning per
            kind (overflow, divide by zero, invalid value) with its count, as
            ``np.errstate`` asks (``"raise"``: ``FloatingPointError``).
        """
        from . import _cluster

        on = _cluster.reduction_client(self, client)
        try:
            if on is not None:
                return _cluster.run_reductions(self, memory_limit, n_jobs, on)
            return self._expr.compute(check_memory_limit(memory_limit), check_n_jobs(n_jobs))
        except MemoryError as e:
            message = str(e)
            # The engine suggests a file where the result is a good share
            # of what the job needs; name the methods that write one.
            if "to_npy" in message or "instead of returning it in memory" not in message:
                raise
            raise MemoryError(
                f"{message}; x.to_npy(path) or x.to_zarr(path) stream the result to disk within the limit"
            ) from None

    def to_npy(
        self, path: Any, memory_limit: Any = None, n_jobs: Any = None, overwrite: bool = False, client: Any = None
    ) -> None:
        """Streams the array into a ``.npy`` file, block by block with
        positioned writes, without holding the result in memory.

        The file is written under a temporary name in the same directory and
        renamed to ``path`` at the end, so a failure (a full disk, Ctrl-C)
        leaves no partial file and an existing file untouched.

        Parameters
        ----------
        path : str or os.PathLike
            The file to write, exactly this name (no ``.npy`` is appended).
        memory_limit : int, str or None, default=None
            Bytes for every buffer of the evaluation (None: half of the
            available memory); the result is on disk and does not count.
        n_jobs : int or None, default=None
            Worker threads (None: the CPUs this process may use, at most
            ``OMP_NUM_THREADS`` and a ``threadpoolctl`` limit; -1: all those CPUs).
        overwrite : bool, default=False
            Replace an existing file.
        client : None, "auto" or distributed.Client, default=None
            Where the array's reductions run, as in :meth:`compute` (the
            file is written here).

        Raises
        ------
        FileExistsError
            ``path`` exists and ``overwrite`` is False (the file is left
            untouched).
        MemoryError
            One minimal block of the plan does not fit ``memory_limit``.
        OSError
            The file cannot be written (e.g. a full disk).
        FloatingPointError
            The evaluation raised a floating-point exception that
            ``np.errstate`` sets to ``"raise"``: nothing is written or
            replaced.
        ValueError, TypeError, Exception
            With ``client``: as :meth:`compute`.
        """
        path = os.fsdecode(os.fspath(path))
        from . import _cluster

        on = _cluster.reduction_client(self, client)
        if on is not None:
            _cluster.run_reductions(self, memory_limit, n_jobs, on, path, bool(overwrite))
            return
        self._expr.to_npy(path, check_memory_limit(memory_limit), check_n_jobs(n_jobs), bool(overwrite))

    def to_zarr(
        self,
        path: Any,
        chunks: Any = None,
        memory_limit: Any = None,
        n_jobs: Any = None,
        overwrite: bool = False,
        client: Any = None,
        shards: Any = "auto",
    ) -> None:
        """Streams the array into a Zarr v3 array directory (compressed, one
        writer per chunk or shard, chunks and shards written in parallel),
        readable by zarr-python, without holding the result in memory; on a
        Dask cluster (``client``, by default the active one), one task per
        chunk (per shard when ``shards`` is given).

        Parameters
        ----------
        path : str or os.PathLike
            The directory of the Zarr array. With ``client``, it must be on a
            file system that the workers share with this process, at the same
            absolute path (and so must the ``.npy``/Zarr inputs).
        chunks : int, tuple of int or None, default=None
            Chunk shape (an int: that length along every axis, clipped to the
            shape). None: chosen before the evaluation tiles, sized for
            Zarr: about ``memory_limit / 32`` uncompressed bytes per chunk,
            at least 64 KiB (unless the whole array is smaller) and at most
            8 MiB, contiguous in C order (the innermost axes whole, then
            part of the next axis, balanced; one element of the outer
            axes); the memory left by buffers the evaluation holds counts,
            not the whole limit. With ``client``: the same rule at a task's
            memory limit.
        memory_limit : int, str or None, default=None
            Bytes for every buffer of the evaluation (None: half of the
            available memory). With ``client``: the most one task may use;
            a task's limit is ``min(memory_limit, worker memory_limit /
            worker nthreads * SAFETY)`` with
            ``memfit._dask.SAFETY = 0.5`` (Dask spills at 60-70% and
            pauses a worker at 80% of its limit); None: the worker's share
            alone.
        n_jobs : int or None, default=None
            Worker threads (None: the CPUs this process may use, at most
            ``OMP_NUM_THREADS`` and a ``threadpoolctl`` limit; -1: all those
            CPUs). With ``client``: threads
            of each task (None: 1, since a Dask worker runs one task per
            thread).
        overwrite : bool, default=False
            Replace an existing directory.
        client : None, "auto" or distributed.Client, default=None
            The cluster to evaluate on, as ``client`` of the estimators'
            ``fit`` (:func:`memfit._options.resolve_client`): None (or
            ``"auto"``) is the active ``distributed`` client when there is
            one, as Dask's own computations use it, else this process. On
            a cluster: one task per output chunk, each computing
            ``x[chunk]`` and writing it with zarr-python, into a temporary
            directory beside ``path`` that is renamed onto ``path`` once
            every task has succeeded (a failure leaves neither). Needs
            ``pip install "memfit[dask]"``.
        shards : "auto", None, int or tuple of int, default="auto"
            Shard shape, as ``shards`` of ``zarr.create_array``: chunks are
            grouped into shards (Zarr v3's ``sharding_indexed`` codec), one
            file per shard holding its chunks, each compressed on its own,
            and their index. Each length must be a positive multiple of the
            chunk's on that axis (an int: that length along every axis);
            with ``chunks=None`` the default chunk is shortened on each axis
            to a divisor of the shard's length. ``"auto"``: shards only when
            the chunks are small (under 1 MiB uncompressed): whole chunks
            grouped from the innermost axis outwards into shards of at most
            64 MiB and a quarter of the memory the plan leaves (the same
            layout for any ``n_jobs``); otherwise (and with ``client``) one
            file per chunk. None: one file per chunk. A shard's file has the
            same bytes for any ``n_jobs``.

        Raises
        ------
        FileExistsError
            ``path`` exists and ``overwrite`` is False.
        ValueError
            ``chunks`` or ``shards`` of the wrong length or with non-positive
            lengths; ``shards`` that are not multiples of the chunks.
        MemoryError
            One chunk (or one minimal block) does not fit ``memory_limit``.
            With ``client``, raised before any task is submitted, naming the
            worker's memory limit, its nthreads and the safety fraction.
        OSError
            The directory cannot be written.
        ImportError
            A client is given and dask.distributed or zarr is missing.
        TypeError
            ``chunks`` or ``shards`` not of the kinds above (a string other
            than ``"auto"`` included), naming the value; ``client`` is not
            None, "auto" or a ``distributed.Client``; or, with ``client``,
            the array cannot be pickled (see :meth:`__reduce__`).
        Exception
            With ``client``: the first error of a failed task, re-raised here.
        """
        auto_shards = isinstance(shards, str) and shards == "auto"
        shards = zarr_shards(shards, self.shape)
        chunks = zarr_chunks(chunks, self.shape)
        resolved = resolve_client(client)
        if resolved is not None:
            from . import _cluster

            _cluster.to_zarr(self, path, chunks, memory_limit, n_jobs, overwrite, resolved, shards=shards)
            return
        self._expr.to_zarr(
            os.fsdecode(os.fspath(path)),
            chunks,
            check_memory_limit(memory_limit),
            check_n_jobs(n_jobs),
            bool(overwrite),
            shards,
            auto_shards,
        )

    def explain(self, memory_limit: Any = None, n_jobs: Any = None, output: Any = None) -> Plan:
        """The evaluation plan, without evaluating anything.

        Parameters
        ----------
        memory_limit : int, str or None, default=None
            Bytes for every buffer (None: half of the available memory).
        n_jobs : int or None, default=None
            Worker threads (None: the CPUs this process may use, at most
            ``OMP_NUM_THREADS`` and a ``threadpoolctl`` limit; -1: all those CPUs).
        output : str, os.PathLike or None, default=None
            None: the plan of :meth:`compute` (the result in memory); a path:
            the plan of :meth:`to_zarr` for a path ending in ``.zarr``, else
            of :meth:`to_npy` (nothing is written).

        Returns
        -------
        Plan
            ``print(plan)`` shows the fused pipelines, the block shape, every
            buffer with its bytes, the passes and any scratch on disk;
            ``plan.data`` is the same as a dict.

        Raises
        ------
        MemoryError
            One minimal block does not fit ``memory_limit`` (naming the buffer
            and the smallest limit that works).
        """
        limit, jobs = check_memory_limit(memory_limit), check_n_jobs(n_jobs)
        out = None if output is None else os.fsdecode(os.fspath(output))
        return Plan(self._expr.explain(limit, jobs, out), self._expr.plan(limit, jobs, out))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """``np.asarray(x)``: computes the array within the default memory
        limit (half of the available memory); MemoryError, pointing to
        :meth:`to_npy` / :meth:`to_zarr`, when it does not fit."""
        if copy is False:
            raise ValueError(
                "Unable to avoid copy while creating an array as requested: a memfit array is lazy and is "
                "computed into a new array"
            )
        out = self.compute()
        if dtype is not None and np.dtype(dtype) != out.dtype:
            out = out.astype(dtype)
        return out

    def _scalar_value(self, what: str) -> Any:
        if self.size != 1:
            if what == "bool":
                if self.size == 0:
                    raise ValueError("The truth value of an empty array is ambiguous. Use `array.size > 0` to check that an array is not empty.")
                raise ValueError(
                    "The truth value of an array with more than one element is ambiguous. Use a.any() or a.all()"
                )
        if what != "bool" and self.ndim != 0:
            # NumPy 2's rule for float(), int() and complex().
            raise TypeError("only 0-dimensional arrays can be converted to Python scalars")
        return self.compute().reshape(())

    def item(self, *args: Any) -> Any:
        """One element as a Python scalar, as ``numpy.ndarray.item`` (the
        array is computed).

        Parameters
        ----------
        *args : int or tuple of int
            None for an array of one element, a flat index, or one index per
            axis (NumPy's rules; IndexError out of range).

        Returns
        -------
        z : Python scalar
            The element as a Python ``bool``, ``int`` or ``float``.
        """
        return self.compute().item(*args)

    def tolist(self) -> Any:
        """The computed array as nested Python lists, as ``numpy.ndarray.tolist``.

        Returns
        -------
        y : list or Python scalar
            Nested lists of Python scalars, ``ndim`` deep (a scalar for a 0-d
            array).
        """
        return self.compute().tolist()

    def __format__(self, spec: str) -> str:
        # As NumPy's: a 0-d array formats as its scalar.
        if self.ndim == 0:
            return format(self.compute()[()], spec)
        return super().__format__(spec)

    def __bool__(self) -> bool:
        return bool(self._scalar_value("bool"))

    def __float__(self) -> float:
        return float(self._scalar_value("float"))

    def __int__(self) -> int:
        return int(self._scalar_value("int"))

    def __index__(self) -> int:
        if self.ndim != 0 or self.dtype.kind not in "iu":
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        return int(self.compute())

    # -- arithmetic --------------------------------------------------------

    __add__, __radd__ = _binary("add", "x + y")
    __sub__, __rsub__ = _binary("subtract", "x - y")
    __mul__, __rmul__ = _binary("multiply", "x * y")
    __truediv__, __rtruediv__ = _binary("true_divide", "x / y")
    __floordiv__, __rfloordiv__ = _binary("floor_divide", "x // y")
    __mod__, __rmod__ = _binary("remainder", "x % y")
    __and__, __rand__ = _binary("bitwise_and", "x & y")
    __or__, __ror__ = _binary("bitwise_or", "x | y")
    __xor__, __rxor__ = _binary("bitwise_xor", "x ^ y")
    __lshift__, __rlshift__ = _binary("left_shift", "x << y")
    __rshift__, __rrshift__ = _binary("right_shift", "x >> y")
    __lt__, _ = _binary("less", "x < y")
    __le__, _ = _binary("less_equal", "x <= y")
    __gt__, _ = _binary("greater", "x > y")
    __ge__, _ = _binary("greater_equal", "x >= y")
    __eq__, _ = _binary("equal", "x == y")  # type: ignore[assignment]
    __ne__, _ = _binary("not_equal", "x != y")  # type: ignore[assignment]
    del _

    def __divmod__(self, other):
        """``divmod(x, y)``: ``(x // y, x % y)``, as numpy.divmod, lazy."""
        o = maybe_operand(other)
        if o is None:
            return NotImplemented
        return op("floor_divide", [self, o]), op("remainder", [self, o])

    def __rdivmod__(self, other):
        """Reflected ``divmod(y, x)``: ``(y // x, y % x)``, as numpy.divmod, lazy."""
        o = maybe_operand(other)
        if o is None:
            return NotImplemented
        return op("floor_divide", [o, self]), op("remainder", [o, self])
    __iadd__ = _iop("add", "x += y")
    __isub__ = _iop("subtract", "x -= y")
    __imul__ = _iop("multiply", "x *= y")
    __itruediv__ = _iop("true_divide", "x /= y")
    __ifloordiv__ = _iop("floor_divide", "x //= y")
    __imod__ = _iop("remainder", "x %= y")
    __iand__ = _iop("bitwise_and", "x &= y")
    __ior__ = _iop("bitwise_or", "x |= y")
    __ixor__ = _iop("bitwise_xor", "x ^= y")
    __ilshift__ = _iop("left_shift", "x <<= y")
    __irshift__ = _iop("right_shift", "x >>= y")
    __neg__ = _unary("negative", "-x")
    __pos__ = _unary("positive", "+x")
    __abs__ = _unary("absolute", "abs(x)")
    __invert__ = _unary("invert", "~x")

    def __pow__(self, other, modulo=None):
        """``x ** y``: elementwise numpy.power, lazy; as NumPy's operator
        (its fast paths), ``x ** 2`` with a Python int is numpy.square (int8
        for bools), and ``x ** 0.5`` with a Python float numpy.sqrt for float
        arrays (float16 too)."""
        if modulo is not None:
            return NotImplemented
        if type(other) is int and other == 2:
            return op("square", [self])
        if type(other) is float and other == 0.5 and self.dtype.kind == "f":
            return op("sqrt", [self])
        o = maybe_operand(other)
        return NotImplemented if o is None else op("power", [self, o])

    def __rpow__(self, other, modulo=None):
        """Reflected ``x ** y``: elementwise numpy.power, lazy."""
        if modulo is not None:
            return NotImplemented
        o = maybe_operand(other)
        return NotImplemented if o is None else op("power", [o, self])

    def __ipow__(self, other, modulo=None):
        """``x **= y``: as ``x *= y`` for numpy.power."""
        if modulo is not None:
            return NotImplemented
        o = maybe_operand(other)
        return NotImplemented if o is None else _in_place(self, "power", other, op("power", [self, o]))

    def __imatmul__(self, other):
        """``x @= y``: as ``x *= y`` for numpy.matmul (the product must keep
        x's shape)."""
        o = maybe_operand(other)
        if o is None:
            return NotImplemented
        from ._functions import matmul

        return _in_place(self, "matmul", other, matmul(self, o))

    def __matmul__(self, other):
        """``x @ y``: :func:`memfit.array.matmul`, lazy."""
        o = maybe_operand(other)
        if o is None:
            return NotImplemented
        from ._functions import matmul

        return matmul(self, o)

    def __rmatmul__(self, other):
        """Reflected ``x @ y``: :func:`memfit.array.matmul`, lazy."""
        o = maybe_operand(other)
        if o is None:
            return NotImplemented
        from ._functions import matmul

        return matmul(o, self)

    # -- indexing ----------------------------------------------------------

    def __getitem__(self, key: Any) -> "Array":
        """Indexing as NumPy's, lazy: integers (negative from the end),
        slices with any step (negative included), ``None``/``np.newaxis`` and
        one ``...`` are views; one integer array or list (``x[idx]``,
        ``x[:, cols]``, any shape of indices, negative from the end) or one
        boolean array (``x[mask]``, ``x[:, keep]``; a mask of several axes
        merges them) selects along its axes, with the result's axes where
        NumPy puts them. An index that is itself a memfit array is computed
        first (its values decide the result's shape); the data are read
        only when the result is.

        Raises
        ------
        IndexError
            An integer or array element out of range, a boolean index of the
            wrong shape, too many indices or more than one ellipsis (NumPy's
            messages), or an index of another type.
        TypeError
            Several integer or boolean arrays in one index (NumPy broadcasts
            them together), which memfit.array does not support. A boolean
            scalar (``True``, ``np.array(False)``, a lazy 0-d mask) adds an
            axis of length 1 or 0, as NumPy's; beside an index array NumPy
            broadcasts it with the array, as a second one: refused.
        """
        return _getitem(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        """Refused: a lazy array is immutable.

        Raises
        ------
        TypeError
            Always (Python's words for an object without item assignment),
            with how to write the same result.
        """
        raise TypeError(
            "'Array' object does not support item assignment; hint: memfit arrays are lazy and immutable: build "
            "the new values with memfit.array.where(mask, value, x), or compute the array first"
        )

    # -- methods -----------------------------------------------------------

    def astype(self, dtype: Any, order: str = "K", casting: str = "unsafe", subok: bool = True, copy: bool = True) -> "Array":
        """The array cast to ``dtype`` (lazy), with NumPy's ``"unsafe"``
        casting semantics (float to int truncates towards zero, etc.).

        Parameters
        ----------
        dtype : dtype-like
            One of the 12 supported dtypes.
        casting : {"no", "equiv", "safe", "same_kind", "unsafe"}, default="unsafe"
            Checked with ``numpy.can_cast``; TypeError (NumPy's message) when
            the cast is not allowed.
        order, subok, copy
            Accepted for NumPy compatibility; a lazy array has no layout and is
            never modified in place.

        Returns
        -------
        Array
        """
        name = dtype_name(dtype)
        if casting != "unsafe" and not np.can_cast(self.dtype, np.dtype(name), casting):
            raise TypeError(
                f"Cannot cast array data from {self.dtype!r} to {np.dtype(name)!r} according to the rule {casting!r}"
            )
        if name == self.dtype.name:
            return self
        return op("astype", [self], dtype=name)

    def reshape(self, *shape: Any, order: str = "C", copy: Any = None) -> "Array":
        """:func:`memfit.array.reshape` (``x.reshape(2, -1)`` or
        ``x.reshape((2, -1))``)."""
        if len(shape) == 1 and not isinstance(shape[0], (numbers.Integral, np.integer)):
            shape = shape[0]
        from ._functions import reshape

        return reshape(self, shape, order=order)

    def ravel(self, order: str = "C") -> "Array":
        """The array flattened to 1-d in C order (lazy)."""
        return self.reshape(-1, order=order)

    def flatten(self, order: str = "C") -> "Array":
        """The array flattened to 1-d in C order (lazy)."""
        return self.reshape(-1, order=order)

    def transpose(self, *axes: Any) -> "Array":
        """:func:`memfit.array.transpose` (``x.transpose(1, 0, 2)`` or
        ``x.transpose((1, 0, 2))``; none: axes reversed)."""
        if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
            axes = axes[0]
        elif not axes:
            axes = None
        from ._functions import transpose

        return transpose(self, axes)

    def swapaxes(self, axis1: int, axis2: int) -> "Array":
        """:func:`memfit.array.swapaxes`."""
        from ._functions import swapaxes

        return swapaxes(self, axis1, axis2)

    def squeeze(self, axis: Any = None) -> "Array":
        """:func:`memfit.array.squeeze`."""
        from ._functions import squeeze

        return squeeze(self, axis)

    def nonzero(self) -> tuple:
        """:func:`memfit.array.nonzero`: the indices of the nonzero elements,
        as ``numpy.ndarray.nonzero`` (the array is computed).

        Returns
        -------
        tuple of numpy.ndarray (intp)
            One array per axis.
        """
        from ._functions import nonzero

        return nonzero(self)

    def repeat(self, repeats: int, axis: Any = None) -> "Array":
        """:func:`memfit.array.repeat`."""
        from ._functions import repeat

        return repeat(self, repeats, axis)

    def clip(self, min: Any = None, max: Any = None, out: Any = None, **kwargs: Any) -> "Array":
        """:func:`memfit.array.clip`."""
        from ._functions import clip

        return clip(self, min, max, out=out, **kwargs)

    def dot(self, b: Any, out: Any = None) -> "Array":
        """:func:`memfit.array.dot`."""
        from ._functions import dot

        return dot(self, b, out=out)

    def sum(self, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None) -> "Array":
        """:func:`memfit.array.sum`."""
        from ._functions import sum

        return sum(self, axis, dtype, out, keepdims, initial, where)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None) -> "Array":
        """:func:`memfit.array.prod`."""
        from ._functions import prod

        return prod(self, axis, dtype, out, keepdims, initial, where)

    def cumsum(self, axis=None, dtype=None, out=None) -> "Array":
        """:func:`memfit.array.cumsum`."""
        from ._functions import cumsum

        return cumsum(self, axis, dtype, out)

    def cumprod(self, axis=None, dtype=None, out=None) -> "Array":
        """:func:`memfit.array.cumprod`."""
        from ._functions import cumprod

        return cumprod(self, axis, dtype, out)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False, *, where=None) -> "Array":
        """:func:`memfit.array.mean`."""
        from ._functions import mean

        return mean(self, axis, dtype, out, keepdims, where=where)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None, correction=None) -> "Array":
        """:func:`memfit.array.var`."""
        from ._functions import var

        return var(self, axis, dtype, out, ddof, keepdims, where=where, mean=mean, correction=correction)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None, correction=None) -> "Array":
        """:func:`memfit.array.std`."""
        from ._functions import std

        return std(self, axis, dtype, out, ddof, keepdims, where=where, mean=mean, correction=correction)

    def min(self, axis=None, out=None, keepdims=False, initial=None, where=None) -> "Array":
        """:func:`memfit.array.min`."""
        from ._functions import min

        return min(self, axis, out, keepdims, initial, where)

    def max(self, axis=None, out=None, keepdims=False, initial=None, where=None) -> "Array":
        """:func:`memfit.array.max`."""
        from ._functions import max

        return max(self, axis, out, keepdims, initial, where)

    def argmin(self, axis=None, out=None, *, keepdims=False) -> "Array":
        """:func:`memfit.array.argmin`."""
        from ._functions import argmin

        return argmin(self, axis, out, keepdims=keepdims)

    def argmax(self, axis=None, out=None, *, keepdims=False) -> "Array":
        """:func:`memfit.array.argmax`."""
        from ._functions import argmax

        return argmax(self, axis, out, keepdims=keepdims)

    def any(self, axis=None, out=None, keepdims=False, *, where=None) -> "Array":
        """:func:`memfit.array.any`."""
        from ._functions import any

        return any(self, axis, out, keepdims, where=where)

    def all(self, axis=None, out=None, keepdims=False, *, where=None) -> "Array":
        """:func:`memfit.array.all`."""
        from ._functions import all

        return all(self, axis, out, keepdims, where=where)

    # -- NumPy dispatch ----------------------------------------------------

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy ufuncs on memfit arrays return lazy arrays (see
        :mod:`memfit.array`); unsupported ufuncs, methods and ``out=`` raise
        TypeError naming them."""
        from ._dispatch import array_ufunc

        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        """NumPy functions on memfit arrays return lazy arrays (see
        :mod:`memfit.array`); unsupported functions raise TypeError naming
        them."""
        from ._dispatch import array_function

        return array_function(func, types, args, kwargs)


# ---------------------------------------------------------------------------
# Indexing


def _advanced(k: Any) -> Optional[np.ndarray]:
    """An index that is an integer or boolean array (a list, an ndarray, a
    memfit array, computed here: its values decide the result's shape) as
    an ndarray; None for the other kinds of index."""
    if k is None or k is Ellipsis or isinstance(k, (slice, bool, np.bool_, numbers.Integral, np.integer, str)):
        return None
    if isinstance(k, (np.ndarray, Array)) and k.ndim == 0:
        return None
    if isinstance(k, (list, tuple, np.ndarray, Array)) or hasattr(k, "__array__"):
        a = k.compute() if isinstance(k, Array) else np.asarray(k)
        # An empty list is float64 to NumPy, yet an integer index; an empty
        # float array is not (NumPy's IndexError below).
        if a.dtype == object or (a.size == 0 and a.dtype.kind == "f" and not isinstance(k, (np.ndarray, Array))):
            try:
                a = a.astype(np.intp)
            except (TypeError, ValueError):
                # A list holding slices, None or other non-numbers.
                raise IndexError(
                    "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or boolean "
                    "arrays are valid indices"
                ) from None
        if a.dtype != bool and a.dtype.kind not in "iu":
            if not isinstance(k, (np.ndarray, Array)):
                raise IndexError(
                    "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or boolean "
                    "arrays are valid indices"
                )
            raise IndexError("arrays used as indices must be of integer (or boolean) type")
        return a
    return None


def _scalar_mask(k: Any) -> bool:
    """Whether ``k`` is a boolean scalar index (``True``, a 0-d mask)."""
    return isinstance(k, (bool, np.bool_)) or (isinstance(k, (np.ndarray, Array)) and k.ndim == 0 and k.dtype == bool)


def _getitem(x: Array, key: Any) -> Array:
    """Indexing as NumPy's: basic indices are views; one integer or boolean
    array (anywhere in the key; a boolean array covering its axes) selects
    along its axes, with the result's axes where NumPy puts them."""
    if not isinstance(key, tuple):
        key = (key,)
    fancy = [(i, a) for i, a in ((i, _advanced(k)) for i, k in enumerate(key)) if a is not None]
    # Beside an index array, NumPy takes a boolean scalar as one more (a 0-d
    # mask, broadcast with it), not as a new axis.
    scalar_masks = sum(1 for k in key if _scalar_mask(k))
    if len(fancy) + (scalar_masks if fancy else 0) > 1:
        raise TypeError(
            "memfit.array supports one integer or boolean array per index; indexing with several "
            f"(broadcast together) is not supported; {_UNSUPPORTED_HINT}"
        )
    if not fancy:
        return _basic(x, key)
    (at, index), = fancy
    after = sum(1 for k in key[at + 1:] if k is not None and k is not Ellipsis)
    if index.dtype == bool:
        # The axes it covers, merged, then the positions of its True values.
        m = index.ndim
        before = sum(1 for k in key[:at] if k is not None and k is not Ellipsis)
        if before + m + after > x.ndim:
            raise IndexError(
                f"too many indices for array: array is {x.ndim}-dimensional, but {before + m + after} were indexed"
            )
        if any(k is Ellipsis for k in key[:at]):
            before = x.ndim - m - after
        covered = x.shape[before:before + m]
        # An empty boolean index selects nothing whatever its shape (NumPy
        # turns it into empty integer indices).
        if index.size and tuple(index.shape) != tuple(covered):
            for j, (a, b) in enumerate(zip(index.shape, covered)):
                if a != b:
                    raise IndexError(
                        f"boolean index did not match indexed array along axis {before + j}; size of axis is {b} "
                        f"but size of corresponding boolean axis is {a}"
                    )
            raise IndexError(f"too many indices for array: array is {x.ndim}-dimensional, but {before + m} were indexed")
        if m != 1:
            x = op("reshape", [x], shape=[*x.shape[:before], int(np.prod(covered)), *x.shape[before + m:]])
        index = np.flatnonzero(index)
    else:
        # NumPy names the array's own axis of an index out of range.
        before = sum(1 for k in key[:at] if k is not None and k is not Ellipsis)
        if any(k is Ellipsis for k in key[:at]):
            before = x.ndim - 1 - after
        if before < x.ndim:
            n = x.shape[before]
            bad = (index < -n) | (index >= n)
            if bad.any():
                raise IndexError(f"index {index[bad].flat[0]} is out of bounds for axis {before} with size {n}")
    # Basic indexing with the advanced index replaced by a full slice; the
    # selected axis is where that slice ended up.
    y = _basic(x, key[:at] + (slice(None),) + key[at + 1:])
    lead = key[:at]
    e = next((i for i, k in enumerate(lead) if k is Ellipsis), None)
    if e is not None:
        consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
        lead = lead[:e] + (slice(None),) * (x.ndim - consumed) + lead[e + 1:]
    axis = sum(1 for k in lead if k is None or isinstance(k, slice))
    flat = index.reshape(-1)
    taken = op("take", [y], axis=axis, indices=np.ascontiguousarray(flat, dtype=np.int64))
    if index.ndim != 1:
        taken = op("reshape", [taken], shape=[*y.shape[:axis], *index.shape, *y.shape[axis + 1:]])
    # Integers are advanced indices too: when a slice, None or ... stands
    # between them and the array, NumPy puts the selected axes first.
    def is_int(k):
        return isinstance(k, (numbers.Integral, np.integer)) or (isinstance(k, (np.ndarray, Array)) and k.ndim == 0)

    expanded = key
    e = next((i for i, k in enumerate(key) if k is Ellipsis), None)
    if e is not None:
        consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
        expanded = key[:e] + (slice(None),) * (x.ndim - consumed) + key[e + 1:]
        if e < at:
            at = at + (x.ndim - consumed) - 1
    advanced = [i for i, k in enumerate(expanded) if i == at or is_int(k)]
    if axis > 0 and advanced[-1] - advanced[0] + 1 != len(advanced):
        d = index.ndim
        perm = [*range(axis, axis + d), *range(axis), *range(axis + d, taken.ndim)]
        taken = op("transpose", [taken], axes=perm)
    return taken


def _basic(x: Array, key: tuple) -> Array:
    shape = x.shape
    ndim = len(shape)
    kinds = []
    for k in key:
        if k is None:
            kinds.append("new")
        elif k is Ellipsis:
            kinds.append("ellipsis")
        elif isinstance(k, slice):
            kinds.append("slice")
        elif _scalar_mask(k):
            # NumPy's: a new axis, of length 1 (True) or 0 (False).
            kinds.append("true" if bool(k.compute() if isinstance(k, Array) else k) else "false")
        elif isinstance(k, (numbers.Integral, np.integer)) or (
            isinstance(k, (np.ndarray, Array)) and k.ndim == 0 and k.dtype.kind in "iu"
        ):
            i = int(k.compute() if isinstance(k, Array) else k)
            if 2**63 <= i < 2**64:
                # NumPy converts it to a C long (a uint64 too).
                raise OverflowError("Python int too large to convert to C long")
            if not -(2**63) <= i < 2**63:
                raise IndexError(
                    "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or boolean "
                    "arrays are valid indices"
                )
            kinds.append("int")
        elif isinstance(k, (np.ndarray, Array)) and k.ndim == 0:
            raise IndexError("arrays used as indices must be of integer (or boolean) type")
        else:
            raise IndexError(
                "only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and integer or boolean "
                "arrays are valid indices"
            )
    if kinds.count("ellipsis") > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(1 for k in kinds if k in ("int", "slice"))
    if consumed > ndim:
        raise IndexError(
            f"too many indices for array: array is {ndim}-dimensional, but {consumed} were indexed"
        )
    if "ellipsis" in kinds:
        i = kinds.index("ellipsis")
        fill = ndim - consumed
        key = key[:i] + (slice(None),) * fill + key[i + 1 :]
        kinds = kinds[:i] + ["slice"] * fill + kinds[i + 1 :]
    else:
        key = key + (slice(None),) * (ndim - consumed)
        kinds = kinds + ["slice"] * (ndim - consumed)
    items, squeeze_axes, new_axes, empty_axes = [], [], [], []
    axis = 0  # input axis
    out = 0  # position in the result
    for k, kind in zip(key, kinds):
        if kind in ("new", "true", "false"):
            new_axes.append(out)
            if kind == "false":
                empty_axes.append(out)
            out += 1
            continue
        n = shape[axis]
        if kind == "int":
            i = int(k)
            j = i + n if i < 0 else i
            if not 0 <= j < n:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
            items.append([j, j + 1, 1])
            squeeze_axes.append(axis)
        else:
            start, stop, step = k.indices(n)
            # A step beyond the axis takes at most its first element (and
            # fits the engine's 64-bit integers): NumPy's a[::2**70].
            if abs(step) > max(n, 1):
                step = max(n, 1) if step > 0 else -max(n, 1)
            items.append([start, stop, step])
            out += 1
        axis += 1
    result = x
    if any(it != [0, n, 1] for it, n in zip(items, shape)):
        result = op("slice", [result], items=items)
    if squeeze_axes:
        result = op("squeeze", [result], axes=squeeze_axes)
    if new_axes:
        result = op("expand_dims", [result], axes=new_axes)
    if empty_axes:
        result = op("slice", [result], items=[[0, 0 if a in empty_axes else n, 1] for a, n in enumerate(result.shape)])
    return result
