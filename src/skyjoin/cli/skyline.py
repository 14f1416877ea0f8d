"""The ``skyjoin skyline`` command and the skyline part of ``skyjoin demo``."""

from __future__ import annotations

import os
import time

import click
import numpy as np

__all__ = ["skyline_cmd", "demo_skyline", "plot_skyline"]

_MAX_PLOT_POINTS = 200_000   # a seeded random subset of the points beyond this


def _split(spec):
    """'a,b,3' -> ['a', 'b', 3] (0-based positions as ints)."""
    if not spec:
        return []
    out = []
    for s in spec.split(","):
        s = s.strip()
        if s:
            out.append(int(s) if s.lstrip("-").isdigit() else s)
    return out


def plot_skyline(ax, X, sky, sense=None, names=None, title=None, max_points=_MAX_PLOT_POINTS,
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


def demo_skyline(X_or_n=20_000, d=2, kind="anticorrelated", seed=0, device=None, ax=None):
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
        Where to draw (see :func:`plot_skyline`).

    Returns
    -------
    dict
        n, d, skyline size, seconds, device, pre-filter survivors, work counters.

    Examples
    --------
    >>> demo_skyline(2000, d=3, device="cpu")["n"]
    2000
    """
    import skyjoin as sj
    from .._core.device import resolve_device

    if isinstance(X_or_n, (int, np.integer)):
        X = sj.datasets.skyline_data(int(X_or_n), d, kind, seed=seed)
    else:
        X = np.asarray(X_or_n, dtype=np.float64)
    dev = resolve_device(device)
    t0 = time.perf_counter()
    sky, st = sj.skyline(X, device=dev, return_stats=True)
    secs = time.perf_counter() - t0
    if ax is not None:
        plot_skyline(ax, X, sky, title=f"skyline: {len(sky):,} of {len(X):,} points ({dev})")
    return {"n": int(X.shape[0]), "d": int(X.shape[1]), "skyline": int(sky.size),
            "seconds": secs, "device": dev, "prefilter_survivors": st.get("prefilter_survivors"),
            "dominance_tests": st.get("dominance_tests"), "mask_tests": st.get("mask_tests")}


from .distributed import client_from_options, distributed_options, uses_cluster  # noqa: E402


@click.command("skyline")
@click.argument("data", type=click.Path(exists=True, dir_okay=False))
@click.option("--min", "min_cols", default=None,
              help="Comma-separated columns (names or 0-based positions) to minimise.")
@click.option("--max", "max_cols", default=None,
              help="Comma-separated columns to maximise.  With neither --min nor --max, "
                   "every numeric column is minimised; columns not named are ignored.")
@click.option("--distinct", is_flag=True, help="Keep one row (the first) of equal points.")
@click.option("--device", type=click.Choice(["auto", "cpu", "gpu"]), default=None,
              help="Where to run (default: $SKYJOIN_DEVICE or auto).")
@click.option("--algorithm", type=click.Choice(["auto", "skyalign", "bruteforce", "bnl", "sfs",
                                                "ggs"]), default="auto", show_default=True)
@click.option("--out", "out", default=None,
              help="Write the skyline rows here (.csv, .parquet or .npy of row indices).")
@click.option("--plot", "plot", default=None, help="Draw a PNG: the staircase in 2-D, "
              "parallel coordinates of the skyline otherwise.")
@distributed_options
def skyline_cmd(data, min_cols, max_cols, distinct, device, algorithm, out, plot, scheduler,
                local_cluster):
    """The skyline (Pareto set) of the rows of DATA (.csv/.txt/.parquet/.npy).

    With --scheduler or --local-cluster the workers read DATA themselves and
    --out receives the skyline's row ids.

    \b
    Examples:
      skyjoin skyline nba.csv
      skyjoin skyline cars.csv --min price --max rating,hp --out best.csv --plot best.png
    """
    if uses_cluster(scheduler, local_cluster):
        if plot:
            raise click.UsageError("--plot is not available with --scheduler/--local-cluster")
        from .distributed import run_skyline

        with client_from_options(scheduler, local_cluster, device=device, echo=click.echo) as client:
            _, msg = run_skyline(client, data, min_cols=_split(min_cols), max_cols=_split(max_cols),
                                 distinct=distinct, device=device, out=out)
        click.echo(msg)
        return
    import skyjoin as sj
    from ..io import read_frame

    t0 = time.perf_counter()
    try:
        df = read_frame(data)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="DATA")
    t_read = time.perf_counter() - t0
    mins, maxs = _split(min_cols), _split(max_cols)

    def resolve(c):
        if isinstance(c, int) and c not in df.columns:
            if not -df.shape[1] <= c < df.shape[1]:
                raise click.BadParameter(f"column position {c} out of range (0..{df.shape[1] - 1})")
            return df.columns[c]
        if c not in df.columns:
            raise click.BadParameter(f"no column {c!r}; columns are {list(df.columns)}")
        return c

    mins = [resolve(c) for c in mins]
    maxs = [resolve(c) for c in maxs]
    try:
        t1 = time.perf_counter()
        res, st = sj.skyline(df, min=mins or None, max=maxs or None, distinct=distinct,
                             device=device, algorithm=algorithm, return_stats=True)
        t_sky = time.perf_counter() - t1
    except ValueError as exc:
        raise click.UsageError(str(exc))
    cols = mins + maxs if (mins or maxs) else list(df.select_dtypes(include=[np.number, "bool"]).columns)
    sense = ["min"] * len(mins) + ["max"] * len(maxs) if (mins or maxs) else ["min"] * len(cols)
    click.echo(f"{len(res):,} skyline rows of {len(df):,} ({len(cols)} columns: "
               + ", ".join(f"{c} {s}" for c, s in zip(cols, sense))
               + f"); {st['device']}, {st['algorithm']}; read {t_read:.3f} s, skyline {t_sky:.3f} s")
    if st.get("prefilter_survivors") is not None:
        click.echo(f"pre-filter kept {st['prefilter_survivors']:,} rows; "
                   f"{st.get('dominance_tests') or 0:,} dominance tests, "
                   f"{st.get('mask_tests') or 0:,} mask tests")
    if out:
        ext = os.path.splitext(out)[1].lower()
        if ext == ".parquet":
            res.to_parquet(out)
        elif ext == ".npy":
            np.save(out, df.index.get_indexer(res.index).astype(np.int64))
        elif ext in (".csv", ".txt"):
            res.to_csv(out, index=False)
        else:
            raise click.BadParameter(f"unknown extension {ext!r}: use .csv, .parquet or .npy",
                                     param_hint="--out")
        click.echo(f"wrote {out}")
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        X = df[cols].to_numpy(dtype=np.float64)
        sky = df.index.get_indexer(res.index) if df.index.is_unique else np.flatnonzero(
            df.index.isin(res.index))
        fig, ax = plt.subplots(figsize=(7, 5) if len(cols) == 2 else (max(7, len(cols)), 5))
        plot_skyline(ax, X, sky, sense=sense, names=[str(c) for c in cols],
                     title=f"skyline of {os.path.basename(data)}: {len(res):,} of {len(df):,} rows")
        fig.tight_layout()
        fig.savefig(plot, dpi=110)
        plt.close(fig)
        click.echo(f"wrote {plot}")
