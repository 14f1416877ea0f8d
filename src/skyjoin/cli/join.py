"""``skyjoin join``: all pairs of points within distance eps (self-join, or R join S)."""

from __future__ import annotations

import logging
import os
import time

import click

import skyjoin as sj

from .._core.plans import recording
from ..io import open_pair_writer, write_counts, write_neighbor_table
from ..simjoin.api import DEFAULT_CHUNK_PAIRS
from .distributed import client_from_options, run_join, uses_cluster
from .errors import user_errors
from .inputs import check_metric_options, column_names_text, metric_points, read_input
from .options import (COLUMNS, DEGREES, DEVICE, EPS, METRIC, PRECISION, PROGRESS, VERBOSE,
                      WARM_ROWS, column_list, distributed_options, kernel_note, operator_clock,
                      phase, ran_on, show_progress)
from .outputs import COLUMN_OUT, PAIRS_OUT, check_out, join_output
from .wording import plural

__all__ = ["join_cmd"]

log = logging.getLogger("skyjoin.cli")

_OUTPUTS = {"summary": "counts only, summed for the summary (no table is built)",
            "counts": "neighbour counts, one a point",
            "stream": "pairs streamed in bounded chunks",
            "table": "the whole CSR table"}


@click.command("join")
@click.argument("data", nargs=-1, required=True, metavar="DATA [S]",
                type=click.Path(exists=True, dir_okay=False))
@click.option("--eps", type=EPS, required=True,
              help="Join radius (distance <= eps), a finite number > 0.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write the result: pairs to .parquet, .csv or .npy (streamed in bounded "
                   "chunks, any size), the CSR table to .npz (scipy.sparse.load_npz reads "
                   "it); with --counts, counts to .csv, .parquet or .npy.")
@click.option("--counts", is_flag=True, help="Only count the neighbours of each point.")
@click.option("--include-self", is_flag=True,
              help="Report each point as its own neighbour (self-join only).")
@click.option("--no-sort", is_flag=True, help="Skip sorting the columns within each row.")
@click.option("--pattern", type=click.Choice(["auto", "full", "unicomp", "lid_unicomp"]),
              default="auto", show_default=True, help="Cell access pattern (self-join only).")
@METRIC
@DEGREES
@PRECISION
@click.option("--chunk-pairs", type=click.IntRange(min=1), default=DEFAULT_CHUNK_PAIRS,
              show_default=True,
              help="Pairs per chunk when streaming pairs (memory: about 8 bytes a pair, "
                   "for the chunk being computed and the one being written).")
