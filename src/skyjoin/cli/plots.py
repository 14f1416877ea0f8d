"""All the pictures of the command line: clusters, skylines and the demo.

Matplotlib is imported inside the functions (``import skyjoin.cli`` stays
fast) and draws with the non-interactive Agg backend.  :func:`plot_clusters`
and :func:`plot_skyline` draw on a given Axes; the ``save_*`` functions write
a picture file atomically (:func:`skyjoin.io.atomic_path`).

Points are drawn rasterised (``rasterized=True``), axes, labels and lines
as vectors: a .pdf or .svg of 200,000 points stays small and quick to
write and to open.

Haversine data, (lat, lon) in radians, is drawn on a world map
(:func:`plot_map_clusters`): Matplotlib's Mollweide projection, which is
equal-area (a cluster's area on the page is its area on the sphere) and
draws each pole as a point, so a polar cluster is a cap at the top or
bottom, not a band as wide as the map, as a plain lon/lat plot would draw
it.  The antimeridian (lon = +-180) is the map's left and right edges: a
cluster across it appears at both edges, in one colour.  Two insets in the
map's empty corners show the caps within :data:`POLAR_CAP_DEG` of each
pole in the azimuthal equidistant projection (polar axes: angle the
longitude, radius the distance from the pole), where a polar cluster is
round.

Colours: noise alone is grey; clusters take :data:`CLUSTER_COLORS`, the
qualitative ``tab20`` palette without its two greys, dark shades first so
that neighbouring cluster numbers differ in hue.

Examples
--------
>>> import matplotlib; matplotlib.use("Agg")
>>> import matplotlib.pyplot as plt, numpy as np
>>> fig, (a, b) = plt.subplots(1, 2)
>>> plot_clusters(a, np.zeros((3, 2)), np.array([0, 0, -1]), names=["lon", "lat"])
>>> plot_skyline(b, np.array([[1., 2.], [2., 1.], [2., 2.]]), np.array([0, 1]))
>>> a.get_xlabel(), a.get_ylabel()
('lon', 'lat')
"""

from __future__ import annotations

import numpy as np

from ..io import atomic_path
from .wording import plural

__all__ = ["MAX_PLOT_POINTS", "NOISE_COLOR", "CLUSTER_COLORS", "MAP_PROJECTION", "cluster_colors",
           "plot_clusters", "plot_map_clusters", "plot_skyline", "save_clusters", "save_skyline",
           "save_demo"]

#: At most this many points are drawn: a seeded random subset beyond it.
MAX_PLOT_POINTS = 200_000
#: The colour of noise (label -1), and of noise alone.
NOISE_COLOR = "0.75"
#: Indices into ``tab20`` of the cluster colours: its dark shades, then its
#: light ones, without the greys (14 and 15).
_TAB20_NO_GREY = (0, 2, 4, 6, 8, 10, 12, 16, 18, 1, 3, 5, 7, 9, 11, 13, 17, 19)
CLUSTER_COLORS = len(_TAB20_NO_GREY)
#: The projection of haversine data (a Matplotlib projection name).
MAP_PROJECTION = "mollweide"
#: The polar insets of a map show the points within this many degrees of a pole.
POLAR_CAP_DEG = 30.0


