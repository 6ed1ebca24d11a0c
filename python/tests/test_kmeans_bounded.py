"""Bounded k-means (issue 24): ``algorithm="bounded"`` (and ``"elkan"``,
``"auto"``) gives plain Lloyd's labels, centres, inertia and n_iter_ bit for
bit, on blobs, integer grids with exact ties, duplicated rows far from the
origin, float32 and float64, weighted or not, at two memory limits and
thread counts; and reports the share of distances it skipped."""

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from memfit import KMeans


def _datasets():
    blobs, _ = make_blobs(n_samples=20_000, centers=15, n_features=6, random_state=3)
    grid = np.array([(i % 9, (i // 9) % 4) for i in range(12_000)], dtype=np.float64)
    rng = np.random.default_rng(5)
    far = np.repeat(rng.normal(size=(40, 12)) + 1e6, 300, axis=0)
    return {"blobs": blobs, "grid": grid, "far_duplicates": far}


DATA = _datasets()


@pytest.mark.parametrize("name", sorted(DATA))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("k", [2, 25])
def test_every_algorithm_gives_lloyds_bits(name, dtype, weighted, k):
    X = DATA[name].astype(dtype)
    w = (np.arange(len(X)) % 4 + 0.5) if weighted else None
    init = X[:: len(X) // k][:k].copy()
    fits = {}
    for algorithm, limit, n_jobs in [("lloyd", "1GiB", 1), ("bounded", "1GiB", 2), ("elkan", "8MiB", 1), ("auto", "1GiB", 2)]:
        km = KMeans(n_clusters=k, init=init, n_init=1, max_iter=40, tol=0, algorithm=algorithm,
                    memory_limit=limit, n_jobs=n_jobs)
        fits[algorithm] = km.fit(X, sample_weight=w)
    lloyd = fits.pop("lloyd")
    assert np.all(lloyd.skip_share_ == 0) and lloyd.skip_share_.shape == (lloyd.n_iter_,)
    for algorithm, km in fits.items():
        assert km.n_iter_ == lloyd.n_iter_, algorithm
        np.testing.assert_array_equal(km.labels_, lloyd.labels_)
        np.testing.assert_array_equal(km.cluster_centers_, lloyd.cluster_centers_)
        assert km.inertia_ == lloyd.inertia_, algorithm
        assert km.skip_share_.shape == (km.n_iter_,)
    if lloyd.n_iter_ > 4:
        assert fits["bounded"].skip_share_[2:].max() > 0.3, fits["bounded"].skip_share_


def test_bounded_plan_and_verbose_report_the_bounds(capsys):
    X = DATA["blobs"]
    km = KMeans(n_clusters=15, n_init=1, random_state=0, algorithm="bounded", verbose=2).fit(X)
    assert "bounded iterations: per-row label and lower bound in memory" in km.memory_plan_
    assert "row bounds" in km.memory_plan_
    out = capsys.readouterr().out
    assert "Iteration 0, inertia" in out and "bounds skipped" in out
    assert "row bounds" not in KMeans(n_clusters=15, n_init=1, algorithm="lloyd").fit(X).memory_plan_


def test_unknown_algorithm_is_refused_as_scikit_learn_does():
    from sklearn.utils._param_validation import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="'algorithm' parameter"):
        KMeans(n_clusters=2, algorithm="hamerly").fit(DATA["grid"])
