"""Shared fixtures for the Python package's tests."""

import numpy as np
import pytest


@pytest.fixture
def blobs():
    """2,000 × 3 float64 rows around 4 well-separated centres, and the centres."""
    rng = np.random.RandomState(7)
    centers = np.array([[0.0, 0.0, 0.0], [8.0, 0.0, 1.0], [0.0, 9.0, -2.0], [7.0, 8.0, 5.0]])
    labels = rng.randint(4, size=2000)
    return centers[labels] + rng.randn(2000, 3), centers
