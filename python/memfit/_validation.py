"""Input checks shared by the estimators and kernels.

Arrays are handed to the engine as they are whenever it can read them in
place (the dtypes of :data:`NATIVE_DTYPES`; C order,
Fortran order or any non-negative strides; read-only or writeable), so
fitting never copies X. Other inputs are converted once (documented per case
below). A ``str`` or ``os.PathLike`` is a ``.npy`` path that the engine reads
in row blocks with positioned reads into reused buffers (out of core). A
``numpy.memmap`` of a whole ``.npy`` file (``np.load(path, mmap_mode="r")``)
is read the same way, from its file, so its pages do not pile up in resident
memory; other memmaps are read in place like any array.
"""

from __future__ import annotations

import contextlib
import errno
import numbers
import os
import warnings
from dataclasses import dataclass, replace
from typing import Any, Optional, Union

import numpy as np

from . import _dask, _memfit, _options
from . import array as ma
from ._sparse import is_sparse, sparse_input

_NAN = "Input X contains NaN."


@contextlib.contextmanager
def sklearn_messages(estimator: Any):
    """Re-raises ``"Input X contains NaN."`` (the engine's, or the Python
    checks') with scikit-learn's sentences after it, naming the estimator
    (``sklearn.utils.validation._assert_all_finite``'s text), and memfit's
    detail (where the value is, a hint) on the next line.

    A context manager rather than a decorator: it adds no frame, so the
    ``stacklevel`` of warnings issued in its block is unchanged."""
    try:
        yield
    except ValueError as e:
        msg = str(e)
        if not (msg == _NAN or msg.startswith(_NAN + " ")):
            raise
        from sklearn.utils.validation import _assert_all_finite

        try:
            _assert_all_finite(np.array([np.nan]), estimator_name=type(estimator).__name__, input_name="X")
            text = _NAN
        except ValueError as sk:
            text = str(sk)
        detail = msg[len(_NAN) :].strip()
        raise ValueError(f"{text}\n{detail}" if detail else text) from None


#: What a fit records of X before it can fail.
_FEATURE_ATTRS = ("n_features_in_", "feature_names_in_")


@contextlib.contextmanager
def features_kept_on_failure(estimator: Any):
    """Restores ``n_features_in_`` and ``feature_names_in_`` when the
    block (a fit) raises: a refit refused for its data (NaN, a memory limit)
    leaves the previous fit usable, as scikit-learn's, which checks the data
    before recording them. A context manager: it adds no frame, so the
    ``stacklevel`` of warnings issued in its block is unchanged."""
    kept = {a: estimator.__dict__[a] for a in _FEATURE_ATTRS if a in estimator.__dict__}
    try:
        yield
    except BaseException:
        for a in _FEATURE_ATTRS:
            estimator.__dict__.pop(a, None)
        estimator.__dict__.update(kept)
        raise


#: Dtypes the engine reads in place (``memfit._memfit.ROW_DTYPES``).
NATIVE_DTYPES = frozenset(np.dtype(t) for t in _memfit.ROW_DTYPES)
#: Integer and bool dtypes (by their byte-order-free ``dtype.str``) as the
#: narrowest dtype the engine reads in place that holds their values
#: exactly (a dtype it reads, in another byte order: its own); other
#: dtypes become float64.
_NARROW = {"b1": np.uint8, "i1": np.int16, "u1": np.uint8, "u2": np.int32, "i2": np.int16, "i4": np.int32,
           "u4": np.uint32, "i8": np.int64, "u8": np.uint64}


