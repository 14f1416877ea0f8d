"""Tests of the data generators: pinned recipes, reproducibility, ranges, statistics."""

import numpy as np
import pytest

from skyjoin import datasets as ds


def _pinned_expo(seed, n, d, rate=40.0):
    """The exponential recipe of issue 3, written out independently."""
    rng = np.random.default_rng(seed)
    X = rng.exponential(1 / rate, (n, d))
    while np.any(X > 1):
        X[X > 1] = rng.exponential(1 / rate, int(np.sum(X > 1)))
    return X


@pytest.mark.parametrize("seed,n,d", [(1, 1000, 2), (2, 777, 6), (0, 0, 3), (5, 1, 1)])
def test_uniform_equals_pinned_recipe(seed, n, d):
    X = ds.uniform(n, d, 0, 100, seed=seed)
    assert np.array_equal(X, np.random.default_rng(seed).uniform(0, 100, (n, d)))
    assert X.dtype == np.float64 and X.flags.c_contiguous and X.shape == (n, d)


def test_uniform_box_and_generator_seed():
    X = ds.uniform(500, 3, low=-2.0, high=3.0, seed=np.random.default_rng(9))
    assert X.min() >= -2.0 and X.max() < 3.0
    assert np.array_equal(X, np.random.default_rng(9).uniform(-2, 3, (500, 3)))


@pytest.mark.parametrize("seed,d", [(3, 2), (4, 6)])
def test_exponential_equals_pinned_recipe(seed, d):
    # rate 2 rejects ~13 % of the draws, so the redraw loop runs several rounds
    for rate in (40.0, 2.0):
        X = ds.exponential(5000, d, rate=rate, seed=seed)
        assert np.array_equal(X, _pinned_expo(seed, 5000, d, rate))
        assert X.max() <= 1.0 and X.min() >= 0.0
        assert X.dtype == np.float64 and X.flags.c_contiguous


def test_exponential_mean_close_to_truncated_mean():
    rate = 40.0
    X = ds.exponential(200_000, 1, rate=rate, seed=0)
    # truncation at 1 is negligible for rate 40: mean ~ 1/40
    assert abs(X.mean() - 1 / rate) < 5e-4


def test_blobs_recipe_and_labels():
    X, y = ds.blobs(3000, 3, centers=4, std=0.5, seed=11, return_labels=True)
    rng = np.random.default_rng(11)
    C = rng.uniform(0, 100, (4, 3))
    lab = rng.integers(0, 4, 3000)
    ref = C[lab] + rng.normal(0, 0.5, (3000, 3))
    assert np.array_equal(X, ref) and np.array_equal(y, lab)
    assert y.dtype == np.int64
    # every point lies near its centre
    assert np.abs(X - C[y]).max() < 0.5 * 6


def test_blobs_given_centres():
    C = [[0.0, 0.0], [10.0, 10.0]]
    X, y = ds.blobs(400, 2, centers=C, std=0.1, seed=1, return_labels=True)
    assert np.allclose(X[y == 1].mean(axis=0), [10, 10], atol=0.05)
    with pytest.raises(ValueError, match="centers"):
        ds.blobs(10, 3, centers=C)


def _manifold_recipe(n, d, k, noise, seed):
    """The recipe of the issue on the join in high dimensions, written out."""
    rng = np.random.default_rng(seed)
    latent = rng.normal(size=(n, k))
    basis = rng.normal(size=(k, d))
    return latent @ basis / np.sqrt(k) + rng.normal(0, noise, (n, d))


@pytest.mark.parametrize("n,d,k,noise,seed", [(3000, 90, 12, 0.05, 11), (500, 7, 2, 0.3, 4),
                                              (0, 5, 1, 0.0, 1), (1, 3, 3, 1.0, 0)])
def test_manifold_equals_the_issue_recipe(n, d, k, noise, seed):
    Z = ds.manifold(n, d=d, k=k, noise=noise, seed=seed)
    assert np.array_equal(Z, _manifold_recipe(n, d, k, noise, seed))
    assert Z.dtype == np.float64 and Z.flags.c_contiguous and Z.shape == (n, d)
    assert np.array_equal(Z, ds.manifold(n, d=d, k=k, noise=noise, seed=seed))


