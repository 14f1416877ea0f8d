"""``skyjoin dbscan``: one clustering, or a sweep over eps and min_samples."""

from __future__ import annotations

import time

import click

import skyjoin as sj

from .._core.plans import recording
from ..io import write_labels
from .demo import cluster_summary
from .distributed import client_from_options, run_dbscan, uses_cluster
from .errors import user_errors
from .inputs import check_metric_options, column_names_text, metric_points, read_input
from .options import (COLUMNS, DEGREES, DEVICE, EPS, METRIC, PRECISION, PROGRESS, VERBOSE,
                      WARM_ROWS, column_list, distributed_options, kernel_note, number_list,
                      operator_clock, phase, ran_on, show_progress)
from .outputs import COLUMN_OUT, PLOT_OUT, check_out, sweep_path
from .plots import save_clusters
from .wording import plural

__all__ = ["dbscan_cmd"]


def _one_or_sweep(value, sweep, option: str, kind) -> list:
    """The values of a parameter: ``--X`` or ``--sweep-X``, never both (a
    usage error, exit status 2: the one would be ignored)."""
    if value is not None and sweep is not None:
        raise click.UsageError(f"give --{option} or --sweep-{option}, not both")
    if sweep is not None:
        return number_list(sweep, f"--sweep-{option}", kind)
    return [value] if value is not None else []


@click.command("dbscan")
@click.argument("data", type=click.Path(exists=True, dir_okay=False))
@click.option("--eps", type=EPS, default=None,
              help="Neighbourhood radius (distance <= eps), a finite number > 0.  Required "
                   "unless --sweep-eps.")
@click.option("--min-samples", type=click.IntRange(min=1), default=None,
              help="Core points have at least this many neighbours, themselves included. "
                   "Required unless --sweep-min-samples.")
@click.option("--sweep-eps", default=None, metavar="E1,E2,...",
              help="Comma-separated eps values: one neighbour table each (pipelined).")
@click.option("--sweep-min-samples", default=None, metavar="M1,M2,...",
              help="Comma-separated min_samples values: all reuse each eps's table.")
@COLUMNS
@click.option("--out", default=None, type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the labels (.csv, .parquet or .npy; one column, -1 is noise). With "
                   "a sweep, one file per clustering: FILE_eps<e>_ms<m>.ext.")
@click.option("--plot", default=None, type=click.Path(dir_okay=False), metavar="FILE",
              help="Write a picture of the clusters (.png, .pdf or .svg; first two columns, "
                   "or a world map with --metric haversine; noise in grey); with a sweep, "
                   "one panel per clustering (the first 16).")
@PROGRESS
@METRIC
@DEGREES
@DEVICE
@PRECISION
@click.option("--sweep-method", type=click.Choice(["auto", "hybrid"]), default="auto",
              show_default=True,
              help="A sweep's method: 'auto' the fastest path, 'hybrid' the paper's "
                   "HYBRID-DBSCAN (tables built by the join, assigned on the CPU).")
@distributed_options
@VERBOSE
@user_errors
def dbscan_cmd(data, eps, min_samples, sweep_eps, sweep_min_samples, columns, out, plot,
               progress, metric, degrees, device, precision, sweep_method, scheduler,
               local_cluster):
    """Cluster the points in DATA with DBSCAN (scikit-learn's exact labels).

    DATA is a .csv/.txt, .parquet or .npy file of points, one per row; every
    column is a dimension unless --columns chooses some.  --metric haversine
    reads two columns, (lat, lon), in radians unless --degrees.  With
    --sweep-eps and/or --sweep-min-samples, every combination is clustered;
    each eps's neighbour table is built once (the next one in the background)
    and reused by every min_samples.

    \b
    Examples:
      skyjoin dbscan blobs.npy --eps 0.3 --min-samples 10 --plot clusters.png
      skyjoin dbscan blobs.npy --sweep-eps 0.2,0.3,0.4 --sweep-min-samples 5,10,20
      skyjoin dbscan geo.csv --metric haversine --degrees --eps 0.005 --min-samples 10
    """
    col = column_list(columns)
    eps_list = _one_or_sweep(eps, sweep_eps, "eps", float)
    ms_list = _one_or_sweep(min_samples, sweep_min_samples, "min-samples", int)
    if not eps_list:
        raise click.UsageError("give --eps (or --sweep-eps)")
    if not ms_list:
        raise click.UsageError("give --min-samples (or --sweep-min-samples)")
    check_out(out, COLUMN_OUT, what="the labels")
    check_out(plot, PLOT_OUT, option="--plot", what="the picture")
    check_metric_options(metric, degrees)
    if uses_cluster(scheduler, local_cluster):
        if len(eps_list) != 1 or len(ms_list) != 1 or plot:
            raise click.UsageError("--scheduler/--local-cluster run one clustering (one --eps, "
                                   "one --min-samples) without --plot")
        if metric != "euclidean":
            raise click.UsageError(f"--metric {metric} runs on this machine: leave out "
                                   f"--scheduler and --local-cluster")
        with client_from_options(scheduler, local_cluster, device=device, echo=click.echo) as client:
            _, msg = run_dbscan(client, data, eps_list[0], ms_list[0], out=out,
                                precision=precision, columns=col, device=device)
        click.echo(msg)
        return
    t0 = time.perf_counter()
    X, names = read_input(data, col)
    X = metric_points(X, names, metric, degrees, data)
    t_read = time.perf_counter() - t0
    unit = " in degrees" if degrees else " in radians" if metric == "haversine" else ""
    click.echo(f"read {plural(X.shape[0], 'point')} in {plural(X.shape[1], 'dimension')} "
               f"({column_names_text(names)}{unit}) from {data} ({t_read:.2f} s)")
    if len(eps_list) == 1 and len(ms_list) == 1:
        _single(X, names, eps_list[0], ms_list[0], out, plot, device, precision, metric)
    else:
        _sweep(X, names, eps_list, ms_list, out, plot, device, precision, sweep_method,
               show_progress(progress), metric)


