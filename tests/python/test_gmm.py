"""memfit gmm / gmm-predict against scikit-learn's GaussianMixture, EM
invariants, thread and memory-limit invariance, out-of-core memory, and bad
input."""

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.mixture import GaussianMixture

from conftest import MEMFIT_BIN, MiB, RSS_SLACK, cli_options, dataset, only_files, run_memfit, save

COV_TYPES = ["full", "tied", "diag", "spherical"]
MEASURE = ("import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
           "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); sys.exit(rc)")


def gmm(dir_, X, k, tag="gmm", expect=0, **opts):
    """Run `memfit gmm` on X (array or path); load the model folder and summary."""
    dir_ = Path(dir_)
    path = X if isinstance(X, (str, Path)) else save(dir_, f"{tag}_X.npy", X)
    for key in ("means_init", "weights_init", "precisions_init", "sample_weight"):
        if isinstance(opts.get(key), np.ndarray):
            opts[key] = save(dir_, f"{tag}_{key}.npy", opts[key])
    out = SimpleNamespace(model=dir_ / f"{tag}_model", summary_path=dir_ / f"{tag}_summary.json",
                          labels_path=dir_ / f"{tag}_labels.npy")
    out.proc = run_memfit("gmm", path, "--n-components", k, "--quiet", "--model", out.model,
                          "--summary", out.summary_path, "--labels", out.labels_path,
                          *cli_options(**opts), expect=expect)
    if expect == 0:
        out.summary = json.loads(out.summary_path.read_text())
        for name in ("weights", "means", "covariances", "precisions_cholesky"):
            setattr(out, name, np.load(out.model / f"{name}.npy"))
        out.labels = np.load(out.labels_path)
    return out


def initial_params(X, k, cov_type, seed=0):
    """Weights, means (random rows) and precisions (inverse of the data covariance)."""
    rs = np.random.RandomState(seed)
    d = X.shape[1]
    means = X[rs.choice(len(X), k, replace=False)].astype(np.float64)
    weights = np.full(k, 1.0 / k)
    cov = np.cov(X.T).reshape(d, d) + 1e-3 * np.eye(d)
    prec = np.linalg.inv(cov)
    precisions = {"full": np.array([prec] * k), "tied": prec,
                  "diag": np.tile(1.0 / np.diag(cov), (k, 1)),
                  "spherical": np.full(k, 1.0 / np.mean(np.diag(cov)))}[cov_type]
    return weights, means, precisions


