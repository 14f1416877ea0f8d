"""``skyjoin demo``: the join, DBSCAN and the skyline on one generated data set, drawn.

Then a haversine DBSCAN of (lat, lon) clusters on the sphere
(:func:`skyjoin.datasets.geographic`: both poles and the antimeridian),
drawn on a world map; it stays small (at most :data:`GEO_POINTS` points).

``demo_cmd`` is the command and :func:`run_demo` its work;
:func:`demo_dbscan` and :func:`demo_skyline` are the demo's DBSCAN and
skyline steps, usable alone (each times one call of the public operator and
summarises it).  The pictures are drawn by
:mod:`skyjoin.cli.plots`.
"""

from __future__ import annotations

import os
import time
from typing import Callable

import click
import numpy as np

import skyjoin as sj

from .._core import compiling
from .._core.plans import recording
from ..datasets import EARTH_RADIUS_KM, blobs, geographic, skyline_data
from .errors import user_errors
from .options import DEVICE, VERBOSE, ran_on
from .plots import plot_clusters, plot_map_clusters, plot_skyline, save_demo
from .warmup import compile_elsewhere
from .wording import plural

__all__ = ["demo_cmd", "run_demo", "demo_dbscan", "demo_skyline", "cluster_summary"]

#: the warm-up call (:func:`skyjoin.cli.warmup.warm_calls`) that compiles the
#: demo's DBSCAN kernels in a helper process
DBSCAN_WARM = "DBSCAN float64: grid"
#: the demo's haversine DBSCAN: at most this many geographic points, in
#: 12 clusters of 500 km, eps 100 km at this size (scaled as 1/sqrt(n) below it)
GEO_POINTS = 20_000
GEO_CLUSTERS, GEO_SPREAD_KM, GEO_EPS_KM, GEO_MIN_SAMPLES = 12, 500.0, 100.0, 10


def geo_setting(n: int) -> tuple[int, float]:
    """The demo's geographic points and eps (km) for ``-n n``: min(n,
    :data:`GEO_POINTS`) points, eps :data:`GEO_EPS_KM` scaled by
    sqrt(GEO_POINTS / points), so that each cluster keeps about as many
    neighbours per point at any size.  O(1)."""
    m = min(n, GEO_POINTS)
    return m, GEO_EPS_KM * (GEO_POINTS / m) ** 0.5


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def cluster_summary(labels, core, seconds, eps, min_samples) -> dict:
    """Counts of a clustering: eps, min_samples, n, clusters, noise, core, seconds."""
    n_clusters = int(labels.max()) + 1 if len(labels) else 0
    return {"eps": float(eps), "min_samples": int(min_samples), "n": int(len(labels)),
            "clusters": n_clusters, "noise": int((labels < 0).sum()), "core": int(len(core)),
            "seconds": float(seconds)}


def demo_dbscan(X, eps, min_samples, ax=None, device=None, metric="euclidean"):
    """Cluster X with skyjoin's DBSCAN, summarise, and draw on ``ax`` if given.

    Parameters
    ----------
    X : array_like, shape (n, d)
    eps : float
    min_samples : int
    ax : matplotlib.axes.Axes, optional
        Where to draw the clusters (noise in grey); with
        ``metric="haversine"`` a map Axes (:func:`skyjoin.cli.plots.plot_map_clusters`).
    device : {"auto", "cpu", "gpu"}, optional
    metric : str
        The DBSCAN's metric ("haversine": X is (lat, lon) in radians).

    Returns
    -------
    dict
        eps, min_samples, n, clusters, noise, core, seconds (of the fit
        alone), path (which DBSCAN path ran) and labels (the array).

    Notes
    -----
    One :meth:`skyjoin.DBSCAN.fit`: its cost, plus O(n) for the summary.

    See Also
    --------
    skyjoin.DBSCAN, skyjoin.cli.plots.plot_clusters

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(1000, 2))
    >>> demo_dbscan(X, eps=0.2, min_samples=5, device="cpu")["n"]
    1000
    """
    est, secs = _timed(lambda: sj.DBSCAN(eps=eps, min_samples=min_samples, metric=metric,
                                         device=device).fit(X))
    out = cluster_summary(est.labels_, est.core_sample_indices_, secs, eps, min_samples)
    out["path"] = est.path_
    if ax is not None:
        title = (f"DBSCAN eps={eps:g}, min_samples={min_samples}: "
                 f"{plural(out['clusters'], 'cluster')}, noise in grey")
        if metric == "haversine":
            plot_map_clusters(ax, X, est.labels_, title=title)
        else:
            plot_clusters(ax, np.asarray(X), est.labels_, title=title)
    out["labels"] = est.labels_
    return out