@dataclass
class Data:
    """An input ready for the engine.

    Attributes
    ----------
    engine : str, numpy.ndarray, scipy.sparse CSR matrix or memfit._memfit.Expr
        What the engine reads: a ``.npy`` path, a 2-D array of a dtype in
        ``NATIVE_DTYPES`` with non-negative strides, aligned and native-endian,
        a canonical CSR matrix of float32 or float64 (see
        :func:`sparse_input`), a 2-D array expression whose rows it
        computes block by block, or a Dask array's reader
        (:class:`memfit._dask.Rows`, :class:`memfit._dask.SparseRows`).
    n_samples, n_features : int
        Shape of the data.
    dtype : numpy.dtype
        The stored dtype.
    float32 : bool
        Whether the engine computes in float32 (float32 input) rather than
        float64 (every other dtype, as scikit-learn converts them).
    keep : object, optional
        Kept alive with the data: the :class:`memfit.array.Array` behind an
        expression.
    """

    engine: Union[str, np.ndarray]
    n_samples: int
    n_features: int
    dtype: np.dtype
    float32: bool
    #: What must live as long as ``engine`` (a temporary file's owner).
    keep: Any = None
    #: A Dask input (``memfit._dask.DaskData``): ``engine`` reads its chunks.
    dask: Any = None

    @property
    def out_dtype(self) -> np.dtype:
        """float32 for float32 input, else float64 (scikit-learn's rule)."""
        return np.dtype(np.float32 if self.float32 else np.float64)

    def rows(self) -> Any:
        """The data as an array without reading it (a read-only memory map
        for a ``.npy`` path, the Dask array with whole rows for a Dask
        input, a read-only view of an array: the caller's data are not
        changed through it)."""
        if self.dask is not None:
            return self.dask.input
        if isinstance(self.engine, str):
            return np.load(self.engine, mmap_mode="r")
        rows = np.asarray(self.keep) if isinstance(self.engine, _memfit.Expr) else self.engine
        if isinstance(rows, np.ndarray):
            rows = rows.view()
            rows.flags.writeable = False
        return rows



def _too_few(shape: tuple, n_samples: int, n_features: int, min_samples: int, estimator: Any) -> None:
    """scikit-learn's ``check_array`` errors for too few rows or columns."""
    context = f" by {type(estimator).__name__}" if estimator is not None else ""
    if n_samples < min_samples:
        raise ValueError(
            f"Found array with {n_samples} sample(s) (shape={shape}) while a minimum of {min_samples} "
            f"is required{context}."
        )
    if n_features < 1:
        raise ValueError(
            f"Found array with {n_features} feature(s) (shape={shape}) while a minimum of 1 is required{context}."
        )


def _not_finite(a: np.ndarray, input_name: str, dtype: np.dtype, label: str) -> str:
    """scikit-learn's sentence for an array ``input_name`` with NaN or
    infinity (``_assert_all_finite``; ``dtype`` is the one it names), then
    where the first value of the kind it names is in ``label`` (the first
    NaN when it says NaN, as :func:`check_finite` names them in X)."""
    nan = np.isnan(a)
    is_nan = bool(nan.any())
    where = np.argwhere(nan if is_nan else ~np.isfinite(a))[0]
    padded = f"{input_name} " if input_name else ""
    what = "NaN" if is_nan else f"infinity or a value too large for {dtype!r}"
    index = ", ".join(str(int(i)) for i in where)
    return f"Input {padded}contains {what}. memfit: {label}[{index}] = {a[tuple(where)]}"


def _too_many_dims(ndim: int, name: str, shape: tuple, estimator: Any) -> ValueError:
    """scikit-learn's ``check_array`` error for more than 2 dimensions,
    naming the estimator as it does (else the array's name and shape)."""
    by = f" by {type(estimator).__name__}" if estimator is not None else f" ({name} has shape {shape})"
    return ValueError(f"Found array with dim {ndim}, while dim <= 2 is required{by}.")


def _printed(a: Any, as_float: bool = False) -> Optional[str]:
    """``a`` as scikit-learn's ``check_array`` prints it in its messages
    (converted to float64 unless float32 or float64 when ``as_float``); a
    Dask array only when NumPy prints it whole (1,000 values or fewer),
    else None: its values are not computed for a message."""
    if _dask.is_dask_array(a):
        if not (a.size <= 1000):  # unknown sizes are NaN
            return None
        a = a.compute()
    a = np.asarray(a)
    if as_float and a.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        try:
            a = a.astype(np.float64)
        except (TypeError, ValueError):
            pass
    return str(a)


