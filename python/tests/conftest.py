"""Shared fixtures for the Python package's tests.

Real data sets are read from <repo>/../shared/datasets; a test that needs one
skips with a clear message when it is absent, or fails when the environment
variable MEMFIT_REQUIRE_DATASETS is set (as .ci/run does where the folder
exists), so that CI never passes by skipping them.
"""

import os
from pathlib import Path

import numpy as np
import pytest

DATASETS = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"


def dataset_path(name):
    """The path of shared data set `name`; skips the test when it is absent, or
    fails it when MEMFIT_REQUIRE_DATASETS is set."""
    path = DATASETS / name
    if not path.is_file():
        missing = f"shared data set {name} not found in {DATASETS}"
        if os.environ.get("MEMFIT_REQUIRE_DATASETS", "") not in ("", "0"):
            pytest.fail(f"{missing}, but MEMFIT_REQUIRE_DATASETS is set (CI expects the shared data "
                        "sets): restore the file, or unset the variable to skip", pytrace=False)
        pytest.skip(missing)
    return path


@pytest.fixture
def dataset():
    """Loader: dataset(name, rows=None) -> the .npy's path, or its first `rows`
    rows as a read-only memory map when rows is given."""
    def load(name, rows=None):
        path = dataset_path(name)
        return path if rows is None else np.load(path, mmap_mode="r")[:rows]
    return load


@pytest.fixture
def blobs():
    """2,000 × 3 float64 rows around 4 well-separated centres, and the centres."""
    rng = np.random.RandomState(7)
    centers = np.array([[0.0, 0.0, 0.0], [8.0, 0.0, 1.0], [0.0, 9.0, -2.0], [7.0, 8.0, 5.0]])
    labels = rng.randint(4, size=2000)
    return centers[labels] + rng.randn(2000, 3), centers
