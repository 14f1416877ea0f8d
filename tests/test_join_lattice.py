"""The brute force's FP16 screen (``algorithm="brute-fp16"``): the lattice
and its margin (``skyjoin.simjoin.lattice``), pair for pair the float64
(or float32) oracle, ties at eps included, and adversarial inputs for the
margin.  The GPU engine runs here through the CPU emulation of CUDA, with
its FP16 product stood in by an IEEE float32 product of the same integers;
on a GPU, ``-m gpu`` checks the tensor cores' product itself against
int64 arithmetic."""

import math

import numpy as np
import pytest

import skyjoin as sj
from skyjoin.simjoin import brute_bound, lattice
from skyjoin.simjoin.algorithm import choose_algorithm

from oracles import check_gpu_screen
from test_join_brute import emulated_gpu, oracle, table_of  # noqa: F401 (a fixture)

gpu = pytest.mark.gpu


# -- the lattice ---------------------------------------------------------------

@pytest.mark.parametrize("seed", range(5))
def test_scale_is_the_smallest_power_of_two_that_fits(seed):
    rng = np.random.default_rng(seed)
    for _ in range(200):
        d = int(rng.integers(1, 2000))
        radius = float(10.0 ** rng.uniform(-200, 200))
        absmax = radius * float(rng.uniform(0, 1))
        s = lattice.lattice_scale(radius, absmax, d)
        assert math.frexp(s)[0] == 0.5                      # a power of two
        room = 4095.0 - math.sqrt(d) / 2

        def fits(t):
            return radius / t <= room and absmax / t <= 2047.5
        assert fits(s) and not fits(s / 2)
    assert lattice.lattice_scale(0.0, 0.0, 5) == 1.0
    with pytest.raises(ValueError, match="too many"):
        lattice.lattice_scale(1.0, 1.0, 4096 ** 2 * 4)


@pytest.mark.parametrize("scale_exp", [-480, -20, 0, 30, 480])
def test_points_split_exactly_into_lattice_and_remainder(scale_exp):
    rng = np.random.default_rng(3)
    A = rng.normal(size=(400, 37)) * 2.0 ** scale_exp
    A[:5] = 0.0
    A[5, :] = 2.0 ** (scale_exp - 60)                       # far below the spacing
    radii = brute_bound.row_radii(np.einsum("ij,ij->i", A, A), 37)
    s = lattice.lattice_scale(float(radii.max()), float(np.abs(A).max()), 37)
    L = lattice.on_lattice(A, radii, 0.0, s)
    x = L.points[:, :37].astype(np.float64)
    assert L.points.dtype == np.float16 and L.points.shape[1] == 40
    assert not L.points[:, 37:].any()
    np.testing.assert_array_equal(x, np.rint(A / s))        # FP16 held the integers
    r = A - x * s
    # the remainder is exact: x s + r gives back A, and |r| <= s / 2
    np.testing.assert_array_equal(x * s + r, A)
    assert np.all(np.abs(r) <= s / 2)
    norms = (x.astype(np.int64) ** 2).sum(axis=1)
    np.testing.assert_array_equal(L.norms, norms)
    assert norms.max() < 2 ** 24 and np.abs(x).max() <= 2048
    assert norms.max() >= 2 ** 22                           # and the scale is not wasted
    rho = np.sqrt((r * r).sum(axis=1))
    assert np.all(L.slack * s >= rho)


def test_float32_products_on_the_lattice_are_exact():
    """Integers at the limits: the largest norms, coordinates at +-2048,
    and sums that cancel.  NumPy's float32 product (IEEE, any order) gives
    the int64 answer; the GPU test does the same for the tensor cores."""
    rng = np.random.default_rng(4)
    d = 40
    X = rng.integers(-2048, 2049, size=(300, d))
    norm = np.sqrt((X.astype(np.float64) ** 2).sum(axis=1))
    X = np.trunc(X * (4095.0 / norm)[:, None]).astype(np.int64)   # norms just below 4096
    X[0, :] = 0
    X[0, 0] = 2048
    X[1] = -X[2]
    assert (X ** 2).sum(axis=1).max() < 2 ** 24
    exact = X @ X.T
    got = X.astype(np.float32) @ X.astype(np.float32).T
    np.testing.assert_array_equal(got.astype(np.int64), exact)


def _near_eps(rng, n, d, eps):
    """Pairs (A_i, B_i) just inside eps, on a coarse lattice: one far point
    makes the spacing about eps / 4, so the margin's rounding terms
    decide."""
    A = rng.normal(size=(n, d))
    u = rng.normal(size=(n, d))
    u /= np.sqrt((u * u).sum(axis=1))[:, None]
    B = A + u * (eps * (1 - 2.0 ** -20))
    A[0] = 2.5 * eps * 4096 / np.sqrt(d)
    return A, B


