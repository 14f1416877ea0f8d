"""The CPU join's packing helpers (``skyjoin.simjoin.cpu._simd``) against NumPy,
and the tiled fill with and without the vector code."""

import os
import subprocess
import sys

import numba as nb
import numpy as np
import pytest

from skyjoin.simjoin.cpu._simd import compress16, compress16_scalar


@nb.njit(nogil=True)
def compress_all(dst, src, dist, m, thr, scalar):
    """Pack the candidates of ``src[:m]`` with ``dist <= thr`` to the front
    of ``dst``; returns how many.  ``compress16`` (or, with ``scalar``,
    ``compress16_scalar``) in steps of 16: ``src`` and ``dist`` must be
    readable up to m rounded up to 16, with NaN distances past m, and
    ``dst`` must hold m + 16."""
    n = 0
    for p in range(0, m, 16):
        if scalar:
            n += compress16_scalar(dst, n, src, p, dist, thr)
        else:
            n += compress16(dst, n, src, p, dist, thr)
    return n


@pytest.mark.parametrize("scalar", [False, True])
@pytest.mark.parametrize("idt", [np.int32, np.int64])
@pytest.mark.parametrize("fdt", [np.float64, np.float32])
def test_compress_matches_boolean_mask(rng, scalar, idt, fdt):
    for m in [0, 1, 15, 16, 17, 31, 100, 225, 513]:
        mp = (m + 15) // 16 * 16
        src = rng.integers(0, 2**31 - 1, mp).astype(idt)
        dist = rng.uniform(0, 2, mp).astype(fdt)
        dist[rng.random(mp) < 0.05] = np.nan       # excluded points
        dist[rng.random(mp) < 0.05] = 1.0          # ties at the threshold pass
        dist[m:] = np.nan                          # padding never passes
        thr = fdt(1.0)
        dst = np.full(m + 16, -1, dtype=idt)
        n = compress_all(dst, src, dist, m, thr, scalar)
        want = src[:m][dist[:m] <= thr]
        assert n == want.shape[0]
        assert np.array_equal(dst[:n], want)


def test_scalar_code_path_gives_the_same_table():
    # a fresh process with the vector code switched off (and no on-disk
    # cache, so the portable kernels are compiled)
    code = (
        "import numpy as np, skyjoin as sj\n"
        "from skyjoin.simjoin.cpu import _simd\n"
        "assert not _simd.VECTOR_COMPRESS and not _simd.PREFETCH\n"
        "rng = np.random.default_rng(7)\n"
        "X = rng.exponential(0.05, (3000, 2))\n"
        "nt = sj.self_join(X, 0.02, device='cpu', pattern='full')\n"
        "np.save(__import__('sys').argv[1], np.concatenate([nt.indptr, nt.indices]))\n"
    )
    import tempfile

    import skyjoin as sj

    rng = np.random.default_rng(7)
    X = rng.exponential(0.05, (3000, 2))
    want = sj.self_join(X, 0.02, device="cpu", pattern="full")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "t.npy")
        env = dict(os.environ, SKYJOIN_NO_SIMD="1", SKYJOIN_NUMBA_CACHE="0")
        subprocess.run([sys.executable, "-c", code, out], check=True, env=env, timeout=600)
        got = np.load(out)
    assert np.array_equal(got, np.concatenate([want.indptr, want.indices]))
