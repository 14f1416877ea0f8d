"""The ``skyjoin dbscan`` command and the DBSCAN part of ``skyjoin demo``."""

from __future__ import annotations

import os
import time

import click
import numpy as np

__all__ = ["dbscan_cmd", "demo_dbscan", "plot_clusters"]

_MAX_PLOT_POINTS = 200_000  # keep pictures light: a random subset beyond this


def plot_clusters(ax, X, labels, title=None, max_points=_MAX_PLOT_POINTS, seed=0):
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


def _summary(labels, core, seconds, eps, min_samples):
    """Counts of a clustering as a dict."""
    n_clusters = int(labels.max()) + 1 if len(labels) else 0
    return {"eps": float(eps), "min_samples": int(min_samples), "n": int(len(labels)),
            "clusters": n_clusters, "noise": int((labels < 0).sum()), "core": int(len(core)),
            "seconds": float(seconds)}


def demo_dbscan(X, eps, min_samples, ax=None, device=None):
    """Cluster X with skyjoin's DBSCAN, summarise, and draw on ``ax`` if given.

    Parameters
    ----------
    X : array_like, shape (n, d)
    eps : float
    min_samples : int
    ax : matplotlib.axes.Axes, optional
        Where to draw the clusters (noise in grey).
    device : {"auto", "cpu", "gpu"}, optional

    Returns
    -------
    dict
        eps, min_samples, n, clusters, noise, core, seconds, path (which
        DBSCAN path ran) and labels (the array).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(1000, 2))
    >>> demo_dbscan(X, eps=0.2, min_samples=5, device="cpu")["n"]
    1000
    """
    from ..dbscan.estimator import DBSCAN

    t0 = time.perf_counter()
    est = DBSCAN(eps=eps, min_samples=min_samples, device=device).fit(X)
    out = _summary(est.labels_, est.core_sample_indices_, time.perf_counter() - t0, eps,
                   min_samples)
    out["path"] = est.path_
    if ax is not None:
        plot_clusters(ax, np.asarray(X), est.labels_,
                      title=f"DBSCAN eps={eps}, min_samples={min_samples}: "
                            f"{out['clusters']} clusters, noise in grey")
    out["labels"] = est.labels_
    return out


def _floats(spec, name):
    """Parse "0.1,0.2" into a list of floats."""
    try:
        return [float(s) for s in spec.split(",") if s.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {spec!r}",
                                 param_hint=name) from None


def _ints(spec, name):
    """Parse "5,10" into a list of ints."""
    try:
        return [int(s) for s in spec.split(",") if s.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated integers, got {spec!r}",
                                 param_hint=name) from None


def _variant_path(out, eps, min_samples):
    """FILE.ext -> FILE_eps<eps>_ms<m>.ext for one clustering of a sweep."""
    stem, ext = os.path.splitext(out)
    return f"{stem}_eps{eps:g}_ms{min_samples}{ext}"