def _kept(A, B, eps, precision):
    """The screen's decision for every pair, computed as the kernel does
    (float64 threshold from the lattice's constants)."""
    dtype = np.float32 if precision == "float32" else np.float64
    e = dtype(eps)
    fb = brute_bound.filter_bound(float(dtype(e * e)), A.shape[1], precision)
    Ac, _, ra, Bc, _, rb = brute_bound.centred(A.astype(dtype), B.astype(dtype))
    s = lattice.lattice_scale(float(max(ra.max(), rb.max())),
                              float(max(np.abs(Ac).max(), np.abs(Bc).max())), A.shape[1])
    la = lattice.on_lattice(Ac, ra, fb.cu, s)
    lb = lattice.on_lattice(Bc, rb, fb.cu, s)
    lf = lattice.lattice_bound(fb, s)
    G = la.points.astype(np.float32) @ lb.points.astype(np.float32).T
    D = (la.norms[:, None] + lb.norms[None, :]) - 2.0 * G.astype(np.float64)
    rr = la.slack[:, None] + lb.slack[None, :]
    t = lf.root_t + lf.cu * rr
    return D <= (t * t + lf.cg * (rr * rr)) * lf.inflate


@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("case", ["normal", "at_eps", "near_eps", "far_and_close", "tiny",
                                  "huge"])
def test_screen_keeps_every_pair_the_test_accepts(precision, case):
    rng = np.random.default_rng(5)
    d = 24
    if case == "at_eps":                    # exactly representable pairs at eps
        A = rng.integers(-50, 50, size=(300, d)).astype(np.float64)
        B = A.copy()
        B[np.arange(300), rng.integers(0, d, 300)] += 3.0
        eps = 3.0
    elif case == "far_and_close":           # large norms, close together
        A = 1e7 + rng.normal(0, 1e-3, size=(200, d))
        B = np.concatenate([A[:100] + rng.normal(0, 2e-3, size=(100, d)),
                            -1e7 + rng.normal(0, 1e-3, size=(100, d))])
        eps = 6e-3
    elif case == "near_eps":
        eps = 1.2
        A, B = _near_eps(rng, 300, d, eps)
    else:
        big = 1e18 if precision == "float32" else 1e150    # within the precision's range
        scale = {"normal": 1.0, "tiny": 1.0 / big, "huge": big}[case]
        A = rng.normal(size=(300, d)) * scale
        B = A + rng.normal(0, 0.3, size=(300, d)) * scale
        eps = 1.2 * scale
    dtype = np.float32 if precision == "float32" else np.float64
    accepted = oracle(A, B, eps, dtype)
    kept = _kept(A, B, eps, precision)
    assert accepted.any()
    assert not (accepted & ~kept).any()
    if case == "normal":                     # and the screen screens
        assert kept.sum() < 0.2 * kept.size


def test_rule_offers_fp16_on_the_gpu_only():
    assert choose_algorithm("brute-fp16", 64, device="gpu") == "brute-fp16"
    assert choose_algorithm("auto", 64, device="gpu") != "brute-fp16"
    with pytest.raises(ValueError, match="GPU's tensor cores"):
        choose_algorithm("brute-fp16", 64, device="cpu")
    with pytest.raises(ValueError, match="does not stream chunks"):
        choose_algorithm("brute-fp16", 64, chunks=True, device="gpu")
    with pytest.raises(ValueError, match="GPU's tensor cores"):
        sj.self_join(np.zeros((3, 16)), 1.0, device="cpu", algorithm="brute-fp16")


# -- the GPU engine, its kernel emulated on the CPU ----------------------------

@pytest.fixture
def emulated_fp16(emulated_gpu, monkeypatch):
    """The brute force's emulated GPU engine (``test_join_brute``), its FP16
    product stood in by NumPy's IEEE float32 product of the same integers."""
    monkeypatch.setattr(emulated_gpu, "fp16_product",
                        lambda cp, A, B: A.astype(np.float32) @ B.astype(np.float32).T)
    return emulated_gpu


def _emulated_check(run, R, X, eps, precision):
    from skyjoin.simjoin.plan import request

    dtype = np.float32 if precision == "float32" else np.float64
    X, R = X.astype(dtype), R.astype(dtype)
    for include_self in (False, True):
        plan = request("gpu", self_join=True, precision=precision, include_self=include_self,
                       algorithm="brute-fp16")
        nt = run(plan, None, X, eps)
        mask = oracle(X, X, eps, dtype)
        np.fill_diagonal(mask, False)
        indptr, indices = table_of(mask, include_self)
        np.testing.assert_array_equal(nt.indptr, indptr)
        np.testing.assert_array_equal(nt.indices, indices)
        c = run(request("gpu", self_join=True, output="counts", include_self=include_self,
                        precision=precision, algorithm="brute-fp16"), None, X, eps)
        np.testing.assert_array_equal(c, np.diff(indptr))
    nt = run(request("gpu", self_join=False, precision=precision, algorithm="brute-fp16"),
             R, X, eps)
    indptr, indices = table_of(oracle(R, X, eps, dtype))
    np.testing.assert_array_equal(nt.indptr, indptr)
    np.testing.assert_array_equal(nt.indices, indices)
    return indptr


