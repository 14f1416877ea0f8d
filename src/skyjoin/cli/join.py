"""``skyjoin join``: all pairs of points of a file within distance eps."""

from __future__ import annotations

import sys
import time

import click
from tqdm import tqdm

import skyjoin as sj

from .._core.device import resolve_device
from ..io import ParquetPairWriter, read_points
from .distributed import client_from_options, run_join, uses_cluster
from .errors import user_errors
from .options import COLUMNS, DEVICE, PRECISION, column_list, distributed_options
from .outputs import join_output, write_counts, write_table

__all__ = ["join_cmd"]


@click.command("join")
@click.argument("data", type=click.Path(exists=True, dir_okay=False))
@click.option("--eps", type=float, required=True, help="Join radius (distance <= eps).")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Write the result: pairs to .parquet (streamed in bounded chunks, any size), "
                   "the CSR table to .npz; with --counts, counts to .csv/.parquet.")
@click.option("--counts", is_flag=True, help="Only count the neighbours of each point.")
@click.option("--include-self", is_flag=True, help="Report each point as its own neighbour.")
@click.option("--no-sort", is_flag=True, help="Skip sorting the columns within each row.")
@click.option("--pattern", type=click.Choice(["auto", "full", "unicomp", "lid_unicomp"]),
              default="auto", show_default=True, help="Cell access pattern.")
@PRECISION
@click.option("--chunk-pairs", type=int, default=1 << 24, show_default=True,
              help="Pairs per chunk when streaming to Parquet.")
@COLUMNS
@DEVICE
@click.option("--progress/--no-progress", default=None,
              help="Progress bar (default: when writing to a terminal).")
@distributed_options
@user_errors
def join_cmd(data, eps, out, counts, include_self, no_sort, pattern, precision, chunk_pairs,
             columns, device, progress, scheduler, local_cluster):
    """All pairs of points of DATA within distance EPS (the self-join).

    DATA is a .csv/.txt (comma or whitespace separated, optional header),
    .parquet or .npy file of points, one per row.  Prints a one-line summary:
    points, dimensions, pairs, mean neighbours per point and time.  With
    --scheduler or --local-cluster the join runs on a Dask cluster (the
    workers read DATA themselves; --out naming a folder gets one Parquet file
    of pairs per partition).
    """
    if uses_cluster(scheduler, local_cluster):
        with client_from_options(scheduler, local_cluster, device=device, echo=click.echo) as client:
            click.echo(run_join(client, data, eps, out=out, counts=counts,
                                include_self=include_self, sort=not no_sort, precision=precision,
                                columns=column_list(columns), device=device))
        return
    t0 = time.perf_counter()
    X = read_points(data, columns=column_list(columns))
    t_load = time.perf_counter() - t0
    dev = resolve_device(device)
    n, d = X.shape
    show = sys.stderr.isatty() if progress is None else progress
    kind = join_output(out, counts)
    t0 = time.perf_counter()
    if kind == "counts":
        c = sj.self_join(X, eps, output="counts", include_self=include_self, device=dev,
                         precision=precision, pattern=pattern)
        n_pairs = int(c.sum())
        if out:
            write_counts(out, c)
    elif kind == "stream":
        n_pairs = 0
        with ParquetPairWriter(out, shape=(n, n), sorted=not no_sort) as w, \
                tqdm(total=n, unit="rows", disable=not show, desc="join") as bar:
            for ch in sj.self_join_chunks(X, eps, include_self=include_self, sort=not no_sort,
                                          max_pairs=chunk_pairs, device=dev, precision=precision):
                w.write(ch.i, ch.j)
                n_pairs += len(ch)
                bar.update(ch.row_stop - ch.row_start)
    else:
        nt = sj.self_join(X, eps, include_self=include_self, sort=not no_sort, device=dev,
                          precision=precision, pattern=pattern)
        n_pairs = nt.n_pairs
        if out:
            write_table(out, nt)
    dt = time.perf_counter() - t0
    mean = n_pairs / n if n else 0.0
    click.echo(f"{n:,} points, {d} dimensions, eps {eps:g}: {n_pairs:,} pairs "
               f"({mean:.2f} neighbours per point) in {dt:.3f} s on {dev} "
               f"(+{t_load:.2f} s reading)" + (f"; wrote {out}" if out else ""))