def demo_skyline(X_or_n=20_000, d=2, kind="anticorrelated", seed=0, device=None, ax=None,
                 stats=True):
    """Compute a skyline for the demo and optionally draw it.

    Parameters
    ----------
    X_or_n : int or array_like of shape (n, d)
        Points, or how many to generate (skyline data of ``kind`` in ``d`` dims).
    d : int
        Dimensions of generated data.
    kind : {"independent", "correlated", "anticorrelated", "pareto"}
    seed : int
    device : {"auto", "cpu", "gpu"} or None
    ax : matplotlib.axes.Axes, optional
        Where to draw (see :func:`skyjoin.cli.plots.plot_skyline`).
    stats : bool
        Count the work (pre-filter survivors, dominance and mask tests); on
        the GPU the counting costs time, so the demo's timed run passes False.

    Returns
    -------
    dict
        n, d, skyline size, seconds, device (as the skyline reports it; None
        if it reports none), pre-filter survivors, work counters (None
        without ``stats``), and indices (the skyline's rows).

    Notes
    -----
    One :func:`skyjoin.skyline` call: its cost.

    See Also
    --------
    skyjoin.skyline, skyjoin.cli.plots.plot_skyline

    Examples
    --------
    >>> demo_skyline(2000, d=3, device="cpu")["n"]
    2000
    """
    if isinstance(X_or_n, (int, np.integer)):
        X = skyline_data(int(X_or_n), d, kind, seed=seed)
    else:
        X = np.asarray(X_or_n, dtype=np.float64)
    with recording() as plans:
        if stats:
            (sky, st), secs = _timed(lambda: sj.skyline(X, device=device, return_stats=True))
        else:
            sky, secs = _timed(lambda: sj.skyline(X, device=device))
            st = {}
    dev = ran_on(plans)
    if ax is not None:
        on = f" ({dev})" if dev else ""
        plot_skyline(ax, X, sky, title=f"skyline: {len(sky):,} of {len(X):,} points{on}")
    return {"n": int(X.shape[0]), "d": int(X.shape[1]), "skyline": int(sky.size),
            "seconds": secs, "device": dev, "prefilter_survivors": st.get("prefilter_survivors"),
            "dominance_tests": st.get("dominance_tests"), "mask_tests": st.get("mask_tests"),
            "indices": sky}


