"""The GPU epsilon grid (skyjoin.index.grid_gpu) with its kernels run on the host.

The device primitives and the grid kernels are compiled by the host compiler
and launched thread by thread, the range search of ``join.cu`` likewise
(``_cuda_emulation``), NumPy in CuPy's place.  Oracle: the grid's definition
in NumPy float64 (cell coordinates floor((x - lo) / side), masks, rank-space
linear ids, a stable sort), and for the candidate ranges, brute force: every
data point of an adjacent cell, and no other, is in a query cell's ranges.
The real kernels on a GPU are checked by the GPU tests (``-m gpu``).
"""

import sys

import numpy as np
import pytest

from _cuda_emulation import FakeCupy, Module, compiler, emulate_device_kernels

pytestmark = pytest.mark.skipif(compiler() is None, reason="no host C++ compiler")

_INT2 = "struct int2 { int x, y; };\nstatic inline int2 make_int2(int x, int y) { return {x, y}; }\n"


@pytest.fixture
def grid_gpu(monkeypatch):
    from skyjoin.index import grid_gpu

    monkeypatch.setitem(sys.modules, "cupy", FakeCupy())
    emulate_device_kernels(monkeypatch)
    src = grid_gpu._source()
    head = _INT2 + src[:src.index("// The distance test")]      # the range search only
    monkeypatch.setattr(grid_gpu, "compile_module", lambda names: Module(head, names))
    return grid_gpu


def _expected(P, lo, side, k):
    """The grid of P by its definition, in NumPy."""
    coords = np.floor((P[:, :k].astype(np.float64) - lo[:k]) / side[:k]).astype(np.int64)
    masks = [np.unique(coords[:, j]) for j in range(k)]
    radix = [m.size for m in masks]
    stride = [int(np.prod(radix[j + 1:], dtype=np.int64)) for j in range(k)]
    lid = sum(np.searchsorted(masks[j], coords[:, j]) * stride[j] for j in range(k))
    order = np.argsort(lid, kind="stable")
    ids, start = np.unique(lid[order], return_index=True)
    return coords, masks, stride, order, ids, np.r_[start, P.shape[0]]


def _cases():
    rng = np.random.default_rng(3)
    yield "uniform-2d", None, rng.uniform(0, 10, (3000, 2)), 0.4, "float64", None
    yield "ties-3d", None, np.round(rng.uniform(-3, 3, (2000, 3)) * 2) / 2, 0.5, "float64", None
    yield "r-join-s-4d", rng.normal(0, 1, (700, 4)), rng.normal(0.2, 1, (900, 4)), 0.6, "float64", None
    yield "float32-2d", None, rng.uniform(-1, 1, (2500, 2)).astype(np.float32), 0.05, "float32", None
    yield "k1-of-5d", None, rng.uniform(0, 4, (1500, 5)), 0.3, "float64", 1


@pytest.mark.parametrize("name,R,S,eps,precision,index_dims", list(_cases()),
                         ids=[c[0] for c in _cases()])