def _not_2d(a: Any, name: str) -> ValueError:
    """scikit-learn's error for a 0-d or 1-d X, with the array printed
    (its shape instead for a large Dask array)."""
    got = "scalar" if a.ndim == 0 else f"{a.ndim}D"
    printed = _printed(a, as_float=True)
    what = f"({name} has shape {a.shape})." if printed is None else f":\narray={printed}.\n"
    return ValueError(
        f"Expected 2D array, got {got} array instead{' ' + what if printed is None else what}"
        f"{' ' if printed is None else ''}Reshape your data either using array.reshape(-1, 1) if your data has a "
        "single feature or array.reshape(1, -1) if it contains a single sample."
    )


def _complex(a: Any, name: str) -> ValueError:
    """scikit-learn's error for complex data, with the array printed (its
    dtype instead for a large Dask array)."""
    printed = _printed(a)
    if printed is None:
        return ValueError(f"Complex data not supported: {name} has dtype {a.dtype}")
    return ValueError(f"Complex data not supported\n{printed}\n")


def refuse_strings(X: Any) -> None:
    """scikit-learn's ``check_array`` refusal of strings under its default
    ``dtype="numeric"`` (GaussianMixture's methods on new X; its ``fit``
    converts them to float64). A path names a ``.npy`` file, not data."""
    if isinstance(X, (str, bytes, os.PathLike)):
        return
    dtype = getattr(X, "dtype", None)
    if dtype is None and isinstance(X, (list, tuple)):
        dtype = np.asarray(X).dtype
    if getattr(dtype, "kind", None) in ("U", "S", "V"):
        raise ValueError(
            "dtype='numeric' is not compatible with arrays of bytes/strings."
            "Convert your data to numeric values explicitly instead."
        )


def engine_array(X: Any, *, name: str = "X", estimator: Any = None) -> np.ndarray:
    """``X`` as a 2-D array the engine reads in place, copying only when it
    cannot: bool, int8 and uint16 become the narrowest dtype it reads that
    holds them (uint8, int16, int32: ``_NARROW``), object and other dtypes
    float64; non-native byte order, unaligned data and negative strides are
    copied.

    Raises
    ------
    TypeError
        For sparse matrices and ``np.matrix`` (scikit-learn's message).
    ValueError
        For complex data, strings, or another number of dimensions than 2.
    """
    if isinstance(X, np.matrix):
        raise TypeError(
            "np.matrix is not supported. Please convert to a numpy array with np.asarray. For more information "
            "see: https://numpy.org/doc/stable/reference/generated/numpy.matrix.html"
        )
    if is_sparse(X):
        raise TypeError(
            f"Sparse data was passed for {name}, but dense data is required. Use '.toarray()' to convert to a "
            f"dense numpy array. memfit: {name} is {type(X).__name__}; a dense array can also be saved to a .npy "
            "file and passed as a path"
        )
    arr = np.asarray(X)
    if arr.dtype == object and hasattr(X, "to_numpy"):
        # scikit-learn's check_array takes a frame's common dtype first:
        # datetimes or timedeltas beside numbers have none (NumPy's
        # DTypePromotionError), where float64 would make them numbers.
        columns = getattr(X, "dtypes", None)
        if columns is not None and not isinstance(columns, np.dtype):
            np.result_type(*[d for d in columns if isinstance(d, np.dtype)] or [np.float64])
        # pandas with nullable (Int64, Float64) or object columns: missing
        # values become NaN, which the engine reports as such.
        try:
            arr = X.to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError):
            pass
    if np.iscomplexobj(arr):
        raise _complex(arr, name)
    if arr.ndim != 2:
        if arr.ndim > 2:
            raise _too_many_dims(arr.ndim, name, arr.shape, estimator)
        if arr.ndim == 1 and hasattr(X, "iloc") and hasattr(X, "dtype"):
            # A pandas Series: scikit-learn's check_array words it so.
            raise ValueError(
                f"Expected a 2-dimensional container but got {type(X)} instead. Pass a DataFrame containing a "
                "single row (i.e. single sample) or a single column (i.e. single feature) instead."
            )
        raise _not_2d(arr, name)
    if arr.dtype not in NATIVE_DTYPES or not arr.dtype.isnative:
        if arr.dtype.kind in "OUSV":
            try:
                arr = arr.astype(np.float64)
            except (TypeError, ValueError) as e:
                raise type(e)(f"{e}; hint: {name} must be numeric (memfit could not convert {arr.dtype} to float64)") from e
        elif arr.dtype.kind == "f" and arr.dtype.itemsize in (2, 4, 8):
            arr = arr.astype(arr.dtype.newbyteorder("="))
        else:
            # A bool, int8 or uint16 array was copied to float64: 8× or 4× it.
            arr = arr.astype(_NARROW.get(arr.dtype.str[1:], np.float64))
    item = arr.dtype.itemsize
    # The stride of an axis of length 1 is never used (NumPy calls such a
    # view contiguous whatever it says), so only the others must be
    # non-negative multiples of the item size.
    if not arr.flags.aligned or any(s < 0 or s % item for n, s in zip(arr.shape, arr.strides) if n > 1):
        arr = np.array(arr, order="C", copy=True)
    return arr