def _pyplot():
    """matplotlib.pyplot on the Agg backend (imported on first use)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def cluster_colors(labels) -> np.ndarray:
    """RGBA colours of DBSCAN labels: noise grey, cluster k colour k modulo
    :data:`CLUSTER_COLORS` of the grey-free palette.  O(n).

    Examples
    --------
    >>> c = cluster_colors(np.array([-1, 0, 1]))
    >>> bool(c[0, 0] == c[0, 1] == c[0, 2]), bool(c[1, 0] == c[1, 1] == c[1, 2])
    (True, False)
    """
    from matplotlib import colormaps
    from matplotlib.colors import to_rgba

    palette = colormaps["tab20"](np.array(_TAB20_NO_GREY))
    labels = np.asarray(labels)
    out = np.empty((len(labels), 4))
    noise = labels < 0
    out[noise] = to_rgba(NOISE_COLOR)
    out[~noise] = palette[labels[~noise] % CLUSTER_COLORS]
    return out


def plot_clusters(ax, X, labels, title=None, max_points=MAX_PLOT_POINTS, seed=0, names=None):
    """Draw points coloured by cluster (:func:`cluster_colors`) on a Matplotlib Axes.

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
    names : sequence of str, optional
        Column names for the axes (default ``x0``, ``x1``).
    """
    X = np.asarray(X)
    labels = np.asarray(labels)
    if len(X) > max_points:
        keep = np.random.default_rng(seed).choice(len(X), max_points, replace=False)
        X, labels = X[keep], labels[keep]
    names = list(names) if names is not None else [f"x{k}" for k in range(X.shape[1])]
    x = X[:, 0]
    y = X[:, 1] if X.shape[1] > 1 else np.zeros(len(X))
    size = max(0.5, min(12.0, 4e4 / max(1, len(X))))
    noise = labels < 0
    colors = cluster_colors(labels)
    ax.scatter(x[noise], y[noise], s=size, c=colors[noise], linewidths=0, label="noise",
               rasterized=True)
    if (~noise).any():
        ax.scatter(x[~noise], y[~noise], s=size, c=colors[~noise], linewidths=0,
                   rasterized=True)
    ax.set_xlabel(names[0])
    ax.set_ylabel(names[1] if X.shape[1] > 1 else "")
    if title:
        ax.set_title(title, fontsize=9)


def plot_map_clusters(ax, latlon, labels, title=None, max_points=MAX_PLOT_POINTS, seed=0):
    """Draw (lat, lon) points in radians coloured by cluster on a map Axes.

    ``ax`` must have the :data:`MAP_PROJECTION` projection
    (``fig.add_subplot(projection="mollweide")``), which takes longitude
    then latitude in radians.  Longitudes are wrapped into [-pi, pi) (the
    map's width), so any period of them draws in place; latitudes are drawn
    as given ([-pi/2, pi/2]).  Meridians and parallels every 30 degrees; an
    inset for each polar cap (see the module's notes).  O(n) (at most
    ``max_points`` drawn, a seeded random subset).

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        A Mollweide Axes.
    latlon : ndarray, shape (n, 2)
        (lat, lon) in radians, scikit-learn's haversine convention.
    labels : ndarray of int, shape (n,)
        DBSCAN labels (-1 is noise).
    title : str, optional
    max_points : int
    seed : int
    """
    latlon = np.asarray(latlon, dtype=np.float64)
    labels = np.asarray(labels)
    if len(latlon) > max_points:
        keep = np.random.default_rng(seed).choice(len(latlon), max_points, replace=False)
        latlon, labels = latlon[keep], labels[keep]
    lat = latlon[:, 0]
    lon = np.mod(latlon[:, 1] + np.pi, 2.0 * np.pi) - np.pi
    size = max(0.5, min(12.0, 4e4 / max(1, len(latlon))))
    colors = cluster_colors(labels)
    _scatter_by_cluster(ax, lon, lat, labels, colors, size)
    ax.grid(True, color="0.85", linewidth=0.5)
    ax.tick_params(labelsize=6)
    ax.set_xlabel("lon")
    ax.set_ylabel("lat")
    cap = np.radians(POLAR_CAP_DEG)
    for name, sign, bounds in (("N", 1.0, [0.0, 0.70, 0.2, 0.30]),
                               ("S", -1.0, [0.0, 0.0, 0.2, 0.30])):
        inset = ax.inset_axes(bounds, projection="polar")
        near = sign * lat > np.pi / 2 - cap
        r = np.degrees(np.pi / 2 - sign * lat[near])       # degrees from the pole
        _scatter_by_cluster(inset, lon[near], r, labels[near], colors[near], size)
        inset.set_theta_zero_location("S" if sign > 0 else "N")
        inset.set_theta_direction(1 if sign > 0 else -1)   # east counterclockwise seen from above
        inset.set_rlim(0.0, POLAR_CAP_DEG)
        inset.set_xticklabels([])
        inset.set_yticklabels([])
        inset.grid(True, color="0.85", linewidth=0.4)
        inset.set_title(f"{name} pole, {POLAR_CAP_DEG:g}\N{DEGREE SIGN}", fontsize=6, pad=2)
    if title:
        ax.set_title(title, fontsize=9, pad=14)


def _scatter_by_cluster(ax, x, y, labels, colors, size) -> None:
    """Noise first (grey), then the clusters over it."""
    noise = labels < 0
    ax.scatter(x[noise], y[noise], s=size, c=colors[noise], linewidths=0, label="noise",
               rasterized=True)
    if (~noise).any():
        ax.scatter(x[~noise], y[~noise], s=size, c=colors[~noise], linewidths=0,
                   rasterized=True)


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
        ax.scatter(S[:, 0], S[:, 1], s=14, c="C3", zorder=3, label=f"skyline ({len(sky)})",
                   rasterized=len(S) > 5000)
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
        from matplotlib.collections import LineCollection

        lines = LineCollection([np.column_stack([xs, row]) for row in S], colors="C0",
                               alpha=max(0.02, min(0.6, 30.0 / max(1, len(S)))), linewidths=0.8,
                               rasterized=len(S) > 200)
        ax.add_collection(lines)
        ax.autoscale_view()
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{nm}\n({s})" for nm, s in zip(names, sense)], fontsize=7)
        ax.set_ylabel("scaled value")
    if title:
        ax.set_title(title)


def _save(plt, fig, path, dpi) -> None:
    """Lay out, write atomically and close a figure."""
    fig.tight_layout()
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=dpi)
    finally:
        plt.close(fig)


def save_clusters(path, panels, X, names=None, metric="euclidean") -> None:
    """Write one picture with a panel per (labels, title) of the points X,
    axes named by ``names`` (see :func:`plot_clusters`); with
    ``metric="haversine"``, X is (lat, lon) in radians and each panel a
    world map (see :func:`plot_map_clusters`)."""
    plt = _pyplot()
    k = len(panels)
    cols = min(4, k)
    rows = (k + cols - 1) // cols
    geo = metric == "haversine"
    fig, axes = plt.subplots(rows, cols, squeeze=False,
                             figsize=(6.4 * cols, 3.8 * rows) if geo else (4.5 * cols, 4.2 * rows),
                             subplot_kw={"projection": MAP_PROJECTION} if geo else None)
    for ax, (labels, title) in zip(axes.ravel(), panels):
        if geo:
            plot_map_clusters(ax, X, labels, title=title)
        else:
            plot_clusters(ax, X, labels, title=title, names=names)
    for ax in axes.ravel()[k:]:
        ax.axis("off")
    _save(plt, fig, path, 110)


def save_skyline(path, X, sky, sense, names, title) -> None:
    """Write a picture of a skyline (see :func:`plot_skyline`)."""
    plt = _pyplot()
    d = X.shape[1]
    fig, ax = plt.subplots(figsize=(7, 5) if d == 2 else (max(7, d), 5))
    plot_skyline(ax, X, sky, sense=sense, names=names, title=title)
    _save(plt, fig, path, 110)


def save_demo(path, X, counts, labels, sky, eps, geo=None) -> None:
    """The demo's picture: neighbour counts, DBSCAN clusters, skyline
    staircase, and with ``geo`` a fourth panel, a world map.

    X : 2-D points; counts : neighbours within ``eps`` of each point;
    labels : DBSCAN labels (-1 noise); sky : row indices of the skyline;
    geo : (latlon in radians, labels, title) of a haversine DBSCAN, drawn
    by :func:`plot_map_clusters`.
    """
    plt = _pyplot()
    rng = np.random.default_rng(0)
    show = rng.permutation(len(X))[:60_000]  # keep the picture light
    k = 3 if geo is None else 4
    fig = plt.figure(figsize=(16, 5.4) if geo is None else (24, 5.4))
    grid = fig.add_gridspec(1, k, width_ratios=[1, 1, 1, 1.7][:k])
    axes = [fig.add_subplot(grid[0, j]) for j in range(3)]
    if geo is not None:
        gx = fig.add_subplot(grid[0, 3], projection=MAP_PROJECTION)
        plot_map_clusters(gx, geo[0], geo[1], title=geo[2], max_points=60_000)
    ax = axes[0]
    sc = ax.scatter(X[show, 0], X[show, 1], c=np.log1p(counts[show]), s=1, cmap="viridis",
                    rasterized=True)
    fig.colorbar(sc, ax=ax, label="log(1 + neighbours)")
    ax.set_title(f"self-join: neighbours within eps = {eps}")
    plot_clusters(axes[1], X, labels, max_points=60_000,
                  title=f"DBSCAN: {plural(int(labels.max()) + 1, 'cluster')}, noise in grey")
    plot_skyline(axes[2], X, sky, max_points=60_000,
                 title=f"skyline (minimise both): {len(sky)} points")
    for a in axes:
        a.set_xlabel("x0")
        a.set_ylabel("x1")
        a.set_aspect("equal", adjustable="box")
    _save(plt, fig, path, 100)
