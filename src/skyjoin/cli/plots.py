"""All the pictures of the command line: clusters, skylines and the demo.

Matplotlib is imported inside the functions (``import skyjoin.cli`` stays
fast) and draws with the non-interactive Agg backend.  :func:`plot_clusters`
and :func:`plot_skyline` draw on a given Axes; the ``save_*`` functions write
a PNG file.
"""

from __future__ import annotations

import numpy as np

__all__ = ["MAX_PLOT_POINTS", "plot_clusters", "plot_skyline", "save_clusters", "save_skyline",
           "save_demo"]

#: At most this many points are drawn: a seeded random subset beyond it.
MAX_PLOT_POINTS = 200_000


def _pyplot():
    """matplotlib.pyplot on the Agg backend (imported on first use)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_clusters(ax, X, labels, title=None, max_points=MAX_PLOT_POINTS, seed=0):
    """Draw points coloured by cluster, noise in grey, on a Matplotlib Axes.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
    X : ndarray, shape (n, d)
        The first two columns are drawn (a 1-D set is drawn on a line).
    labels : ndarray of int, shape (n,)
        DBSCAN labels (-1 is noise).
    title : str, optional
    max_points : int
        At most this many points are drawn (a seeded random subset).
    seed : int

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt, numpy as np
    >>> fig, ax = plt.subplots()
    >>> plot_clusters(ax, np.zeros((3, 2)), np.array([0, 0, -1]))
    """
    X = np.asarray(X)
    labels = np.asarray(labels)
    if len(X) > max_points:
        keep = np.random.default_rng(seed).choice(len(X), max_points, replace=False)
        X, labels = X[keep], labels[keep]
    x = X[:, 0]
    y = X[:, 1] if X.shape[1] > 1 else np.zeros(len(X))
    size = max(0.5, min(12.0, 4e4 / max(1, len(X))))
    noise = labels < 0
    ax.scatter(x[noise], y[noise], s=size, c="0.75", linewidths=0, label="noise")
    if (~noise).any():
        ax.scatter(x[~noise], y[~noise], s=size, c=labels[~noise] % 20, cmap="tab20",
                   vmin=0, vmax=19, linewidths=0)
    ax.set_xlabel("x0")
    ax.set_ylabel("x1" if X.shape[1] > 1 else "")
    if title:
        ax.set_title(title, fontsize=9)


def plot_skyline(ax, X, sky, sense=None, names=None, title=None, max_points=MAX_PLOT_POINTS,
                 seed=0):
    """Draw a skyline on a Matplotlib Axes.

    2-D data: every point (grey) and the skyline points joined by their
    staircase.  More dimensions: parallel coordinates of the skyline points
    (each column scaled to [0, 1] over the whole data set).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
    X : ndarray, shape (n, d)
    sky : ndarray of int
        Row indices of the skyline.
    sense : list of "min"/"max", optional
        Used to draw the 2-D staircase the right way round.
    names : list of str, optional
        Column names for the axes.
    title : str, optional
    max_points : int
        At most this many background points are drawn (seeded subset).
    seed : int

    Examples
    --------
    >>> import matplotlib; matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt, numpy as np
    >>> fig, ax = plt.subplots()
    >>> plot_skyline(ax, np.array([[1., 2.], [2., 1.], [2., 2.]]), np.array([0, 1]))
    """
    X = np.asarray(X, dtype=np.float64)
    sky = np.asarray(sky, dtype=np.int64)
    n, d = X.shape
    names = list(names) if names is not None else [f"x{k}" for k in range(d)]
    sense = list(sense) if sense is not None else ["min"] * d
    if d == 2:
        bg = X
        if n > max_points:
            bg = X[np.random.default_rng(seed).choice(n, max_points, replace=False)]
        ax.scatter(bg[:, 0], bg[:, 1], s=2 if len(bg) > 5000 else 10, c="0.6", lw=0,
                   label="points", rasterized=True)
        S = X[sky]
        # staircase: sort along x in the preferred direction of x
        order = np.argsort(S[:, 0], kind="stable")
        if sense[0] == "max":
            order = order[::-1]
        S = S[order]
        ax.step(S[:, 0], S[:, 1], where="post", c="C3", lw=1.2)
        ax.scatter(S[:, 0], S[:, 1], s=14, c="C3", zorder=3, label=f"skyline ({len(sky)})")
        ax.set_xlabel(f"{names[0]} ({sense[0]})")
        ax.set_ylabel(f"{names[1]} ({sense[1]})")
        ax.legend(loc="best", fontsize=8)
    elif d == 1:
        ax.hist(X[:, 0], bins=50, color="0.75")
        for v in np.unique(X[sky, 0]):
            ax.axvline(v, c="C3")
        ax.set_xlabel(f"{names[0]} ({sense[0]})")
    else:
        lo = X.min(axis=0)
        span = np.where(X.max(axis=0) > lo, X.max(axis=0) - lo, 1.0)
        S = (X[sky] - lo) / span
        if len(S) > 2000:
            S = S[np.random.default_rng(seed).choice(len(S), 2000, replace=False)]
        xs = np.arange(d)
        for row in S:
            ax.plot(xs, row, c="C0", alpha=max(0.02, min(0.6, 30.0 / len(S))), lw=0.8)
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{nm}\n({s})" for nm, s in zip(names, sense)], fontsize=7)
        ax.set_ylabel("scaled value")
    if title:
        ax.set_title(title)


def save_clusters(path, panels, X) -> None:
    """Write one picture with a panel per (labels, title) of the points X."""
    plt = _pyplot()
    k = len(panels)
    cols = min(4, k)
    rows = (k + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 4.2 * rows), squeeze=False)
    for ax, (labels, title) in zip(axes.ravel(), panels):
        plot_clusters(ax, X, labels, title=title)
    for ax in axes.ravel()[k:]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def save_skyline(path, X, sky, sense, names, title) -> None:
    """Write a picture of a skyline (see :func:`plot_skyline`)."""
    plt = _pyplot()
    d = X.shape[1]
    fig, ax = plt.subplots(figsize=(7, 5) if d == 2 else (max(7, d), 5))
    plot_skyline(ax, X, sky, sense=sense, names=names, title=title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def save_demo(path, X, counts, labels, sky, eps) -> None:
    """The demo's picture: neighbour counts, DBSCAN clusters, skyline staircase.

    X : 2-D points; counts : neighbours within ``eps`` of each point;
    labels : DBSCAN labels (-1 noise); sky : row indices of the skyline.
    """
    plt = _pyplot()
    rng = np.random.default_rng(0)
    show = rng.permutation(len(X))[:60_000]  # keep the picture light
    fig, axes = plt.subplots(1, 3, figsize=(16, 5.4))
    ax = axes[0]
    sc = ax.scatter(X[show, 0], X[show, 1], c=np.log1p(counts[show]), s=1, cmap="viridis")
    fig.colorbar(sc, ax=ax, label="log(1 + neighbours)")
    ax.set_title(f"self-join: neighbours within eps = {eps}")
    plot_clusters(axes[1], X, labels, max_points=60_000,
                  title=f"DBSCAN: {int(labels.max()) + 1} clusters, noise in grey")
    plot_skyline(axes[2], X, sky, max_points=60_000,
                 title=f"skyline (minimise both): {len(sky)} points")
    for a in axes:
        a.set_xlabel("x0")
        a.set_ylabel("x1")
        a.set_aspect("equal", adjustable="box")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