@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("scale", [1.0, 1e-150, 1e150])
def test_emulated_gpu_fp16_equals_the_oracle(emulated_fp16, precision, scale):
    if precision == "float32" and scale != 1.0:
        pytest.skip("float32 holds neither scale")
    rng = np.random.default_rng(10)
    Z = rng.normal(size=(90, 4)) @ rng.normal(size=(4, 18))
    X = (Z + rng.normal(0, 0.05, size=Z.shape)) * scale
    R = X[:50] + rng.normal(0, 0.3, size=(50, 18)) * scale
    indptr = _emulated_check(emulated_fp16.run, R, X, 3.0 * scale, precision)
    assert indptr[-1] > 0


def test_emulated_gpu_fp16_ties_and_far_clusters(emulated_fp16):
    rng = np.random.default_rng(12)
    B = rng.integers(0, 9, size=(40, 20)).astype(np.float64) * 10
    step = np.zeros((40, 20))
    step[np.arange(40), rng.integers(0, 20, 40)] = 2.0
    X = np.concatenate([B, B + step, B - step])             # pairs exactly at eps
    _emulated_check(emulated_fp16.run, X[::3] + 0.5, X, 2.0, "float64")
    A = 1e8 + rng.normal(0, 1e-3, size=(40, 16))
    X = np.concatenate([A, -A])
    indptr = _emulated_check(emulated_fp16.run, X[::2], X, 4e-3, "float64")
    assert indptr[-1] > 0
    A, B = _near_eps(rng, 60, 24, 1.2)
    indptr = _emulated_check(emulated_fp16.run, A, np.concatenate([A, B]), 1.2, "float64")
    assert indptr[-1] >= 59


# -- on a GPU --------------------------------------------------------------------

@gpu
def test_gpu_fp16_product_is_exact_on_the_lattice():
    import cupy as cp

    from skyjoin.simjoin.gpu.brute import fp16_product

    rng = np.random.default_rng(4)
    for d in (8, 96, 1024):
        X = rng.integers(-2048, 2049, size=(700, d))
        norm = np.sqrt((X.astype(np.float64) ** 2).sum(axis=1))
        X = np.trunc(X * (4095.0 / np.maximum(norm, 4095.0))[:, None]).astype(np.int64)
        X[1] = -X[2]
        Y = X[::-1].copy()
        Y[:, ::3] *= -1
        got = fp16_product(cp, cp.asarray(X, dtype=cp.float16), cp.asarray(Y, dtype=cp.float16))
        np.testing.assert_array_equal(cp.asnumpy(got).astype(np.int64), X @ Y.T)


@gpu
@pytest.mark.parametrize("precision", ["float64", "float32"])
def test_gpu_fp16_equals_brute_and_the_oracle(precision):
    rng = np.random.default_rng(11)                # 30 blobs in 32-D
    X = np.concatenate([c + rng.normal(0, 0.4, (300, 32)) for c in rng.normal(0, 3, (30, 32))])
    a = check_gpu_screen("brute-fp16", X, 2.5, precision, [("brute", "gpu")])
    dtype = np.float32 if precision == "float32" else np.float64
    mask = oracle(X[:1500], X[:1500], 2.5, dtype)
    np.fill_diagonal(mask, False)
    b = sj.self_join(X[:1500], 2.5, algorithm="brute-fp16", device="gpu", precision=precision)
    indptr, indices = table_of(mask)
    assert a.n_pairs > 0 and indptr[-1] > 0
    np.testing.assert_array_equal(b.indptr, indptr)
    np.testing.assert_array_equal(b.indices, indices)


@gpu
def test_gpu_fp16_adversarial_margin_and_ties():
    rng = np.random.default_rng(12)
    A = 1e8 + rng.normal(0, 1e-3, size=(300, 16))
    X = np.concatenate([A, -1e8 + rng.normal(0, 1e-3, size=(300, 16))])
    B = rng.integers(0, 9, size=(150, 20)).astype(np.float64) * 10
    step = np.zeros((150, 20))
    step[np.arange(150), rng.integers(0, 20, 150)] = 2.0
    N = np.concatenate(_near_eps(rng, 2000, 24, 1.2))
    for P, eps in ((X, 4e-3), (np.concatenate([B, B + step, B - step]), 2.0), (N, 1.2)):
        mask = oracle(P, P, eps)
        np.fill_diagonal(mask, False)
        nt = sj.self_join(P, eps, algorithm="brute-fp16", device="gpu")
        indptr, indices = table_of(mask)
        assert indptr[-1] > 0
        np.testing.assert_array_equal(nt.indptr, indptr)
        np.testing.assert_array_equal(nt.indices, indices)