def _save_plot(path, panels, X):
    """Write one picture with a panel per (labels, title)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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


from ..distributed.cli import client_from_options, distributed_options, uses_cluster  # noqa: E402


@click.command("dbscan")
@click.argument("data", type=click.Path(exists=True, dir_okay=False))
@click.option("--eps", type=float, default=None,
              help="Neighbourhood radius (distance <= eps).  Required unless --sweep-eps.")
@click.option("--min-samples", type=int, default=None,
              help="Core points have at least this many neighbours, themselves included. "
                   "Required unless --sweep-min-samples.")
@click.option("--sweep-eps", default=None,
              help="Comma-separated eps values: one neighbour table each (pipelined).")
@click.option("--sweep-min-samples", default=None,
              help="Comma-separated min_samples values: all reuse each eps's table.")
@click.option("--columns", default=None,
              help="Comma-separated column names or 0-based positions (default: all).")
@click.option("--out", default=None, type=click.Path(dir_okay=False),
              help="Write the labels (.csv or .parquet; one column, -1 is noise). With a "
                   "sweep, one file per clustering: FILE_eps<e>_ms<m>.ext.")
@click.option("--plot", default=None, type=click.Path(dir_okay=False),
              help="Write a PNG of the clusters (first two columns; noise in grey); with a "
                   "sweep, one panel per clustering (at most 16).")
@click.option("--device", type=click.Choice(["auto", "cpu", "gpu"]), default=None,
              help="Device of the join ('auto': the GPU when CuPy finds one).")
@click.option("--precision", type=click.Choice(["float64", "float32"]), default="float64",
              show_default=True, help="Working precision of the distance test.")
@click.option("--sweep-method", type=click.Choice(["auto", "hybrid"]), default="auto",
              show_default=True,
              help="A sweep's method: 'auto' the fastest path, 'hybrid' the paper's "
                   "HYBRID-DBSCAN (tables built by the join, assigned on the CPU).")
@distributed_options
def dbscan_cmd(data, eps, min_samples, sweep_eps, sweep_min_samples, columns, out, plot, device,
               precision, sweep_method, scheduler, local_cluster):
    """Cluster the points in DATA with DBSCAN (scikit-learn's exact labels).

    DATA is a .csv/.txt, .parquet or .npy file of points, one per row.  With
    --sweep-eps and/or --sweep-min-samples, every combination is clustered;
    each eps's neighbour table is built once (the next one in the background)
    and reused by every min_samples.

    \b
    Examples:
      skyjoin dbscan points.npy --eps 0.3 --min-samples 10 --plot clusters.png
      skyjoin dbscan points.csv --sweep-eps 0.2,0.3,0.4 --sweep-min-samples 5,10,20
    """
    from ..io import read_points, write_labels

    col = None
    if columns is not None:
        col = [int(c) if c.strip().lstrip("-").isdigit() else c.strip()
               for c in columns.split(",")]
    eps_list = _floats(sweep_eps, "--sweep-eps") if sweep_eps else ([eps] if eps is not None else [])
    ms_list = (_ints(sweep_min_samples, "--sweep-min-samples") if sweep_min_samples
               else ([min_samples] if min_samples is not None else []))
    if not eps_list:
        raise click.UsageError("give --eps (or --sweep-eps)")
    if not ms_list:
        raise click.UsageError("give --min-samples (or --sweep-min-samples)")
    if uses_cluster(scheduler, local_cluster):
        if len(eps_list) != 1 or len(ms_list) != 1 or plot:
            raise click.UsageError("--scheduler/--local-cluster run one clustering (one --eps, "
                                   "one --min-samples) without --plot")
        from ..distributed.cli import run_dbscan

        with client_from_options(scheduler, local_cluster, device=device, echo=click.echo) as client:
            _, msg = run_dbscan(client, data, eps_list[0], ms_list[0], out=out,
                                precision=precision, columns=col, device=device)
        click.echo(msg)
        return
    t0 = time.perf_counter()
    X = read_points(data, columns=col)
    t_read = time.perf_counter() - t0
    click.echo(f"read {X.shape[0]:,} points in {X.shape[1]} dimensions from {data} "
               f"({t_read:.2f} s)")
    try:
        if len(eps_list) == 1 and len(ms_list) == 1:
            _single(X, eps_list[0], ms_list[0], out, plot, device, precision, write_labels)
        else:
            _sweep(X, eps_list, ms_list, out, plot, device, precision, write_labels,
                   sweep_method)
    except (ValueError, TypeError) as exc:
        raise click.ClickException(str(exc)) from exc


def _single(X, eps, min_samples, out, plot, device, precision, write_labels):
    """One clustering: print a summary, write labels and picture."""
    from ..dbscan.estimator import DBSCAN

    t0 = time.perf_counter()
    est = DBSCAN(eps=eps, min_samples=min_samples, device=device, precision=precision).fit(X)
    s = _summary(est.labels_, est.core_sample_indices_, time.perf_counter() - t0, eps,
                 min_samples)
    click.echo(f"eps={eps:g} min_samples={min_samples}: {s['clusters']} clusters, "
               f"{s['core']:,} core, {s['noise']:,} noise points "
               f"({s['seconds']:.3f} s, path {est.path_})")
    if out:
        write_labels(out, est.labels_)
        click.echo(f"labels: {out}")
    if plot:
        _save_plot(plot, [(est.labels_, f"eps={eps:g}, min_samples={min_samples}: "
                                        f"{s['clusters']} clusters")], X)
        click.echo(f"picture: {plot}")


def _sweep(X, eps_list, ms_list, out, plot, device, precision, write_labels, method="auto"):
    """A sweep: progress bar, a table of results, files per clustering."""
    from ..dbscan.sweep import dbscan_sweep

    panels = []
    rows = []
    t0 = time.perf_counter()
    for r in dbscan_sweep(X, eps=eps_list, min_samples=ms_list, device=device,
                          precision=precision, progress=True, method=method):
        path = r.timings.get("path")
        rows.append((r.eps, r.min_samples, r.n_clusters, len(r.core_sample_indices),
                     int((r.labels < 0).sum()), r.timings["table"], r.timings["assign"]))
        if out:
            write_labels(_variant_path(out, r.eps, r.min_samples), r.labels)
        if plot and len(panels) < 16:
            panels.append((r.labels, f"eps={r.eps:g}, min_samples={r.min_samples}: "
                                     f"{r.n_clusters} clusters"))
    total = time.perf_counter() - t0
    click.echo(f"{'eps':>10} {'min_samples':>11} {'clusters':>9} {'core':>11} {'noise':>11} "
               f"{'table s':>8} {'assign s':>9}")
    for e, m, k, c, z, tt, ta in rows:
        click.echo(f"{e:>10g} {m:>11d} {k:>9d} {c:>11,d} {z:>11,d} {tt:8.3f} {ta:9.3f}")
    click.echo(f"{len(rows)} clusterings in {total:.2f} s ({method}, path {path})")
    if out:
        click.echo(f"labels: one file per clustering, e.g. "
                   f"{_variant_path(out, rows[0][0], rows[0][1])}")
    if plot:
        _save_plot(plot, panels, X)
        click.echo(f"picture: {plot}")
