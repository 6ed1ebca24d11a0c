"""scikit-learn's estimator checks (``parametrize_with_checks``) for both
estimators, with the checks expected to fail listed with their reasons, as
scikit-learn lists its own."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from memfit import GaussianMixture, KMeans, MiniBatchKMeans

#: Checks expected to fail, per estimator class, with the reason.
EXPECTED_FAILED_CHECKS = {
    "KMeans": {
        # scikit-learn lists the same failure for its own KMeans: the
        # k-means++ seeding draws rows with probability proportional to the
        # weights, which is equal in distribution, not in value, to drawing
        # from repeated rows.
        "check_sample_weight_equivalence_on_dense_data": (
            "sample_weight is not equivalent to removing/repeating samples "
            "for a random k-means++ seeding (same as scikit-learn's KMeans)"
        ),
        "check_sample_weight_equivalence_on_sparse_data": (
            "sample_weight is not equivalent to removing/repeating samples "
            "for a random k-means++ seeding (same as scikit-learn's KMeans)"
        ),
    },
    "MiniBatchKMeans": {
        # scikit-learn lists the same failure for its own MiniBatchKMeans:
        # batches draw rows at random, so weights equal repeated rows in
        # distribution only.
        "check_sample_weight_equivalence_on_dense_data": (
            "sample_weight is not equivalent to removing/repeating samples (same as scikit-learn's "
            "MiniBatchKMeans)"
        ),
        "check_sample_weight_equivalence_on_sparse_data": (
            "sample_weight is not equivalent to removing/repeating samples (same as scikit-learn's "
            "MiniBatchKMeans)"
        ),
    },
    # scikit-learn's GaussianMixture takes no sample_weight; memfit's does,
    # and its default initialisation is a k-means fit with a random
    # k-means++ seeding, equivalent to repeated rows in distribution only
    # (a single component needs no seeding, and passes).
    "GaussianMixture": {
        "check_sample_weight_equivalence_on_dense_data": (
            "sample_weight is not equivalent to removing/repeating samples for the random k-means++ seeding "
            "of the k-means initialisation (as KMeans)"
        ),
    },
}


def expected_failed_checks(estimator):
    """The checks ``estimator`` is expected to fail, with reasons."""
    return EXPECTED_FAILED_CHECKS[type(estimator).__name__]


@parametrize_with_checks(
    [
        KMeans(n_clusters=2, n_init=2, max_iter=5),
        # scikit-learn's own test parameters for its MiniBatchKMeans.
        MiniBatchKMeans(n_clusters=2, n_init=2, max_iter=5, batch_size=10),
        GaussianMixture(n_init=2, max_iter=5),
        GaussianMixture(n_components=2, n_init=2, max_iter=5),
    ],
    expected_failed_checks=expected_failed_checks,
)
def test_sklearn_compatible_estimator(estimator, check):
    """Each of scikit-learn's estimator checks passes (or fails as listed)."""
    check(estimator)
