"""Docstring examples run, and the extension's stub lists exactly its functions."""

import ast
import doctest
from pathlib import Path

import pytest

import memfit
import memfit.array
import memfit.array.random
from memfit import _kernels, _kmeans, _memfit, _mixture, _validation
from memfit.array import _core as _array_core


@pytest.mark.parametrize("module", [_kmeans, _mixture, _kernels, _validation, memfit.array, _array_core])
def test_docstring_examples(module):
    """Every >>> example in the package's docstrings gives the output shown."""
    result = doctest.testmod(module, raise_on_error=False)
    assert result.failed == 0


def test_stub_matches_extension():
    """_memfit.pyi declares each function and class the extension exports, and no other."""
    stub = Path(memfit.__file__).with_name("_memfit.pyi")
    tree = ast.parse(stub.read_text())
    declared = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    exported = {n for n in dir(_memfit) if not n.startswith("_") and callable(getattr(_memfit, n))}
    assert declared == exported


def test_public_api_is_documented():
    """Each public name has a numpydoc docstring with Parameters or Returns."""
    for name in memfit.__all__:
        obj = getattr(memfit, name)
        if name == "__version__":
            continue
        doc = obj.__doc__ or ""
        assert "Parameters" in doc or "Returns" in doc or name == "parse_size", name


def test_array_api_is_documented():
    """Each public function and class of memfit.array, and each public method
    of memfit.array.Array, has a numpydoc docstring with Parameters or
    Returns."""
    import inspect

    names = [(n, getattr(memfit.array, n)) for n in memfit.array.__all__]
    names += [(f"random.{n}", getattr(memfit.array.random, n)) for n in memfit.array.random.__all__]
    names += [(f"Array.{n}", m) for n, m in inspect.getmembers(memfit.array.Array) if not n.startswith("_") and callable(m)]
    for name, obj in names:
        if not callable(obj):
            continue
        doc = obj.__doc__ or ""
        assert "Parameters" in doc or "Returns" in doc, name