def npy_behind(X: Any, ndim: Optional[int] = 2) -> Optional[str]:
    """The ``.npy`` file that the ``numpy.memmap`` ``X`` maps whole (same
    shape, dtype, order and data offset; not copy-on-write; ``ndim``
    dimensions unless None), else None."""
    filename = getattr(X, "filename", None)
    if not isinstance(X, np.memmap) or not isinstance(filename, (str, os.PathLike)) or X.mode == "c":
        return None
    if ndim is not None and X.ndim != ndim:
        return None
    filename = os.fspath(filename)
    try:
        shape, dtype, fortran, offset = _memfit.npy_info(filename)
    except (OSError, ValueError):
        return None
    contiguous = X.flags.f_contiguous if fortran else X.flags.c_contiguous
    if tuple(shape) == X.shape and np.dtype(dtype) == X.dtype and contiguous and X.offset == offset:
        return filename
    return None


def _check_features(estimator: Any, d: int, reset: bool) -> None:
    """Records (``reset``) or checks ``n_features_in_`` for data without
    feature names (a path, an expression or a Dask array), as scikit-learn
    does: with its warning when the fit had feature names."""
    if estimator is None:
        return
    if reset:
        estimator.n_features_in_ = d
        if hasattr(estimator, "feature_names_in_"):
            del estimator.feature_names_in_
        return
    if hasattr(estimator, "feature_names_in_"):
        warnings.warn(
            f"X does not have valid feature names, but {type(estimator).__name__} was fitted with feature names"
        )
    if d != estimator.n_features_in_:
        raise ValueError(
            f"X has {d} features, but {type(estimator).__name__} is expecting "
            f"{estimator.n_features_in_} features as input."
        )


def _is_lazy_array(X: Any) -> bool:
    return type(X).__module__ == "memfit.array._core" and type(X).__name__ == "Array"


def lazy_array_input(X: Any, name: str = "X") -> Any:
    """A 2-D :class:`memfit.array.Array` as the estimators read it: the
    engine computes its rows block by block as it reads them (like a
    ``.npy`` file), never the whole array; reductions inside it (a column
    mean, say) run once, before the first block."""
    if X.ndim != 2:
        raise ValueError(
            f"Expected 2D array, got {X.ndim}D array instead ({name} has shape {X.shape}); "
            "reshape the memfit array to (n_samples, n_features)"
        )
    return X._expr


def on_cluster(X: Any, client: Any) -> Any:
    """``X`` as a fit on ``client`` (or the active Dask client) reads it: a
    2-D :class:`memfit.array.Array` becomes a Dask array whose chunks the
    workers compute (see :func:`memfit._dask.from_expression`); anything
    else is returned as is (NumPy arrays and paths are fitted in this
    process). A ``client`` that is not a running ``distributed.Client``
    raises TypeError or RuntimeError whatever ``X`` is."""
    on = _options.resolve_client(client)
    if _is_lazy_array(X) and X.ndim == 2 and on is not None:
        return _dask.from_expression(X)
    return X