def test_manifold_defaults_and_generator_seed():
    assert np.array_equal(ds.manifold(200), _manifold_recipe(200, 90, 12, 0.05, 11))
    Z = ds.manifold(100, d=4, k=2, seed=np.random.default_rng(5))
    assert np.array_equal(Z, _manifold_recipe(100, 4, 2, 0.05, 5))
    assert not np.array_equal(ds.manifold(100, seed=1), ds.manifold(100, seed=2))


@pytest.mark.parametrize("k,noise", [(12, 0.05), (3, 0.2)])
def test_manifold_has_k_large_singular_values(k, noise):
    """Centred, the data has k directions of spread about sqrt(n) and d - k
    of the noise, about noise * sqrt(n)."""
    n, d = 4000, 40
    Z = ds.manifold(n, d=d, k=k, noise=noise, seed=7)
    s = np.linalg.svd(Z - Z.mean(axis=0), compute_uv=False)
    assert s[k - 1] > 0.3 * np.sqrt(n)               # the latent spread
    assert s[k - 1] > 3 * s[k]                        # a gap after k
    np.testing.assert_allclose(s[k:], noise * np.sqrt(n), rtol=0.25)


def test_manifold_argument_errors():
    with pytest.raises(ValueError, match=r"k \(dimension of the manifold\) must be in \[1, d=5\]"):
        ds.manifold(10, d=5, k=6)
    with pytest.raises(ValueError, match="k .*got 0"):
        ds.manifold(10, d=5, k=0)
    with pytest.raises(TypeError, match="k must be an integer"):
        ds.manifold(10, d=5, k=2.0)
    with pytest.raises(ValueError, match="noise must be >= 0"):
        ds.manifold(10, noise=-0.1)
    with pytest.raises(ValueError, match="noise must be finite"):
        ds.manifold(10, noise=float("nan"))
    with pytest.raises(ValueError, match="n .*>= 0"):
        ds.manifold(-1)
    with pytest.raises(TypeError, match="seed"):
        ds.manifold(10, seed="abc")


@pytest.mark.parametrize("kind", ds.SKYLINE_KINDS)
@pytest.mark.parametrize("d", [1, 2, 5, 12])
def test_skyline_kinds_range_shape_reproducible(kind, d):
    n = 3000
    X = ds.skyline_data(n, d, kind, seed=123)
    assert X.shape == (n, d) and X.dtype == np.float64 and X.flags.c_contiguous
    assert X.min() >= 0.0 and X.max() <= 1.0
    assert np.isfinite(X).all()
    assert np.array_equal(X, ds.skyline_data(n, d, kind, seed=123))
    assert not np.array_equal(X, ds.skyline_data(n, d, kind, seed=124))


@pytest.mark.parametrize("kind", ds.SKYLINE_KINDS)
def test_skyline_empty_and_single(kind):
    assert ds.skyline_data(0, 4, kind, seed=0).shape == (0, 4)
    one = ds.skyline_data(1, 4, kind, seed=0)
    assert one.shape == (1, 4) and 0.0 <= one.min() and one.max() <= 1.0


def test_skyline_many_blocks_reproducible():
    # more rows than one block: blocks are seeded independently of threads
    n = 3 * ds.skyline._BLOCK + 17
    a = ds.anticorrelated(n, 4, seed=5)
    b = ds.anticorrelated(n, 4, seed=5)
    assert np.array_equal(a, b)
    # distinct blocks do not repeat each other's stream
    assert not np.array_equal(a[: ds.skyline._BLOCK], a[ds.skyline._BLOCK: 2 * ds.skyline._BLOCK])
    # a Generator seed continues its stream: two draws differ
    g = np.random.default_rng(5)
    assert not np.array_equal(ds.correlated(100, 3, seed=g), ds.correlated(100, 3, seed=g))