def anisotropic_blobs(n=4000, d=5, k=4, seed=0):
    rs = np.random.RandomState(seed)
    centres = rs.uniform(-10, 10, (k, d))
    X = np.vstack([c + rs.randn(n // k, d) * rs.uniform(0.5, 2.0) for c in centres])
    return (X @ rs.randn(d, d))[rs.permutation(len(X))]


PARITY_DATA = {
    "blobs": lambda: anisotropic_blobs(),
    "uci_wine": lambda: dataset("bench_uci_wine_X.npy").astype(np.float64),
    "mnist_2k_pca": lambda: (lambda X: (X - X.mean(0)) @ np.linalg.svd(X - X.mean(0), full_matrices=False)[2][:20].T)(
        dataset("mnist_X_uint8.npy", rows=2000).astype(np.float64) / 255.0),
}


@pytest.mark.parametrize("cov_type", COV_TYPES)
@pytest.mark.parametrize("name", list(PARITY_DATA))
def test_parity_with_sklearn_from_the_same_init(tmp_path, name, cov_type):
    X = PARITY_DATA[name]()
    k = 3 if name == "uci_wine" else 4
    w, m, p = initial_params(X, k, cov_type)
    ref = GaussianMixture(k, covariance_type=cov_type, weights_init=w, means_init=m, precisions_init=p,
                          max_iter=30, tol=1e-8, reg_covar=1e-6).fit(X)
    out = gmm(tmp_path, X, k, covariance_type=cov_type, weights_init=w, means_init=m, precisions_init=p,
              max_iter=30, tol=1e-8, reg_covar=1e-6)
    s = out.summary
    assert s["n_iter"] == ref.n_iter_ and s["converged"] == ref.converged_
    lb, ref_lb = np.array(s["lower_bounds"]), np.array(ref.lower_bounds_)
    assert lb.shape == ref_lb.shape
    np.testing.assert_allclose(lb, ref_lb, rtol=1e-8, atol=0)
    assert s["lower_bound"] == pytest.approx(ref.lower_bound_, rel=1e-8)
    scale = np.abs(X).max()
    np.testing.assert_allclose(out.weights, ref.weights_, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(out.means, ref.means_, rtol=1e-6, atol=1e-9 * scale)
    cov_scale = np.abs(ref.covariances_).max()
    np.testing.assert_allclose(out.covariances, ref.covariances_, rtol=1e-6, atol=1e-9 * cov_scale)
    pc_scale = np.abs(ref.precisions_cholesky_).max()
    np.testing.assert_allclose(out.precisions_cholesky, ref.precisions_cholesky_, rtol=1e-6, atol=1e-9 * pc_scale)
    assert out.covariances.shape == ref.covariances_.shape
    assert s["bic"] == pytest.approx(ref.bic(X), rel=1e-8)
    assert s["aic"] == pytest.approx(ref.aic(X), rel=1e-8)
    np.testing.assert_array_equal(out.labels, ref.predict(X))


def test_float32_input_keeps_float64_statistics(tmp_path):
    X = anisotropic_blobs(seed=3)
    w, m, p = initial_params(X, 4, "full")
    ref = GaussianMixture(4, weights_init=w, means_init=m, precisions_init=p, max_iter=20, tol=0).fit(
        X.astype(np.float32).astype(np.float64))
    out = gmm(tmp_path, X.astype(np.float32), 4, weights_init=w, means_init=m, precisions_init=p,
              max_iter=20, tol=0)
    assert out.summary["compute_dtype"] == "float32"
    np.testing.assert_allclose(out.summary["lower_bounds"], ref.lower_bounds_, rtol=1e-5)
    np.testing.assert_allclose(out.means, ref.means_, atol=1e-4 * np.abs(X).max())


@pytest.mark.parametrize("cov_type", ["full", "diag"])
def test_lower_bound_never_decreases_without_regularisation(tmp_path, cov_type):
    X = anisotropic_blobs(n=3000, d=4, k=5, seed=5)
    out = gmm(tmp_path, X, 5, covariance_type=cov_type, reg_covar=0, max_iter=60, tol=0, init="random",
              seed=1)
    lb = np.array(out.summary["lower_bounds"])
    assert len(lb) == 60 and np.isfinite(lb).all()
    assert (np.diff(lb) >= -1e-9 * np.abs(lb[1:])).all(), np.diff(lb).min()


@pytest.mark.parametrize("init", ["kmeans", "k-means++", "random", "random_from_data"])
def test_every_init_finds_separated_components(tmp_path, init):
    rs = np.random.RandomState(0)
    centres = np.array([[0, 0], [20, 0], [0, 20], [20, 20.0]])
    X = np.vstack([c + rs.randn(500, 2) for c in centres])[rs.permutation(2000)]
    out = gmm(tmp_path, X, 4, init=init, seed=3, n_init=3, max_iter=200)
    assert out.summary["converged"] and len(out.summary["lower_bound_per_init"]) == 3
    assert out.summary["lower_bound"] == max(out.summary["lower_bound_per_init"])
    found = out.means[np.argsort(out.means[:, 0] * 100 + out.means[:, 1])]
    expected = centres[np.argsort(centres[:, 0] * 100 + centres[:, 1])]
    if init == "random":  # uniform responsibilities may merge components; require a sound fit
        assert np.isfinite(out.summary["lower_bound"])
    else:
        np.testing.assert_allclose(found, expected, atol=0.2)
        np.testing.assert_allclose(np.sort(out.weights), 0.25, atol=0.01)


def test_thread_count_and_memory_limit_do_not_change_the_result(tmp_path):
    X = anisotropic_blobs(n=20000, d=12, k=6, seed=9)
    runs = {}
    for tag, opts in {"t1": dict(threads=1), "t2": dict(threads=2), "small": dict(memory_limit="2MiB"),
                      "big": dict(memory_limit="1GiB")}.items():
        out = gmm(tmp_path, X, 6, tag=tag, seed=4, max_iter=15, tol=0, init="random_from_data", **opts)
        runs[tag] = out
    base = runs["t2"]
    assert base.summary["plan"]["n_blocks"] == 1 and runs["small"].summary["plan"]["n_blocks"] > 1
    for tag, out in runs.items():
        assert out.summary["lower_bounds"] == base.summary["lower_bounds"], tag
        for name in ("weights", "means", "covariances", "precisions_cholesky", "labels"):
            np.testing.assert_array_equal(getattr(out, name), getattr(base, name), err_msg=f"{tag} {name}")


def test_predict_matches_sklearn_and_the_fit(tmp_path):
    X = anisotropic_blobs(seed=11)
    w, m, p = initial_params(X, 4, "full")
    ref = GaussianMixture(4, weights_init=w, means_init=m, precisions_init=p, max_iter=10, tol=0).fit(X)
    out = gmm(tmp_path, X, 4, weights_init=w, means_init=m, precisions_init=p, max_iter=10, tol=0)
    Xn = anisotropic_blobs(n=1000, seed=12)
    xn = save(tmp_path, "new.npy", Xn)
    paths = {n: tmp_path / f"pred_{n}.npy" for n in ("labels", "proba", "log_likelihood")}
    proc = run_memfit("gmm-predict", xn, "--model", out.model, "--labels", paths["labels"], "--proba",
                      paths["proba"], "--log-likelihood", paths["log_likelihood"], "--memory-limit", "4MiB")
    np.testing.assert_array_equal(np.load(paths["labels"]), ref.predict(Xn))
    np.testing.assert_allclose(np.load(paths["proba"]), ref.predict_proba(Xn), atol=1e-9)
    np.testing.assert_allclose(np.load(paths["log_likelihood"]), ref.score_samples(Xn), rtol=1e-9)
    score = float(proc.stdout.split("score=")[1].split()[0])
    assert score == pytest.approx(ref.score(Xn), rel=1e-9)
    # The fit's own labels equal gmm-predict's on the training data.
    run_memfit("gmm-predict", tmp_path / "gmm_X.npy", "--model", out.model, "--labels", paths["labels"])
    np.testing.assert_array_equal(np.load(paths["labels"]), out.labels)


def test_predict_writes_every_output_within_the_limit_the_fit_ran_at(tmp_path):
    """The writers of small outputs hold no more than their files: a prediction
    with all three outputs runs at the limit its fit ran at (it was refused,
    with 1.5 MiB of fixed-size write buffers planned)."""
    X = np.random.default_rng(0).standard_normal((3000, 30))
    out = gmm(tmp_path, X, 8, max_iter=5, tol=0, memory_limit="1MiB")
    paths = [tmp_path / f"o_{n}.npy" for n in ("labels", "proba", "log_likelihood")]
    run_memfit("gmm-predict", tmp_path / "gmm_X.npy", "--model", out.model, "--memory-limit", "1MiB",
               "--labels", paths[0], "--proba", paths[1], "--log-likelihood", paths[2])
    np.testing.assert_array_equal(np.load(paths[0]), out.labels)
    assert np.load(paths[1]).shape == (3000, 8) and np.load(paths[2]).shape == (3000,)


def test_predict_computes_in_the_dtype_the_model_was_fitted_in(tmp_path):
    """A model fitted with --dtype float32 on float64 data scores new rows in
    float32 by default (as --dtype float32), so its own rows get its labels."""
    X = anisotropic_blobs(seed=11)
    out = gmm(tmp_path, X, 4, max_iter=5, tol=0, dtype="float32")
    proba = {}
    for tag, flags in [("default", []), ("float32", ["--dtype", "float32"]), ("float64", ["--dtype", "float64"])]:
        p = tmp_path / f"p_{tag}.npy"
        run_memfit("gmm-predict", tmp_path / "gmm_X.npy", "--model", out.model, "--proba", p, *flags)
        proba[tag] = np.load(p)
    np.testing.assert_array_equal(proba["default"], proba["float32"])
    assert not np.array_equal(proba["default"], proba["float64"])


def test_integer_sample_weights_equal_repeated_rows(tmp_path):
    X = anisotropic_blobs(n=1200, seed=13)
    reps = np.random.RandomState(0).randint(0, 4, len(X))
    w, m, p = initial_params(X, 4, "diag")
    opts = dict(covariance_type="diag", weights_init=w, means_init=m, precisions_init=p, max_iter=15, tol=0)
    weighted = gmm(tmp_path, X, 4, tag="w", sample_weight=reps.astype(np.float64), **opts)
    repeated = gmm(tmp_path, np.repeat(X, reps, axis=0), 4, tag="r", **opts)
    np.testing.assert_allclose(weighted.summary["lower_bounds"], repeated.summary["lower_bounds"], rtol=1e-10)
    np.testing.assert_allclose(weighted.means, repeated.means, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(weighted.covariances, repeated.covariances, rtol=1e-9)


def test_warm_start_continues_the_fit(tmp_path):
    X = anisotropic_blobs(seed=17)
    w, m, p = initial_params(X, 4, "full")
    opts = dict(weights_init=w, means_init=m, precisions_init=p, tol=0)
    ten = gmm(tmp_path, X, 4, tag="ten", max_iter=10, **opts)
    five = gmm(tmp_path, X, 4, tag="five", max_iter=5, **opts)
    more = gmm(tmp_path, tmp_path / "five_X.npy", 4, tag="more", max_iter=5, tol=0, warm_start=five.model)
    np.testing.assert_allclose(five.summary["lower_bounds"] + more.summary["lower_bounds"],
                               ten.summary["lower_bounds"], rtol=1e-12)
    np.testing.assert_allclose(more.means, ten.means, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(more.covariances, ten.covariances, rtol=1e-9, atol=1e-12)


def test_components_in_groups_equal_the_in_memory_fit(tmp_path):
    """Limits below the parameters' size: components in 6 groups, then 12
    with the per-row log-sum-exp states on disk too; the model and
    gmm-predict's outputs (probabilities written by column groups) equal the
    in-memory run's."""
    rs = np.random.RandomState(1)
    n, d, k = 3000, 48, 12
    X = rs.randn(n, d) + (rs.randn(k, d) * 4)[np.arange(n) % k]
    path = save(tmp_path, "X.npy", X)
    opts = dict(max_iter=4, tol=0, init="random_from_data")
    ref = gmm(tmp_path, path, k, tag="ref", memory_limit="1GiB", **opts)
    for limit, groups, on_disk in [("1000KiB", 6, False), ("830KiB", 12, True)]:
        plan = run_memfit("gmm", path, "--n-components", k, "--memory-limit", limit, "--dry-run",
                          "--labels", tmp_path / "dry.npy", *cli_options(**opts)).stdout
        assert f"component groups: {groups} of" in plan, plan
        assert ("per-row log-sum-exp states on disk" in plan) == on_disk, plan
        got = gmm(tmp_path, path, k, tag=f"g{groups}", memory_limit=limit, scratch_dir=tmp_path, **opts)
        assert got.summary["plan"]["component_groups"]["count"] == groups
        # The same bits as in memory.
        np.testing.assert_array_equal(got.summary["lower_bounds"], ref.summary["lower_bounds"])
        for name in ("weights", "means", "covariances", "precisions_cholesky"):
            np.testing.assert_array_equal(getattr(got, name), getattr(ref, name), err_msg=name)
        np.testing.assert_array_equal(got.labels, ref.labels)
        outs = {}
        for tag, lim in [("mem", "1GiB"), ("grp", "950KiB")]:
            names = [tmp_path / f"{tag}_{o}.npy" for o in ("labels", "proba", "ll")]
            run_memfit("gmm-predict", path, "--model", got.model, "--memory-limit", lim, "--quiet",
                       "--labels", names[0], "--proba", names[1], "--log-likelihood", names[2])
            outs[tag] = [np.load(p) for p in names]
        grouped = run_memfit("gmm-predict", path, "--model", got.model, "--memory-limit", "950KiB", "--dry-run",
                             "--labels", names[0], "--proba", names[1], "--log-likelihood", names[2]).stdout
        assert "component groups: 6 of 2 components, their factors read from the model" in grouped, grouped
        for a, b in zip(outs["grp"], outs["mem"]):
            np.testing.assert_array_equal(a, b)
    # Nothing is left in the scratch folder but the test's own files.
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_model_folder_and_summary(tmp_path):
    X = anisotropic_blobs(seed=19)
    out = gmm(tmp_path, X, 3, covariance_type="tied", plot=tmp_path / "lb.png", max_iter=50)
    only_files(out.model, ["weights.npy", "means.npy", "covariances.npy", "precisions_cholesky.npy",
                           "model.json"])
    meta = json.loads((out.model / "model.json").read_text())
    assert meta["covariance_type"] == "tied" and meta["n_components"] == 3 and meta["n_features"] == 5
    s = out.summary
    for key in ("lower_bound", "lower_bounds", "n_iter", "converged", "bic", "aic", "timings",
                "peak_rss_bytes", "plan"):
        assert key in s, key
    assert len(s["lower_bounds"]) == s["n_iter"] and s["lower_bound"] == s["lower_bounds"][-1]
    assert (tmp_path / "lb.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # P = U Uᵀ inverts the covariance.
    U = out.precisions_cholesky
    np.testing.assert_allclose(out.covariances @ (U @ U.T), np.eye(5), atol=1e-9)
    # Refitting replaces the model folder.
    gmm(tmp_path, X, 3, covariance_type="tied", max_iter=2)


def test_case_c13_ill_conditioned_covariance(tmp_path):
    """cases.md C13: K = 1, full, reg_covar = 0 on samples of C = 2uuᵀ + 1e-7 I."""
    u = np.array([4.0, 4.5, 1.0])
    C = 2 * np.outer(u, u) + 1e-7 * np.eye(3)
    X = np.random.RandomState(0).multivariate_normal(np.zeros(3), C, size=1_000_000)
    for dtype in (np.float64, np.float32):
        out = gmm(tmp_path, X.astype(dtype), 1, tag=np.dtype(dtype).name, reg_covar=0, max_iter=3)
        small = np.linalg.eigvalsh(out.covariances[0])[:2]
        np.testing.assert_allclose(small, 1e-7, rtol=0.05)
        assert np.isfinite(out.summary["lower_bound"])
    # log N(0 | 0, C) from the saved model (float64 end to end).
    xs = save(tmp_path, "x0.npy", np.array([[0.0, 0, 0], 3e-4 * np.array([1.0, -1.0, 0.5])]))
    exact = tmp_path / "exact_model"
    exact.mkdir()
    U = np.ascontiguousarray(np.linalg.inv(np.linalg.cholesky(C)).T)
    for name, arr in (("weights", np.ones(1)), ("means", np.zeros((1, 3))), ("covariances", C[None]),
                      ("precisions_cholesky", U[None])):
        np.save(exact / f"{name}.npy", arr)
    (exact / "model.json").write_text(json.dumps({"format": "memfit-gaussian-mixture", "covariance_type": "full"}))
    ll = tmp_path / "ll.npy"
    run_memfit("gmm-predict", xs, "--model", exact, "--log-likelihood", ll)
    np.testing.assert_allclose(np.load(ll), [11.20588049, 10.19338049], atol=1e-5)


def test_peak_rss_out_of_core(tmp_path):
    if not sys.platform.startswith("linux"):
        pytest.skip("ru_maxrss is in KiB only on Linux")
    data = tmp_path / "big.npy"  # 2,000,000 x 16 float64 = 256 MB, 8x the limit
    run_memfit("generate", "blobs", "--n-samples", 2_000_000, "--n-features", 16, "--centers", 8,
               "--seed", 0, "--out", data, "--memory-limit", "32MiB")
    try:
        summary = tmp_path / "summary.json"
        proc = subprocess.run(
            [sys.executable, "-c", MEASURE, str(MEMFIT_BIN), "gmm", str(data), "--n-components", "8",
             "--max-iter", "3", "--tol", "0", "--init", "random_from_data", "--memory-limit", "32MiB",
             "--quiet", "--labels", str(tmp_path / "labels.npy"), "--summary", str(summary)],
            capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr
        peak = int(proc.stdout.split()[-1]) * 1024
    finally:
        data.unlink(missing_ok=True)
    s = json.loads(summary.read_text())
    print(f"gmm peak RSS {peak / MiB:.1f} MiB, plan {s['plan']['total_bytes'] / MiB:.1f} MiB")
    assert s["plan"]["total_bytes"] <= 32 * MiB and s["plan"]["n_blocks"] > 8
    assert peak <= s["plan"]["total_bytes"] + RSS_SLACK


def test_case_c02_scaled_gmm_within_budget(tmp_path):
    """cases.md C02(b), 1/25 size: 4,000,000 x 2 float32, four unit Gaussians at (±10, ±10),
    K = 4 full, 20 EM iterations, 16 MiB budget (the data are 2x it as float32, 4x as float64)."""
    rs = np.random.RandomState(0)
    centres = np.array([[10, 10], [10, -10], [-10, 10], [-10, -10.0]])
    n = 4_000_000
    X = (centres[rs.randint(0, 4, n)] + rs.randn(n, 2)).astype(np.float32)
    out = gmm(tmp_path, X, 4, max_iter=20, memory_limit="16MiB")
    order = np.lexsort((np.round(out.means[:, 1]), np.round(out.means[:, 0])))
    np.testing.assert_allclose(out.weights, 0.25, atol=1e-3)
    np.testing.assert_allclose(out.means[order], centres[np.lexsort((centres[:, 1], centres[:, 0]))], atol=5e-3)
    np.testing.assert_allclose(out.covariances, np.eye(2)[None].repeat(4, 0), atol=5e-3)
    assert out.summary["peak_rss_bytes"] <= 16 * MiB + RSS_SLACK


@pytest.mark.parametrize("case, args, needle", [
    ("nan", dict(), "not finite"),
    ("k_too_big", dict(n_components=50), "n_components = 50 exceeds n_samples = 40"),
    ("singular", dict(reg_covar=0, covariance_type="full"), "ill-defined empirical covariance"),
    ("means_shape", dict(means_init=np.zeros((3, 3))), "--means-init: shape [3, 3]"),
    ("weights_sum", dict(weights_init=np.array([0.5, 0.4])), "sum to"),
    ("precisions_shape", dict(precisions_init=np.eye(3)), "precisions_init"),
    ("bad_type", dict(covariance_type="banana"), "invalid --covariance-type"),
    ("tiny_limit", dict(memory_limit="1KiB"), "memory limit"),
])
def test_bad_input_fails_clearly_without_output(tmp_path, case, args, needle):
    rs = np.random.RandomState(0)
    X = rs.randn(40, 3)
    if case == "nan":
        X[7, 2] = np.nan
    if case == "singular":
        X[:, 2] = X[:, 0] + X[:, 1]  # rank 2: every component's covariance is singular
    k = args.pop("n_components", 2)
    inputs = {f"{case}_X.npy"}
    for key in ("means_init", "weights_init", "precisions_init"):
        if key in args:
            inputs.add(f"{case}_{key}.npy")
    out = gmm(tmp_path, X, k, tag=case, expect=2, **args)
    assert needle in out.proc.stderr, out.proc.stderr
    only_files(tmp_path, sorted(inputs))


def test_model_folders_are_protected(tmp_path):
    """Found by a newcomer: --model never deletes a folder that is not a pure memfit model folder,
    and no output may land inside a model folder (before any data are read)."""
    X = np.random.RandomState(0).randn(200, 3)
    x = save(tmp_path, "X.npy", X)
    model = tmp_path / "m"
    run_memfit("gmm", x, "-k", 2, "--model", model, "--quiet")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "model.json").write_text("{}")
    (proj / "data.txt").write_text("precious")
    afile = tmp_path / "afile"
    afile.write_text("keep")
    cases = [
        (["gmm", x, "-k", 2, "--model", proj], "not a memfit model folder"),
        (["gmm", x, "-k", 2, "--model", afile], "not a memfit model folder"),
        (["gmm", x, "-k", 2, "--model", "."], "needs a name of its own"),
        (["gmm", model / "means.npy", "-k", 2, "--model", model], "inside the folder of --model"),
        (["gmm", x, "-k", 2, "--warm-start", model, "--labels", model / "weights.npy"], "inside the folder"),
        (["gmm-predict", x, "--model", model, "--labels", model / "weights.npy"], "inside the folder"),
        (["gmm-predict", x, "--model", model, "--proba", model / "model.json"], "inside the folder"),
    ]
    for args, needle in cases:
        proc = run_memfit(*args, expect=2)
        assert needle in proc.stderr, (args, proc.stderr)
    assert (proj / "data.txt").read_text() == "precious" and afile.read_text() == "keep"
    only_files(model, ["weights.npy", "means.npy", "covariances.npy", "precisions_cholesky.npy", "model.json"])


def test_predict_rejects_bad_data_and_damaged_models(tmp_path):
    X = np.random.RandomState(1).randn(200, 3)
    model = tmp_path / "m"
    run_memfit("gmm", save(tmp_path, "X.npy", X), "-k", 2, "--model", model, "--quiet")
    Xn = X.copy()
    Xn[17, 2] = np.nan
    proc = run_memfit("gmm-predict", save(tmp_path, "nan.npy", Xn), "--model", model, "--labels",
                      tmp_path / "l.npy", expect=2)
    assert "row 17, column 2 is NaN" in proc.stderr
    proc = run_memfit("gmm-predict", save(tmp_path, "wide.npy", np.zeros((5, 4))), "--model", model, "--labels",
                      tmp_path / "l.npy", expect=2)
    assert "fitted on 3" in proc.stderr
    # Damage that once passed: a value below a factor's diagonal (it was
    # dropped), a shift of another length or of text (it was ignored).
    import json

    U = np.load(model / "precisions_cholesky.npy")
    lower = U.copy()
    lower[0, 2, 0] = 50.0
    np.save(model / "precisions_cholesky.npy", lower)
    proc = run_memfit("gmm-predict", tmp_path / "X.npy", "--model", model, "--labels", tmp_path / "l.npy", expect=2)
    assert "component 0: precisions_cholesky is not upper triangular" in proc.stderr
    np.save(model / "precisions_cholesky.npy", U)
    saved = (model / "model.json").read_text()
    for shift in ([0.0], "garbage", [0.0, None, 1.0]):
        (model / "model.json").write_text(json.dumps({**json.loads(saved), "shift": shift}))
        proc = run_memfit("gmm-predict", tmp_path / "X.npy", "--model", model, "--labels", tmp_path / "l.npy",
                          expect=2)
        assert "shift is" in proc.stderr and "not 3 finite numbers" in proc.stderr
    # Another covariance type than the factors': the folder disagrees with
    # itself (not "save the array with scikit-learn's shape").
    (model / "model.json").write_text(json.dumps({**json.loads(saved), "covariance_type": "diag"}))
    proc = run_memfit("gmm-predict", tmp_path / "X.npy", "--model", model, "--labels", tmp_path / "l.npy", expect=2)
    assert "declares covariance_type diag but precisions_cholesky.npy has shape [2, 3, 3]" in proc.stderr
    assert "hint: give a model folder written by memfit" in proc.stderr
    (model / "model.json").write_text(saved)
    U[1, 0, 0] = 0.0
    np.save(model / "precisions_cholesky.npy", U)
    proc = run_memfit("gmm-predict", tmp_path / "X.npy", "--model", model, "--labels", tmp_path / "l.npy", expect=2)
    assert "invalid --model" in proc.stderr and "component 1" in proc.stderr and "fit it again" in proc.stderr
    w = np.load(model / "weights.npy")
    w[0] = np.nan
    np.save(model / "weights.npy", w)
    proc = run_memfit("gmm-predict", tmp_path / "X.npy", "--model", model, "--labels", tmp_path / "l.npy", expect=2)
    assert "invalid --model" in proc.stderr and "weights.npy[0]" in proc.stderr
    assert not (tmp_path / "l.npy").exists()


@pytest.mark.parametrize("cov_type", ["full", "tied"])
def test_a_precisions_init_that_is_not_symmetric_is_refused(tmp_path, cov_type):
    """Found by trying memfit: the CLI fitted from a non-symmetric precision
    matrix (the factorisation reads one triangle), where scikit-learn and
    the Python estimator refuse it (numpy.allclose(P, P.T))."""
    X = np.random.default_rng(0).standard_normal((300, 2))
    bad = np.array([[1.0, 0.5], [0.0, 1.0]])
    p = save(tmp_path, "p.npy", np.stack([bad] * 3) if cov_type == "full" else bad)
    x = save(tmp_path, "x.npy", X)
    proc = run_memfit("gmm", x, "-k", 3, "--covariance-type", cov_type, "--precisions-init", p, expect=2)
    assert "is not symmetric" in proc.stderr
    with pytest.raises(ValueError, match="symmetric"):
        GaussianMixture(3, covariance_type=cov_type, precisions_init=np.stack([bad] * 3) if cov_type == "full" else bad,
                        ).fit(X)


def test_a_precisions_init_of_the_wrong_shape_names_the_option_once(tmp_path):
    """Helper 127: "--precisions-init: --precisions-init p.npy: shape ..."."""
    x = save(tmp_path, "x.npy", np.random.default_rng(0).standard_normal((50, 3)))
    p = save(tmp_path, "p.npy", np.stack([np.eye(2)] * 2))
    proc = run_memfit("gmm", x, "-k", 2, "--precisions-init", p, expect=2)
    assert proc.stderr.count("--precisions-init") == 1, proc.stderr
    assert f"--precisions-init: {p}: shape [2, 2, 2], but [2, 3, 3] is required" in proc.stderr, proc.stderr


def test_predict_says_when_rows_have_zero_density(tmp_path):
    """A finite row far from every component gets scikit-learn's answers
    (log-likelihood -inf, NaN probabilities, label 0) and a warning on
    stderr, not silence; rows within the mixture get none."""
    X = np.random.RandomState(1).randn(300, 3)
    model = tmp_path / "m"
    run_memfit("gmm", save(tmp_path, "X.npy", X), "-k", 2, "--model", model, "--quiet")
    rows = np.zeros((4, 3))
    rows[2, 0] = 1e160
    proba, ll = tmp_path / "p.npy", tmp_path / "ll.npy"
    proc = run_memfit("gmm-predict", save(tmp_path, "far.npy", rows), "--model", model, "--proba", proba,
                      "--log-likelihood", ll)
    assert "warning: some rows have zero density under every component" in proc.stderr
    assert np.isnan(np.load(proba)[2]).all() and np.isneginf(np.load(ll)[2])
    assert np.isfinite(np.load(ll)[[0, 1, 3]]).all()
    proc = run_memfit("gmm-predict", tmp_path / "X.npy", "--model", model, "--log-likelihood", ll)
    assert "zero density" not in proc.stderr


def test_one_row_is_refused_as_scikit_learn_refuses_it(tmp_path):
    """A mixture needs 2 rows, as in Python (scikit-learn's minimum); the
    command line fitted one (helper 86)."""
    x = save(tmp_path, "X.npy", np.array([[1.0, 2.0, 3.0]]))
    proc = run_memfit("gmm", x, "-k", "1", "--model", tmp_path / "m", expect=2)
    assert "1 row" in proc.stderr and "at least 2" in proc.stderr
    assert not (tmp_path / "m").exists()