def check_data(
    X: Any,
    estimator: Any = None,
    *,
    reset: bool = False,
    name: str = "X",
    min_samples: int = 1,
    accept_sparse: bool = False,
) -> Data:
    """:func:`_check_data`; a :class:`memfit._dask.Piece` (a Dask chunk in a
    task) is checked as its array and read by the engine with its rows
    numbered as in the whole array. With ``accept_sparse``, a
    ``scipy.sparse`` matrix or array is read as CSR (see
    :func:`sparse_input`), and a Dask array of scipy.sparse chunks through
    :class:`memfit._dask.SparseRows` (every chunk computed once, then read
    chunk by chunk); otherwise both raise TypeError (scikit-learn's for a
    matrix)."""
    if not accept_sparse and _dask.is_dask_array(X) and is_sparse(getattr(X, "_meta", None)):
        _dask.refuse_sparse_chunks(type(X._meta).__name__, name, accept_sparse)
    if isinstance(X, _dask.Piece):
        data = check_data(X.array, estimator, reset=reset, name=name, min_samples=min_samples, accept_sparse=accept_sparse)
        return replace(data, engine=_dask.Piece(data.engine, X.first_row))
    if accept_sparse and is_sparse(X):
        csr = sparse_input(X, name, warn=True)
        if estimator is not None:
            from sklearn.utils.validation import validate_data

            validate_data(estimator, X, reset=reset, skip_check_array=True)
        n, d = csr.shape
        _too_few(csr.shape, n, d, min_samples, estimator)
        return Data(csr, n, d, csr.dtype, csr.dtype == np.float32)
    return _check_data(X, estimator, reset=reset, name=name, min_samples=min_samples)


def _check_data(X: Any, estimator: Any = None, *, reset: bool, name: str, min_samples: int) -> Data:
    """Checks ``X`` (array-like, ``numpy.memmap``, ``.npy`` path or 2-D
    :class:`memfit.array.Array`, see :func:`lazy_array_input`), that it
    has at least ``min_samples`` rows and, with an estimator, its feature
    count (``reset=True`` records ``n_features_in_`` and
    ``feature_names_in_`` as scikit-learn does).

    Raises
    ------
    ValueError
        Wrong dimensions, empty data, complex or non-numeric values, a
        feature count that differs from the fit's; for a path, a file that is
        not a ``.npy`` of a supported dtype.
    OSError
        A path that cannot be opened.
    TypeError
        Sparse input.
    """
    keep = None
    if _dask.is_dask_array(X):
        if X.ndim > 2:
            raise _too_many_dims(X.ndim, name, X.shape, estimator)
        if X.ndim != 2:
            raise _not_2d(X, name)
        X = _dask.known_chunk_sizes(X)
        if np.issubdtype(X.dtype, np.complexfloating):
            raise _complex(X, name)
        if is_sparse(getattr(X, "_meta", None)):
            # As sparse_input converts a matrix: other dtypes to float64.
            if np.dtype(X.dtype) not in (np.dtype(np.float32), np.dtype(np.float64)):
                X = X.astype(np.float64)
        elif np.dtype(X.dtype) not in NATIVE_DTYPES:
            if X.dtype.kind not in "biufOUS":
                raise ValueError(f"dtype {X.dtype} is not numeric; hint: {name} must be numeric")
            # As a NumPy X is converted (object and string chunks too,
            # lazily: a value that is not a number fails when read).
            X = X.astype(np.float64)
        n, d = (int(s) for s in X.shape)
        _too_few(tuple(X.shape), n, d, min_samples, estimator)
        _check_features(estimator, d, reset)
        dd = _dask.DaskData(X)
        return Data(dd.reader, n, d, np.dtype(X.dtype), X.dtype == np.float32, dask=dd)
    if _is_lazy_array(X):
        expr = lazy_array_input(X, name)
        n, d = X.shape
        _too_few(tuple(X.shape), n, d, min_samples, estimator)
        _check_features(estimator, d, reset)
        return Data(expr, n, d, X.dtype, X.dtype == np.float32, X)
    X = npy_behind(X) or X
    if isinstance(X, (str, bytes, os.PathLike)):
        path = os.fsdecode(os.fspath(X))
        if os.path.isdir(path):
            raise IsADirectoryError(errno.EISDIR, "is a directory, not a .npy file", path)
        shape, dtype_name, _, _ = _memfit.npy_info(path)
        if len(shape) != 2:
            hint = "X.reshape(-1, 1) for a single feature" if len(shape) == 1 else "X.reshape(n_samples, -1)"
            raise ValueError(
                f"{path}: expected a 2-D array of shape (n_samples, n_features), found shape {tuple(shape)}; "
                f"hint: save {hint}"
            )
        n, d = shape
        _too_few(tuple(shape), n, d, min_samples, estimator)
        _check_features(estimator, d, reset)
        dtype = np.dtype(dtype_name)
        return Data(path, n, d, dtype, dtype == np.float32, keep)
    arr = engine_array(X, name=name, estimator=estimator)
    n, d = arr.shape
    # scikit-learn's check_array counts the samples before the features are
    # compared with the fit's.
    _too_few(arr.shape, n, d, min_samples, estimator)
    if estimator is not None:
        from sklearn.utils.validation import validate_data

        # Feature names and n_features_in_ exactly as scikit-learn records
        # and checks them (from X itself, which may be a DataFrame).
        validate_data(estimator, X, reset=reset, skip_check_array=True)
    # scikit-learn computes in float32 for native float32 only (a
    # big-endian array is converted to float64), as for a file.
    native = not (isinstance(X, np.ndarray) and not X.dtype.isnative)
    return Data(arr, n, d, arr.dtype, arr.dtype == np.float32 and native)


