"""``skyjoin demo``: the three operators on one generated data set, drawn."""

from __future__ import annotations

import os
import time
from typing import Callable

import numpy as np

__all__ = ["run_demo"]


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def run_demo(n: int = 200_000, out_dir: str = "skyjoin-demo", seed: int = 0,
             device: str | None = None, echo: Callable[[str], None] = print) -> dict:
    """Generate 2-D Gaussian blobs, run the join, DBSCAN and the skyline.

    Prints a short table and writes ``demo.png`` into ``out_dir``: the points
    coloured by their number of neighbours, the DBSCAN clusters (noise in
    grey) and the skyline staircase.

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
    """
    import skyjoin as sj

    from .._core.device import resolve_device
    from ..datasets import blobs

    if n < 10:
        raise ValueError(f"the demo needs at least 10 points, got n={n}")
    dev = resolve_device(device)
    X = blobs(n, 2, centers=50, std=1.5, seed=seed)
    eps, min_samples = 0.3, 10
    echo(f"skyjoin demo: {n:,} points in 2-D (50 Gaussian blobs), device {dev}")
    # warm-up on a small slice: the first call of each operator compiles its
    # kernels (cached on disk afterwards), which the table should not count
    # (a sparse slice and a dense clump: the engines take other paths for
    # sparse and for crowded cells)
    clump = np.random.default_rng(seed).normal(50.0, 0.05, (2000, 2))
    warm = np.concatenate([X[:2000], clump])
    _, t_compile = _timed(lambda: ([sj.self_join(warm, eps, device=dev, pattern=p)
                                    for p in ("full", "lid_unicomp")],
                                   sj.self_join(warm, eps, output="counts", device=dev),
                                   sj.DBSCAN(eps=eps, min_samples=min_samples, device=dev).fit(warm),
                                   sj.skyline(X[:20000], device=dev)))
    echo(f"kernels ready in {t_compile:.1f} s (compiled on the first run, then loaded from cache)")
    nt, t_join = _timed(lambda: sj.self_join(X, eps, device=dev))
    counts, t_counts = _timed(lambda: sj.self_join(X, eps, output="counts", device=dev))
    model, t_db = _timed(lambda: sj.DBSCAN(eps=eps, min_samples=min_samples, device=dev).fit(X))
    labels = model.labels_
    sky, t_sky = _timed(lambda: sj.skyline(X, device=dev))
    n_clusters = int(labels.max()) + 1 if labels.size else 0
    rows = [
        ("self-join (CSR table)", f"eps={eps}", f"{nt.n_pairs:,} pairs, {nt.n_pairs / n:.1f} per point", t_join),
        ("self-join (counts only)", f"eps={eps}", f"max {int(counts.max())} neighbours", t_counts),
        ("DBSCAN", f"eps={eps}, min_samples={min_samples}",
         f"{n_clusters} clusters, {int((labels == -1).sum()):,} noise points", t_db),
        ("skyline (min, min)", "", f"{len(sky)} points", t_sky),
    ]
    w = max(len(r[0]) for r in rows)
    w2 = max(len(r[1]) for r in rows)
    w3 = max(len(r[2]) for r in rows)
    echo(f"{'operator':<{w}}  {'parameters':<{w2}}  {'result':<{w3}}  {'time':>9}")
    for name, params, result, t in rows:
        echo(f"{name:<{w}}  {params:<{w2}}  {result:<{w3}}  {t:8.3f}s")
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "demo.png")
    _draw(X, counts, labels, sky, eps, path)
    echo(f"picture: {path}")
    return {"n": n, "pairs": nt.n_pairs, "compile_s": t_compile, "clusters": n_clusters,
            "noise": int((labels == -1).sum()), "skyline": len(sky), "picture": path,
            "times": {r[0]: r[3] for r in rows}}


def _draw(X, counts, labels, sky, eps, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(0)
    show = rng.permutation(len(X))[:60_000]  # keep the picture light
    fig, axes = plt.subplots(1, 3, figsize=(16, 5.4))
    ax = axes[0]
    sc = ax.scatter(X[show, 0], X[show, 1], c=np.log1p(counts[show]), s=1, cmap="viridis")
    fig.colorbar(sc, ax=ax, label="log(1 + neighbours)")
    ax.set_title(f"self-join: neighbours within eps = {eps}")
    ax = axes[1]
    lab = labels[show]
    noise = lab == -1
    ax.scatter(X[show][noise, 0], X[show][noise, 1], s=1, c="0.8")
    ax.scatter(X[show][~noise, 0], X[show][~noise, 1], s=1, c=lab[~noise] % 20, cmap="tab20")
    ax.set_title(f"DBSCAN: {int(labels.max()) + 1} clusters, noise in grey")
    ax = axes[2]
    ax.scatter(X[show, 0], X[show, 1], s=1, c="0.75")
    S = X[sky]
    S = S[np.argsort(S[:, 0])]
    ax.step(S[:, 0], S[:, 1], where="post", color="crimson", lw=1.5)
    ax.scatter(S[:, 0], S[:, 1], s=14, c="crimson", zorder=3)
    ax.set_title(f"skyline (minimise both): {len(sky)} points")
    for a in axes:
        a.set_xlabel("x0")
        a.set_ylabel("x1")
        a.set_aspect("equal", adjustable="box")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
