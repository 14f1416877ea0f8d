"""dbscan_sweep and dbscan_model against scikit-learn and against their own definitions."""

import numpy as np
import pytest
from sklearn.cluster import DBSCAN as SkDBSCAN

import skyjoin
from skyjoin.cluster.sweep import ideal_pipeline_time, pipeline_makespan


def _oracle(X, eps, m, w=None):
    sk = SkDBSCAN(eps=eps, min_samples=m, algorithm="kd_tree").fit(X, sample_weight=w)
    return sk.core_sample_indices_, sk.labels_


@pytest.mark.parametrize("pipeline", [True, False])
def test_sweep_equals_separate_sklearn_runs(pipeline):
    rng = np.random.default_rng(0)
    C = rng.uniform(0, 10, (5, 2))
    X = np.round(C[rng.integers(0, 5, 1500)] + rng.normal(0, 0.7, (1500, 2)), 1)  # ties
    eps = [0.2, 0.3, 0.5]
    ms = [3, 20, 8, 1, 8, 40]
    res = list(skyjoin.dbscan_sweep(X, eps=eps, min_samples=ms, device="cpu",
                                    pipeline=pipeline))
    assert [(r.eps, r.min_samples) for r in res] == [(e, m) for e in eps for m in (40, 20, 8, 3, 1)]
    for r in res:
        core, labels = _oracle(X, r.eps, r.min_samples)
        np.testing.assert_array_equal(r.core_sample_indices, core)
        np.testing.assert_array_equal(r.labels, labels)
        assert r.n_clusters == labels.max() + 1
        assert r.timings["table"] >= 0 and r.timings["assign"] >= 0


def test_sweep_weights_and_dimensions():
    rng = np.random.default_rng(1)
    for d in (1, 3, 5):
        X = rng.integers(0, 6, (300, d)).astype(float)
        w = rng.integers(-1, 4, 300).astype(float)
        for r in skyjoin.dbscan_sweep(X, eps=[1.0, 1.5], min_samples=[2, 5, 9],
                                      sample_weight=w, device="cpu", progress=False):
            core, labels = _oracle(X, r.eps, r.min_samples, w)
            np.testing.assert_array_equal(r.core_sample_indices, core)
            np.testing.assert_array_equal(r.labels, labels)


def test_sweep_bad_input():
    X = np.zeros((4, 2))
    with pytest.raises(ValueError):
        list(skyjoin.dbscan_sweep(X, eps=[0.1, -1.0], min_samples=[3]))
    with pytest.raises(ValueError):
        list(skyjoin.dbscan_sweep(X, eps=[0.1], min_samples=[0]))
    with pytest.raises(ValueError):
        list(skyjoin.dbscan_sweep(X, eps=[], min_samples=[3]))
    with pytest.raises(ValueError):
        list(skyjoin.dbscan_sweep(X, eps=0.1, min_samples=3, sample_weight=[1.0]))
    with pytest.raises(ValueError, match="method must be 'auto' or 'hybrid'"):
        list(skyjoin.dbscan_sweep(X, eps=0.1, min_samples=3, method="grid"))


@pytest.mark.parametrize("pipeline", [True, False])
def test_sweep_hybrid_method_builds_tables_and_equals_sklearn(pipeline):
    """method="hybrid" (the paper's HYBRID-DBSCAN) takes the table path where "auto"
    takes the grid, with the same labels."""
    rng = np.random.default_rng(11)
    X = np.round(rng.normal(0, 1.0, (1200, 2)), 2)
    res = _check_sweep(X, [0.1, 0.2, 0.3], [3, 12], method="hybrid", pipeline=pipeline)
    assert {r.timings["path"] for r in res} == {"table"}
    assert all(r.timings["pairs"] > 0 for r in res)


def test_sweep_stops_cleanly_when_abandoned():
    X = np.random.default_rng(2).uniform(0, 1, (500, 2))
    gen = skyjoin.dbscan_sweep(X, eps=[0.05, 0.06, 0.07, 0.08], min_samples=[3], device="cpu")
    first = next(gen)
    assert first.eps == 0.05
    gen.close()  # the producer thread must stop, not hang


def test_ideal_pipeline_time():
    assert ideal_pipeline_time(10.0, 1) == 10.0
    assert ideal_pipeline_time(8.0, 8) == pytest.approx(8.0 * 9 / 16)


def test_pipeline_makespan_is_eq2_when_balanced():
    # equal stages: equation (2)
    assert pipeline_makespan([0.5] * 8, [0.5] * 8) == pytest.approx(ideal_pipeline_time(8.0, 8))
    # the longer stage runs back to back: builds 3 s each, assignments 1 s
    assert pipeline_makespan([3, 3, 3], [1, 1, 1]) == pytest.approx(10.0)
    assert pipeline_makespan([1, 1, 1], [3, 3, 3]) == pytest.approx(10.0)
    assert pipeline_makespan([2, 1], [1, 3]) == pytest.approx(6.0)