def check_sample_weight(
    sample_weight: Any, data: Data, name: str = "sample_weight", all_zero: bool = False
) -> Union[None, str, np.ndarray]:
    """``sample_weight`` as the engine reads it: ``None``, a ``.npy`` path, or
    an ``(n_samples, 1)`` view (a scalar becomes a constant array; integer
    and other dtypes are converted to float64, a copy of n_samples values).
    Checked as scikit-learn's ``_check_sample_weight`` checks them, with its
    messages: 1-D of length n_samples, finite, not all zero (ValueError);
    negative weights are refused by the estimators' engine (ValueError);
    ``name`` is the parameter named in errors; ``all_zero`` accepts weights
    that are all zero (a weighted scatter's are: its result is then zero)."""
    if sample_weight is None:
        return None
    if is_sparse(sample_weight):
        # scikit-learn's check_array(accept_sparse=False) words.
        raise TypeError(
            f"Sparse data was passed for {name}, but dense data is required. Use '.toarray()' to convert to a "
            "dense numpy array."
        )
    if data.dask is not None:
        if not _dask.is_dask_array(sample_weight):
            # In memory (or a .npy file): checked as for a NumPy X, then
            # read chunk by chunk with X's row chunks.
            if isinstance(sample_weight, (str, bytes, os.PathLike)):
                sample_weight = np.load(os.fsdecode(os.fspath(sample_weight)), mmap_mode="r")
            w = check_sample_weight(sample_weight, replace(data, dask=None), name, all_zero)
            return _dask.Rows(data.dask.weights(w.reshape(-1)).reshape(-1, 1))
        if np.issubdtype(sample_weight.dtype, np.complexfloating):
            raise _complex(sample_weight, name)
        if sample_weight.ndim != 1:
            raise ValueError(
                f"Sample weights must be 1D array or scalar, got {sample_weight.ndim}D array. Expected either a "
                f"scalar value or a 1D array of length {data.n_samples}."
            )
        sample_weight = _dask.known_chunk_sizes(sample_weight)
        if tuple(sample_weight.shape) != (data.n_samples,):
            raise ValueError(f"{name}.shape == {tuple(sample_weight.shape)}, expected ({data.n_samples},)!")
        w = data.dask.weights(sample_weight)
        # The engine reads the weights chunk by chunk as it reads X; it
        # refuses negative and non-finite ones, naming the row.
        return _dask.Rows(w.reshape(-1, 1))
    if isinstance(sample_weight, (str, bytes, os.PathLike)):
        path = os.fsdecode(os.fspath(sample_weight))
        shape, _, _, _ = _memfit.npy_info(path)
        if tuple(shape) != (data.n_samples,):
            raise ValueError(f"{name}.shape == {tuple(shape)}, expected ({data.n_samples},)!")
        return path
    # A bool is a number to scikit-learn too (True: weights of one).
    if isinstance(sample_weight, numbers.Number) and not isinstance(sample_weight, complex):
        sample_weight = np.full(data.n_samples, float(sample_weight))
    w = np.asarray(sample_weight)
    if np.iscomplexobj(w):
        raise _complex(w, name)
    if w.ndim != 1:
        raise ValueError(
            f"Sample weights must be 1D array or scalar, got {w.ndim}D array. Expected either a scalar value "
            f"or a 1D array of length {data.n_samples}."
        )
    if w.shape[0] != data.n_samples:
        raise ValueError(f"{name}.shape == {w.shape}, expected ({data.n_samples},)!")
    if w.dtype not in (np.dtype(np.float64), np.dtype(np.float32)):
        w = w.astype(np.float64)
    check_weight_values(w, data, name, all_zero)
    return engine_array(w.reshape(-1, 1), name=name)