@COLUMNS
@DEVICE
@PROGRESS
@distributed_options
@VERBOSE
@user_errors
def join_cmd(data, eps, out, counts, include_self, no_sort, pattern, metric, degrees, precision,
             chunk_pairs, columns, device, progress, scheduler, local_cluster):
    """All pairs of points of DATA within distance EPS (the self-join); with a
    second file S, all pairs (i, j) with DATA[i] within EPS of S[j] (R join S).

    Files are .csv/.txt (comma or whitespace separated, optional header),
    .parquet or .npy, one point a row.  Prints a one-line summary: points,
    dimensions, pairs, mean neighbours per point and time; without --out
    only the counts are computed.  Every column is a dimension unless
    --columns chooses some; all must hold numbers.  --metric haversine reads
    two columns, (lat, lon), in radians unless --degrees; eps is then a
    great-circle distance in radians (km / 6371.0088).  With --scheduler or
    --local-cluster the self-join runs on a Dask cluster (the workers read
    DATA themselves; --out naming a folder gets one Parquet file of pairs per
    partition).

    \b
    Examples:
      skyjoin join points.npy --eps 0.5
      skyjoin join points.npy --eps 0.5 --out pairs.parquet
      skyjoin join queries.csv points.csv --eps 0.5 --counts --out counts.csv
      skyjoin join geo.csv --metric haversine --degrees --eps 0.002 --out pairs.parquet
    """
    if len(data) > 2:
        raise click.UsageError("give one file (the self-join) or two (R join S)")
    two = len(data) == 2
    if two and include_self:
        raise click.UsageError("--include-self is for the self-join (one file)")
    if two and pattern != "auto":
        raise click.UsageError("--pattern is for the self-join (one file)")
    col = column_list(columns)
    check_metric_options(metric, degrees)
    if uses_cluster(scheduler, local_cluster):
        if metric != "euclidean":
            raise click.UsageError(f"--metric {metric} runs on this machine: leave out "
                                   f"--scheduler and --local-cluster")
        if two:
            raise click.UsageError("R join S runs on this machine: leave out --scheduler and "
                                   "--local-cluster")
        kind = join_output(out, counts, distributed=True)
        if kind == "counts":
            check_out(out, COLUMN_OUT, what="counts")
        elif kind == "table":
            check_out(out, (".npz", ".parquet"), what="the table")
        with client_from_options(scheduler, local_cluster, device=device, echo=click.echo) as client:
            click.echo(run_join(client, data[0], eps, out=out, counts=counts,
                                include_self=include_self, sort=not no_sort, precision=precision,
                                columns=col, device=device))
        return
    check_out(out, COLUMN_OUT if counts else PAIRS_OUT, what="counts" if counts else "the pairs")
    t0 = time.perf_counter()
    R, names = read_input(data[0], col)
    R = metric_points(R, names, metric, degrees, data[0])
    if two:
        S, s_names = read_input(data[1], col)
        S = metric_points(S, s_names, metric, degrees, data[1])
    else:
        S = None
    t_load = time.perf_counter() - t0
    kind = join_output(out, counts)
    log.info("output: %s%s", _OUTPUTS[kind], f" to {out}" if out else "")
    show = show_progress(progress)
    # metric= only when not the default: the operators' Euclidean calls stay as they were
    mkw = {} if metric == "euclidean" else {"metric": metric}
    opts = dict(sort=not no_sort, device=device, precision=precision, **mkw)
    streamed = kind == "stream" and not two
    output = "counts" if kind in ("summary", "counts") else "table"
    with operator_clock() as warm:          # loads the engine: reported apart
        if two:
            sj.join(R[:WARM_ROWS], S[:WARM_ROWS], eps, output=output, device=device,
                    precision=precision, **mkw)
        else:
            sj.self_join(R[:WARM_ROWS], eps, output=output, include_self=include_self,
                         pattern=pattern, device=device, precision=precision, **mkw)
    t0 = time.perf_counter()
    with phase("join and write" if streamed else "join"), operator_clock() as clock, \
            recording() as plans:
        if output == "counts":
            c = (sj.join(R, S, eps, output="counts", device=device, precision=precision, **mkw)
                 if two
                 else sj.self_join(R, eps, output="counts", include_self=include_self,
                                   pattern=pattern, device=device, precision=precision, **mkw))
            n_pairs = int(c.sum())
        elif streamed:
            n_pairs = _stream(R, eps, out, include_self, chunk_pairs, show, opts)
        else:
            nt = (sj.join(R, S, eps, **opts) if two
                  else sj.self_join(R, eps, include_self=include_self, pattern=pattern, **opts))
            n_pairs = nt.n_pairs
    if out and not streamed:
        with phase(f"write {out}"):
            if kind == "counts":
                write_counts(out, c)
            else:
                write_neighbor_table(out, nt)
    dt = time.perf_counter() - t0 - clock["compile"]
    note = kernel_note(warm, clock)
    click.echo(_summary(R, S, names, eps, n_pairs, dt, ran_on(plans), t_load, note, metric)
               + (f"; wrote {out}" if out else ""))


def _stream(X, eps, out, include_self, chunk_pairs, show, opts) -> int:
    """Stream the self-join's pairs to ``out`` chunk by chunk; the number of pairs.

    The count pass runs first (a notice, then its time at ``-v``); the
    progress bar then counts pairs, so that its rate is pairs per second of
    the fill and write alone and its ETA is the time left for the pairs
    left.  The writer encodes the pairs on its own thread while the next
    chunk is computed.  Memory: the join's (O(n) plus the chunks in
    flight) plus the writer's blocks (``skyjoin.io.PairWriter``).
    """
    from tqdm import tqdm

    n = X.shape[0]
    stream = sj.self_join_chunks(X, eps, include_self=include_self, max_pairs=chunk_pairs,
                                 **opts)
    with open_pair_writer(out, shape=(n, n), sorted=opts["sort"]) as w:
        if show:
            click.echo("counting the neighbours of every point...", err=True)
        with phase("count"):
            total = stream.count()
        with phase("fill and write"), \
                tqdm(total=total, unit="pair", unit_scale=True, disable=not show,
                     desc=f"writing {os.path.basename(out)}", smoothing=0.1) as bar:
            for ch in stream:
                w.write_chunk(ch)
                bar.update(len(ch))
    return w.n_pairs


def _summary(R, S, names, eps, n_pairs, seconds, dev, t_load, note="",
             metric="euclidean") -> str:
    """The one-line summary of a join: sizes, the result, the time, the
    device the join's plan reports (left out if it reported none), the
    one-time kernel ``note``, the reading time and the columns used; the
    metric when it is not the Euclidean."""
    n, d = R.shape
    mean = n_pairs / n if n else 0.0
    pts = plural(n, "point") if S is None else \
        f"{plural(n, 'point')} joined with {plural(S.shape[0], 'point')}"
    on = f" on {dev}" if dev else ""
    on_metric = "" if metric == "euclidean" else f" ({metric})"
    return (f"{pts}, {plural(d, 'dimension')}, eps {eps:g}{on_metric}: "
            f"{plural(n_pairs, 'pair')} ({mean:.2f} neighbours per point) in {seconds:.3f} s"
            f"{on}{note} (+{t_load:.2f} s reading); columns {column_names_text(names)}")