def test_model_reproduces_probe_and_scales_with_ball_volume():
    rng = np.random.default_rng(3)
    for d in (2, 3):
        X = rng.uniform(0, 40, (20000, d))
        model = skyjoin.dbscan_model(X, probe_eps=1.5 if d == 2 else 3.0, device="cpu")
        assert model.d == d and model.n == 20000
        assert model.predict(model.probe_eps) == pytest.approx(model.probe_time)
        assert model.predict(2 * model.probe_eps) > model.predict(model.probe_eps)
        # mean neighbours at another eps, against the real join (uniform data:
        # linear in the ball volume, up to border effects)
        eps = 0.7 * model.probe_eps
        real = skyjoin.self_join(X, eps, output="counts", device="cpu").mean()
        assert model.predict_neighbours(eps) == pytest.approx(real, rel=0.1)
        np.testing.assert_allclose(model.predict([eps, eps]), model.predict(eps))


def test_model_bad_input():
    with pytest.raises(ValueError):
        skyjoin.dbscan_model(np.zeros((0, 2)), probe_eps=1.0)
    with pytest.raises(ValueError):
        skyjoin.dbscan_model(np.zeros((3, 2)), probe_eps=0.0)


def _check_sweep(X, eps_list, ms, w=None, **kw):
    res = list(skyjoin.dbscan_sweep(X, eps=eps_list, min_samples=ms, sample_weight=w,
                                    device="cpu", **kw))
    levels = sorted(set(ms), reverse=True)
    assert [(r.eps, r.min_samples) for r in res] == [(e, m) for e in eps_list for m in levels]
    for r in res:
        core, labels = _oracle(X, r.eps, r.min_samples, w)
        np.testing.assert_array_equal(r.core_sample_indices, core)
        np.testing.assert_array_equal(r.labels, labels)
        assert r.n_clusters == (labels.max() + 1 if len(labels) else 0)
    return res