def _title(eps, min_samples, n_clusters) -> str:
    """A panel's title."""
    return f"eps={eps:g}, min_samples={min_samples}: {plural(n_clusters, 'cluster')}"


def _metric_kw(metric: str) -> dict:
    """``metric=`` for an operator, only when it is not the Euclidean default."""
    return {} if metric == "euclidean" else {"metric": metric}


def _single(X, names, eps, min_samples, out, plot, device, precision, metric="euclidean"):
    """One clustering: print a summary, write labels and picture."""
    with operator_clock() as warm:          # loads the engine: reported apart
        sj.DBSCAN(eps=eps, min_samples=min_samples, metric=metric, device=device,
                  precision=precision).fit(X[:WARM_ROWS])
    with phase("dbscan"), operator_clock() as clock, recording() as plans:
        est = sj.DBSCAN(eps=eps, min_samples=min_samples, metric=metric, device=device,
                        precision=precision).fit(X)
    s = cluster_summary(est.labels_, est.core_sample_indices_, clock["seconds"], eps,
                        min_samples)
    dev = ran_on(plans)
    on_metric = "" if metric == "euclidean" else f" ({metric})"
    click.echo(f"eps={eps:g} min_samples={min_samples}{on_metric}: "
               f"{plural(s['clusters'], 'cluster')}, "
               f"{s['core']:,} core, {plural(s['noise'], 'noise point')} "
               f"({s['seconds']:.3f} s, path {est.path_}{f' on {dev}' if dev else ''})"
               f"{kernel_note(warm, clock)}")
    if out:
        with phase(f"write {out}"):
            write_labels(out, est.labels_)
        click.echo(f"labels: {out}")
    if plot:
        with phase(f"draw {plot}"):
            save_clusters(plot, [(est.labels_, _title(eps, min_samples, s["clusters"]))], X,
                          names=names, metric=metric)
        click.echo(f"picture: {plot}")


def _sweep(X, names, eps_list, ms_list, out, plot, device, precision, method="auto",
           progress=False, metric="euclidean"):
    """A sweep: progress bar (``progress``: on a terminal only), a table of
    results in ascending (eps, min_samples) order, files per clustering, the
    first 16 panels."""
    panels = []
    rows = []
    kw = _metric_kw(metric)
    # the first clustering of a process compiles the kernels, which its
    # "assign s" would count: a sweep of a small prefix compiles them first
    with operator_clock() as warm:
        for _ in sj.dbscan_sweep(X[:1000], eps=eps_list[:1], min_samples=ms_list[:1],
                                 device=device, precision=precision, method=method, **kw):
            pass
    t0 = time.perf_counter()
    with phase("dbscan sweep"), operator_clock() as clock:
        for r in sj.dbscan_sweep(X, eps=eps_list, min_samples=ms_list, device=device,
                                 precision=precision, progress=progress, method=method,
                                 **kw):
            path = r.timings.get("path")
            rows.append((r.eps, r.min_samples, r.n_clusters, len(r.core_sample_indices),
                         int((r.labels < 0).sum()), r.timings["table"], r.timings["assign"]))
            if out:
                write_labels(sweep_path(out, r.eps, r.min_samples), r.labels)
            if plot:
                panels.append(((r.eps, r.min_samples), r.labels,
                               _title(r.eps, r.min_samples, r.n_clusters)))
                panels = sorted(panels, key=lambda p: p[0])[:16]
    total = time.perf_counter() - t0 - clock["compile"]
    rows.sort(key=lambda row: (row[0], row[1]))
    click.echo(f"{'eps':>10} {'min_samples':>11} {'clusters':>9} {'core':>11} {'noise':>11} "
               f"{'table s':>8} {'assign s':>9}")
    for e, m, k, c, z, tt, ta in rows:
        click.echo(f"{e:>10g} {m:>11d} {k:>9d} {c:>11,d} {z:>11,d} {tt:8.3f} {ta:9.3f}")
    click.echo(f"{plural(len(rows), 'clustering')} in {total:.2f} s ({method}, path {path})"
               + kernel_note(warm, clock))
    if out:
        click.echo(f"labels: one file per clustering, e.g. "
                   f"{sweep_path(out, rows[0][0], rows[0][1])}")
    if plot:
        with phase(f"draw {plot}"):
            save_clusters(plot, [(lab, title) for _, lab, title in panels], X, names=names,
                          metric=metric)
        click.echo(f"picture: {plot}")