def test_emulated_gpu_grid_and_ranges_equal_numpy(grid_gpu, name, R, S, eps, precision, index_dims):
    from skyjoin.index.grid import cell_sides

    q, g = grid_gpu.build_gpu_grids(R, S, eps, precision, index_dims)
    sets = [S] if R is None else [S, R]
    k = g.k
    lo = np.min([P[:, :k].min(axis=0) for P in sets], axis=0).astype(np.float64)
    hi = np.max([P[:, :k].max(axis=0) for P in sets], axis=0).astype(np.float64)
    side = cell_sides(lo, hi, eps, S.shape[1], precision)
    for grid, P in zip((g, q), (S, S if R is None else R)):
        coords, masks, stride, order, ids, start = _expected(P, lo, side, k)
        np.testing.assert_array_equal(grid.order, order)
        np.testing.assert_array_equal(grid.points, P[order])
        np.testing.assert_array_equal(grid.cell_ids, ids)
        np.testing.assert_array_equal(grid.cell_start, start)
        np.testing.assert_array_equal(grid.point_cell, np.repeat(np.arange(ids.size), np.diff(start)))
        np.testing.assert_array_equal(grid.cell_coords, coords[order[start[:-1]]])
        assert grid.stride == tuple(stride)
        for m, want in zip(grid.masks, masks):
            np.testing.assert_array_equal(m, want)
        assert grid.order.dtype == np.int32 and grid.point_cell.dtype == np.int32
    rptr, ranges = grid_gpu.build_cell_ranges(q, g, "full")
    dcell = g.cell_coords[g.point_cell]                      # cell of each sorted data point
    for c in range(q.n_cells):
        got = np.zeros(g.n_points, dtype=int)
        for a, b in ranges[rptr[c]:rptr[c + 1]]:
            got[a:b] += 1
        want = (np.abs(dcell - q.cell_coords[c]) <= 1).all(axis=1)
        np.testing.assert_array_equal(got, want.astype(int), err_msg=f"query cell {c}")
    rptr_b, ranges_b = grid_gpu.bruteforce_ranges(q, g)
    np.testing.assert_array_equal(rptr_b, np.arange(q.n_cells + 1))
    np.testing.assert_array_equal(ranges_b, np.tile([0, g.n_points], (q.n_cells, 1)))


def test_emulated_engine_sort_plan_and_work_order(grid_gpu):
    """The engine's row classes and SORTBYWL order against their NumPy definitions."""
    from skyjoin.simjoin.gpu.engine import GpuEngine

    rng = np.random.default_rng(5)
    eng = object.__new__(GpuEngine)
    eng.cp = FakeCupy()
    lens = rng.choice([0, 1, 5, 64, 65, 2048, 2049, 9000, 40000], size=500)
    indptr = np.r_[0, np.cumsum(lens)].astype(np.int64)
    batches = [(0, 120), (120, 121), (121, 500)]
    edges = [0, 120, 121, 500]
    for (lo_len, hi_len, threads), got in zip(GpuEngine._SORT_CLASSES, eng.sort_plan(indptr, batches)):
        sel = (lens > lo_len) & (True if hi_len is None else lens <= hi_len)
        rows = np.flatnonzero(sel)
        assert got[:3] == (lo_len, hi_len, threads)
        np.testing.assert_array_equal(got[3], rows)
        assert got[4] == {e: int(np.searchsorted(rows, e)) for e in edges}
        if hi_len is None:
            np.testing.assert_array_equal(got[5], rows)
    # SORTBYWL: most work first, ties in grid order (a stable sort of -work)
    X = rng.uniform(0, 5, (800, 2))
    q, g = grid_gpu.build_gpu_grids(None, X, 0.5, "float64")
    rptr, ranges = grid_gpu.build_cell_ranges(q, g, "full")
    eng.qgrid = q
    eng.cell_work = np.array([sum(b - a for a, b in ranges[rptr[c]:rptr[c + 1]])
                              for c in range(q.n_cells)], dtype=np.int64)
    w = eng.cell_work[q.point_cell]
    np.testing.assert_array_equal(eng._most_work_first(q.point_cell), np.argsort(-w, kind="stable"))
    pos = rng.permutation(q.n_points)[:300].astype(np.int32)
    np.testing.assert_array_equal(eng._most_work_first(pos), pos[np.argsort(-w[pos], kind="stable")])
    # the engine's work statistics: range lengths per cell, mean and spread, candidates
    from skyjoin._core.device_kernels import launch
    from skyjoin._core.device_reduce import weighted_span_sum, work_sums

    got = np.empty(q.n_cells, dtype=np.int64)
    launch(eng.cp, "range_lengths", q.n_cells, (rptr, ranges, np.int64(q.n_cells), got))
    np.testing.assert_array_equal(got, eng.cell_work)
    mean, sd = work_sums(eng.cp, got, q.point_cell)
    assert mean == w.astype(np.float64).sum() / w.size
    assert sd == np.sqrt(((w - mean) ** 2).sum() / w.size)
    assert weighted_span_sum(eng.cp, got, q.cell_start) == int((got * np.diff(q.cell_start)).sum())
