"""Where scikit-learn's DBSCAN differs from skyjoin's, and which of its
settings skyjoin's labels equal (the examples of the DBSCAN Notes, the
README and docs/guide/dbscan.md; these tests keep those texts true).

skyjoin's rule: i and j are neighbours iff ``sum_k (x_ik - x_jk)**2 <=
fl(eps)**2`` in float64.  Oracles: scikit-learn with ``algorithm="brute"``
on float64 input, and scipy's cKDTree (its neighbourhoods clustered by
scikit-learn with ``metric="precomputed"``).
"""

import numpy as np
import pytest
from scipy.spatial import cKDTree
from sklearn.cluster import DBSCAN as SkDBSCAN

import skyjoin as sj

#: 6 copies each of (0, 1, 0) and (1, 0, 1): the squared distance across is
#: exactly 3 > fl(sqrt(3))**2 = 2.9999999999999996
TIE_X = np.array([[0.0, 1.0, 0.0]] * 6 + [[1.0, 0.0, 1.0]] * 6)
TIE_EPS = float(np.sqrt(3))
TIE_MIN_SAMPLES = 7

#: two float32 points 0.1f apart (0.100000001490116... > 0.1), eps = 0.1
F32_X = np.array([[0.0], [0.1]], dtype=np.float32)


def sklearn_labels(X, eps, min_samples, algorithm):
    return SkDBSCAN(eps=eps, min_samples=min_samples, algorithm=algorithm).fit(X).labels_


def ckdtree_labels(X, eps, min_samples):
    """DBSCAN on cKDTree's neighbourhoods (``query_ball_point``, which tests
    the squared distance against eps**2)."""
    near = np.zeros((len(X), len(X)), dtype=bool)
    for i, js in enumerate(cKDTree(X).query_ball_point(X, eps)):
        near[i, js] = True
    return SkDBSCAN(eps=0.5, min_samples=min_samples, metric="precomputed").fit(
        np.where(near, 0.0, 1.0)).labels_


def test_tie_example_premise():
    assert TIE_EPS == 1.7320508075688772
    assert TIE_EPS * TIE_EPS < 3.0                       # in float64
    assert (TIE_X[0] - TIE_X[6]) @ (TIE_X[0] - TIE_X[6]) == 3.0


def test_tie_labels_equal_brute_and_ckdtree():
    """Across the tie nothing is within eps: each point has its 6 copies
    (itself included), fewer than min_samples = 7, so everything is noise."""
    ours = sj.DBSCAN(eps=TIE_EPS, min_samples=TIE_MIN_SAMPLES, device="cpu").fit(TIE_X).labels_
    assert (ours == -1).all()
    assert np.array_equal(ours, sklearn_labels(TIE_X, TIE_EPS, TIE_MIN_SAMPLES, "brute"))
    assert np.array_equal(ours, ckdtree_labels(TIE_X, TIE_EPS, TIE_MIN_SAMPLES))
    core, labels = sj.dbscan(TIE_X, eps=TIE_EPS, min_samples=TIE_MIN_SAMPLES, device="cpu")
    assert np.array_equal(labels, ours) and len(core) == 0
    w = sj.DBSCAN(eps=TIE_EPS, min_samples=TIE_MIN_SAMPLES, device="cpu").fit(
        TIE_X, sample_weight=np.ones(len(TIE_X))).labels_
    assert np.array_equal(w, ours)
    (res,) = sj.dbscan_sweep(TIE_X, eps=[TIE_EPS], min_samples=[TIE_MIN_SAMPLES], device="cpu")
    assert np.array_equal(res.labels, ours)


@pytest.mark.parametrize("algorithm", ["kd_tree", "ball_tree"])
def test_tie_sklearn_trees_admit_the_tie(algorithm):
    """scikit-learn's trees admit a whole node when its distance bound, a
    rounded distance, is <= eps (``_query_radius_single``, "Case 2"): here
    fl(sqrt(3)) == eps, so the 12 points are all neighbours, one cluster.
    (In the installed scikit-learn the ball tree does this too.)"""
    labels = sklearn_labels(TIE_X, TIE_EPS, TIE_MIN_SAMPLES, algorithm)
    assert (labels == 0).all()
    # the same trees agree with brute force one ulp of eps away from the tie
    up = np.nextafter(TIE_EPS, 4.0)
    assert np.array_equal(sklearn_labels(TIE_X, up, TIE_MIN_SAMPLES, algorithm),
                          sklearn_labels(TIE_X, up, TIE_MIN_SAMPLES, "brute"))


def test_float32_example():
    """scikit-learn computes float32 input in float32 (brute force); skyjoin in
    float64 unless ``precision="float32"`` is asked for."""
    X64 = F32_X.astype(np.float64)
    assert X64[1, 0] > 0.1
    ours = sj.DBSCAN(eps=0.1, min_samples=2, device="cpu").fit(F32_X).labels_
    assert ours.tolist() == [-1, -1]
    assert np.array_equal(ours, sklearn_labels(X64, 0.1, 2, "brute"))
    assert np.array_equal(ours, ckdtree_labels(X64, 0.1, 2))
    assert sklearn_labels(F32_X, 0.1, 2, "brute").tolist() == [0, 0]      # float32 arithmetic
    f32 = sj.DBSCAN(eps=0.1, min_samples=2, device="cpu", precision="float32").fit(F32_X)
    assert f32.labels_.tolist() == [0, 0]


@pytest.mark.gpu
def test_examples_on_the_gpu(cp):
    for X, eps, ms in ((TIE_X, TIE_EPS, TIE_MIN_SAMPLES), (F32_X, 0.1, 2)):
        want = sj.DBSCAN(eps=eps, min_samples=ms, device="cpu").fit(X).labels_
        assert np.array_equal(sj.DBSCAN(eps=eps, min_samples=ms, device="gpu").fit(X).labels_,
                              want)
        w = np.ones(len(X))
        got = sj.DBSCAN(eps=eps, min_samples=ms, device="gpu").fit(X, sample_weight=w).labels_
        assert np.array_equal(got, want)
