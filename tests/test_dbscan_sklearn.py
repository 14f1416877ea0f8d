"""scikit-learn's own DBSCAN tests and estimator checks, run against skyjoin's DBSCAN.

The installed ``sklearn/cluster/tests/test_dbscan.py`` is loaded as a private
copy of the module, its ``DBSCAN`` and ``dbscan`` globals are replaced by
ours, and each of its ``test_*`` functions is re-exported here, so pytest
collects them with their own parametrisation.
"""

import importlib.util
import inspect

import pytest

from skyjoin.cluster.estimator import DBSCAN, dbscan

_spec = importlib.util.find_spec("sklearn.cluster.tests.test_dbscan")
if _spec is None or _spec.origin is None:  # pragma: no cover - sklearn without tests
    pytest.skip("the installed scikit-learn ships no tests", allow_module_level=True)


def _load_sklearn_tests():
    """A private copy of sklearn's test module with our DBSCAN patched in."""
    spec = importlib.util.spec_from_file_location("_skyjoin_sklearn_test_dbscan", _spec.origin)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.DBSCAN = DBSCAN
    mod.dbscan = dbscan
    return mod


_sk = _load_sklearn_tests()

for _name, _fn in inspect.getmembers(_sk, inspect.isfunction):
    if _name.startswith("test_") and _fn.__module__ == _sk.__name__:
        globals()["test_sklearn_" + _name[len("test_"):]] = _fn


@pytest.fixture
def global_random_seed():
    """scikit-learn's fixture (its conftest is not loaded here): a fixed seed."""
    return 42


def test_patch_is_effective():
    """The borrowed tests really call skyjoin's estimator on the join path."""
    assert _sk.DBSCAN is DBSCAN and _sk.dbscan is dbscan
    est = _sk.DBSCAN(eps=0.8, min_samples=10, device="cpu").fit(_sk.X)
    # about 2.3 points a fine cell: the sparse grid's (index.fine_grid.dense_grid_wins)
    assert est.path_ == "sparse-grid-cpu"


# --- scikit-learn's estimator checks ----------------------------------------

from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

# Checks expected to fail, with the reason.  The default estimator fails
# none.  With metric="precomputed" the checks feed feature matrices with
# negative values as if they were distances; scikit-learn's own
# DBSCAN(metric="precomputed") fails exactly these checks the same way
# (verified with sklearn.utils.estimator_checks.check_estimator).
_PRECOMPUTED_REASON = ("the check passes negative features as a distance matrix; "
                       "sklearn.cluster.DBSCAN(metric='precomputed') fails it identically")
EXPECTED_FAILED_CHECKS = {
    "precomputed": {
        "check_positive_only_tag_during_fit": _PRECOMPUTED_REASON,
        "check_clustering": _PRECOMPUTED_REASON,
    },
}


def _expected_failures(est):
    return EXPECTED_FAILED_CHECKS.get(est.metric if isinstance(est.metric, str) else "", {})


@parametrize_with_checks(
    [DBSCAN(device="cpu"), DBSCAN(device="cpu", metric="precomputed")],
    expected_failed_checks=_expected_failures,
)
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)