@pytest.mark.parametrize("seed", range(6))
def test_sweep_many_min_samples_random(seed):
    """Many min_samples (ties, 1, beyond every neighbourhood) on clustered data with
    duplicates, in 1-4 D: every level equals scikit-learn's run (grid path)."""
    rng = np.random.default_rng(100 + seed)
    d = 1 + seed % 4
    n = int(rng.integers(200, 1500))
    centres = rng.uniform(0, 6, (int(rng.integers(1, 6)), d))
    X = centres[rng.integers(0, len(centres), n)] + rng.normal(0, 0.5, (n, d))
    X = np.round(X, int(rng.integers(1, 3)))           # ties and duplicates
    X[rng.integers(0, n, n // 10)] = X[rng.integers(0, n, n // 10)]
    ms = [1, n + 5] + rng.integers(1, 60, 14).tolist() + [7, 7]
    res = _check_sweep(X, [0.15, 0.3 + 0.1 * seed], ms)
    if d <= 3:  # in 4-D the finer grid of eps 0.15 has too many cells: the table path
        assert {r.timings["path"] for r in res} == {"grid-cpu"}


@pytest.mark.parametrize("seed", range(3))
def test_sweep_weights_random(seed):
    rng = np.random.default_rng(200 + seed)
    n = 800
    X = np.round(rng.normal(0, 1.0, (n, 2 + seed % 2)), 1)
    w = rng.integers(-2, 5, n).astype(float) / 2      # exact sums; negative weights
    _check_sweep(X, [0.2, 0.35], [1, 2, 3, 4, 6, 9, 13], w)


def test_sweep_table_path_equals_sklearn(monkeypatch):
    """The table path (taken when the grid does not fit, d > 4, float32, GPU)."""
    from skyjoin.cluster.sweep import pipeline as sweep

    monkeypatch.setattr(sweep, "grid_index", lambda *a, **k: None)
    rng = np.random.default_rng(5)
    X = np.round(rng.normal(0, 1.0, (700, 2)), 1)
    res = _check_sweep(X, [0.2, 0.3], [1, 3, 3, 8, 20, 800])
    assert {r.timings["path"] for r in res} == {"table"}


def test_sweep_grid_single_points_and_one_cell():
    X = np.zeros((5, 2))                    # one cell, all duplicates
    _check_sweep(X, [0.1], [1, 5, 6])
    X = np.array([[0.0, 0.0]])
    _check_sweep(X, [0.1], [1, 2])
    X = np.arange(40, dtype=float)[:, None] * 0.5   # a chain in 1-D
    _check_sweep(X, [0.5, 0.6, 1.0], [1, 2, 3, 4])


@pytest.mark.parametrize("seed", range(3))
def test_sweep_grid_levels_labelled_in_several_passes(monkeypatch, seed):
    """The grid path labels as many levels per pass as its output budget allows: with a
    tiny budget every pass holds one or a few levels, and each level still equals
    scikit-learn's run (dense cells of mixed levels: reordered in place)."""
    from skyjoin.cluster.sweep import grid_links as sweep

    rng = np.random.default_rng(300 + seed)
    n = int(rng.integers(600, 1600))
    d = 2 + seed % 2
    X = np.round(rng.normal(0, 0.6, (n, d)) * rng.choice([0.25, 1.0], (n, 1)), 2)
    X[rng.integers(0, n, n // 5)] = X[rng.integers(0, n, n // 5)]   # duplicates
    monkeypatch.setattr(sweep, "_GROUP_BYTES", int(rng.integers(1, 3)) * 16 * (n + 1))
    ms = sorted(set(rng.integers(1, 300, 12).tolist()) | {1, 2})
    res = _check_sweep(X, [0.1, 0.25], ms)
    assert {r.timings["path"] for r in res} == {"grid-cpu"}


@pytest.mark.parametrize("pipeline", [True, False])
@pytest.mark.parametrize("parts_per_thread", [1, 1000])
def test_sweep_grid_border_reaches_in_any_number_of_parts(monkeypatch, parts_per_thread,
                                                          pipeline):
    """The border reaches are filled in ranges of cells handed out to threads: one range
    or one per cell, pipelined or not, the labels equal scikit-learn's."""
    from skyjoin.cluster.sweep import grid_reach as sweep

    rng = np.random.default_rng(7)
    X = np.round(rng.normal(0, 1.0, (2500, 2)), 2)
    monkeypatch.setattr(sweep, "_REACH_PARTS_PER_THREAD", parts_per_thread)
    res = _check_sweep(X, [0.08, 0.2, 0.05], [2, 5, 9, 30], pipeline=pipeline)
    assert {r.timings["path"] for r in res} == {"grid-cpu"}


def test_cell_pairs_equal_every_near_pair_once():
    """The parallel bucketed cell pairs: exactly the unordered pairs of near cells not
    separated by the box test (brute force over all cell pairs), in the bucket of their
    bound, by increasing first cell."""
    from skyjoin.cluster.sweep import grid_links as sweep
    from skyjoin.cluster.grid_cpu import boxes_apart as _boxes_apart

    rng = np.random.default_rng(3)
    X = np.round(rng.normal(0, 1.0, (3000, 2)), 2)
    ms = [2, 6, 15, 40]
    g = sweep.grid_index(X, 0.15, ms)
    ptr, pa, pb = sweep._prepare_links(g)
    m, d = len(g.cells), X.shape[1]
    coords = np.empty((m, d), dtype=np.int64)   # integer cell coordinates (last dim fastest)
    rem = g.cells.astype(np.int64)
    for k in range(d - 1, -1, -1):
        coords[:, k] = rem % g.radix[k]
        rem //= g.radix[k]
    slot = {tuple(c): t for t, c in enumerate(coords.tolist())}
    near = set()
    for t in range(m):
        for o in g.offsets.tolist():
            u = slot.get(tuple(int(a) + int(b) for a, b in zip(coords[t], o)))
            if (u is not None and u != t and g.maxlev[t] > 0 and g.maxlev[u] > 0
                    and not _boxes_apart(g.box_lo, g.box_hi, t, u, g.eps2)):
                near.add((min(t, u), max(t, u)))
    got = [tuple(sorted((int(a), int(b)))) for a, b in zip(pa, pb)]
    assert len(near) > 1000
    assert len(got) == len(set(got)) == len(near) and set(got) == near
    K = len(ms)
    for k in range(K + 1):
        seg = slice(ptr[k], ptr[k + 1])
        assert np.all(np.minimum(g.maxlev[pa[seg]], g.maxlev[pb[seg]]) == k)
        assert np.all(np.diff(pa[seg]) >= 0)


@pytest.mark.parametrize("n_threads", [2, 3, 5])
def test_share_runs_every_task_once_after_prepare(n_threads):
    import threading
    import time

    from skyjoin.cluster.sweep.grid_reach import _share

    log, lock = [], threading.Lock()
    serial_done = threading.Event()

    def serial():
        time.sleep(0.02)
        serial_done.set()

    def prepare():
        with lock:
            log.append("prepare")

    def task(i):
        with lock:
            log.append(i)

    _share(serial, prepare, task, 200, n_threads=n_threads)
    assert serial_done.is_set()
    assert log[0] == "prepare"
    assert sorted(log[1:]) == list(range(200))


@pytest.mark.parametrize("where", ["serial", "prepare", "task"])
def test_share_raises_the_error_of_any_part(where):
    from skyjoin.cluster.sweep.grid_reach import _share

    def boom(*_):
        raise RuntimeError(f"{where} failed")

    parts = {"serial": lambda: None, "prepare": lambda: None, "task": lambda i: None}
    parts[where] = boom
    with pytest.raises(RuntimeError, match=f"{where} failed"):
        _share(parts["serial"], parts["prepare"], parts["task"], 50, n_threads=3)