def check_weight_values(w: np.ndarray, data: Data, name: str = "sample_weight", all_zero: bool = False) -> None:
    """The checks of :func:`check_sample_weight` on the values of weights
    held in memory (a 1-D float array for ``data``), with scikit-learn's
    ``_check_sample_weight`` messages: finite (the first NaN or infinity
    named), not all zero unless ``all_zero``. Negative weights are left to
    the engine, which names the row."""
    if not np.isfinite(w).all():
        raise ValueError(f"{_not_finite(w, name, data.out_dtype, name)}; hint: weights must be finite")
    if not all_zero and not w.any():
        raise ValueError("Sample weights must contain at least one non-zero number.")


def c_float64(a: Any) -> np.ndarray:
    """``a`` as a C-contiguous, aligned float64 array, copied only when it is
    not one (arrays unpickled on a Dask worker can be misaligned)."""
    return np.require(a, dtype=np.float64, requirements=["C", "A"])


def small_array(a: Any, name: str, ndim: Optional[int] = None, allow_nd: bool = True,
                estimator: bool = True) -> np.ndarray:
    """A parameter array (centres, Q, initial parameters) as C-ordered
    float64 (with ``ndim`` dimensions when given; at most 2 unless
    ``allow_nd``), refusing complex and non-finite values with
    scikit-learn's ``check_array`` sentences (whole, as an estimator's
    ``check_array`` words them, with the array printed; else naming
    ``name``)."""
    arr = np.asarray(a)
    if np.iscomplexobj(arr):
        raise _complex(arr, name) if estimator else ValueError(
            f"Complex data not supported: {name} has dtype {arr.dtype}")
    dtype = arr.dtype if arr.dtype in (np.dtype(np.float32), np.dtype(np.float64)) else np.dtype(np.float64)
    try:
        arr = c_float64(arr)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{e}; hint: {name} must be numeric") from e
    if estimator and ndim == 2 and arr.ndim < 2:
        raise _not_2d(arr, name)
    if estimator and (not allow_nd or ndim == 2) and arr.ndim >= 3:
        raise ValueError(f"Found array with dim {arr.ndim}, while dim <= 2 is required.")
    if ndim is not None and arr.ndim != ndim:
        raise ValueError(f"Expected {ndim}D array, got {arr.ndim}D array instead: {name} has shape {arr.shape}")
    if estimator and arr.ndim >= 1 and arr.shape[0] == 0:
        raise ValueError(f"Found array with 0 sample(s) (shape={arr.shape}) while a minimum of 1 is required.")
    if estimator and arr.ndim == 2 and arr.shape[1] == 0:
        raise ValueError(f"Found array with 0 feature(s) (shape={arr.shape}) while a minimum of 1 is required.")
    if not np.isfinite(arr).all():
        raise ValueError(_not_finite(arr, "", dtype, name))
    return arr