def test_independent_recipe():
    assert np.array_equal(ds.independent(100, 3, seed=4), np.random.default_rng(4).random((100, 3)))


def test_correlated_statistics():
    X = ds.correlated(20_000, 5, seed=1)
    C = np.corrcoef(X.T)
    off = C[~np.eye(5, dtype=bool)]
    assert off.min() > 0.3                   # positively correlated in every pair
    # v = peak(0, 1, d) has mean 1/2; the offsets sum to zero over a point
    assert abs(X.mean() - 0.5) < 0.01
    s = X.sum(axis=1) / 5
    assert s.std() == pytest.approx(np.sqrt(1 / 12 / 5), rel=0.1)


def test_anticorrelated_statistics():
    d = 6
    X = ds.anticorrelated(20_000, d, seed=2)
    C = np.corrcoef(X.T)
    # neighbours in the ring share an offset with opposite signs
    for k in range(d):
        assert C[k, (k + 1) % d] < -0.2
    s = X.sum(axis=1)
    # the sum of the coordinates is d * v with v in [0.25, 0.75], peaked at 1/2
    assert np.all(s >= d * 0.25 - 1e-9) and np.all(s <= d * 0.75 + 1e-9)
    assert abs(s.mean() - d / 2) < 0.02
    assert np.abs(s - d / 2).mean() < 0.06 * d
    # more spread around the diagonal than correlated data, in every coordinate
    assert X.std(axis=0).min() > 0.15


def test_anticorrelated_matches_naive_rejection_in_law():
    """The early-rejection order draws from the same law as the plain recipe."""
    d, n = 4, 40_000
    rng = np.random.default_rng(0)
    rows = []
    while sum(len(r) for r in rows) < n:
        m = 50_000
        v = 0.25 + 0.5 * rng.random((m, 12)).mean(axis=1)
        l = np.minimum(v, 1 - v)
        h = rng.uniform(-1, 1, (m, d)) * l[:, None]
        x = v[:, None] + h - np.roll(h, 1, axis=1)
        rows.append(x[((x >= 0) & (x <= 1)).all(axis=1)])
    ref = np.concatenate(rows)[:n]
    X = ds.anticorrelated(n, d, seed=3)
    for k in range(d):
        qa = np.quantile(X[:, k], [0.05, 0.25, 0.5, 0.75, 0.95])
        qb = np.quantile(ref[:, k], [0.05, 0.25, 0.5, 0.75, 0.95])
        assert np.abs(qa - qb).max() < 0.015
    assert abs(np.corrcoef(X.T)[0, 1] - np.corrcoef(ref.T)[0, 1]) < 0.03
    assert abs(X.sum(1).std() - ref.sum(1).std()) < 0.01


def test_pareto_normalisation_and_skew():
    X = ds.pareto(5000, 3, seed=8)
    assert np.array_equal(X.min(axis=0), [0, 0, 0]) and np.array_equal(X.max(axis=0), [1, 1, 1])
    assert np.median(X) < 0.01                # heavy skew towards 0
    r = np.random.default_rng(8).random((5000, 3))
    x = 1 / (1 - r)
    assert np.allclose(X, (x - x.min(0)) / (x.max(0) - x.min(0)), rtol=0, atol=1e-15)
    # min-max is increasing per column: same order as the uniform draws
    assert np.array_equal(np.argsort(X[:, 0]), np.argsort(r[:, 0]))