def run_demo(n: int = 200_000, out_dir: str = "skyjoin-demo", seed: int = 0,
             device: str | None = None, echo: Callable[[str], None] = print) -> dict:
    """Generate 2-D Gaussian blobs, run the join, DBSCAN and the skyline,
    then a haversine DBSCAN of geographic points.

    Prints a short table and writes ``demo.png`` into ``out_dir``: the points
    coloured by their number of neighbours, the DBSCAN clusters (noise in
    grey), the skyline staircase, and the geographic clusters on a world
    map (:func:`geo_setting`: at most :data:`GEO_POINTS` points).

    Parameters
    ----------
    n : int
        Number of points (50 blobs of std 1.5 in [0, 100]^2).
    out_dir : str
        Folder for the picture (created if needed).
    seed : int
        Seed of the generator.
    device : {"auto", "cpu", "gpu"}, optional
    echo : callable
        Where to print.

    Returns
    -------
    dict
        The figures printed, and the path of the picture.

    Raises
    ------
    ValueError
        For n < 10.
    """
    if n < 10:
        raise ValueError(f"the demo needs at least 10 points, got n={n}")
    X = blobs(n, 2, centers=50, std=1.5, seed=seed)
    eps, min_samples = 0.3, 10
    n_geo, geo_km = geo_setting(n)
    G = geographic(n_geo, n_clusters=GEO_CLUSTERS, spread_km=GEO_SPREAD_KM, seed=seed)
    geo_eps = geo_km / EARTH_RADIUS_KM
    echo(f"skyjoin demo: {n:,} points in 2-D (50 Gaussian blobs)")
    # warm-up on small inputs: the first call of each operator compiles its
    # kernels (cached on disk afterwards), which the table should not count.
    # The join warms the pattern that its plan for the whole set reports
    # (its counts pass decides it; a sparse slice alone would compile the
    # other one too).
    clump = np.random.default_rng(seed).normal(50.0, 0.05, (2000, 2))
    warm = np.concatenate([X[:2000], clump])
    # DBSCAN's kernels compile in another process (another core) while this
    # one compiles the join's (the grid's first), when Numba's cache can
    # hand them over and something compiles at all; the 2-D skyline
    # compiles nothing on the CPU (sort2d, NumPy alone).  The notice gives
    # what this process compiles on the CPU, the demo's own figure
    # (docs/decisions/core-compile-time.md).
    t0 = time.perf_counter()
    helper: list = []
    ops = ("skyjoin.simjoin", "skyjoin.cluster", "skyjoin.pareto") if device == "gpu" else \
        ("skyjoin.cli.demo",)

    def start_helper():         # at the first compile: the join has reported its plan
        helper.append(compile_elsewhere([DBSCAN_WARM], ran_on(plans)))

    with recording() as plans, compiling.when_compiling(start_helper), compiling.expect(ops):
        sj.self_join(X, eps, output="counts", device=device)
        ran = plans[-1] if plans else None
        pattern = getattr(ran, "pattern", "auto")
        sj.self_join(warm, eps, device=device, pattern=pattern)
        for p in helper:
            if p is not None:
                p.wait()
        sj.DBSCAN(eps=eps, min_samples=min_samples, device=device).fit(warm)
        # all of G: at 2,000 points the join takes another of its paths (the
        # table's), and the timed run would compile the one it takes here
        sj.DBSCAN(eps=geo_eps, min_samples=GEO_MIN_SAMPLES, metric="haversine",
                  device=device).fit(G)
        sj.skyline(X[:20000], device=device)
    t_compile = time.perf_counter() - t0
    where = f" on the {ran.device}, the join's pattern {pattern}" if ran is not None else ""
    echo(f"kernels ready in {t_compile:.1f} s{where} (compiled on the first run, then loaded "
         f"from cache)")
    nt, t_join = _timed(lambda: sj.self_join(X, eps, device=device, pattern=pattern))
    counts, t_counts = _timed(lambda: sj.self_join(X, eps, output="counts", device=device,
                                                   pattern=pattern))
    db = demo_dbscan(X, eps, min_samples, device=device)
    sk = demo_skyline(X, device=device, stats=False)
    geo = demo_dbscan(G, geo_eps, GEO_MIN_SAMPLES, device=device, metric="haversine")
    labels, sky = db["labels"], sk["indices"]
    rows = [
        ("self-join (CSR table)", f"eps={eps}", f"{nt.n_pairs:,} pairs, {nt.n_pairs / n:.1f} per point", t_join),
        ("self-join (counts only)", f"eps={eps}", f"max {int(counts.max())} neighbours", t_counts),
        ("DBSCAN", f"eps={eps}, min_samples={min_samples}",
         f"{plural(db['clusters'], 'cluster')}, {plural(db['noise'], 'noise point')}",
         db["seconds"]),
        ("skyline (min, min)", "", f"{len(sky)} points", sk["seconds"]),
        (f"DBSCAN haversine, {n_geo:,} lat/lon", f"eps={geo_km:.0f} km, min_samples="
         f"{GEO_MIN_SAMPLES}", f"{plural(geo['clusters'], 'cluster')}, "
         f"{plural(geo['noise'], 'noise point')}", geo["seconds"]),
    ]
    w = max(len(r[0]) for r in rows)
    w2 = max(len(r[1]) for r in rows)
    w3 = max(len(r[2]) for r in rows)
    echo(f"{'operator':<{w}}  {'parameters':<{w2}}  {'result':<{w3}}  {'time':>9}")
    for name, params, result, t in rows:
        echo(f"{name:<{w}}  {params:<{w2}}  {result:<{w3}}  {t:8.3f}s")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "demo.png")
    geo_title = (f"haversine DBSCAN, eps={geo_km:.0f} km: "
                 f"{plural(geo['clusters'], 'cluster')} (poles, antimeridian)")
    save_demo(path, X, counts, labels, sky, eps, geo=(G, geo["labels"], geo_title))
    echo(f"picture: {path}")
    return {"n": n, "pairs": nt.n_pairs, "compile_s": t_compile, "clusters": db["clusters"],
            "noise": db["noise"], "skyline": len(sky), "picture": path,
            "geo_clusters": geo["clusters"], "geo_path": geo["path"],
            "times": {r[0]: r[3] for r in rows}}


@click.command("demo")
@click.option("-n", "--n-points", "n", type=click.IntRange(min=10), default=200_000,
              show_default=True, help="Points to generate (at least 10).")
@click.option("--out", "out_dir", default="skyjoin-demo", show_default=True, metavar="DIR",
              help="Folder for the picture (demo.png).")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@DEVICE
@VERBOSE
@user_errors
def demo_cmd(n, out_dir, seed, device):
    """Generate data, run the join, DBSCAN and the skyline (and a haversine DBSCAN
    on lat/lon clusters), print a table and draw them."""
    run_demo(n=n, out_dir=out_dir, seed=seed, device=device, echo=click.echo)