def seed_from(random_state: Any) -> int:
    """A 64-bit engine seed: an ``int`` is used as is (same int, same
    result); ``None`` or a ``RandomState`` draws one (as scikit-learn draws
    from them)."""
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return int(random_state)
    from sklearn.utils import check_random_state

    rng = check_random_state(random_state)
    return int(rng.randint(np.iinfo(np.int32).max))


def emit_warnings(engine_warnings: list, skip: tuple = (), stacklevel: int = 3) -> None:
    """Engine warnings, ``(kind, category, message)`` tuples, as Python
    warnings of their category's class (``ConvergenceWarning`` for a fit
    that stopped at max_iter or found fewer clusters, else
    ``UserWarning``), except the kinds in ``skip`` (those the estimators
    issue themselves in scikit-learn's words)."""
    from sklearn.exceptions import ConvergenceWarning

    classes = {"convergence": ConvergenceWarning, "user": UserWarning}
    for kind, category, message in engine_warnings:
        if kind not in skip:
            warnings.warn(message, classes[category], stacklevel=stacklevel)


def _lazy_rows(data):
    """X as a :class:`memfit.array.Array` read block by block (a path with
    positioned reads, never mapped; a Dask task's chunk alone)."""
    if isinstance(data.engine, _dask.Piece):
        return ma.asarray(data.engine.array)
    if isinstance(data.engine, str):
        return ma.from_npy(data.engine)
    if isinstance(data.engine, _memfit.Expr):
        return data.keep
    return ma.asarray(data.engine)


def sparse_chunks(data):
    """Whether X is a Dask array of scipy.sparse chunks."""
    return data.dask is not None and data.dask.sparse


def check_finite(data):
    """scikit-learn's ``check_array`` finiteness check, X read in blocks
    (sparse chunks: with the statistics the plan asks for, computed once)."""
    dense_dask = False
    # A Dask task's chunk (a Piece) is checked as the array it holds.
    engine = data.engine.array if isinstance(data.engine, _dask.Piece) else data.engine
    if is_sparse(engine):
        values = engine.data
        finite, nan = np.isfinite(values).all(), lambda: np.isnan(values).any()
    elif sparse_chunks(data):
        finite, nan = data.engine.nonfinite == 0, lambda: data.engine.nonfinite == 2
    else:
        if data.dask is not None:
            import dask.array as da

            x, lib, dense_dask = data.dask.checked, da, True
        else:
            x, lib = _lazy_rows(data), ma
        finite, nan = bool(lib.isfinite(x).all().compute()), lambda: bool(lib.isnan(x).any().compute())
    if not finite:
        is_nan = nan()
        where = ""
        if dense_dask:
            # The first such value's row and column in the whole array,
            # as the engine names them for the inputs it reads.
            bad = lib.isnan(x) if is_nan else ~lib.isfinite(x)
            row = int(lib.argmax(bad.any(axis=1)).compute())
            column = int(np.argmax(np.asarray(bad[row].compute())))
            value = np.asarray(x[row, column].compute()).item()
            shown = "NaN" if is_nan else "inf" if value > 0 else "-inf"
            where = f" X: row {row}, column {column} is {shown} (not finite)"
        if is_nan:
            raise ValueError(f"Input X contains NaN.{where}")
        raise ValueError(f"Input X contains infinity or a value too large for dtype('{data.out_dtype}').{where}")

@contextlib.contextmanager
def finite_or_checked(estimator, data):
    """On a ValueError (rows are checked as they are read), X is checked
    whole: a non-finite X raises scikit-learn's message for it (the
    row's error, naming the value, where it says the same), and any
    other error is raised as it was."""
    with sklearn_messages(estimator):
        try:
            yield
        except ValueError as error:
            try:
                check_finite(data)
            except ValueError as whole:
                if str(error).startswith(str(whole)):
                    raise error from None
                raise whole from None
            raise


def checked(estimator, data, engine_call):
    """``engine_call`` whose errors are those of :func:`finite_or_checked`
    (X checked whole on a ValueError, for scikit-learn's message)."""

    def call(*args, **kwargs):
        with finite_or_checked(estimator, data):
            return engine_call(*args, **kwargs)

    return call