def test_generate_dispatch_and_errors():
    assert np.array_equal(ds.generate("uniform", 10, 2, seed=1, low=0, high=1),
                          ds.uniform(10, 2, 0, 1, seed=1))
    assert np.array_equal(ds.generate("exponential", 10, 2, seed=1), ds.exponential(10, 2, seed=1))
    assert np.array_equal(ds.generate("pareto", 10, 2, seed=1), ds.pareto(10, 2, seed=1))
    X, y = ds.generate("blobs", 10, 2, seed=1, centers=2, return_labels=True)
    assert X.shape == (10, 2) and y.shape == (10,)
    with pytest.raises(ValueError, match="unknown data kind"):
        ds.generate("gaussian", 10, 2)
    with pytest.raises(ValueError, match="takes no parameter"):
        ds.generate("pareto", 10, 2, rate=3)
    with pytest.raises(ValueError, match="n .*>= 0"):
        ds.generate("uniform", -1, 2)
    with pytest.raises(ValueError, match="d .*>= 1"):
        ds.generate("correlated", 10, 0)
    with pytest.raises(TypeError, match="n must be an integer"):
        ds.uniform(2.5, 2)
    with pytest.raises(ValueError, match="unknown skyline data kind"):
        ds.skyline_data(10, 2, "uniform")
    with pytest.raises(ValueError, match="rate"):
        ds.exponential(10, 2, rate=0)
    with pytest.raises(ValueError, match="low must be < high"):
        ds.uniform(10, 2, low=1, high=1)
    with pytest.raises(TypeError, match="seed"):
        ds.uniform(10, 2, seed="abc")


def test_named_cases_registry():
    names = set(ds.NAMED_CASES)
    for want in ["Unif2D2M-0.5", "Unif2D2M-1.0", "Unif6D2M-8.0", "Expo2D2M-0.0004",
                 "Expo2D2M-0.002", "Expo6D2M-0.012", "Unif2D10M-0.25", "Expo2D10M-0.0002",
                 "Unif2D1M-0.5", "Unif6D1M-12", "Expo2D1M-0.0008", "Expo6D1M-0.02"]:
        assert want in names
    c = ds.NAMED_CASES["Unif2D2M-0.5"]
    assert (c.kind, c.n, c.d, c.seed, c.eps, c.pairs_incl_self) == (
        "uniform", 2_000_000, 2, 1, 0.5, 314_833_680)
    assert ds.NAMED_CASES["Expo6D2M-0.012"].seed == 4
    with pytest.raises(ValueError, match="unknown named case"):
        ds.named_case("Unif2D")


def test_named_case_small_one_matches_recipe():
    # the 1M cases are cheap enough to generate in a test; check the recipe
    X, eps = ds.named_case("Expo2D1M-0.0008")
    assert eps == 0.0008 and X.shape == (1_000_000, 2)
    assert np.array_equal(X[:1000], _pinned_expo(13, 1_000_000, 2)[:1000])
    X, eps = ds.named_case("Unif6D1M-12")
    assert eps == 12.0
    assert np.array_equal(X, np.random.default_rng(12).uniform(0, 100, (1_000_000, 6)))


def test_correlated_matches_naive_recipe_in_law():
    """The compiled generator draws from the law of the plain NumPy recipe."""
    d, n = 3, 40_000
    rng = np.random.default_rng(1)
    rows = []
    while sum(len(r) for r in rows) < n:
        m = 50_000
        v = rng.random((m, d)).mean(axis=1)
        l = np.minimum(v, 1 - v)
        h = (-l[:, None] + 2 * l[:, None] * rng.random((m, d, 12)).mean(axis=2))
        x = v[:, None] + h - np.roll(h, 1, axis=1)
        rows.append(x[((x >= 0) & (x <= 1)).all(axis=1)])
    ref = np.concatenate(rows)[:n]
    X = ds.correlated(n, d, seed=3)
    for k in range(d):
        qa = np.quantile(X[:, k], [0.05, 0.25, 0.5, 0.75, 0.95])
        qb = np.quantile(ref[:, k], [0.05, 0.25, 0.5, 0.75, 0.95])
        assert np.abs(qa - qb).max() < 0.015
    assert abs(np.corrcoef(X.T)[0, 1] - np.corrcoef(ref.T)[0, 1]) < 0.02


def test_standard_generator_output_is_pinned():
    """Benchmarks name their skyline data by (kind, n, d, seed): it must not drift."""
    assert ds.anticorrelated(1000, 5, seed=1).sum() == pytest.approx(2503.3665250594395, rel=1e-12)
    assert ds.correlated(1000, 5, seed=1).sum() == pytest.approx(2496.8143286000086, rel=1e-12)
