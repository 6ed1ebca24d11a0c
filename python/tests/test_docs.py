"""Docstring examples run, and the extension's stub lists exactly its functions."""

import ast
import doctest
from pathlib import Path

import pytest

import memfit
from memfit import _kernels, _kmeans, _memfit, _mixture, _validation


@pytest.mark.parametrize("module", [_kmeans, _mixture, _kernels, _validation])
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
