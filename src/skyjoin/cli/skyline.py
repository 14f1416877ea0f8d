"""``skyjoin skyline``: the skyline (Pareto set) of the rows of a file."""

from __future__ import annotations

import os
import time

import click
import numpy as np

import skyjoin as sj

from .._core.device import resolve_device
from ..io import write_rows
from ..skyline.plan import ALGORITHMS
from .distributed import client_from_options, run_skyline, uses_cluster
from .errors import user_errors
from .inputs import read_input_frame
from .options import (DEVICE, VERBOSE, column_list, compile_note, distributed_options,
                      operator_clock, phase)
from .outputs import COLUMN_OUT, PLOT_OUT, check_out
from .plots import save_skyline
from .wording import plural

__all__ = ["skyline_cmd"]


def _column_names(df, specs):
    """Column names of ``df`` for names or 0-based positions; a usage error for unknown ones."""
    out = []
    for c in specs:
        if isinstance(c, int) and c not in df.columns:
            if not -df.shape[1] <= c < df.shape[1]:
                raise click.BadParameter(f"column position {c} out of range (0..{df.shape[1] - 1})")
            c = df.columns[c]
        elif c not in df.columns:
            raise click.BadParameter(f"no column {c!r}; columns are {list(df.columns)}")
        out.append(c)
    return out


@click.command("skyline")
@click.argument("data", type=click.Path(exists=True, dir_okay=False))
@click.option("--min", "min_cols", default=None,
              help="Comma-separated columns (names or 0-based positions) to minimise.")
@click.option("--max", "max_cols", default=None,
              help="Comma-separated columns to maximise.  With neither --min nor --max, "
                   "every numeric column is minimised; columns not named are ignored.")
@click.option("--distinct", is_flag=True, help="Keep one row (the first) of equal points.")
@DEVICE
@click.option("--algorithm", type=click.Choice(ALGORITHMS), default="auto", show_default=True)
@click.option("--out", "out", default=None,
              help="Write the skyline rows here: .csv or .parquet (a first column 'row', the "
                   "0-based row in DATA, then DATA's columns) or .npy (the row ids alone).")
@click.option("--plot", "plot", default=None, help="Draw a picture (.png, .pdf or .svg): the "
              "staircase in 2-D, parallel coordinates of the skyline otherwise.")
@distributed_options
@VERBOSE
@user_errors
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
    mins, maxs = column_list(min_cols) or [], column_list(max_cols) or []
    check_out(out, COLUMN_OUT, what="the skyline")
    check_out(plot, PLOT_OUT, option="--plot", what="the picture")
    if uses_cluster(scheduler, local_cluster):
        if plot:
            raise click.UsageError("--plot is not available with --scheduler/--local-cluster")
        with client_from_options(scheduler, local_cluster, device=device, echo=click.echo) as client:
            _, msg = run_skyline(client, data, min_cols=mins, max_cols=maxs,
                                 distinct=distinct, device=device, out=out)
        click.echo(msg)
        return
    device = resolve_device(device)
    t0 = time.perf_counter()
    df = read_input_frame(data)
    t_read = time.perf_counter() - t0
    mins, maxs = _column_names(df, mins), _column_names(df, maxs)
    with phase("skyline"), operator_clock() as clock:
        res, st = sj.skyline(df, min=mins or None, max=maxs or None, distinct=distinct,
                             device=device, algorithm=algorithm, return_stats=True)
    t_sky = clock["seconds"]
    cols = mins + maxs if (mins or maxs) else list(df.select_dtypes(include=[np.number, "bool"]).columns)
    sense = ["min"] * len(mins) + ["max"] * len(maxs) if (mins or maxs) else ["min"] * len(cols)
    sky = df.index.get_indexer(res.index) if df.index.is_unique else np.flatnonzero(
        df.index.isin(res.index))
    click.echo(f"{plural(len(res), 'skyline row')} of {len(df):,} ({plural(len(cols), 'column')}: "
               + ", ".join(f"{c} {s}" for c, s in zip(cols, sense))
               + f"); {st['device']}, {st['algorithm']}; read {t_read:.3f} s, skyline {t_sky:.3f} s"
               + compile_note(clock["compile"]))
    if st.get("prefilter_survivors") is not None:
        tests = [f"{st[k]:,} {k.replace('_', ' ')}" for k in ("dominance_tests", "mask_tests")
                 if st.get(k) is not None]          # None: the algorithm counts none
        click.echo(f"pre-filter kept {st['prefilter_survivors']:,} rows"
                   + (f"; {', '.join(tests)}" if tests else ""))
    if out:
        with phase(f"write {out}"):
            write_rows(out, df, sky)
        click.echo(f"wrote {out}")
    if plot:
        X = df[cols].to_numpy(dtype=np.float64)
        save_skyline(plot, X, sky, sense=sense, names=[str(c) for c in cols],
                     title=f"skyline of {os.path.basename(data)}: {len(res):,} of {len(df):,} rows")
        click.echo(f"wrote {plot}")
